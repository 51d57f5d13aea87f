#!/bin/sh
# On a machine with an NVIDIA GPU (not part of `make test`): a plain CUDA
# job (spin.cu) runs 8 s with GSHARE_ALLOC=1 while nvml_probe charges
# allocation 1 from NVML per-process samples through the agent's GPU
# module and the accounting module.  Prints both figures; fails when the
# estimate is missing or off by more than half.
set -eu
out=${OUT:-/tmp}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d /tmp/gs-nvml.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$nvcc" -O2 -o "$tmp/spin" tests/acct/gpu/spin.cu
gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Icommon -iquote node-agent \
	-o "$tmp/nvml_probe" tests/acct/gpu/nvml_probe.c node-agent/acct.c \
	node-agent/gpu.c common/gs_error.c -ldl
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
GSHARE_ALLOC=1 "$tmp/spin" 8 10 > "$tmp/spin.out" &
spin=$!
"$tmp/nvml_probe" "$uuid" 10 > "$tmp/probe.out" 2> "$tmp/probe.err" || { cat "$tmp/probe.err"; exit 1; }
[ -n "${PROBE_VERBOSE:-}" ] && cat "$tmp/probe.err"
wait $spin
cat "$tmp/spin.out" "$tmp/probe.out"
python3 - "$tmp/spin.out" "$tmp/probe.out" <<'PY'
import sys
own = float(open(sys.argv[1]).read().split()[0].split("=")[1]) / 1000
kv = dict(f.split("=") for f in open(sys.argv[2]).read().split())
est = float(kv["estimate_gpu_s"])
print("spin measured %.2f GPU-s; NVML estimate %.2f GPU-s (ratio %.3f, "
      "%s samples)" % (own, est, est / own, kv["nvml_samples"]))
assert kv["estimate"] == "1" and 0.5 < est / own < 1.5
PY
