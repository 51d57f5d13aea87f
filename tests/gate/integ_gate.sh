#!/bin/sh
# Integration test of the launch gate without a GPU: a live gshared with
# one simulated GPU (wfq, 4 ms slices), the stand-in libcuda.so.1, and
# gate_app (which reaches the driver like the CUDA runtime does) with
# libgshare-gate.so preloaded.  Checks:
#   - no allocation / GSHARE_GATE=0 / libgshare linked (level 2): every
#     launch passes through untouched (level 2 keeps the memory limit:
#     mem_gate.sh);
#   - each way to reach the driver (cuGetProcAddress_v2, the PTDS flag,
#     dlsym on the libcuda handle, the application asking for
#     cuGetProcAddress itself) is gated; graphs, async copies, several
#     streams, a global-mode capture (not broken), fork, a second device
#     (not gated) work; the work queued on the GPU stays within the
#     window (ungated, the same program queues 20 ms);
#   - alone on the GPU the gate keeps the wide window (8 ms), beside a
#     busy job on another allocation the tight one (1 ms);
#   - two gated jobs at weights 1:3 split the GPU 25/75;
#   - a job idle most of the time leaves its time to a busy one;
#   - kill -9 of a gated job mid-slice leaves the agent and the other job
#     running; a second process on the same allocation is gated beside
#     the first (they share the allocation's token);
#   - in space mode a gated job is planned alone (it keeps no partition)
#     and its libgshare partner takes turns with it.
# Cleans up every process and file on any exit.
set -u
GS_LOG_TAIL=40
. "$(dirname "$0")/../lib/agent.sh"
APP=$B/tests/gate/gate_app
GATE=$PWD/$B/runtime/gate/libgshare-gate.so
gs_agent_init gsgate "$APP" "$SIM" "$GATE" "$B/tests/gate/standin/libcuda.so.1" \
    "$B/tests/gate/fake_libgshare.so"
export LD_LIBRARY_PATH=$PWD/$B/tests/gate/standin

# one GPU listed with the stand-in's UUID (device 0's), so the gate's
# check that a job runs on its allocation's GPU passes
UUID=GPU-5354414e-4449-4e00-0000-000000000000
gs_agent_conf <<CONF
gpus:
  - index: 0
    uuid: $UUID
    name: stand-in
policy: wfq
slice: 4ms
CONF
gs_agent_start "stand-in GPU"

ctl() { $CTL -s "$sock" "$@"; }
gated() {	# ALLOC OUT ARGS...: gate_app under the gate, in the background
	g_alloc=$1 g_out=$2
	shift 2
	GSHARE_SOCKET=$sock GSHARE_ALLOC=$g_alloc LD_PRELOAD=$GATE \
	    $APP "$@" >"$dir/$g_out.out" 2>&1 &
	jpids="$jpids $!"
}
# until some allocation's job holds the GPU (5 s at most)
wait_running() {
	i=0
	until ctl status --json 2>/dev/null | grep -q '"state": *"running"'; do
		i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.05
	done
}
field() {	# FILE KEY
	sed -n 's/.*event=done.* '"$2"'=\([^ ]*\).*/\1/p' "$1"
}

# --- pass-through -------------------------------------------------------
LD_PRELOAD=$GATE $APP --seconds 0.2 --expect-ungated >"$dir/p1.out" 2>&1 &&
    ok "no allocation: untouched" || bad "no allocation: $(cat "$dir/p1.out")"
a=$(ctl create --shares 50)
GSHARE_GATE=0 GSHARE_SOCKET=$sock GSHARE_ALLOC=$a LD_PRELOAD=$GATE \
    $APP --seconds 0.2 --expect-ungated >"$dir/p2.out" 2>&1 &&
    ok "GSHARE_GATE=0: untouched" || bad "GSHARE_GATE=0: $(cat "$dir/p2.out")"
# a level-2 job (libgshare's gs_init present) drives its own session
GSHARE_SOCKET=$sock GSHARE_ALLOC=$a \
    LD_PRELOAD="$GATE $PWD/$B/tests/gate/fake_libgshare.so" \
    $APP --seconds 0.2 --expect-ungated >"$dir/p4.out" 2>&1 &&
    ok "libgshare linked: launches are libgshare's" ||
    bad "libgshare linked: $(cat "$dir/p4.out")"
# a job on another GPU than its allocation's (the stand-in's device 0
# reports another UUID): refused with the reason, never silently shared
GATE_STANDIN_UUID=5354414e44494e0000000000000000ff \
    GSHARE_SOCKET=$sock GSHARE_ALLOC=$a LD_PRELOAD=$GATE \
    $APP --seconds 0.2 >"$dir/p5.out" 2>&1 &&
    bad "wrong GPU: ran ($(cat "$dir/p5.out"))" || {
	grep -q "allocation $a is on GPU $UUID, but this process's CUDA device 0 is GPU-5354414e-4449-4e00-0000-0000000000ff.*CUDA_ERROR_INVALID_DEVICE" \
	    "$dir/p5.out" && ok "wrong GPU: refused with the reason" ||
	bad "wrong GPU: $(cat "$dir/p5.out")"
}
# the same program without the gate queues far more than a window
$APP --seconds 0.3 --max-queue-us 2000 >"$dir/p3.out" 2>&1 &&
    bad "ungated run stayed within the window (test cannot fail)" ||
    ok "ungated: $(field "$dir/p3.out" max_queued_us) us queued"

# --- the window: wide while alone on the GPU, tight with a contender ------
# alone (the agent's page says nobody else wants the GPU): the wide
# window (8 ms) lets more than the tight one queue, never more than it
gated "$a" alone --seconds 0.4 --expect-gated --max-queue-us 9500
gs_wait_jobs 30
q=$(field "$dir/alone.out" max_queued_us)
[ $fail = 0 ] && [ "${q%.*}" -gt 2500 ] 2>/dev/null &&
    ok "alone: wide window, $q us queued (tight: <= 2500)" ||
    { bad "alone: $q us queued, want 2500 < q <= 9500"; cat "$dir/alone.out" >&2; }
# a job that arrives beside a busy one on another allocation always has
# a contender: the tight window (1 ms + one kernel + slack).  (The busy
# one queued under the wide window until then: its first suspend drains
# that, docs/runtime.md.)
c=$(ctl create --shares 50)
gated "$c" cont_c --seconds 1.5
cpid=$!
wait_running
gated "$a" cont_a --seconds 0.8 --max-queue-us 2500 --expect-gated
gs_wait_jobs 30
[ $fail = 0 ] && ok "contended: tight window, $(field "$dir/cont_a.out" \
    max_queued_us) us queued" ||
    { bad "contended: window not tight"; cat "$dir/cont_a.out" >&2; }
# a contender that pauses (busy 40 ms, idle 100 ms: it gives the token
# back in each pause) is still one: the window widens only after 200 ms
# without contention (GSHARE_GATE_ALONE_AFTER_US), so the busy job never
# queues more than the tight window
gated "$c" duty_c --seconds 1.5 --busy-ms 40 --idle-ms 100
wait_running
gated "$a" duty_a --seconds 1.0 --max-queue-us 2500 --expect-gated
gs_wait_jobs 30
[ $fail = 0 ] && ok "contender with pauses: still tight, $(field \
    "$dir/duty_a.out" max_queued_us) us queued" ||
    { bad "contender with pauses: window widened"; cat "$dir/duty_a.out" >&2; }
ctl close "$c" >/dev/null || bad "close $c"

# --- every path to the driver, alone on the allocation --------------------
# the tight window everywhere (GSHARE_GATE_ALONE_WINDOW_US=0): window
# 1 ms + one 100 us kernel + scheduling slack on a loaded machine
export GSHARE_GATE_ALONE_WINDOW_US=0
for v in "" "--ptds" "--dlsym" "--dlsym --ptds" "--self-gpa" "--graph" \
	 "--copies" "--streams 3" "--capture" "--fork" "--dev1" \
	 "--stream-churn --kernel-us 20 --sync-every 0"; do
	n=v$(echo "$v" | tr -dc 'a-z0-9')
	# one window per stream (docs/runtime.md): 3 streams, 3 windows
	q=2500
	[ "$v" = "--streams 3" ] && q=4500
	gated "$a" "$n" --seconds 0.4 --expect-gated --max-queue-us $q $v
	gs_wait_jobs 30
	[ $fail = 0 ] && ok "gated ${v:-(cuGetProcAddress_v2)}: $(field \
	    "$dir/$n.out" launches) launches, $(field "$dir/$n.out" \
	    event_records) events, $(field "$dir/$n.out" max_queued_us) us queued" ||
	    { bad "gated $v"; cat "$dir/$n.out" >&2; exit 1; }
done
grep -q 'captured=[1-9]' "$dir/vcapture.out" &&
    grep -q 'capture_broken=0' "$dir/vcapture.out" &&
    ok "capture: recorded, not broken" || bad "capture: $(cat "$dir/vcapture.out")"
grep -q 'dev1=[1-9]' "$dir/vdev1.out" && ok "second device used" ||
    bad "dev1: $(cat "$dir/vdev1.out")"
# every churned stream's launch is gated (a start marker each), also
# after more streams than the gate's table holds (1024)
f=$dir/vstreamchurnkernelus20syncevery0.out
n=$(field "$f" launches) e=$(field "$f" event_records)
[ "${n:-0}" -gt 1100 ] && [ "${e:-0}" -ge "$n" ] &&
    ok "stream churn: $n streams created and destroyed, $e events" ||
    bad "stream churn: $n streams, $e events (want >1100 and >= streams)"
ctl close "$a" >/dev/null || bad "close $a"
unset GSHARE_GATE_ALONE_WINDOW_US

# --- weights 1:3 -------------------------------------------------------------
a=$(ctl create --shares 25 --weight 1)
b=$(ctl create --shares 75 --weight 3)
at=$(( $($SIM --now) + 800000000 ))
gated "$a" w1 --seconds 4 --at $at --win 1:4
gated "$b" w3 --seconds 4 --at $at --win 1:4
gs_wait_jobs 60
$PY - "$(field "$dir/w1.out" in_window)" "$(field "$dir/w3.out" in_window)" <<'EOF' &&
import sys
x, y = int(sys.argv[1]), int(sys.argv[2])
s = 100 * x / (x + y)
print(f"ok   weights 1:3 -> {s:.1f} / {100 - s:.1f} %")
sys.exit(0 if abs(s - 25) <= 8 else 1)
EOF
    true || bad "weights 1:3 off by more than 8 points"

# --- idle release: a job busy 20 % of the time leaves the rest ------------------
at=$(( $($SIM --now) + 800000000 ))
gated "$a" i1 --seconds 3 --at $at --win 0:3
gated "$b" i3 --seconds 3 --at $at --win 0:3 --busy-ms 40 --idle-ms 160
gs_wait_jobs 60
# the weight-1 job's kernels cover most of the 3 s (ungated: ~100 %)
$PY - "$(field "$dir/i1.out" kernel_s)" <<'EOF' &&
import sys
k = float(sys.argv[1])
print(f"ok   idle release: the busy weight-1 job ran {k:.2f} s of 3 s")
sys.exit(0 if k >= 0.6 * 3 else 1)
EOF
    true || bad "idle release: the busy job got too little"

# --- kill -9 mid-slice, and a second process on one allocation ----------------
gated "$a" k1 --seconds 4
victim=$!
gated "$b" k3 --seconds 2
sleep 1
kill -9 $victim
wait $victim 2>/dev/null
jpids=$(echo "$jpids" | sed "s/ $victim\b//")
gated "$b" k3b --seconds 1 --expect-gated
gs_wait_jobs 60
ctl ping >/dev/null && [ "$(field "$dir/k3.out" launches)" -gt 0 ] &&
    ok "kill -9 mid-slice: agent alive, the other job finished" ||
    bad "after kill -9"
# several processes attach to one allocation and share its token: the
# second one (k3 still runs) is gated, not refused
! grep -q 'running ungated' "$dir/k3b.out" && grep -q 'event=done' "$dir/k3b.out" &&
    ok "second process on one allocation: gated beside the first" ||
    bad "second process: $(cat "$dir/k3b.out")"
ctl close "$a" >/dev/null && ctl close "$b" >/dev/null || bad "close"

# --- accounting: the agent's GPU time against the driver's --------------
# a gated job alone on a fresh allocation: the GPU time the agent shows
# (the gate's event spans while it held the token) against the kernel
# time the stand-in ran, within 1 %: GPU-bound, and busy 40 ms of every
# 140 (its idle spells are not billed).  Third, busy 2 ms then a 0.3 ms
# host pause, over and over: the job holds the token through pauses
# shorter than the idle grace, so they are billed as its own
# (docs/runtime.md): its whole run from the first launch to the last
# completion, less any pause the loaded machine stretched past 1.5 ms,
# within 2 % -- and clearly more than its kernels' time.
for x in "bound:--sync-every 0" "duty:--busy-ms 40 --idle-ms 100" \
    "pauses:--busy-ms 2 --idle-ms 0.3"; do
	n=${x%%:*}
	e=$(ctl create --shares 50)
	# shellcheck disable=SC2086
	GSHARE_SOCKET=$sock GSHARE_ALLOC=$e LD_PRELOAD=$GATE $APP \
	    --seconds 1.5 --kernel-us 1000 ${x#*:} >"$dir/acct_$n.out" 2>&1
	ks=$(field "$dir/acct_$n.out" kernel_s)
	ps=0 tol=0.01 want=$ks
	if [ "$n" = pauses ]; then
		ps=$(field "$dir/acct_$n.out" paused_s) tol=0.02
		want=$(awk -v e="$(field "$dir/acct_$n.out" elapsed_s)" \
		    -v l="$(field "$dir/acct_$n.out" long_paused_s)" \
		    'BEGIN { printf "%.4f", e - l }')
	fi
	gn=$(ctl status --json | /usr/bin/python3 -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["id"] == int(sys.argv[1]):
        print(a["gpu_ns"])' "$e")
	if [ -n "$ks" ] && [ -n "$ps" ] && [ -n "$gn" ] &&
	    awk -v g="$gn" -v k="$ks" -v p="$ps" -v w="$want" -v t="$tol" \
	    -v n="$n" 'BEGIN { r = g / 1e9 / w
		 exit !(k > 0.3 && r > 1 - t && r < 1 + t &&
			(n != "pauses" || (p > 0.02 * k && g / 1e9 > k + p / 2))) }'
	then
		ok "accounting, $n: agent $(awk -v g="$gn" 'BEGIN { printf "%.4f", g / 1e9 }') s vs $want s (kernels $ks s, short host pauses $ps s)"
	else
		bad "accounting, $n: agent gpu_ns '$gn' vs $want s (kernel_s '$ks', paused_s '$ps')"
	fi
	ctl close "$e" >/dev/null
done

# --- GSHARE_GATE_TRACE: one line per hold; an unwritable prefix only warns
e=$(ctl create --shares 50)
GSHARE_SOCKET=$sock GSHARE_ALLOC=$e GSHARE_GATE_TRACE=$dir/tr LD_PRELOAD=$GATE \
    $APP --seconds 0.3 --busy-ms 20 --idle-ms 30 >"$dir/tr.out" 2>&1
rc=$?
tf=$(ls "$dir"/tr.* 2>/dev/null | grep -v 'tr.out$' | head -n 1)
if [ $rc = 0 ] && [ -n "$tf" ] && head -n 1 "$tf" | grep -q '^# grant first' &&
    awk 'NR > 1 { n++; if (NF != 8 || $1 == 0 || ($5 != 0 && $5 < $1)) bad = 1 }
	 END { exit !(n >= 2 && !bad) }' "$tf"; then
	ok "trace: $(($(wc -l <"$tf") - 1)) holds, grant before release in each"
else
	bad "trace: rc $rc, file '$tf': $(head -n 3 "$tf" 2>/dev/null)"
fi
GSHARE_SOCKET=$sock GSHARE_ALLOC=$e GSHARE_GATE_TRACE=$dir/no/such/dir/tr \
    LD_PRELOAD=$GATE $APP --seconds 0.1 >"$dir/tr2.out" 2>&1 &&
    grep -q 'cannot write the trace' "$dir/tr2.out" &&
    ok "trace to an unwritable place: a warning, the job ends normally" ||
    bad "unwritable trace: $(cat "$dir/tr2.out")"
ctl close "$e" >/dev/null

# --- space mode: a gated job keeps no partition, so it takes turns ------
# (its page says it runs the gate; docs/space.md); a level-2 job's gate
# session says nothing of the kind
space_why() {	# ALLOC: the planner's reason in STATUS
	ctl status --json | $PY -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])]
print(a[0].get("space", "") if a else "none")' "$1"
}
until_why() {	# ALLOC WHY: within 5 s
	i=0
	until [ "$(space_why "$1")" = "$2" ]; do
		i=$((i + 1)); [ $i -lt 100 ] || return 1; sleep 0.05
	done
}
s1=$(ctl create --shares 50 --mode space)
s2=$(ctl create --shares 50 --mode space)
gated "$s1" sp1 --seconds 1.5
$SIM -s "$sock" -a "$s2" -n sp2 -d 1.5 >"$dir/sp2.out" 2>&1 &
jpids="$jpids $!"
until_why "$s1" "takes turns: no libgshare, no partition" &&
    until_why "$s2" "takes turns with $s1: it keeps no partition" &&
    ok "space mode: the gated job takes turns with its libgshare partner" ||
    bad "space mode, gated: '$(space_why "$s1")' / '$(space_why "$s2")'"
gs_wait_jobs 30
# level 2 on s1 (attached, idle: it never asks for the token here) and a
# busy job on s2: s2 has the whole GPU as a partner of an idle member,
# never "takes turns" with a gated one, for as long as the job runs
$SIM -s "$sock" -a "$s2" -n sp4 -d 2 >"$dir/sp4.out" 2>&1 &
jpids="$jpids $!"
GSHARE_SOCKET=$sock GSHARE_ALLOC=$s1 \
    LD_PRELOAD="$GATE $PWD/$B/tests/gate/fake_libgshare.so" \
    $APP --seconds 1 --expect-ungated >"$dir/sp3.out" 2>&1 &
l2=$!
jpids="$jpids $l2"
seen=""
while kill -0 "$l2" 2>/dev/null; do
	w=$(space_why "$s2")
	case $seen in *"[$w]"*) ;; *) seen="$seen[$w]";; esac
	sleep 0.05
done
gs_wait_jobs 30
case $seen in
*"takes turns"*) bad "space mode, libgshare linked: planned as gated: $seen";;
*"[whole GPU: its partners are idle]"*)
	ok "space mode, libgshare linked: not planned as gated";;
*)	bad "space mode, libgshare linked: never seen attached: $seen";;
esac
ctl close "$s1" >/dev/null; ctl close "$s2" >/dev/null

[ $fail = 0 ] && echo "integ_gate: all passed"
exit $fail
