# tests/agent — integration tests and benchmark of a live gshared.

AGENT_TEST := $(B)/tests/agent/test_agent
AGENT_BENCH := $(B)/tests/agent/bench_agent
TEST_HELPERS += $(AGENT_TEST) $(AGENT_BENCH)
INTEG_TESTS += $(AGENT_TEST) tests/agent/test_cli.sh
# memory limits across a kill -9 and a changed memory_reserve
INTEG_TESTS += tests/agent/mem_restart.sh
# placement where the memory limit fits
INTEG_TESTS += tests/agent/mem_place.sh
# memory from NVML and the cross-check, through the stand-in NVML
INTEG_TESTS += tests/agent/mem_nvml.sh
# gshared under ASan+UBSan through shutdown and restart with jobs attached
SAN_TEST_BINS += build/san/node-agent/gshared
INTEG_TESTS += tests/agent/shutdown_asan.sh tests/agent/test_agent_asan.sh
BENCHES += $(AGENT_BENCH)

$(AGENT_TEST): $(B)/tests/agent/test_agent.o $(GSCOMMON) | $(GSHARED)
	$(CC) $(LDFLAGS) -o $@ $< $(GSCOMMON)

# connection counts per uid and root's reserve; replies nobody reads
LIMITS_TEST := $(B)/tests/agent/test_limits
TEST_HELPERS += $(LIMITS_TEST)
INTEG_TESTS += $(LIMITS_TEST)
$(LIMITS_TEST): $(B)/tests/agent/test_limits.o $(GSCOMMON) | $(GSHARED)
	$(CC) $(LDFLAGS) -o $@ $< $(GSCOMMON)

$(AGENT_BENCH): $(B)/tests/agent/bench_agent.o $(GSCOMMON) | $(GSHARED)
	$(CC) $(LDFLAGS) -o $@ $< $(GSCOMMON) -lpthread

# unit tests of agent modules that need no daemon
UNIT_TESTS += $(B)/tests/agent/test_loop_alloc
$(B)/tests/agent/test_loop_alloc.o: CFLAGS += -Inode-agent
$(B)/tests/agent/test_loop_alloc: $(B)/tests/agent/test_loop_alloc.o \
	    $(B)/node-agent/loop.o $(B)/node-agent/alloc.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

UNIT_TESTS += $(B)/tests/agent/test_connlimit
$(B)/tests/agent/test_connlimit.o: CFLAGS += -Inode-agent
$(B)/tests/agent/test_connlimit: $(B)/tests/agent/test_connlimit.o \
	    $(B)/node-agent/connlimit.o
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# a stand-in libnvidia-ml.so.1 (two fake GPUs, health from a state file)
# for the NVML health path without a GPU
FAKE_NVML := $(B)/tests/agent/fakenvml/libnvidia-ml.so.1
TEST_HELPERS += $(FAKE_NVML)
INTEG_TESTS += tests/agent/test_health_nvml.sh
INTEG_TESTS += tests/agent/test_gpus_auto.sh
INTEG_TESTS += tests/agent/test_unmanaged.sh
$(FAKE_NVML): $(B)/tests/agent/fake_nvml.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,-z,nodelete -o $@ $< -lpthread

# cost of one NVML health check on the machine's GPUs (skips without NVML)
HEALTH_BENCH := $(B)/tests/agent/bench_health
TEST_HELPERS += $(HEALTH_BENCH)
BENCHES += $(HEALTH_BENCH)
$(B)/tests/agent/bench_health.o: CFLAGS += -Inode-agent
$(HEALTH_BENCH): $(B)/tests/agent/bench_health.o $(B)/node-agent/gpu.o \
	    $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(GSCOMMON_LDLIBS) -ldl

# default memory limits and memory admission (memquota.c)
UNIT_TESTS += $(B)/tests/agent/test_memquota
$(B)/tests/agent/test_memquota.o: CFLAGS += -Inode-agent
$(B)/tests/agent/test_memquota: $(B)/tests/agent/test_memquota.o \
	    $(AGENT_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $(B)/tests/agent/test_memquota.o \
	    $(AGENT_OBJS) $(AGENT_LDLIBS) -lcmocka

# space mode's planner: traces of arrivals, departures, idle, resizes
UNIT_TESTS += $(B)/tests/agent/test_space
$(B)/tests/agent/test_space.o: CFLAGS += -Inode-agent
$(B)/tests/agent/test_space: $(B)/tests/agent/test_space.o \
	    $(B)/node-agent/space.o
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# MPS control daemon supervision against a stand-in daemon (~12 s)
INTEG_TESTS += tests/agent/test_mps.sh
# space mode: the scheduler co-grants a group, accounting, classes from
# the simulated counters and from (stand-in) NVML (~20 s)
INTEG_TESTS += tests/agent/test_cogrant.sh
INTEG_TESTS += tests/agent/test_corun_check.sh
# a job stand-in that prints its control page's partition (test_mps.sh)
SPACE_PROBE := $(B)/tests/agent/space_probe
TEST_HELPERS += $(SPACE_PROBE)
$(SPACE_PROBE): $(B)/tests/agent/space_probe.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $< $(GSCOMMON)
# unmanaged GPU processes: classification and fair-queuing traces
UNIT_TESTS += $(B)/tests/agent/test_unman
$(B)/tests/agent/test_unman.o: CFLAGS += -Inode-agent
$(B)/tests/agent/test_unman: $(B)/tests/agent/test_unman.o \
	    $(B)/node-agent/unman_dfq.o
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka
