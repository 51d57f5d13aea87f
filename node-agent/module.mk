# node-agent/ — the gshared daemon and the gsharectl CLI.
#
# AGENT_OBJS is everything of the daemon except main, so tests and other
# agent modules (accounting, metrics) can link it.

AGENT_SRCS := node-agent/agent.c node-agent/alloc.c node-agent/config.c \
	      node-agent/gpu.c node-agent/loop.c node-agent/sched.c \
	      node-agent/acct.c node-agent/acct_agent.c node-agent/store.c \
	      node-agent/metrics.c node-agent/health.c node-agent/unman.c \
	      node-agent/unman_dfq.c \
	      node-agent/state.c node-agent/durable.c node-agent/memquota.c
AGENT_SRCS += node-agent/connlimit.c
AGENT_SRCS += node-agent/space.c node-agent/space_agent.c node-agent/mps.c
AGENT_SRCS += node-agent/space_sample.c
AGENT_OBJS := $(AGENT_SRCS:%.c=$(B)/%.o)
AGENT_LDLIBS := $(GSCOMMON) $(GSCOMMON_LDLIBS) -ldl -lsqlite3 -lpthread

GSHARED   := $(B)/node-agent/gshared
BUILD_PATHS += $(GSHARED_CONFIG)
$(B)/node-agent/gshared.o: CFLAGS += -DGS_DEFAULT_CONFIG='"$(GSHARED_CONFIG)"'
$(B)/node-agent/gshared.o: $(PATHS_STAMP)
GSHARECTL := $(B)/node-agent/gsharectl
BINS += $(GSHARED) $(GSHARECTL)

$(GSHARED): $(B)/node-agent/gshared.o $(AGENT_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $(B)/node-agent/gshared.o $(AGENT_OBJS) \
	    $(AGENT_LDLIBS)

$(GSHARECTL): $(B)/node-agent/gsharectl.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $< $(GSCOMMON)

INSTALL_RULES += install-agent
.PHONY: install-agent
install-agent: $(GSHARED) $(GSHARECTL)
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/man/man8 \
	    $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(SYSCONFDIR)/gshare \
	    $(DESTDIR)/lib/systemd/system
	install -m 0755 $(GSHARED) $(DESTDIR)$(PREFIX)/sbin/gshared
	install -m 0755 $(GSHARECTL) $(DESTDIR)$(PREFIX)/bin/gsharectl
	install -m 0644 docs/man/gshared.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 docs/man/gsharectl.1 \
	    $(DESTDIR)$(PREFIX)/share/man/man1/
	test -e $(DESTDIR)$(SYSCONFDIR)/gshare/gshare.yaml || \
	    install -m 0644 node-agent/gshare.yaml \
	    $(DESTDIR)$(SYSCONFDIR)/gshare/gshare.yaml
	sed 's|@SBINDIR@|$(PREFIX)/sbin|; s|@SYSCONFDIR@|$(SYSCONFDIR)|' \
	    node-agent/gshared.service.in \
	    > $(DESTDIR)/lib/systemd/system/gshared.service
	chmod 0644 $(DESTDIR)/lib/systemd/system/gshared.service
