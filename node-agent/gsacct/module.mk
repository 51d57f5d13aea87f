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

# The store gsacct opens with its setgid group: the one gshared's config
# file names (the file gshared reads without -f), else GSACCT_STORE
# (gshared's default <state_dir>/usage.db); and that group (gshared's
# store_group default).
GSACCT_STORE ?= /var/lib/gshare/usage.db
GSACCT_CONFIG ?= $(GSHARED_CONFIG)
GSACCT_GROUP ?= gshare
BUILD_PATHS += $(GSACCT_STORE) $(GSACCT_CONFIG)
$(B)/node-agent/gsacct/gsacct.o: CFLAGS += -DGSACCT_STORE='"$(GSACCT_STORE)"' \
	-DGSACCT_CONFIG='"$(GSACCT_CONFIG)"'
$(B)/node-agent/gsacct/gsacct.o: $(PATHS_STAMP)

# config.o: the default store comes from gshared's config file (config.o
# checks metrics_listen with metrics.o, which needs acct.o)
$(GSACCT): $(B)/node-agent/gsacct/gsacct.o $(GSACCT_LIB_OBJS) \
	   $(B)/node-agent/config.o $(B)/node-agent/metrics.o \
	   $(B)/node-agent/acct.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(GSCOMMON_LDLIBS) $(ACCT_LDLIBS)

INSTALL_RULES += install-gsacct
.PHONY: install-gsacct
install-gsacct: $(GSACCT)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	@if [ "$$(id -u)" = 0 ] && \
	    getent group $(GSACCT_GROUP) > /dev/null; then \
		echo "install -m 2755 -g $(GSACCT_GROUP) $(GSACCT)" \
		    "$(DESTDIR)$(PREFIX)/bin/gsacct"; \
		install -m 2755 -g $(GSACCT_GROUP) $(GSACCT) \
		    $(DESTDIR)$(PREFIX)/bin/gsacct; \
	else \
		install -m 755 $(GSACCT) $(DESTDIR)$(PREFIX)/bin/gsacct && \
		echo "note: gsacct installed without setgid (group" \
		    "$(GSACCT_GROUP) missing, or not root): other users" \
		    "cannot read the usage store with it; see" \
		    "docs/accounting.md, \"Reading it\""; \
	fi
	install -m 644 docs/man/gsacct.1 $(DESTDIR)$(PREFIX)/share/man/man1/
