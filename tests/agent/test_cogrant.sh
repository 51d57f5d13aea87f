#!/bin/sh
# Integration test of space mode's co-granting (docs/space.md): the token
# scheduler grants the members of a co-run group together.  With the
# simulated GPU and the stand-in MPS control daemon
# (tests/agent/fake_mps_control.sh): two space jobs of one user whose
# classes co-run, beside a time-mode job, are granted together (both
# "running" in STATUS at once; their device time over the same window
# adds up to more than the wall time) while each keeps its share of the
# GPU's time (30 + 30 as a group, 40 alone); an idle member's SMs go to
# the other (its control page rewritten within a few ms of the partner's
# exit); two 50-share members hold the odd SMs in turn (space_rotate);
# a job that flips its page's job_kind every 0.2 ms moves nobody's
# partition but once;
# two compute-heavy jobs (simulated profiles) take turns and say
# so in STATUS, while a compute-heavy one and a memory-heavy one co-run;
# a job under the launch gate takes turns with its partner, uncapped;
# gsacct bills the co-running jobs kernel time x partition; the NVML
# source (stand-in libnvidia-ml.so.1) classifies a job that runs alone.
# Polls with deadlines; cleans up on any exit.
set -u
. "$(dirname "$0")/../lib/agent.sh"
PROBE=$B/tests/agent/space_probe
gs_agent_init gscogrant "$SIM" "$PROBE" "$B/node-agent/gsacct/gsacct" \
	"$B/tests/agent/fakenvml/libnvidia-ml.so.1"
chmod 755 "$dir"
FAKE=$(cd "$(dirname "$0")" && pwd)/fake_mps_control.sh
ms() { echo $(( $(date +%s%N) / 1000000 )); }
trap gs_mps_cleanup EXIT
until5() {	# until CMD succeeds (5 s): until5 DESC CMD...
	desc=$1; shift
	t0=$(ms)
	until "$@"; do
		if [ $(( $(ms) - t0 )) -gt 5000 ]; then
			bad "$desc: not after 5 s"
			return 1
		fi
		sleep 0.02
	done
	ok "$desc ($(( $(ms) - t0 )) ms)"
}
field() {	# field ALLOC KEY: from status --json
	$CTL -s "$sock" status --json | $PY -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])]
print(a[0][sys.argv[2]] if a else "none")' "$1" "$2"
}
both_running() {	# ALLOC ALLOC: both running in one STATUS
	$CTL -s "$sock" status --json | $PY -c '
import json, sys
st = {a["id"]: a["state"] for a in json.load(sys.stdin)["allocations"]}
sys.exit(not all(st.get(int(x)) == "running" for x in sys.argv[1:]))' "$@"
}
pct() { $PY -c 'import sys; print("%.1f" % (100 * float(sys.argv[1])))' "$1"; }
within() {	# within GOT WANT TOL (percent points)
	$PY -c 'import sys; g, w, t = map(float, sys.argv[1:]); sys.exit(abs(g - w) > t)' "$@"
}

# the co-run check (a probe alone first, then measured rates) has its
# own test, test_corun_check.sh; the odd SMs stay put (space_rotate: 0)
# until part 2b, so that part 1's bills are exact
base_conf() {
	gs_agent_conf <<CONF
gpus: {simulated: 1}
mps_control: $FAKE
space_check: false
space_rotate: 0
CONF
}
base_conf
gs_agent_start

# 1. co-run beside a time-mode job: 30 + 30 together, 40 alone
a=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space --job 91)
b=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space --job 92)
c=$($CTL -s "$sock" create --shares 40 --gpu 0 --uid 1000 --job 93)
at=$(( $($SIM --now) + 300000000 ))
for x in a b c; do
	eval id=\$$x
	$SIM -s "$sock" -a "$id" -n "$x" --at "$at" -d 3 > "$dir/$x.out" 2>&1 &
	jpids="$jpids $!"
done
until5 "$a and $b granted together (both running)" both_running "$a" "$b"
gs_wait_jobs 30
sa=$(gs_field "$dir/a.out" share)
sb=$(gs_field "$dir/b.out" share)
sc=$(gs_field "$dir/c.out" share)
echo "     wall shares: a $(pct "$sa") %, b $(pct "$sb") %, c $(pct "$sc") %"
within "$(pct "$sa")" 60 6 && within "$(pct "$sb")" 60 6 &&
within "$(pct "$sc")" 40 6 &&
	ok "group 30+30 holds 60 % of the time, both members all of it; time mode 40 %" ||
	bad "shares a $sa b $sb c $sc (want 0.6 0.6 0.4)"
$PY -c 'import sys; sys.exit(sum(map(float, sys.argv[1:])) < 1.3)' "$sa" "$sb" "$sc" &&
	ok "grant intervals overlap (device time $(pct "$sa")+$(pct "$sb")+$(pct "$sc") % of the wall time)" ||
	bad "no overlap: $sa + $sb + $sc"
for x in $a $b $c; do $CTL -s "$sock" close "$x" >/dev/null; done
# accounting (docs/accounting.md): a space job's GPU time is its kernel
# time x its partition's fraction (a: SMs 0-63, b: 64-131 of 132), a
# time-mode job's its kernel time; gsacct reads what the agent stored
GSACCT=$B/node-agent/gsacct/gsacct
TZ=UTC "$GSACCT" --store "$dir/state/usage.db" -j 91,92,93 -P -n \
	-o JobID,GPUSec > "$dir/acct.txt" 2>&1 || bad "gsacct: $(cat "$dir/acct.txt")"
for j in "91 a 64" "92 b 68" "93 c 132"; do
	set -- $j
	got=$(sed -n "s/^$1|//p" "$dir/acct.txt")
	own=$(gs_field "$dir/$2.out" gpu_s)
	$PY -c 'import sys; g, o, s = map(float, sys.argv[1:4]); w = o * s / 132; print("     job %s: gsacct %.3f s, kernels %.3f s x %d/132 = %.3f s" % (sys.argv[4], g, o, s, w)); sys.exit(abs(g - w) > 0.02 * w + 0.005)' \
		"${got:-0}" "$own" "$3" "$1" &&
		ok "job $1: GPU time = kernel time x $3/132 SMs" ||
		bad "job $1: gsacct '$got', kernels $own s, $3 SMs"
done

# 2. an idle member's SMs go to the other: its page is rewritten at once
pa=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
qa=$($CTL -s "$sock" create --shares 50 --gpu 0 --uid 1000 --mode space)
mkfifo "$dir/p-in" "$dir/q-in"
$PROBE "$sock" "$pa" 30 stamp < "$dir/p-in" > "$dir/p.out" 2>&1 &
jpids="$jpids $!"
$PROBE "$sock" "$qa" 30 stamp < "$dir/q-in" > "$dir/q.out" 2>&1 &
jpids="$jpids $!"
exec 8> "$dir/p-in" 9> "$dir/q-in"
# the probe's latest partition is $2
seen() { grep "^part " "$dir/$1.out" | tail -n 1 | grep -q "^part [0-9]* $2 [0-9]* [0-9]*\$"; }
until5 "$pa on SMs 0-47, $qa on 48-131 (30:50)" seen p "0 48"
seen q "48 84" || bad "q: $(cat "$dir/q.out")"
until5 "$pa and $qa hold the token together" both_running "$pa" "$qa"
exec 8>&-
until5 "$pa leaves: $qa gets SMs 0-131" seen q "0 132"
t1=$(sed -n 's/^exit //p' "$dir/p.out")
t2=$(sed -n 's/^part [0-9]* 0 132 \([0-9]*\) .*/\1/p' "$dir/q.out" | tail -n 1)
lat=$(( (${t2:-0} - ${t1:-0}) / 1000 ))
echo "     partner's exit -> partition rewritten: $lat us"
[ -n "$t1" ] && [ -n "$t2" ] && [ "$lat" -ge 0 ] && [ "$lat" -lt 50000 ] &&
	ok "the idle member's SMs reach the other's page in $lat us" ||
	bad "rewrite latency $lat us"
# every partition the agent wrote carries when it wrote it (part_set_ns,
# the runtime's resize latency): set, and not after the probe saw it
badset=$(awk '$1 == "part" && $2 > 0 && ($6 == 0 || $6 > $5) { print }' \
	"$dir/p.out" "$dir/q.out")
nset=$(awk '$1 == "part" && $2 > 0' "$dir/p.out" "$dir/q.out" | wc -l)
[ "$nset" -gt 0 ] && [ -z "$badset" ] &&
	ok "each of $nset partition changes carries the agent's write time" ||
	bad "part_set_ns: $nset changes, wrong: $badset"
exec 9>&-
gs_wait_jobs 10
for x in $pa $qa; do $CTL -s "$sock" close "$x" >/dev/null; done

# 2b. two 50-share members: 64 + 68 SMs, and the 68 changes hands every
# space_rotate (200 ms here, reloaded)
gs_agent_conf <<CONF
gpus: {simulated: 1}
mps_control: $FAKE
space_check: false
space_rotate: 200ms
CONF
reload() {	# DESC: SIGHUP, until the agent says it reloaded
	n0=$(grep -c "configuration reloaded" "$dir/log")
	kill -HUP "$apid"
	until5 "$1" reloaded
}
reloaded() { [ "$(grep -c "configuration reloaded" "$dir/log")" -gt "$n0" ]; }
reload "reloaded (space_rotate: 200ms)"
ra=$($CTL -s "$sock" create --shares 50 --gpu 0 --uid 1000 --mode space)
rb=$($CTL -s "$sock" create --shares 50 --gpu 0 --uid 1000 --mode space)
mkfifo "$dir/ra-in" "$dir/rb-in"
$PROBE "$sock" "$ra" 30 < "$dir/ra-in" > "$dir/ra.out" 2>&1 &
jpids="$jpids $!"
$PROBE "$sock" "$rb" 30 < "$dir/rb-in" > "$dir/rb.out" 2>&1 &
jpids="$jpids $!"
exec 8> "$dir/ra-in" 9> "$dir/rb-in"
had() { grep -q "^part [0-9]* $2\( \|\$\)" "$dir/$1.out"; }
turns() { had ra "0 64" && had ra "64 68" && had rb "0 64" && had rb "64 68"; }
until5 "50/50: each member held 64 and 68 SMs in turn" turns
exec 8>&- 9>&-
gs_wait_jobs 10
for x in $ra $rb; do $CTL -s "$sock" close "$x" >/dev/null; done

# 2c. a job that lies: it says "gate" in its page's job_kind, then
# rewrites it every 0.2 ms, libgshare and gate in turn.  The agent keeps the first word of each
# attach, so its partner's partition does not follow the flips (it
# would change at every 1 ms tick), and the agent stays up.
base_conf
reload "reloaded (space_rotate: 0)"
fb=$($CTL -s "$sock" create --shares 50 --gpu 0 --uid 1000 --mode space)
mkfifo "$dir/fa-in" "$dir/fb-in"
$PROBE "$sock" "$fb" 30 stamp < "$dir/fb-in" > "$dir/fb.out" 2>&1 &
jpids="$jpids $!"
exec 9> "$dir/fb-in"
until5 "$fb alone on the whole GPU" seen fb "0 132"
fa=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
$PROBE "$sock" "$fa" 30 flap < "$dir/fa-in" > "$dir/fa.out" 2>&1 &
jpids="$jpids $!"
exec 8> "$dir/fa-in"
settled() { [ "$(field "$fa" space)" = "takes turns: no libgshare, no partition" ] &&
	seen fb "0 132"; }
until5 "the liar's first word (gate) planned: it takes turns" settled
# its flips start 200 ms after its start: let them begin
t0=$(ms)
while [ $(( $(ms) - t0 )) -lt 300 ]; do sleep 0.05; done
# a second of flips (about 5000) after that plan: the partner's
# partition does not change again (it would at every 1 ms tick if the
# agent followed the flips)
n1=$(grep -c "^part " "$dir/fb.out")
t0=$(ms)
while [ $(( $(ms) - t0 )) -lt 1000 ]; do sleep 0.1; done
nf=$(( $(grep -c "^part " "$dir/fb.out") - n1 ))
kill -0 "$apid" 2>/dev/null && [ "$nf" = 0 ] &&
	ok "job_kind flipped every 0.2 ms for 1 s: the partner's partition did not move, the agent is up" ||
	bad "flipping liar: the partner's partition changed $nf times in 1 s (agent alive: $(kill -0 "$apid" 2>/dev/null && echo yes || echo no))"
exec 8>&- 9>&-
gs_wait_jobs 10
for x in $fa $fb; do $CTL -s "$sock" close "$x" >/dev/null; done

# 3. classes from the simulated GPU's counters (space_sample.c): each job
# runs alone first and is classified; then two compute-heavy ones take
# turns, a compute-heavy and a memory-heavy one co-run
x=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
y=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
z=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
classed() { grep -q "space: allocation $1 is $2 " "$dir/log"; }
for j in "$x compute compute-heavy" "$y compute compute-heavy" \
	 "$z memory memory-heavy"; do
	set -- $j
	$SIM -s "$sock" -a "$1" -n "c$1" --profile "$2" -d 10 \
		> "$dir/c$1.out" 2>&1 &
	cpid=$!
	jpids="$jpids $cpid"
	until5 "$1 (--profile $2) alone: classified $3" classed "$1" "$3"
	kill -TERM "$cpid"
	gs_wait_jobs 10
done
says() { [ "$(field "$1" space)" = "$2" ]; }
pair() {	# pair ID ID WHY [ARGS]: device-time shares over one 2 s
		# window; STATUS gives the second WHY while both run; the
		# second job gets ARGS
	at=$(( $($SIM --now) + 200000000 ))
	for i in "$1" "$2"; do
		more=""; [ "$i" = "$2" ] && more=${4:-}
		$SIM -s "$sock" -a "$i" -n "p$i" --at "$at" -d 2 $more \
			> "$dir/p$i.out" 2>&1 &
		jpids="$jpids $!"
	done
	until5 "STATUS of $2: $3" says "$2" "$3"
	gs_wait_jobs 20
	s1=$(gs_field "$dir/p$1.out" share)
	s2=$(gs_field "$dir/p$2.out" share)
}
pair "$x" "$y" "takes turns with $x: compute-heavy + compute-heavy"
echo "     compute-heavy pair: $(pct "$s1") % + $(pct "$s2") %"
$PY -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a + b < 1.02 and abs(a - b) < 0.08))' "$s1" "$s2" &&
	ok "$x and $y (compute-heavy) take turns: $(pct "$s1") + $(pct "$s2") % of the time" ||
	bad "compute-heavy pair: $s1 + $s2 (want turns, 50/50)"
pair "$x" "$z" "co-runs with $x: memory-heavy + compute-heavy"
echo "     compute-heavy + memory-heavy: $(pct "$s1") % + $(pct "$s2") %"
$PY -c 'import sys; sys.exit(sum(map(float, sys.argv[1:])) < 1.5)' "$s1" "$s2" &&
	ok "$x and $z (compute-heavy + memory-heavy) co-run: $(pct "$s1") + $(pct "$s2") %" ||
	bad "complementary pair: $s1 + $s2 (want co-run)"
case $(field "$z" space) in
"idle: its SMs go to the others") ok "STATUS after the run: $z idle";;
*)	bad "space of $z: $(field "$z" space)";;
esac
# the same pair with z's job under the launch gate (it says so in its
# control page): no partition to keep, so it takes turns (uncapped)
pair "$x" "$z" "takes turns: no libgshare, no partition" "--kind gate"
echo "     compute-heavy + gated memory-heavy: $(pct "$s1") % + $(pct "$s2") %"
$PY -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a + b < 1.02 and abs(a - b) < 0.08))' "$s1" "$s2" &&
	ok "$x and gated $z take turns: $(pct "$s1") + $(pct "$s2") % of the time" ||
	bad "gated pair: $s1 + $s2 (want turns, 50/50)"
[ "$(field "$z" mps_pct)" = 0 ] && ok "gated job's thread cap: none" ||
	bad "mps_pct of $z: $(field "$z" mps_pct)"
kill -TERM "$apid"; wait "$apid" 2>/dev/null; apid=""

# 4. the NVML source (gpus: nvml, the stand-in libnvidia-ml.so.1 of
# tests/agent/fake_nvml.c): a job alone on GPU 0, whose utilization NVML
# gives as 70 % kernels and 80 % memory, is memory-heavy after 4 windows
# of 1 s; GPU 1's utilization is never read for it
gs_agent_conf <<CONF
gpus: nvml
mps_control: $FAKE
CONF
echo "0 util 70 80" > "$dir/nvml"
echo "1 util 99 1" >> "$dir/nvml"
gs_agent_start "" LD_LIBRARY_PATH=$B/tests/agent/fakenvml \
	FAKE_NVML_STATE=$dir/nvml
n=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
$SIM -s "$sock" -a "$n" -n nv -d 10 > "$dir/nv.out" 2>&1 &
cpid=$!
jpids="$jpids $cpid"
t0=$(ms)
until classed "$n" memory-heavy || [ $(( $(ms) - t0 )) -gt 8000 ]; do
	sleep 0.1
done
classed "$n" memory-heavy &&
	ok "NVML source: $n alone at 70 % / 80 % is memory-heavy ($(( $(ms) - t0 )) ms)" ||
	bad "NVML source: $(grep "space: allocation" "$dir/log")"
grep -q "space: allocation $n is memory-heavy (SM 70 %, memory 80 % over 4 samples alone)" "$dir/log" &&
	ok "its samples are GPU 0's readings" ||
	bad "samples: $(grep "space: allocation" "$dir/log")"
kill -TERM "$cpid"
gs_wait_jobs 10
exit $fail
