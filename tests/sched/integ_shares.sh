#!/bin/sh
# Integration test of weighted sharing end to end: a live gshared with one
# simulated GPU, three gshare-simjob processes on allocations with weights
# 1:2:3 (each creates its own allocation, attaches, runs block-tasks
# through the shared host loop).  Shares are measured by the jobs
# themselves, over the same window (--at):
#   phase 1 (0-10 s, all three busy): 1/6, 2/6, 3/6 within 2 points of the
#     GPU time delivered, and the GPU stays busy;
#   phase 2 (the weight-3 job ends at 10 s; measured 11-16 s): the other
#     two absorb its time: 1/3, 2/3 within 2 points, GPU still busy.
# Also: the agent's own accounting (gsharectl status --json) lists the
# three allocations while they run.  Cleans up every process and file on
# any exit.
set -u
GS_LOG_TAIL=40
GS_OUT_GLOB="j*.out"
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsshares "$SIM"

gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: wfq
slice: 4ms
CONF
gs_agent_start "simulated GPU"

# All three start at the same CLOCK_MONOTONIC instant, 1.5 s from now
# (time to connect, create and attach on a loaded machine).
at=$(( $($SIM --now) + 1500000000 ))
start_job() {	# name shares:weight duration
	$SIM -s "$sock" --create "$2" -n "$1" -d "$3" --at $at -t 500 \
		-i 1000 >"$dir/$1.out" 2>&1 &
	jpids="$jpids $!"
}
start_job j1 10:1 16
start_job j2 20:2 16
start_job j3 30:3 10

# While they run, the agent lists the three allocations.
sleep 3
n=$(gs_nallocs)
[ "$n" = 3 ] && ok "agent lists 3 allocations" || bad "agent lists ${n:-?} allocations"

# Wait for the jobs, with a deadline (they end by themselves at 10/16 s).
gs_wait_jobs 60

$PY - "$dir" "$(dirname "$0")/../lib" <<'EOF' || fail=1
import sys

d = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
from simjob_out import lines, check, summary

# j3's final line says where it ended: exactly 10 s of its window.
fin = [kv for kv in lines(d, "j3") if kv["event"] == "done"]
if not fin or abs(float(fin[0]["wall_s"]) - 10.0) > 0.01:
    raise SystemExit("FAIL j3 did not finish its 10 s")
ok = check(d, "all three", ["j1", "j2", "j3"], 0.0, 10.0, [1/6, 2/6, 3/6])
ok &= check(d, "after j3 stopped", ["j1", "j2"], 11.0, 16.0, [1/3, 2/3])
summary(d, ("j1", "j2", "j3"))
sys.exit(0 if ok else 1)
EOF

# Every allocation was closed by its job; the agent is still serving.
n=$(gs_nallocs)
[ "$n" = 0 ] && ok "allocations closed, agent alive" || bad "after the jobs: ${n:-?} allocations"

[ $fail = 0 ] && echo "integ_shares: all passed"
exit $fail
