# tests/slurm — the SPANK plugin's unit test (no Slurm needed) and the
# integration test against a real Slurm 22.05 on loopback.

SPANKOPT_TEST := $(B)/tests/slurm/test_spankopt
UNIT_TESTS += $(SPANKOPT_TEST)
INTEG_TESTS += tests/slurm/run.sh
DEB_PKGS += libslurm-dev slurm-wlm slurmdbd munge mariadb-server \
	    mariadb-client

$(SPANKOPT_TEST): $(B)/tests/slurm/test_spankopt.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# An agent client with stable, greppable output for run.sh.
GS_PROBE := $(B)/tests/slurm/gs_probe
TEST_HELPERS += $(GS_PROBE)

$(GS_PROBE): $(B)/tests/slurm/gs_probe.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^

BENCHES += tests/slurm/bench.sh
