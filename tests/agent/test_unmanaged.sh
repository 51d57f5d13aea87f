#!/bin/sh
# Integration test of unmanaged GPU processes (node-agent/unman.c) without
# a GPU: gshared runs with `gpus: nvml` against the stand-in
# libnvidia-ml.so.1 (tests/agent/fake_nvml.c), which reports real sleeping
# child processes as compute processes of GPU 0 ("0 proc PID SM" lines).
# Checks: a process of an allocation that never attached (GSHARE_ALLOC in
# its environment, the allocation's uid) shows as unmanaged in
# `gsharectl status` (table and JSON) and in the metrics with estimated
# GPU time; a process of no allocation and one naming another user's
# allocation count on the GPU, not on the allocation; the allocation's
# usage row is flagged as an estimate (gsacct); with unmanaged_hold on,
# a process of an allocation far ahead of a contender is stopped
# (/proc/PID/stat state T), logged, continued when the contender goes
# away, and root's process never is; SIGHUP turning the policy off and
# the agent's stop continue what is held.  Polls with deadlines; cleans
# up every process and file on any exit.
set -u
GS_LOG_TAIL=+1
. "$(dirname "$0")/../lib/agent.sh"
JOB=$B/tests/acct/acct_job
gs_agent_init gsunman $JOB
state=$dir/nvml-state
msock=$dir/metrics.sock
NOBODY=65534
: > "$state"

pstate() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null; }
# wait_for SECONDS DESC CMD...: poll CMD until it succeeds
wait_for() {
	t=$1; d=$2; shift 2
	end=$(( $(date +%s) + t ))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt $end ] || { bad "$d (after $t s)"; return 1; }
		sleep 0.1
	done
	ok "$d"
}
field() {	# ALLOC KEY: a field of the allocation in status --json
	$CTL -s "$sock" -t 2000 status --json | $PY -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["id"] == int(sys.argv[1]): print(a[sys.argv[2]])' "$1" "$2"
}
gpu_unman() {	# [GPU]: processes of no allocation on it (default 0)
	$CTL -s "$sock" -t 2000 status --json | $PY -c '
import json, sys
print([g for g in json.load(sys.stdin)["gpus"] if g["index"] == int(sys.argv[1])][0]["unmanaged"])' "${1:-0}"
}
job_alloc() {	# JOB: id of the allocation labelled with it
	$CTL -s "$sock" -t 2000 status --json | $PY -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["labels"]["job"] == sys.argv[1]: print(a["id"])' "$1"
}
is() { [ "$(field "$1" "$2")" = "$3" ]; }
gpu_is() { [ "$(gpu_unman "${2:-0}")" = "$1" ]; }
scrape() { curl -sf --unix-socket "$msock" http://x/metrics; }
# spawn UID ALLOC: a sleeping process as UID with GSHARE_ALLOC=ALLOC
spawn() {
	if [ "$1" = 0 ]; then
		env GSHARE_ALLOC="$2" sleep 300 &
	else
		env GSHARE_ALLOC="$2" setpriv --reuid="$1" --regid="$1" \
			--clear-groups sleep 300 &
	fi
	jpids="$jpids $!"
	last=$!
}

cat > "$dir/gshare.yaml" <<CONF
socket: $sock
state_dir: $dir/state
metrics_listen: "unix:$msock"
store_group: ""
log: stderr
gpus: nvml
mps_control: $(cd "$(dirname "$0")" && pwd)/fake_mps_control.sh
accounting_tick: 200ms
unmanaged_hold: false
unmanaged_ahead: 300ms
CONF
gs_agent_start "" LD_LIBRARY_PATH=$B/tests/agent/fakenvml \
	FAKE_NVML_STATE=$state
grep -q "unmanaged GPU processes: watching 2 GPUs through NVML every 500 ms; hold-back off" \
	"$dir/log" && ok "watcher started" || bad "no watcher: $(cat "$dir/log")"

a1=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid $NOBODY --job 901)
a2=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid 1234 --job 902)
spawn $NOBODY "$a1"; p1=$last
spawn $NOBODY "$a2"; p2=$last	# another user's allocation: no owner
spawn $NOBODY ""; p3=$last	# no GSHARE_ALLOC
printf '0 proc %s 60\n0 proc %s 30\n0 proc %s 10\n' $p1 $p2 $p3 > "$state"
wait_for 5 "allocation $a1: 1 unmanaged process in status --json" \
	is "$a1" unmanaged 1
[ "$(field "$a2" unmanaged)" = 0 ] &&
	ok "a process naming another user's allocation is not counted on it" ||
	bad "a2 unmanaged: $(field "$a2" unmanaged)"
wait_for 3 "GPU 0: 2 unmanaged processes of no allocation" gpu_is 2
out=$($CTL -s "$sock" status)
case $out in
*"unmanaged: 1 GPU process bypassing the gate (0 held back)"*"unmanaged: 2 GPU processes of no allocation"*)
	ok "gsharectl status shows them";;
*) bad "status table: $out";;
esac
# the metrics take the counts at the accounting tick
gauges() {
	m=$(scrape)
	echo "$m" | grep -q "^gshare_unmanaged_processes{gpu=\"0\",alloc=\"$a1\"} 1$" &&
		echo "$m" | grep -q '^gshare_unmanaged_processes{gpu="0",alloc=""} 2$'
}
wait_for 3 "metrics: unmanaged process gauges" gauges ||
	echo "$(scrape | grep unmanaged)" >&2
wait_for 5 "metrics: estimated GPU time of allocation $a1 grows" sh -c \
	"curl -sf --unix-socket $msock http://x/metrics | grep -q '^gshare_unmanaged_gpu_seconds_total{gpu=\"0\",alloc=\"$a1\"} [0-9]*\.[0-9]*[1-9]'"
if command -v promtool >/dev/null 2>&1; then
	scrape | promtool check metrics >/dev/null 2>&1 &&
		ok "promtool check metrics" || bad "promtool: $(scrape | promtool check metrics 2>&1 | head -3)"
fi
# an attached process (the runtime's session, SO_PEERCRED pid) is managed:
# counted nowhere, even without GSHARE_ALLOC in its environment
"$JOB" --socket "$sock" --shares 10 --job 905 --step 0 --work 60 \
	--task-us 500 > "$dir/job.out" 2>&1 &
pj=$!
jpids="$jpids $pj"
wait_for 5 "the attached job's allocation is listed" job_alloc 905
aj=$(job_alloc 905)
wait_for 5 "allocation $aj: its job attached" is "$aj" nattached 1
gj=$(field "$aj" gpu)
spawn $NOBODY ""; p6=$last	# with it, one more of no allocation
before=$(gpu_unman "$gj")
printf '0 proc %s 60\n0 proc %s 30\n0 proc %s 10\n%s proc %s 50\n%s proc %s 10\n' \
	$p1 $p2 $p3 "$gj" $pj "$gj" $p6 > "$state"
wait_for 3 "GPU $gj: the new process of no allocation counted" \
	gpu_is $((before + 1)) "$gj"
[ "$(gpu_unman "$gj")" = $((before + 1)) ] && [ "$(field "$aj" unmanaged)" = 0 ] &&
	ok "the attached process is managed: counted neither on its allocation nor on the GPU" ||
	bad "attached process: GPU $gj $(gpu_unman "$gj") (before $before), allocation $aj $(field "$aj" unmanaged)"
kill $pj 2>/dev/null
printf '0 proc %s 60\n0 proc %s 30\n0 proc %s 10\n' $p1 $p2 $p3 > "$state"

# never attached: acct.c's NVML estimate charges it, flagged
est() {
	GSHARE_STORE=$dir/state/usage.db $B/node-agent/gsacct/gsacct -a \
		-j 901 -X -n -P -o GPUSec,Estimate -S 2000-01-01 2>/dev/null |
		grep -q '|yes$'
}
wait_for 5 "gsacct: the allocation's usage is an estimate" est

# the agent's own MPS server (the child of the control daemon it runs for
# a space allocation) serves its allocations: it counts nowhere, while a
# process of no allocation beside it still does
chmod 755 "$dir"	# the daemon runs as the allocation's user
sp=$($CTL -s "$sock" create --shares 10 --gpu 0 --uid $NOBODY --mode space)
srvf=$dir/state/mps/0/$NOBODY/log/server.pid
wait_for 5 "space allocation $sp: MPS daemon and its server up" test -s "$srvf"
srv=$(cat "$srvf")
jpids="$jpids $srv $(cat "$dir/state/mps/0/$NOBODY/log/pid" 2>/dev/null)"
spawn $NOBODY ""; p7=$last	# listed with it: one more of no allocation
printf '0 proc %s 60\n0 proc %s 30\n0 proc %s 10\n0 proc %s 40\n0 proc %s 5\n' \
	$p1 $p2 $p3 $srv $p7 > "$state"
# the same snapshot: once the new process counts, the server was seen
wait_for 3 "GPU 0: the process beside the server counted" gpu_is 3
n0=$(gpu_unman 0)
[ "$n0" = 3 ] && [ "$(field "$a1" unmanaged)" = 1 ] &&
	ok "the agent's MPS server is not a process of no allocation" ||
	bad "with the MPS server listed: GPU 0 $n0, $a1 $(field "$a1" unmanaged)"
$CTL -s "$sock" close "$sp" >/dev/null
printf '0 proc %s 60\n0 proc %s 30\n0 proc %s 10\n' $p1 $p2 $p3 > "$state"
kill $p7 2>/dev/null

# level 0: hold-back on (SIGHUP reload)
sed -i 's/^unmanaged_hold: false/unmanaged_hold: true/' "$dir/gshare.yaml"
spawn 0 "$a1"; p0=$last		# root's process of a1: never stopped
printf '0 proc %s 90\n0 proc %s 90\n0 proc %s 90\n' $p1 $p0 $p3 > "$state"
kill -HUP $apid
# no contender yet: a1 runs alone, nothing is stopped (the period that
# counts root's process too has made its decision)
wait_for 5 "root's process of $a1 counted as unmanaged" is "$a1" unmanaged 2
[ "$(pstate $p1)" = S ] && ok "alone on the GPU: not held back" ||
	bad "held back with no contender: state $(pstate $p1)"
# a contender: a3's unmanaged process, weight equal, using little
a3=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid $NOBODY --job 903)
spawn $NOBODY "$a3"; p4=$last
printf '0 proc %s 90\n0 proc %s 90\n0 proc %s 90\n0 proc %s 5\n' \
	$p1 $p0 $p3 $p4 > "$state"
wait_for 6 "allocation $a1 ahead of $a3: its process stopped (state T)" \
	sh -c "[ \"\$(sed 's/.*) \(.\).*/\1/' /proc/$p1/stat)\" = T ]"
grep -q "allocation $a1: unmanaged process $p1 (uid $NOBODY) held back (SIGSTOP)" \
	"$dir/log" && ok "stop logged" || bad "stop not logged"
[ "$(pstate $p0)" != T ] && ok "root's process never stopped" ||
	bad "root's process stopped"
[ "$(pstate $p3)" != T ] && ok "a process of no allocation never stopped" ||
	bad "process of no allocation stopped"
wait_for 3 "status: 1 held back" is "$a1" unmanaged_held 1
kill -CONT $p1	# its owner continues it: stopped again
wait_for 4 "continued by its owner while held: stopped again" \
	grep -q "allocation $a1: unmanaged process $p1 was continued while held back; stopped again" \
	"$dir/log"
[ "$(pstate $p1)" = T ] && ok "state T again" || bad "state $(pstate $p1)"
held_gauge() {
	scrape | grep -q "^gshare_unmanaged_held_processes{gpu=\"0\",alloc=\"$a1\"} 1$"
}
wait_for 3 "metrics: held gauge" held_gauge ||
	echo "$(scrape | grep unmanaged_held)" >&2
# the contender goes away: a1 continues
printf '0 proc %s 90\n0 proc %s 90\n0 proc %s 90\n' $p1 $p0 $p3 > "$state"
$CTL -s "$sock" close "$a3" >/dev/null
wait_for 6 "contender gone: process continued" \
	sh -c "[ \"\$(sed 's/.*) \(.\).*/\1/' /proc/$p1/stat)\" = S ]"
grep -q "allocation $a1: unmanaged process $p1 continued (SIGCONT)" \
	"$dir/log" && ok "continue logged" || bad "continue not logged"

# stopped again, then the policy turned off: continued
a4=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid $NOBODY --job 904)
spawn $NOBODY "$a4"; p5=$last
printf '0 proc %s 90\n0 proc %s 5\n' $p1 $p5 > "$state"
wait_for 6 "held back again beside a new contender" \
	sh -c "[ \"\$(sed 's/.*) \(.\).*/\1/' /proc/$p1/stat)\" = T ]"
sed -i 's/^unmanaged_hold: true/unmanaged_hold: false/' "$dir/gshare.yaml"
kill -HUP $apid
wait_for 4 "unmanaged_hold turned off: continued" \
	sh -c "[ \"\$(sed 's/.*) \(.\).*/\1/' /proc/$p1/stat)\" = S ]"
# and on again; then the agent stops: continued
sed -i 's/^unmanaged_hold: false/unmanaged_hold: true/' "$dir/gshare.yaml"
kill -HUP $apid
wait_for 6 "held back once more" \
	sh -c "[ \"\$(sed 's/.*) \(.\).*/\1/' /proc/$p1/stat)\" = T ]"
kill -TERM $apid
wait $apid; rc=$?
apid=""
[ $rc = 0 ] && ok "agent stopped (exit 0)" || bad "agent exit $rc"
[ "$(pstate $p1)" = S ] && ok "the agent's stop continues held processes" ||
	bad "after stop: state $(pstate $p1)"
exit $fail
