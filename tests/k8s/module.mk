# tests/k8s — the device plugin: cmocka tests of its pure modules, and the
# integration run against a kubelet stand-in (Python, Debian's grpcio)
# and a real gshared; manifests validated offline with kubernetes-models.

K8S_UNIT := $(B)/tests/k8s/test_dp_logic
K8S_OOM  := $(B)/tests/k8s/test_dp_oom
UNIT_TESTS += $(K8S_UNIT) $(K8S_OOM)

$(B)/tests/k8s/test_dp_logic.o $(B)/tests/k8s/test_dp_oom.o: \
	CFLAGS += -Ik8s-plugin
$(K8S_UNIT): $(B)/tests/k8s/test_dp_logic.o $(DP_PURE_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka
# Allocation failures injected by wrapping the allocator.
$(K8S_OOM): $(B)/tests/k8s/test_dp_oom.o $(DP_PURE_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
	    -o $@ $^ -lcmocka

# Manifests: node and npm from Debian when the machine has none (a
# NodeSource nodejs ships its own npm and conflicts with Debian's).
DEB_PKGS += $(if $(shell command -v npm 2>/dev/null),,nodejs npm)
INTEG_TESTS += tests/k8s/manifests.sh

# Agent status in a fixed format, for the integration test.
K8S_AGENTQ := $(B)/tests/k8s/dp_agentq
TEST_HELPERS += $(K8S_AGENTQ)
$(K8S_AGENTQ): $(B)/tests/k8s/dp_agentq.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^

# Integration: the plugin against gshared (simulated GPUs) and the kubelet
# stand-in; then the same run with the plugin under valgrind.
INTEG_TESTS += tests/k8s/test_plugin.py tests/k8s/plugin_valgrind.sh
BENCHES += tests/k8s/bench_allocate.sh

# libFuzzer target over the pure modules; make test runs it briefly.
K8S_FUZZ := $(B)/fuzz/fuzz_dp
FUZZERS += $(K8S_FUZZ)
TEST_HELPERS += $(K8S_FUZZ)
INTEG_TESTS += tests/k8s/fuzz.sh
$(K8S_FUZZ): tests/k8s/fuzz_dp.c k8s-plugin/dp_logic.c k8s-plugin/dp_state.c \
	     common/gs_error.c
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -Icommon -Ik8s-plugin -o $@ $^
