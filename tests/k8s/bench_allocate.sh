#!/bin/sh
# Allocate latency of gshare-device-plugin, measured where the kubelet
# sees it: one gRPC Allocate over the plugin's unix socket, including the
# plugin's ALLOC_CREATE round trip to gshared (simulated GPUs) and the
# stand-in's Python gRPC client overhead.  Target: p99 <= 2 ms.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/python3 "$(dirname "$0")/test_plugin.py" --allocs "${ALLOCS:-5000}" \
	--bench "$out" >/dev/null
read -r _ n _ p50 _ p99 _ max <"$out"
echo "k8s: Allocate (kubelet round trip, agent included): $n calls," \
	"p50 $p50 ms, p99 $p99 ms, max $max ms (target p99 <= 2 ms)"
