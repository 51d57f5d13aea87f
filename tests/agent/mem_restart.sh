#!/bin/sh
# Memory limits across agent restarts: a limit the job asked for is kept
# (the state file's mem=), a default one is settled again from the
# configuration of the new run (here: a larger memory_reserve), and a
# restored limit that no longer fits beside the others is kept and
# logged, not a reason to drop the allocation; restored allocations count
# one memory_context_reserve each.  Simulated 16G GPU.
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsmem
export GSHARE_SOCKET=$sock

limits() {	# ids' mem_limit in MiB, and the GPU's sum, one line
	$CTL status --json | $PY -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(a["mem_limit"] >> 20) for a in d["allocations"]),
      d["gpus"][0]["mem_limits"] >> 20)'
}

gs_agent_conf <<CONF
gpus:
  simulated: 1
  memory: 16G
# the figures below leave out the per-allocation context reserve
# (test_memquota covers it)
memory_context_reserve: 0
CONF
gs_agent_start "first run"
a=$($CTL create --shares 50 --mem 10G) || bad "create --mem 10G"
b=$($CTL create --shares 25) || bad "create default"
# 16G - 1G reserve = 15360M; 25 % of it = 3840M
l=$(limits)
[ "$l" = "10240 3840 14080" ] && ok "limits: $l" || bad "limits before: $l"
# the table's two slots (allocs.0, allocs.1)
grep -q "^alloc id=$a .* mem=10737418240$" "$dir"/state/allocs.* &&
	ok "asked limit in the state file" || bad "state file: $(cat "$dir"/state/allocs.*)"
grep "^alloc id=$b " "$dir"/state/allocs.* | grep -q ' mem=' &&
	bad "a default limit was written" || ok "no mem= for a default limit"

kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=""
# the new run keeps 6G back: default 25 % of 10G = 2560M; 10G + 2560M
# = 12800M > 10G usable: kept anyway, logged
gs_agent_conf <<CONF
gpus:
  simulated: 1
  memory: 16G
memory_reserve: 6G
memory_context_reserve: 0
CONF
gs_agent_start "after kill -9, memory_reserve 6G"
l=$(limits)
[ "$l" = "10240 2560 12800" ] && ok "restored limits: $l" || bad "restored: $l"
grep -q "allocation $b: GPU 0: memory limit 2560M does not fit: 0 of 10G left.*restored with it anyway" "$dir/log" &&
	ok "over-full restore logged" || bad "no log line for the over-full restore"
out=$($CTL create --shares 1 2>&1) && bad "a 1-share allocation fit a full GPU: $out"
printf '%s\n' "$out" | grep -q "no GPU with 1 free shares has room for the memory limit" &&
	ok "full GPU refuses more: $out" || bad "refusal: $out"

kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=""
# a third run with the default reserves (1G, 512M per allocation): b's
# default is 25 % of 15360M less 512M = 3328M, and each restored
# allocation counts one context reserve: 15360M - (10240M + 512M) -
# (3328M + 512M) = 768M left, so 256M (+ its own 512M) fits exactly
gs_agent_conf <<CONF
gpus:
  simulated: 1
  memory: 16G
CONF
gs_agent_start "after kill -9, default reserves"
l=$(limits)
[ "$l" = "10240 3328 13568" ] && ok "restored limits: $l" || bad "restored (defaults): $l"
out=$($CTL create --shares 1 --mem 257M 2>&1) && bad "257M fit: $out"
printf '%s\n' "$out" | grep -q "768M of 15G left" &&
	ok "one context reserve per restored allocation: $out" || bad "257M: $out"
c=$($CTL create --shares 1 --mem 256M) && ok "256M fits exactly" ||
	bad "256M refused"
[ -n "$c" ] && { $CTL close "$c" >/dev/null || bad "close c"; }
$CTL close "$a" >/dev/null && $CTL close "$b" >/dev/null || bad "close"
[ "$(limits)" = " 0" ] && ok "limits given back" || bad "after close: $(limits)"
exit $fail
