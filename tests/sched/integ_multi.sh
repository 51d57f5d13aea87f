#!/bin/sh
# Several processes of one job on ONE allocation (srun -n2 tasks, a
# launcher and its workers), end to end: a live gshared with one simulated
# GPU, allocation A (50 shares) with three gshare-simjob processes
# attached, allocation B (50 shares) with one.  Checks:
#   - every ATTACH to A is accepted; gsharectl status shows 3 processes;
#   - A's processes share A's token: each of them runs about half the
#     time (they run under the same grants), B the other half;
#   - kill -9 of one of A's processes leaves the other two running to
#     the end, A open, and B unharmed;
#   - A's counters are the sum over its processes (its GPU time at least
#     the two survivors' own).
# Cleans up every process and file on any exit.
set -u
GS_LOG_TAIL=40
GS_OUT_GLOB="*.out"
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsmulti "$SIM"

gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: wfq
slice: 4ms
CONF
gs_agent_start "simulated GPU"

A=$($CTL -s "$sock" create --shares 50 --job multi) || { bad "create A"; exit 1; }
B=$($CTL -s "$sock" create --shares 50 --job other) || { bad "create B"; exit 1; }

at=$(( $($SIM --now) + 1500000000 ))
for n in a1 a2; do
	$SIM -s "$sock" -a "$A" -n $n -d 6 --at $at -i 500 >"$dir/$n.out" 2>&1 &
	jpids="$jpids $!"
done
$SIM -s "$sock" -a "$A" -n a3 -d 6 --at $at -i 500 >"$dir/a3.out" 2>&1 &
victim=$!
$SIM -s "$sock" -a "$B" -n b -d 6 --at $at -i 500 >"$dir/b.out" 2>&1 &
jpids="$jpids $!"

procs() {	# attached processes of allocation $1 (gsharectl status)
	$CTL -s "$sock" status --json 2>/dev/null | $PY -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["id"] == int(sys.argv[1]):
        print(a["nattached"])' "$1" 2>/dev/null
}
# deadline-polled: all three attached
n=""
for i in $(seq 1 50); do
	n=$(procs "$A")
	[ "$n" = 3 ] && break
	sleep 0.1
done
[ "$n" = 3 ] && ok "A has 3 attached processes" || bad "A shows ${n:-?} attached processes"
$CTL -s "$sock" status | grep -q "PROCS" && ok "status shows PROCS" || bad "status has no PROCS column"

# 3 s into the shared window: kill -9 one of A's processes
while [ "$($SIM --now)" -lt $((at + 3000000000)) ]; do sleep 0.1; done
kill -9 "$victim"
wait "$victim" 2>/dev/null
for i in $(seq 1 50); do
	n=$(procs "$A")
	[ "$n" = 2 ] && break
	sleep 0.1
done
[ "$n" = 2 ] && ok "after kill -9: 2 attached, A still open" || bad "after kill -9: ${n:-?} attached"

gs_wait_jobs 60
read -r agpu aheld <<X
$($CTL -s "$sock" status --json | $PY -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["id"] == int(sys.argv[1]):
        print(a["gpu_ns"] / 1e9, a["held_ns"] / 1e9)' "$A")
X
s1=$(gs_field "$dir/a1.out" share); g1=$(gs_field "$dir/a1.out" gpu_s)
s2=$(gs_field "$dir/a2.out" share); g2=$(gs_field "$dir/a2.out" gpu_s)
sb=$(gs_field "$dir/b.out" share)
chk() {	# DESCRIPTION PYTHON-EXPRESSION
	if $PY -c "import sys; sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$1"
	else
		bad "$1 [$2]"
	fi
}
chk "A's processes share its token: a1 $s1, a2 $s2 of the window" \
	"0.42 <= $s1 <= 0.58 and 0.42 <= $s2 <= 0.58"
chk "B gets its half: $sb" "0.42 <= $sb <= 0.58"
chk "A's GPU time $agpu s >= a1 + a2 ($g1 + $g2)" "$agpu >= 0.98 * ($g1 + $g2)"
chk "A held the token $aheld s of 6" "2.5 <= $aheld <= 3.5"
for a in $A $B; do
	$CTL -s "$sock" close "$a" >/dev/null || bad "close $a"
done
[ $fail = 0 ] && echo "integ_multi: all passed"
exit $fail
