#!/bin/sh
# tests/restart/gpu_restart.sh — agent restart with real GPU jobs (needs a
# GPU and the CUDA examples; not part of `make test`).
#
# Two libgshare jobs (gs-eater --run, weights 1:2) share the GPU under a
# private gshared with 4 ms slices.  The agent is killed with SIGKILL
# mid-run and started again.  The jobs must keep running through the
# outage, re-attach to the same allocations, and then obey the new
# agent's suspends on their new control pages: the agent logs no
# escalation ("ignored a suspend") after the restart, both allocations
# see suspensions again, the eaters' eviction latency in their last three
# 1 s windows (well after the restart) stays under EVICT_MAX_US (a device
# watcher still reading the old page leaves only at the host's next look,
# milliseconds later), and both jobs exit 0.  A third job, gs-sgemm
# --check, runs through the restart and must still compute exactly.
# Usage: tests/restart/gpu_restart.sh [BUILD_DIR]
set -u
B=${1:-build}
TMP=$(mktemp -d /tmp/gs-gpurestart.XXXXXX)
. tests/gpu/agent.sh
EX=$B/runtime/examples
EVICT_MAX_US=${EVICT_MAX_US:-1000}
P1=""; P2=""; P3=""
cleanup() {
	for p in $P1 $P2 $P3; do kill -9 "$p" 2>/dev/null; done
	[ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GSHARE_CHECK_ONCE=1

fail() {
	echo "FAIL: $*"
	tail -n 30 "$TMP/gshared.log"
	for f in "$TMP"/j*.log; do echo "== $f"; tail -n 15 "$f"; done
	exit 1
}

# "id:pid:suspensions ..." of every allocation
allocs() {
	ctl status --json | /usr/bin/python3 -c '
import json, sys
st = json.load(sys.stdin)
print(" ".join("%d:%d:%d" % (a["id"], a["pid"], a["suspensions"])
               for a in sorted(st["allocations"], key=lambda a: a["id"])))'
}

agent_start 4ms || fail "agent did not start"
cp "$TMP/gshared.log" "$TMP/gshared.log.1"
i1=$(ctl create --shares 30 --weight 1) || fail create
i2=$(ctl create --shares 30 --weight 2) || fail create
i3=$(ctl create --shares 30 --weight 1) || fail create
GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$i1 "$EX/gs-eater" --run 16 \
	> "$TMP/j1.log" 2>&1 &
P1=$!
GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$i2 "$EX/gs-eater" --run 16 \
	> "$TMP/j2.log" 2>&1 &
P2=$!
GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$i3 "$EX/gs-sgemm" --check 40 \
	> "$TMP/j3.log" 2>&1 &
P3=$!
sleep 5
echo "before the kill: $(allocs)"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=""
cat "$TMP/gshared.log" >> "$TMP/gshared.log.1"
sleep 2
for p in $P1 $P2; do
	kill -0 "$p" 2>/dev/null || fail "a job died with the agent"
done
agent_start 4ms || fail "agent did not restart"
grep -q "restored 3 of 3 allocation" "$TMP/gshared.log" ||
	fail "allocations not restored"
n=0
while :; do
	a=$(allocs)
	ok=1
	for x in $a; do
		id=${x%%:*}; r=${x#*:}; pid=${r%%:*}
		if [ "$id" = "$i1" ] || [ "$id" = "$i2" ]; then
			[ "$pid" != 0 ] || ok=0
		fi
	done
	[ $ok = 1 ] && break
	n=$((n + 1)); [ $n -gt 100 ] && fail "jobs did not re-attach: $a"
	sleep 0.1
done
echo "re-attached: $a"
sleep 4
a=$(allocs)
echo "4 s later: $a"
for x in $a; do
	id=${x%%:*}; susp=${x##*:}
	if [ "$id" = "$i1" ] || [ "$id" = "$i2" ]; then
		[ "$susp" -gt 0 ] ||
			fail "allocation $id: no suspension since the restart"
	fi
done
grep -q "ignored a suspend" "$TMP/gshared.log" &&
	fail "a job ignored the restarted agent's suspends"
for p in $P1 $P2; do wait "$p" || fail "an eater failed"; done
P1=""; P2=""
wait "$P3" || fail "sgemm failed"
P3=""
grep -q "^check sgemm ok" "$TMP/j3.log" || fail "sgemm check"
for j in 1 2; do
	grep '^window eater' "$TMP/j$j.log" | tail -n 3 |
	    sed 's/.*evict_avg_us=//' | while read -r ev; do
		/usr/bin/python3 -c "import sys; sys.exit(0 if $ev < $EVICT_MAX_US else 1)" ||
			{ echo "eater $j: eviction $ev us after the restart"; exit 1; }
	done || fail "eviction latency after the restart"
done
grep "^check " "$TMP/j3.log"
tail -n 3 "$TMP/j1.log" "$TMP/j2.log"
echo "PASS"
