#!/bin/sh
# Allocate latency of gshare-device-plugin, two ways: inside the plugin
# (request decoded to response built, including its ALLOC_CREATE round trip
# to gshared with simulated GPUs; logged by the plugin), and where the
# kubelet sees it (one gRPC Allocate over the plugin's unix socket, plus
# the stand-in's Python gRPC client).  Target: p99 <= 2 ms.
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/python3 "$(dirname "$0")/test_plugin.py" --allocs "${ALLOCS:-5000}" \
	--bench "$out" >/dev/null
read -r _ n _ p50 _ p99 _ max _ pp50 _ pp99 _ pmax <"$out"
echo "k8s: Allocate in the plugin (decoded to answered, agent round trip" \
	"included): $n calls, p50 $pp50 ms, p99 $pp99 ms, max $pmax ms" \
	"(target p99 <= 2 ms)"
echo "k8s: Allocate as the kubelet stand-in sees it (+ gRPC transport," \
	"Python client): p50 $p50 ms, p99 $p99 ms, max $max ms"
