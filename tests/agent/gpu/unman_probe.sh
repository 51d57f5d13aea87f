#!/bin/sh
# On a machine with an NVIDIA GPU (not part of `make test`): the NVML
# facts behind unmanaged-process detection and level-0 hold-back
# (unman_probe.c): a plain CUDA job (tests/acct/gpu/spin.cu, no gate)
# running as an unprivileged user with GSHARE_ALLOC set is listed by
# NVML with SM utilization > 0; stopped with SIGSTOP it stays listed at
# 0 %; continued it runs again.  Exit 0 when all hold.
set -eu
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
user=${PROBE_UID:-65534}
tmp=$(mktemp -d /tmp/gs-unman.XXXXXX)
spin=""
trap '[ -n "$spin" ] && kill -CONT $spin 2>/dev/null; [ -n "$spin" ] && kill $spin 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
chmod 755 "$tmp"
"$nvcc" -O2 -o "$tmp/spin" tests/acct/gpu/spin.cu
gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Icommon -iquote node-agent \
	-o "$tmp/unman_probe" tests/agent/gpu/unman_probe.c node-agent/gpu.c \
	common/gs_error.c -ldl
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
GSHARE_ALLOC=7 setpriv --reuid="$user" --regid="$user" --clear-groups \
	"$tmp/spin" 20 10 > "$tmp/spin.out" 2>&1 &
spin=$!
"$tmp/unman_probe" "$uuid" "$spin"
