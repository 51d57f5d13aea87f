# runtime/sim — gshare-simjob, the simulated GPU job (host loop from
# common/gs_session.c, simulated executor), and its task pool model.

SIMJOB := $(B)/runtime/sim/gshare-simjob
# --tasks: a task pool on a simulated MasterKernel (tasksim.c) in front of
# libgshare's host TaskTable (gs_tasktable.c)
TASKSIM_OBJS := $(B)/runtime/sim/tasksim.o $(RT_TT_OBJ)

$(SIMJOB): $(B)/runtime/sim/simjob.o $(TASKSIM_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread

# narrow tasks under forced suspensions, on the simulated MasterKernel
TASKSIM_UNIT := $(B)/runtime/tests/test_tasksim
UNIT_TESTS += $(TASKSIM_UNIT)
$(B)/runtime/tests/test_tasksim.o: CFLAGS += -Iruntime/sim
$(TASKSIM_UNIT): $(B)/runtime/tests/test_tasksim.o $(TASKSIM_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

BINS += $(SIMJOB)

INSTALL_RULES += install-simjob
.PHONY: install-simjob
install-simjob: $(SIMJOB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(SIMJOB) $(DESTDIR)$(PREFIX)/bin/gshare-simjob
	install -m 0644 docs/man/gshare-simjob.1 \
	    $(DESTDIR)$(PREFIX)/share/man/man1/

# gshare-simjob --tasks against a live gshared and a busy job (about 4 s)
INTEG_TESTS += tests/sched/integ_tasks.sh
