# tests/sched — scheduler unit tests and benchmark (node-agent/sched.c).

SCHED_OBJ := $(B)/node-agent/sched.o

$(B)/tests/sched/%.o: CFLAGS += -Inode-agent

$(B)/tests/sched/test_sched: $(B)/tests/sched/test_sched.o $(SCHED_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

$(B)/tests/sched/bench_sched: $(B)/tests/sched/bench_sched.o $(SCHED_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

UNIT_TESTS += $(B)/tests/sched/test_sched
TEST_HELPERS += $(B)/tests/sched/bench_sched
BENCHES += $(B)/tests/sched/bench_sched
