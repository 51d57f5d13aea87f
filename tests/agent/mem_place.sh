#!/bin/sh
# Placement with memory limits (gpu -1): the agent picks the GPU with the
# most free shares among those where the memory limit fits too, and says
# why when none does.  Two simulated 16G GPUs (15G each for limits).
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsmemp
export GSHARE_SOCKET=$sock
gs_agent_conf <<CONF
gpus:
  simulated: 2
  memory: 16G
# the figures below leave out the per-allocation context reserve
# (test_memquota covers it)
memory_context_reserve: 0
CONF
gs_agent_start
gpu_of() {	# ID: the GPU an allocation is on
	$CTL status --json | $PY -c '
import json, sys
print([a["gpu"] for a in json.load(sys.stdin)["allocations"]
       if a["id"] == int(sys.argv[1])][0])' "$1"
}
# GPU 0: 10 shares but 14G of limits; GPU 1: 50 shares, 7.5G
a=$($CTL create --shares 10 --gpu 0 --mem 14G) || bad "create a"
b=$($CTL create --shares 50 --gpu 1) || bad "create b"
# GPU 0 has more free shares (90 vs 50) but only 1G left: 4G goes to GPU 1
c=$($CTL create --shares 5 --mem 4G) || bad "create c"
[ "$(gpu_of "$c")" = 1 ] && ok "placed where the memory fits (GPU 1)" ||
	bad "c on GPU $(gpu_of "$c")"
# 1G fits on GPU 0, which has the most free shares
d=$($CTL create --shares 5 --mem 1G) || bad "create d"
[ "$(gpu_of "$d")" = 0 ] && ok "most free shares when both fit (GPU 0)" ||
	bad "d on GPU $(gpu_of "$d")"
out=$($CTL create --shares 5 --mem 4G 2>&1) && bad "4G placed: $out"
printf '%s\n' "$out" | grep -q "no GPU with 5 free shares has room for the memory limit (GPU 1: memory limit 4G does not fit: 3584M of 15G left" &&
	ok "refused with the last GPU's figures" || bad "refusal: $out"
# a limit larger than any GPU offers: EINVAL, not EBUSY
out=$($CTL create --shares 5 --mem 20G 2>&1) && bad "20G placed"
printf '%s\n' "$out" | grep -q "exceeds the 15G the GPU offers" &&
	ok "larger than a GPU: $out" || bad "20G: $out"
exit $fail
