# tests/acct — accounting: unit tests (gsacct formats, store, tick deltas,
# metrics, SVG), golden files for gsacct, integration and benchmarks.

ACCT_TEST_CFLAGS := -Inode-agent -Inode-agent/gsacct -Itests/acct
$(B)/tests/acct/%.o: CFLAGS += $(ACCT_TEST_CFLAGS)

ACCT_UNITS := test_acctfmt test_store test_acct test_metrics test_plot

$(B)/tests/acct/test_acctfmt: $(B)/tests/acct/test_acctfmt.o \
	$(GSACCT_LIB_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(ACCT_LDLIBS)

$(B)/tests/acct/test_plot: $(B)/tests/acct/test_plot.o \
	$(B)/node-agent/gsacct/plot.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

$(B)/tests/acct/test_store $(B)/tests/acct/test_acct \
$(B)/tests/acct/test_metrics: $(B)/tests/acct/%: $(B)/tests/acct/%.o \
	$(ACCT_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(ACCT_LDLIBS)

UNIT_TESTS += $(ACCT_UNITS:%=$(B)/tests/acct/%)

# allocation failures injected with the linker's --wrap
$(B)/tests/acct/test_acct_oom: $(B)/tests/acct/test_acct_oom.o \
	$(B)/node-agent/acct.o $(B)/node-agent/store.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
	    -o $@ $^ -lcmocka $(ACCT_LDLIBS)
UNIT_TESTS += $(B)/tests/acct/test_acct_oom

$(B)/tests/acct/acct_fill: $(B)/tests/acct/acct_fill.o \
	$(B)/node-agent/store.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(ACCT_LDLIBS)

TEST_HELPERS += $(B)/tests/acct/acct_fill $(GSACCT)

# gsacct whose gshared config file is $(B)/tests/acct/cfgtest/gshare.yaml
# and whose built-in store does not exist: golden.sh checks that the
# default store follows the config file
GSACCT_CFGTEST := $(B)/tests/acct/gsacct-cfgtest
$(B)/tests/acct/gsacct-cfgtest.o: node-agent/gsacct/gsacct.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Inode-agent -Inode-agent/gsacct \
	    -DGSACCT_STORE='"/nonexistent/gshare/usage.db"' \
	    -DGSACCT_CONFIG='"$(abspath $(B))/tests/acct/cfgtest/gshare.yaml"' \
	    -c -o $@ $<
$(GSACCT_CFGTEST): $(B)/tests/acct/gsacct-cfgtest.o $(GSACCT_LIB_OBJS) \
		   $(B)/node-agent/config.o $(B)/node-agent/metrics.o \
		   $(B)/node-agent/acct.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(GSCOMMON_LDLIBS) $(ACCT_LDLIBS)
TEST_HELPERS += $(GSACCT_CFGTEST)

INTEG_TESTS += tests/acct/golden.sh

$(B)/tests/acct/acct_job: $(B)/tests/acct/acct_job.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^

TEST_HELPERS += $(B)/tests/acct/acct_job
INTEG_TESTS += tests/acct/integ_accuracy.sh
INTEG_TESTS += tests/acct/integ_crash.sh tests/acct/integ_crash_asan.sh
INTEG_TESTS += tests/acct/integ_close_crash.sh tests/acct/integ_close_crash_asan.sh
INTEG_TESTS += tests/acct/integ_diskfault.sh tests/acct/integ_diskfault_asan.sh
# mkfs.ext4 for the frozen (fsfreeze) loop-mounted file system
DEB_PKGS += e2fsprogs
INTEG_TESTS += tests/acct/integ_prometheus.sh
BENCHES += tests/acct/bench_acct.sh

# libFuzzer target for gsacct's parsers (time specs, --format lists, the
# metrics address); tests/acct/fuzz.sh runs it for a bounded time.
FUZZ_GSACCT := $(B)/tests/acct/fuzz_gsacct
FUZZERS += $(FUZZ_GSACCT)
TEST_HELPERS += $(FUZZ_GSACCT)
INTEG_TESTS += tests/acct/fuzz.sh
FUZZ_GSACCT_SRCS := tests/acct/fuzz_gsacct.c node-agent/gsacct/acctfmt.c \
	node-agent/store.c node-agent/metrics.c node-agent/acct.c \
	common/gs_error.c common/gs_log.c

$(FUZZ_GSACCT): $(FUZZ_GSACCT_SRCS) node-agent/gsacct/acctfmt.h \
	node-agent/store.h node-agent/metrics.h
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -Icommon -iquote node-agent \
	    -iquote node-agent/gsacct \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(FUZZ_GSACCT_SRCS) -lsqlite3 -lpthread
INTEG_TESTS += tests/acct/integ_overrun.sh
# A job that reports 0 ns beside an honest one: shares and bills (6 s).
INTEG_TESTS += tests/acct/integ_liar.sh
# who may read the usage store: store_group, gsacct setgid (as root: a
# temporary group, runuser, a private mount namespace)
INTEG_TESTS += tests/acct/integ_perm.sh
DEB_PKGS += passwd util-linux mount
# the metrics endpoint on a Unix socket (store_group's rule), scraped by
# the real Prometheus through socat
INTEG_TESTS += tests/acct/integ_metrics_unix.sh
DEB_PKGS += socat
