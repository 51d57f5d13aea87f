#!/bin/bash
#
# run.sh — spank_gshare.so against a real Slurm 22.05 on loopback.
#
# Brings up munged, MariaDB + slurmdbd, slurmctld and two slurmd (n1, n2,
# each with Gres=gshare:100) from tests/slurm/cluster.sh, one gshared per
# node (simulated GPU) reached through agent=<dir>/%n.sock, and runs the
# cases below with real srun/sbatch/sacct.  Every wait has a wall-clock
# deadline; everything started here is stopped on exit, pass or fail.
# Must run as root (Slurm daemons, --uid).  Exit 0 only if every case
# passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=${B:-build}
. tests/slurm/cluster.sh

PLUGIN=$ROOT/$B/spank/spank_gshare.so
PROBE=$ROOT/$B/tests/slurm/gs_probe
GSHARED=$ROOT/$B/node-agent/gshared
SIMJOB=$ROOT/$B/runtime/sim/gshare-simjob
GSACCT=$ROOT/$B/node-agent/gsacct

PASS=0
FAIL=0
FAILED=""
CASE=""

CASE_BAD=0

begin() { CASE=$1; CASE_BAD=0; gs_log "=== $CASE"; }
ok() { gs_log "ok: $CASE: $*"; }
bad() { gs_log "FAIL: $CASE: $*"; CASE_BAD=1; }
end() {
	if [ "$CASE_BAD" = 0 ]; then
		PASS=$((PASS + 1))
	else
		FAIL=$((FAIL + 1))
		FAILED="$FAILED $CASE"
	fi
}

# expect DESCRIPTION TEXT PATTERN: PATTERN (grep -E) must occur in TEXT.
expect() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then
		ok "$1"
	else
		bad "$1: no /$3/ in:"
		printf '%s\n' "$2" | sed 's/^/    | /' >&2
	fi
}
reject() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then
		bad "$1: unexpected /$3/ in:"
		printf '%s\n' "$2" | sed 's/^/    | /' >&2
	else
		ok "$1"
	fi
}

if [ "$(id -u)" != 0 ]; then
	echo "run.sh: must run as root (starts Slurm daemons)" >&2
	exit 1
fi
for f in "$PLUGIN" "$PROBE"; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "run.sh: $f missing (make first)" >&2; exit 1; }
done

cleanup() {
	local rc=$?
	stop_agents
	gs_cluster_down
	return $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

GS_NODES=2

stop_agents() { :; }

gs_cluster_up
PLUGSTACK_BASE="required $PLUGIN agent=$GS_T/agent/%n.sock state_dir=$GS_T/spank timeout=1s sacct=$(command -v sacct) sacctmgr=$(command -v sacctmgr)"
set_plugstack() { printf '%s %s\n' "$PLUGSTACK_BASE" "$*" >"$GS_T/plugstack.conf"; }
set_plugstack

# ---------------------------------------------------------------- options
begin bad-options
out=$(timeout 20 srun -w n1 --gshare-weight=abc true 2>&1); rc=$?
[ $rc != 0 ] && ok "srun refused a bad weight (rc $rc)" || bad "srun accepted --gshare-weight=abc"
expect "weight message" "$out" '^srun: error: gshare: --gshare-weight=abc: expected a whole number from 1 to 10000$'
out=$(timeout 20 srun -w n1 --gshare-weight=0 true 2>&1) && bad "weight 0 accepted"
expect "weight 0 message" "$out" 'gshare-weight=0: expected'
out=$(timeout 20 srun -w n1 --gshare-priority=urgent true 2>&1) && bad "priority accepted"
expect "priority message" "$out" '^srun: error: gshare: --gshare-priority=urgent: expected low, normal or high$'
before=$(sacct -n -X -o JobID 2>/dev/null | wc -l)
out=$(timeout 20 sbatch -w n1 --gshare-mode=both --wrap true 2>&1) && bad "sbatch accepted a bad mode"
expect "sbatch mode message" "$out" '^sbatch: error: gshare: --gshare-mode=both: expected time or space$'
reject "nothing queued" "$(squeue -h -o %i)" '.'
after=$(sacct -n -X -o JobID 2>/dev/null | wc -l)
[ "$before" = "$after" ] && ok "no job reached the accounting" || bad "a refused job was recorded ($before -> $after)"
out=$(timeout 20 srun -w n1 --gshare-weight=5 --gshare-priority=high --gshare-mode=space true 2>&1) &&
	ok "good options accepted" || bad "good options refused: $out"
end

# ------------------------------------------------------ agent unreachable
begin agent-down-required
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo RAN' 2>&1); rc=$?
[ $rc != 0 ] && ok "step failed (rc $rc)" || bad "step ran without its agent"
reject "task did not run" "$out" '^RAN$'
expect "clear message" "$out" '^gshare: step [0-9]+\.0 not started: agent unreachable: .*n1\.sock'
end

begin agent-down-unmanaged
set_plugstack on_agent_down=unmanaged
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo RAN alloc=${GSHARE_ALLOC:-none}' 2>&1); rc=$?
[ $rc = 0 ] && ok "step ran (rc 0)" || bad "unmanaged step failed (rc $rc)"
expect "ran unmanaged" "$out" '^RAN alloc=none$'
expect "warning" "$out" '^gshare: warning: step [0-9]+\.0 runs without a GPU share: agent unreachable'
set_plugstack
end

begin no-gshare-untouched
out=$(timeout 30 srun -w n1 bash -c 'echo RAN alloc=${GSHARE_ALLOC:-none}' 2>&1); rc=$?
[ $rc = 0 ] && ok "step without gshare ran with the agent down" || bad "rc $rc: $out"
expect "no allocation" "$out" '^RAN alloc=none$'
reject "no gshare message" "$out" 'gshare'
end

begin too-many-shares
out=$(timeout 20 srun -w n1 --gres=gshare:101 true 2>&1) && bad "gshare:101 accepted"
expect "slurm refuses 101" "$out" 'Requested node configuration is not available'
end

# ------------------------------------------------------------- accounting
begin sacct-alloctres
j=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:30 -o /dev/null --wrap true)
gs_wait 30 "job $j in accounting" bash -c "sacct -n -j $j -o JobID,State -P | grep -q '^$j.batch|'" ||
	bad "job $j never reached sacct"
out=$(sacct -n -P -j "$j" -o JobID,AllocTRES)
expect "job AllocTRES" "$out" "^$j\|.*gres/gshare=30"
expect "batch step AllocTRES" "$out" "^$j\.batch\|.*gres/gshare=30"
end

gs_log "slurm: $PASS passed, $FAIL failed${FAILED:+ (failed:$FAILED)}"
[ "$FAIL" = 0 ]
