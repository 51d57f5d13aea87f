#!/bin/sh
# Integration test of the idle grace end to end: a live gshared with one
# simulated GPU (wfq, 4 ms slices, default idle_grace), two gshare-simjob
# processes: j1 (weight 1) always busy, j3 (weight 3) in a duty cycle of
# 3 ms of GPU work and a 20 us idle gap (released as idle, then wanting
# again: a job that synchronizes often).  Over 8 s both get their weight's
# share of the GPU time delivered within 2 points.  IDLE_GRACE=0 runs the
# same with the grace off (the shares are then far off: see
# docs/benchmarks.md).  Cleans up every process and file on any exit.
set -u
GS_LOG_TAIL=40
GS_OUT_GLOB="j*.out"
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsidle "$SIM"

gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: wfq
slice: 4ms
idle_grace: ${IDLE_GRACE:-2ms}
CONF
gs_agent_start "simulated GPU"

# All three start at the same CLOCK_MONOTONIC instant, 1.5 s from now
# (time to connect, create and attach on a loaded machine).
at=$(( $($SIM --now) + 1500000000 ))
start_job() {	# name shares:weight duration [args]
	n=$1 c=$2 d=$3
	shift 3
	$SIM -s "$sock" --create "$c" -n "$n" -d "$d" --at $at -t 500 \
		-i 1000 "$@" >"$dir/$n.out" 2>&1 &
	jpids="$jpids $!"
}
start_job j1 25:1 8
start_job j3 75:3 8 --busy-ms 3 --idle-ms 0.02

# Wait for the jobs, with a deadline (they end by themselves at 10/16 s).
gs_wait_jobs 60

$PY - "$dir" "$(dirname "$0")/../lib" <<'EOF' || fail=1
import sys

d = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
from simjob_out import check, summary

ok = check(d, "duty-cycled j3", ["j1", "j3"], 0.0, 8.0, [1/4, 3/4])
ok &= check(d, "last 4 s", ["j1", "j3"], 4.0, 8.0, [1/4, 3/4])
summary(d, ("j1", "j3"))
sys.exit(0 if ok else 1)
EOF

# Every allocation was closed by its job; the agent is still serving.
n=$(gs_nallocs)
[ "$n" = 0 ] && ok "allocations closed, agent alive" || bad "after the jobs: ${n:-?} allocations"

[ $fail = 0 ] && echo "integ_idle: all passed"
exit $fail
