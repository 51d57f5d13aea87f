#!/bin/sh
# Integration test of narrow tasks under the agent, end to end: a live
# gshared (one simulated GPU, slice 4 ms) and two gshare-simjob processes
# of equal weight in the same window: one runs 20,000 narrow tasks of
# 32-512 threads on its simulated task pool (gshare-simjob --tasks), with
# waits for single tasks, groups and everything, the other is always busy.
# The agent suspends the task job again and again; every task must still
# run exactly once (the job checks and exits 1 otherwise), waits must
# return only when their tasks ran, and the two must share the GPU about
# evenly while both run (about 4 s).
# Cleans up everything on any exit.
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gstasks "$SIM"

gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: wfq
slice: 4ms
grace: 50ms
CONF
gs_agent_start "slice 4ms"

at=$(( $($SIM --now) + 1000000000 ))
$SIM -s "$sock" --create 50 -n tasks --tasks 20000 -t 400 --at $at \
	>"$dir/tasks.out" 2>&1 &
jpids=$!
$SIM -s "$sock" --create 50 -n hog -d 2 --at $at >"$dir/hog.out" 2>&1 &
jpids="$jpids $!"
gs_wait_jobs 40

line() {	# KEY: value on the task job's event=tasks line
	sed -n 's/.*event=tasks.* '"$1"'=\([^ ]*\).*/\1/p' "$dir/tasks.out"
}
n=$(line ran_once)
[ "$n" = 20000 ] && ok "20000 tasks of mixed sizes each ran exactly once" ||
	bad "tasks run exactly once: ${n:-none} of 20000"
susp=$(gs_field "$dir/tasks.out" suspensions)
tsusp=$(line suspensions)
rq=$(line requeued)
w=$(line waits)
if [ "${susp:-0}" -ge 5 ] && [ "${tsusp:-0}" -ge 5 ]; then
	ok "the agent suspended the task pool $susp times ($tsusp launches left on a suspend, $rq tickets requeued, $w waits)"
else
	bad "suspensions: agent ${susp:-?}, launches left on a suspend ${tsusp:-?}"
fi
# while the task job ran the two shared the GPU about evenly
ts=$(gs_field "$dir/tasks.out" share)
ev=$(gs_field "$dir/tasks.out" evict_avg_us)
if $PY -c "import sys; sys.exit(0 if 0.25 <= float('${ts:-0}') <= 0.75 else 1)"; then
	ok "the task job got $ts of the GPU beside the busy one (evictions ${ev} us: the running tasks finish)"
else
	bad "the task job got ${ts:-?} of the GPU beside the busy one, wanted 0.25..0.75"
fi
kill -0 $apid 2>/dev/null && ok "gshared still running" ||
	bad "gshared died"
n=$(gs_nallocs)
[ "$n" = 0 ] && ok "no allocation left" || bad "${n:-?} allocations left"

[ $fail = 0 ] && echo "integ_tasks: all passed"
exit $fail
