# tests/sched — scheduler unit tests and benchmark (node-agent/sched.c).

SCHED_OBJ := $(B)/node-agent/sched.o

# -iquote: node-agent/sched.h must not shadow the system <sched.h>
$(B)/tests/sched/%.o: CFLAGS += -iquote node-agent

$(B)/tests/sched/test_sched: $(B)/tests/sched/test_sched.o $(SCHED_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

$(B)/tests/sched/bench_sched: $(B)/tests/sched/bench_sched.o $(SCHED_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(B)/tests/sched/test_session: $(B)/tests/sched/test_session.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lpthread

UNIT_TESTS += $(B)/tests/sched/test_sched $(B)/tests/sched/test_session \
	      tests/sched/session_noprint.sh
TEST_HELPERS += $(B)/tests/sched/bench_sched
BENCHES += $(B)/tests/sched/bench_sched tests/sched/bench_shares.sh

# End to end: gshared + three gshare-simjob, weights 1:2:3 (about 20 s).
INTEG_TESTS += tests/sched/integ_shares.sh
# Idle grace: 1:3 with the weight-3 job synchronizing every 3 ms (10 s).
INTEG_TESTS += tests/sched/integ_idle.sh
# Non-cooperating holder: escalation hold, then kill after SIGHUP (14 s).
INTEG_TESTS += tests/sched/integ_noncoop.sh
# Static priority preemption and dynamic priority without starvation (14 s).
INTEG_TESTS += tests/sched/integ_priority.sh
# Several processes on one allocation: shared token, kill -9 of one (9 s).
INTEG_TESTS += tests/sched/integ_multi.sh
