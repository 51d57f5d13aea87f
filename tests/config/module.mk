# tests/config — golden files of gshared's configuration parser.
UNIT_TESTS += tests/config/run.sh

# libFuzzer target over the parser (YAML → keys → validation → print →
# parse again); make test runs it briefly.
CONFIG_FUZZ := $(B)/tests/config/fuzz_config
FUZZERS += $(CONFIG_FUZZ)
TEST_HELPERS += $(CONFIG_FUZZ)
INTEG_TESTS += tests/config/fuzz.sh

# (-iquote: node-agent/sched.h must not hide <sched.h>.  config.c checks
# metrics_listen with the metrics module's parser, which
# links in the accounting and store code.)
$(CONFIG_FUZZ): tests/config/fuzz_config.c node-agent/config.c \
		node-agent/metrics.c node-agent/acct.c node-agent/store.c \
		common/gs_config.c common/gs_cfgyaml.c common/gs_proto.c \
		common/gs_log.c common/gs_error.c node-agent/config.h \
		common/gs_config.h
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -Icommon -iquote node-agent \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(filter %.c,$^) -lyaml -lsqlite3 -lpthread
