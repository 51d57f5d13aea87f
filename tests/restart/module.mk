# tests/restart — agent restart survival: the allocation table file
# (node-agent/state.c: unit test and fuzzer) and the end-to-end test of
# jobs running through a kill -9 / SIGTERM of gshared.

UNIT_TESTS += $(B)/tests/restart/test_state
$(B)/tests/restart/test_state.o: CFLAGS += -Inode-agent
$(B)/tests/restart/test_state: $(B)/tests/restart/test_state.o \
	    $(B)/node-agent/state.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# the table's writer thread (node-agent/durable.c) on a real loop
UNIT_TESTS += $(B)/tests/restart/test_durable
$(B)/tests/restart/test_durable.o: CFLAGS += -Inode-agent
$(B)/tests/restart/test_durable: $(B)/tests/restart/test_durable.o \
	    $(B)/node-agent/durable.o $(B)/node-agent/state.o \
	    $(B)/node-agent/loop.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lpthread

INTEG_TESTS += tests/restart/integ_restart.sh tests/restart/integ_restart_asan.sh

# libFuzzer target for the state file decoder; tests/restart/fuzz.sh runs
# it for a bounded time
FUZZ_STATE := $(B)/tests/restart/fuzz_state
FUZZERS += $(FUZZ_STATE)
TEST_HELPERS += $(FUZZ_STATE)
INTEG_TESTS += tests/restart/fuzz.sh
$(FUZZ_STATE): tests/restart/fuzz_state.c node-agent/state.c \
	    node-agent/state.h common/gs_error.c common/gs_error.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -Inode-agent -o $@ tests/restart/fuzz_state.c \
	    node-agent/state.c common/gs_error.c

# cost of one save / load of the table file (docs/benchmarks.md, restart)
BENCH_STATE := $(B)/tests/restart/bench_state
TEST_HELPERS += $(BENCH_STATE)
BENCHES += $(BENCH_STATE)
$(B)/tests/restart/bench_state.o: CFLAGS += -Inode-agent
$(BENCH_STATE): $(B)/tests/restart/bench_state.o $(B)/node-agent/state.o \
	    $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^
