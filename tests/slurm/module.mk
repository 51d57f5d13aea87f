# tests/slurm — the SPANK plugin's unit test (no Slurm needed) and the
# integration test against a real Slurm 22.05 on loopback.

SPANKOPT_TEST := $(B)/tests/slurm/test_spankopt
UNIT_TESTS += $(SPANKOPT_TEST)
INTEG_TESTS += tests/slurm/run.sh tests/slurm/shard.sh
DEB_PKGS += libslurm-dev slurm-wlm slurmdbd munge mariadb-server \
	    mariadb-client

# malloc is wrapped to inject allocation failures
$(SPANKOPT_TEST): $(B)/tests/slurm/test_spankopt.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -Wl,--wrap=malloc -o $@ $^ -lcmocka

# An agent client with stable, greppable output for run.sh.
GS_PROBE := $(B)/tests/slurm/gs_probe
TEST_HELPERS += $(GS_PROBE)

$(GS_PROBE): $(B)/tests/slurm/gs_probe.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^

BENCHES += tests/slurm/bench.sh

# libFuzzer target over the plugin's parsers; make test runs it briefly.
SPANK_FUZZ := $(B)/tests/slurm/fuzz_spankopt
FUZZERS += $(SPANK_FUZZ)
TEST_HELPERS += $(SPANK_FUZZ)
INTEG_TESTS += tests/slurm/fuzz.sh

$(SPANK_FUZZ): tests/slurm/fuzz_spankopt.c common/gs_spankopt.c \
	       common/gs_paths.c common/gs_config.c common/gs_proto.c \
	       common/gs_error.c common/gs_spankopt.h $(PATHS_STAMP)
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -Icommon \
	    -DGS_GATE_LIB='"$(GS_GATE_PATH)"' \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(filter %.c,$^)
