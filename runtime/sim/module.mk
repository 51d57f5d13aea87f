# runtime/sim — gshare-simjob, the simulated GPU job (host loop from
# common/gs_session.c, simulated executor).

SIMJOB := $(B)/runtime/sim/gshare-simjob

$(SIMJOB): $(B)/runtime/sim/simjob.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread

BINS += $(SIMJOB)
