# runtime/sim — gshare-simjob, the simulated GPU job (host loop from
# common/gs_session.c, simulated executor).

SIMJOB := $(B)/runtime/sim/gshare-simjob

$(SIMJOB): $(B)/runtime/sim/simjob.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread

BINS += $(SIMJOB)

INSTALL_RULES += install-simjob
.PHONY: install-simjob
install-simjob: $(SIMJOB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(SIMJOB) $(DESTDIR)$(PREFIX)/bin/gshare-simjob
	install -m 0644 docs/man/gshare-simjob.1 \
	    $(DESTDIR)$(PREFIX)/share/man/man1/
