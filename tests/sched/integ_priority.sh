#!/bin/sh
# Integration test of the priority policies, end to end: a live gshared
# (one simulated GPU) and gshare-simjob processes attached to allocations
# that gsharectl created with priorities low and high.
#   policy: priority — a low job runs alone; a high job arrives 2 s later
#     for 2 s: it preempts at once and gets the GPU (>= 90%), the low job
#     gets next to nothing meanwhile and everything again afterwards.
#   policy: dynamic-priority (SIGHUP reload, aging = one slice) — both
#     busy for 4 s: the low job is not starved (5..45%), the high one
#     still gets more.
# Shares are measured by the jobs.  Cleans up everything on any exit.
set -u
B=${B:-build}
GSHARED=$B/node-agent/gshared
CTL=$B/node-agent/gsharectl
SIM=$B/runtime/sim/gshare-simjob
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/gsprio.XXXXXX)
sock=$dir/gshared.sock
apid=""
jpids=""
fail=0

cleanup() {
	for p in $jpids; do kill -9 "$p" 2>/dev/null; done
	[ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
	wait 2>/dev/null
	if [ $fail != 0 ]; then
		echo "--- agent log" >&2
		tail -n 30 "$dir/log" >&2
		for f in "$dir"/*.out; do
			[ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
		done
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'fail=1; exit 1' INT TERM

ok() { echo "ok   $1"; }
bad() { echo "FAIL $1" >&2; fail=1; }
check() {	# DESCRIPTION PYTHON-EXPRESSION
	if $PY -c "import sys; sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$1"
	else
		bad "$1 [$2]"
	fi
}

for b in $GSHARED $CTL $SIM; do
	[ -x "$b" ] || { bad "$b not built"; exit 1; }
done

conf() {
	cat > "$dir/gshare.yaml" <<CONF
socket: $sock
state_dir: $dir/state
metrics_listen: ""
log: stderr
gpus:
  simulated: 1
policy: $1
slice: 4ms
aging: 0
CONF
}
conf priority
$GSHARED -d -f "$dir/gshare.yaml" 2>"$dir/log" &
apid=$!
deadline=$(( $(date +%s) + 15 ))
until $CTL -s "$sock" -t 500 ping >/dev/null 2>&1; do
	kill -0 $apid 2>/dev/null || { bad "gshared exited"; exit 1; }
	[ "$(date +%s)" -lt $deadline ] || { bad "gshared did not start"; exit 1; }
	sleep 0.05
done
ok "gshared up (policy priority)"

lo=$($CTL -s "$sock" create --shares 40 --priority low --job lo) ||
	{ bad "create low"; exit 1; }
hi=$($CTL -s "$sock" create --shares 40 --priority high --job hi) ||
	{ bad "create high"; exit 1; }

# wait_jobs SECONDS: wait for $jpids with a deadline
wait_jobs() {
	deadline=$(( $(date +%s) + $1 ))
	for p in $jpids; do
		while kill -0 "$p" 2>/dev/null; do
			[ "$(date +%s)" -lt $deadline ] ||
				{ bad "jobs did not finish in time"; exit 1; }
			sleep 0.2
		done
		wait "$p" || bad "job pid $p exited with status $?"
	done
	jpids=""
}

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
wait_jobs 40
hs=$(sed -n 's/.*event=done.* share=\([^ ]*\).*/\1/p' "$dir/p-hi.out")
l2=$(gpu "$dir/p-lo.out" 2)
l4=$(gpu "$dir/p-lo.out" 4)
l6=$(gpu "$dir/p-lo.out" 6)
check "priority: low alone 0-2 s: $l2 GPU s" "$l2 >= 1.7"
check "priority: high preempts, gets $hs of its 2 s" "$hs >= 0.90"
check "priority: low gets $l4 - $l2 GPU s while high runs" \
	"$l4 - $l2 <= 0.1"
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
wait_jobs 40
ls=$(sed -n 's/.*event=done.* share=\([^ ]*\).*/\1/p' "$dir/d-lo.out")
hs=$(sed -n 's/.*event=done.* share=\([^ ]*\).*/\1/p' "$dir/d-hi.out")
check "dynamic-priority: low not starved ($ls), high gets more ($hs)" \
	"0.05 <= $ls <= 0.45 and $hs > $ls"

for a in $lo $hi; do
	$CTL -s "$sock" close "$a" >/dev/null || bad "close $a"
done
[ $fail = 0 ] && echo "integ_priority: all passed"
exit $fail
