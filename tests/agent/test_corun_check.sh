#!/bin/sh
# Integration test of space mode's co-run check (docs/space.md, "The
# co-run check") with the simulated GPU and the stand-in MPS control
# daemon: simulated jobs whose speed follows their partition
# (gshare-simjob --scaling, --corun-slow) are measured alone, then side
# by side, and the agent acts on what it measured:
#   1. a compute-like job (linear in SMs, 20 % slower beside a partner)
#      and a memory-like one (saturates at a third of the SMs), 50/50:
#      at 64 SMs the first does 0.40 of its rate alone (0.81 of its
#      share); the agent moves granules to it (the log says so) until it
#      reaches its share (80 SMs: 0.505), and they stay side by side;
#      STATUS names the check;
#   2. two compute-like jobs, each 20 % slower beside the other: both
#      below their share and nobody to give: they take turns (STATUS says
#      "slower side by side"), one at a time;
#   2b. a job whose rate alone reads low (--alone-slow) looks above its
#      share and gives a granule, but its rate falls with its SMs: the
#      move is taken back (the donor rule) and the pair settles;
#   3. with space_check off (SIGHUP) nothing is probed or moved: a new
#      pair co-runs at once on 64/68 SMs; both pause every 20 ms (a
#      synchronize), which moves no partition (idle_grace).
# Polls with deadlines; cleans up on any exit.
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gscheck "$SIM"
chmod 755 "$dir"
FAKE=$(cd "$(dirname "$0")" && pwd)/fake_mps_control.sh
ms() { echo $(( $(date +%s%N) / 1000000 )); }
trap gs_mps_cleanup EXIT
field() {	# field ALLOC KEY: from status --json
	$CTL -s "$sock" status --json | $PY -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])]
print(a[0][sys.argv[2]] if a else "none")' "$1" "$2"
}
until_t() {	# until_t DESC MS CMD...: until CMD succeeds
	desc=$1; lim=$2; shift 2
	t0=$(ms)
	until "$@" >/dev/null 2>&1; do
		if [ $(( $(ms) - t0 )) -gt "$lim" ]; then
			bad "$desc: not after $lim ms"
			return 1
		fi
		sleep 0.05
	done
	ok "$desc ($(( $(ms) - t0 )) ms)"
}
is() { [ "$(field "$1" "$2")" = "$3" ]; }
has() { field "$1" space | grep -q "$2"; }
# tasks per second from 2 s before the job's end to 0.5 s before it
# (away from the start, and from the end, where one job may run alone)
rate() {
	grep "^event=progress" "$1" | $PY -c '
import sys
r = [dict(f.split("=", 1) for f in l.split()) for l in sys.stdin]
end = float(r[-1]["wall_s"])
w = [x for x in r if end - 2.01 <= float(x["wall_s"]) <= end - 0.49]
a, b = w[0], w[-1]
print("%.1f" % ((int(b["tasks"]) - int(a["tasks"])) /
		(float(b["wall_s"]) - float(a["wall_s"]))))'
}

# an allocation of 50 shares in space mode
space50() { $CTL -s "$sock" create --shares 50 --gpu 0 --uid 1000 --mode space; }
# job NAME ALLOC OPTIONS...: a simulated job in the background, its
# output in $dir/NAME.out, its pid added to $jpids
job() {
	_n=$1; _a=$2; shift 2
	$SIM -s "$sock" -a "$_a" -n "$_n" "$@" > "$dir/$_n.out" 2>&1 &
	jpids="$jpids $!"
}

gs_agent_conf <<CONF
gpus: {simulated: 1}
mps_control: $FAKE
space_check: true
CONF
GSHARED="$GSHARED -v" gs_agent_start

# alone: 500 us tasks, 2000 tasks/s
ALONE=2000

# the simulated job's knobs refuse bad values (exit 2, the option named)
for bad_opt in "--alone-slow 1001" "--alone-slow x" "--corun-slow -1" \
    "--corun-slow 1001"; do
	# shellcheck disable=SC2086
	$SIM $bad_opt -d 1 >/dev/null 2>"$dir/opt.err"
	rc=$?
	if [ $rc = 2 ] && grep -q "gshare-simjob: ${bad_opt% *}:" "$dir/opt.err"; then
		ok "gshare-simjob $bad_opt refused"
	else
		bad "gshare-simjob $bad_opt: rc $rc, $(cat "$dir/opt.err")"
	fi
done

# 1. granules move to the job below its share
a=$(space50)
b=$(space50)
jpids=""
job a "$a" --scaling linear --corun-slow 20 -d 6 -i 250
job b "$b" --scaling memory --corun-slow 20 -d 6 -i 250
until_t "$a and $b measured alone first" 3000 has "$a" "measured alone"
until_t "then co-run" 3000 has "$a" "co-runs with $b"
until_t "$a (below its share) grows to 80 SMs, $b keeps 52" 5000 \
	sh -c "[ \"\$($CTL -s $sock status --json | $PY -c '
import json, sys
s = {a[\"id\"]: a[\"sm_count\"] for a in json.load(sys.stdin)[\"allocations\"]}
print(s[$a], s[$b])')\" = '80 52' ]"
n=$(grep -c "co-run check: .*a granule from $b to $a" "$dir/log")
[ "$n" = 2 ] && ok "the log names both moves ($n)" ||
	bad "moves logged: $n (want 2): $(grep 'co-run check' "$dir/log")"
until_t "STATUS shows the measured rate" 2000 has "$a" "of alone"
echo "     $a: $(field "$a" space)"
gs_wait_jobs 30
ra=$(rate "$dir/a.out")
rb=$(rate "$dir/b.out")
echo "     rates at the end: $a $ra, $b $rb tasks/s (alone $ALONE)"
# the model's rates at 80/52 SMs: 1010 and 1667 tasks/s (a loaded host
# slows the simulated jobs themselves: the rates are printed, the
# partitions above are the check); a pair still side by side: both
# well above what taking turns gives the memory-like one (1000)
$PY -c 'import sys; b = float(sys.argv[1]); sys.exit(b < 1200)' "$rb" &&
	ok "$a and $b still side by side at the end" ||
	bad "$b at $rb tasks/s: not side by side at the end"
for x in $a $b; do $CTL -s "$sock" close "$x" >/dev/null; done

# 2. a pair that does worse side by side takes turns
c=$(space50)
d=$(space50)
jpids=""
job c "$c" --scaling linear --corun-slow 20 -d 5 -i 250
job d "$d" --scaling linear --corun-slow 20 -d 5 -i 250
until_t "$c and $d co-run" 3000 has "$c" "co-runs with $d"
until_t "then take turns: slower side by side" 5000 has "$d" \
	"takes turns with $c: slower side by side"
grep -q "co-run check: .*they take turns for 30 s" "$dir/log" &&
	ok "the log gives the split and its numbers" ||
	bad "no split in the log"
[ "$(field "$c" sm_count)" = 132 ] && [ "$(field "$d" sm_count)" = 132 ] &&
	ok "each takes its turns on the whole GPU" ||
	bad "SMs: $(field "$c" sm_count) $(field "$d" sm_count)"
gs_wait_jobs 30
rc=$(rate "$dir/c.out")
rd=$(rate "$dir/d.out")
echo "     rates taking turns: $c $rc, $d $rd tasks/s (alone $ALONE)"
# one at a time on the whole GPU: together at most one job's rate alone
# (both running on it at once, as a split that left them both holding
# did: 2000 + 2000)
$PY -c 'import sys; c, d, a = map(float, sys.argv[1:]); sys.exit(c + d > 1.05 * a or min(c, d) <= 0)' \
	"$rc" "$rd" "$ALONE" && ok "taking turns: one at a time" ||
	bad "rates taking turns $rc $rd"
for x in $c $d; do $CTL -s "$sock" close "$x" >/dev/null; done

# 2b. the donor rule: a job whose rate alone reads low (30 %) looks well
# above its share beside its partner (at 64 SMs 0.63 of "alone") and
# gives a granule to the partner below its share (0.46: 0.92 of it); its
# rate falls with the SMs it gave (linear), so the move is taken back
# and the pair settles at 64/68 instead of moving on to 80/52
g=$(space50)
h=$(space50)
jpids=""
job g "$g" --scaling linear --corun-slow 5 -d 5 -i 250
job h "$h" --scaling linear --alone-slow 30 -d 5 -i 250
until_t "$g takes a granule from $h" 5000 \
	grep -q "co-run check: .*a granule from $h to $g" "$dir/log"
until_t "and gives it back: $h lost its rate with it" 4000 \
	grep -q "co-run check: .*a granule from $g to $h" "$dir/log"
# settled: no more moves while they run (64/68, the odd SMs in turns)
sleep_until=$(( $(ms) + 1500 ))
moves=0
while [ "$(ms)" -lt $sleep_until ]; do
	sg=$(field "$g" sm_count)
	case $sg in 64|68) ;; *) moves=$((moves + 1));; esac
	sleep 0.1
done
nm=$(grep -c "co-run check: .*a granule" "$dir/log")
[ $moves = 0 ] && ok "settled at 64/68 for 1.5 s (moves logged in all: $nm)" ||
	bad "$g's SMs left 64/68 $moves times after the take-back: $(field "$g" space)"
gs_wait_jobs 30
for x in $g $h; do $CTL -s "$sock" close "$x" >/dev/null; done

# 3. space_check off: no probe, no check
gs_agent_conf <<CONF
gpus: {simulated: 1}
mps_control: $FAKE
space_check: false
verbose: true
CONF
kill -HUP "$apid"
until_t "reloaded" 3000 grep -q "configuration reloaded" "$dir/log"
e=$(space50)
f=$(space50)
# both pause briefly every 20 ms (a synchronize): their partitions must
# not follow every pause (idle_grace; following them: 200 changes)
n0=$(grep -c "space: gpu 0: allocation $e: SMs" "$dir/log")
jpids=""
job e "$e" --scaling linear --corun-slow 20 -d 2 --busy-ms 20 --idle-ms 0.2
pe=$!
job f "$f" --scaling linear --corun-slow 20 -d 2 --busy-ms 20 --idle-ms 0.2
until_t "space_check off: $e and $f co-run at once" 1000 has "$e" \
	"co-runs with $f"
# to their end (the check would have split them after 0.3 s)
split=""
while kill -0 "$pe" 2>/dev/null; do
	w=$(field "$f" space)
	case $w in *"takes turns"*|*"measured alone"*) split=$w;; esac
	sleep 0.1
done
[ -z "$split" ] && ok "no probe, no split with space_check off" ||
	bad "space_check off but: $split"
nrs=$(( $(grep -c "space: gpu 0: allocation $e: SMs" "$dir/log") - n0 ))
[ "$nrs" -le 12 ] && ok "$e's partition changed $nrs times in 2 s of pauses" ||
	bad "$e's partition changed $nrs times: it follows every pause"
gs_wait_jobs 30
exit $fail
