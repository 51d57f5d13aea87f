#!/bin/sh
# Integration test of the priority policies, end to end: a live gshared
# (one simulated GPU) and gshare-simjob processes attached to allocations
# that gsharectl created with priorities low and high.
#   policy: priority — a low job (40 shares) runs alone; a high job (40
#     shares) arrives 2 s later for 2 s: it preempts at once and gets its
#     40 plus the 20 nobody holds (about 60%); the low job keeps its
#     guaranteed 40% meanwhile (priority orders only the unguaranteed
#     time) and gets everything again afterwards.
#   policy: dynamic-priority (SIGHUP reload, aging = one slice) — both
#     busy for 4 s: each gets at least its 40%.
# Shares are measured by the jobs.  Cleans up everything on any exit.
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsprio "$SIM"

check() {	# DESCRIPTION PYTHON-EXPRESSION
	if $PY -c "import sys; sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$1"
	else
		bad "$1 [$2]"
	fi
}

conf() {
	gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: $1
slice: 4ms
aging: 0
CONF
}
conf priority
gs_agent_start "policy priority"

lo=$($CTL -s "$sock" create --shares 40 --priority low --job lo) ||
	{ bad "create low"; exit 1; }
hi=$($CTL -s "$sock" create --shares 40 --priority high --job hi) ||
	{ bad "create high"; exit 1; }

# gpu FILE T: GPU seconds the job reported at wall time T
gpu() {
	$PY - "$1" "$2" <<'EOF'
import sys
t = float(sys.argv[2])
pts = [(0.0, 0.0)]
for ln in open(sys.argv[1]):
    kv = dict(x.split("=", 1) for x in ln.split() if "=" in x)
    pts.append((float(kv["wall_s"]), float(kv["gpu_s"])))
w, g = min(pts, key=lambda p: abs(p[0] - t))
print(g if abs(w - t) < 0.3 else "nan")
EOF
}

at=$(( $($SIM --now) + 1500000000 ))
$SIM -s "$sock" -a "$lo" -n lo -d 6 --at $at -i 1000 >"$dir/p-lo.out" 2>&1 &
jpids="$!"
$SIM -s "$sock" -a "$hi" -n hi -d 2 --at $((at + 2000000000)) \
	>"$dir/p-hi.out" 2>&1 &
jpids="$jpids $!"
gs_wait_jobs 40
hs=$(gs_field "$dir/p-hi.out" share)
l2=$(gpu "$dir/p-lo.out" 2)
l4=$(gpu "$dir/p-lo.out" 4)
l6=$(gpu "$dir/p-lo.out" 6)
check "priority: low alone 0-2 s: $l2 GPU s" "$l2 >= 1.7"
# about 0.6 (its 40 plus the free 20); above 0.5 proves it got more than
# its guarantee (0.4), which a loaded machine's slower hand-offs do not
# explain (0.54 seen with make test beside other builds)
check "priority: high preempts, gets $hs of its 2 s" "0.50 <= $hs <= 0.66"
check "priority: low keeps its 40% while high runs: $l4 - $l2 GPU s" \
	"0.7 <= $l4 - $l2 <= 0.9"
check "priority: low gets the GPU back: $l6 - $l4 GPU s in 4-6 s" \
	"$l6 - $l4 >= 1.6"

conf dynamic-priority
kill -HUP $apid
sleep 0.5
kill -0 $apid 2>/dev/null || { bad "gshared died on SIGHUP"; exit 1; }
at=$(( $($SIM --now) + 1500000000 ))
$SIM -s "$sock" -a "$lo" -n lo -d 4 --at $at >"$dir/d-lo.out" 2>&1 &
jpids="$!"
$SIM -s "$sock" -a "$hi" -n hi -d 4 --at $at >"$dir/d-hi.out" 2>&1 &
jpids="$jpids $!"
gs_wait_jobs 40
ls=$(gs_field "$dir/d-lo.out" share)
hs=$(gs_field "$dir/d-hi.out" share)
check "dynamic-priority: both get their 40%: low $ls, high $hs" \
	"$ls >= 0.38 and $hs >= 0.38"

for a in $lo $hi; do
	$CTL -s "$sock" close "$a" >/dev/null || bad "close $a"
done
[ $fail = 0 ] && echo "integ_priority: all passed"
exit $fail
