# node-agent/gsacct — the gsacct CLI (sacct for GPU shares).  It reads the
# usage store that node-agent/store.c writes, read-only, through the same
# store module the agent links.  The agent-side accounting objects
# (acct.o, store.o, metrics.o) are listed here for node-agent's gshared
# and the tests: ACCT_OBJS, ACCT_LDLIBS.

ACCT_OBJS   := $(B)/node-agent/acct.o $(B)/node-agent/store.o \
	       $(B)/node-agent/metrics.o
ACCT_LDLIBS := -lsqlite3 -lpthread
GSACCT      := $(B)/node-agent/gsacct/gsacct
GSACCT_LIB_OBJS := $(B)/node-agent/gsacct/acctfmt.o \
		   $(B)/node-agent/gsacct/plot.o $(B)/node-agent/store.o

BINS     += $(GSACCT)
DEB_PKGS += libsqlite3-dev sqlite3
# the accounting integration tests: a real Prometheus server, curl for its API
DEB_PKGS += prometheus curl procps

$(B)/node-agent/gsacct/%.o: CFLAGS += -Inode-agent -Inode-agent/gsacct

$(GSACCT): $(B)/node-agent/gsacct/gsacct.o $(GSACCT_LIB_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(ACCT_LDLIBS)

INSTALL_RULES += install-gsacct
.PHONY: install-gsacct
install-gsacct: $(GSACCT)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(GSACCT) $(DESTDIR)$(PREFIX)/bin/gsacct
	install -m 644 docs/man/gsacct.1 $(DESTDIR)$(PREFIX)/share/man/man1/
