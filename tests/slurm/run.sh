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
GSHARED=${GSHARED:-$ROOT/$B/node-agent/gshared}
SIMJOB=${SIMJOB:-$ROOT/$B/runtime/sim/gshare-simjob}
GSACCT=${GSACCT:-$ROOT/$B/node-agent/gsacct/gsacct}

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
		# what the nodes look like explains most failures (a drained
		# node leaves every later job pending)
		gs_log "nodes after $CASE: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')"
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
for f in "$PLUGIN" "$PROBE" "$GSHARED"; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "run.sh: $f missing (make first)" >&2; exit 1; }
done

# The plugin's detached spool writer (pid in .writer while it runs).
stop_spool_writer() {
	local pid
	[ -n "$GS_T" ] && [ -s "$GS_T/gsspool/.writer" ] || return 0
	pid=$(tr -dc 0-9 <"$GS_T/gsspool/.writer")
	[ -n "$pid" ] && gs_pid_alive "$pid" &&
		[ "$(readlink "/proc/$pid/cwd")" = / ] && kill -TERM "$pid" 2>/dev/null
	return 0
}

cleanup() {
	local rc=$?
	stop_spool_writer
	stop_agents
	gs_cluster_down
	return $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

GS_NODES=2

# ------------------------------------------------------------ agents
# One gshared per Slurm node, simulated GPU, socket $GS_T/agent/<node>.sock
# (the plugin's agent=$GS_T/agent/%n.sock).
declare -A AGENT_PID=()

# each agent's metrics on a free port; both watch the plugin's spool
declare -A METRICS_PORT=()
start_agent() {
	local n=$1 gpus=${2:-1} d=$GS_T/agent
	[ -n "${METRICS_PORT[$n]:-}" ] || METRICS_PORT[$n]=$(gs_free_port)
	mkdir -p "$d/$n.state"
	chmod 755 "$d"
	printf '%s\n' "socket: $d/$n.sock" "state_dir: $d/$n.state" \
		"gpus:" "  simulated: $gpus" "log: file" \
		"log_file: $GS_T/log/gshared.$n.log" \
		"metrics_listen: '127.0.0.1:${METRICS_PORT[$n]:-0}'" \
		"watch_spool: $GS_T/gsspool" \
		"accounting_tick: 100ms" "slice: 20ms" >"$d/$n.yaml"
	"$GSHARED" -d -f "$d/$n.yaml" >>"$GS_T/log/gshared.$n.out" 2>&1 &
	AGENT_PID[$n]=$!
	gs_wait 10 "gshared on $n" "$PROBE" status "$d/$n.sock" ||
		gs_die "gshared for $n did not come up (see $GS_T/log/gshared.$n.*)"
}

stop_agent() {
	local n=$1 pid=${AGENT_PID[$1]:-} end
	[ -n "$pid" ] || return 0
	unset "AGENT_PID[$n]"
	kill -TERM "$pid" 2>/dev/null || return 0
	end=$(($(date +%s%N) + 5000000000))
	while gs_pid_alive "$pid"; do
		if [ "$(date +%s%N)" -gt "$end" ]; then
			kill -KILL "$pid" 2>/dev/null
			break
		fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
	rm -f "$GS_T/agent/$n.sock"
}

stop_agents() {
	local n
	for n in "${!AGENT_PID[@]}"; do
		stop_agent "$n"
	done
}

# allocs NODE: the agent's allocation lines for that node.
allocs() { "$PROBE" status "$GS_T/agent/$1.sock"; }
no_alloc() { ! allocs "$1" | grep -q "^alloc $2 "; }
no_job_allocs() { ! allocs "$1" | grep -q " job=$2 "; }

PLUGSTACK_BASE="required $PLUGIN agent=@T@/agent/%n.sock state_dir=@T@/spank spool_dir=@T@/gsspool timeout=3s sacct=$(command -v sacct) sacctmgr=$(command -v sacctmgr)"
GS_PLUGSTACK=$PLUGSTACK_BASE
gs_cluster_up
# srun and slurmstepd read plugstack.conf afresh each time
set_plugstack() {
	# whole or not at all: slurmd reads it for a job's epilog at any
	# moment (a truncated file there left an allocation open)
	printf '%s %s\n' "${PLUGSTACK_BASE//@T@/$GS_T}" "$*" \
	    >"$GS_T/plugstack.conf.new" &&
	    mv -f "$GS_T/plugstack.conf.new" "$GS_T/plugstack.conf"
}

# ---------------------------------------------------------------- options
begin bad-options
out=$(timeout 20 srun -w n1 --gshare-weight=abc true 2>&1); rc=$?
[ $rc != 0 ] && ok "srun refused a bad weight (rc $rc)" || bad "srun accepted --gshare-weight=abc"
expect "weight message" "$out" '^srun: error: gshare: --gshare-weight=abc: expected a whole number from 1 to 10000$'
out=$(timeout 20 srun -w n1 --gshare-weight=0 true 2>&1) && bad "weight 0 accepted"
expect "weight 0 message" "$out" 'gshare-weight=0: expected'
out=$(timeout 20 srun -w n1 --gshare-priority=urgent true 2>&1) && bad "priority accepted"
expect "priority message" "$out" '^srun: error: gshare: --gshare-priority=urgent: expected low, normal or high$'
out=$(timeout 20 srun -w n1 --gshare-mem=lots true 2>&1) && bad "memory accepted"
expect "memory message" "$out" '^srun: error: gshare: --gshare-mem=lots: expected a size from 1M to 16T, such as 20G or 512M'
before=$(sacct -n -X -o JobID 2>/dev/null | wc -l)
out=$(timeout 20 sbatch -w n1 --gshare-mode=both --wrap true 2>&1) && bad "sbatch accepted a bad mode"
expect "sbatch mode message" "$out" '^sbatch: error: gshare: --gshare-mode=both: expected time or space$'
reject "nothing queued" "$(squeue -h -o %i)" '.'
after=$(sacct -n -X -o JobID 2>/dev/null | wc -l)
[ "$before" = "$after" ] && ok "no job reached the accounting" || bad "a refused job was recorded ($before -> $after)"
out=$(timeout 20 srun -w n1 --gshare-weight=5 --gshare-priority=high --gshare-mode=space true 2>&1) &&
	ok "good options accepted" || bad "good options refused: $out"
end

begin bad-option-from-env
# the same bad value through the environment slurmstepd replays options
# from: the step is refused with the command line's message, not run with
# the default weight
out=$(_SLURM_SPANK_OPTION_gshare_gshare_weight=abc timeout 20 srun -w n1 \
	bash -c 'echo RAN' 2>&1); rc=$?
[ $rc != 0 ] && ok "step refused (rc $rc)" || bad "step ran with --gshare-weight=abc from the environment"
reject "task did not run" "$out" '^RAN$'
expect "the option's message" "$out" '^gshare: step [0-9]+\.0 not started: --gshare-weight=abc: expected a whole number from 1 to 10000$'
end

begin bad-plugstack-argument
# every job epilog reads plugstack.conf afresh: let earlier jobs finish
gs_wait 30 "earlier jobs to complete" gs_no_jobs || bad "jobs left: $(squeue)"
set_plugstack timeout=5
out=$(timeout 20 srun -w n1 true 2>&1) && bad "srun ran with a bad plugstack argument"
expect "one line naming it" "$out" '^srun: error: gshare: plugstack.conf: argument [0-9]+: timeout: '
set_plugstack agnet=/x
out=$(timeout 20 sbatch -w n1 --wrap true 2>&1) && bad "sbatch ran with an unknown key"
expect "unknown key named" "$out" '^sbatch: error: gshare: plugstack.conf: argument [0-9]+: agnet'
# a job that ends while plugstack.conf is broken: its epilog logs the
# error but does not fail (a failed epilog drains the node)
set_plugstack
# The batch step must have started before plugstack.conf breaks: squeue
# says R as soon as slurmctld allocates, but slurmstepd reads
# plugstack.conf later, and a batch step that fails to launch drains
# the node ("batch job complete failure") for every later case.
rm -f "$GS_T/go" "$GS_T/started"
j=$(timeout 20 sbatch --parsable -w n1 -o /dev/null \
	--wrap "touch '$GS_T/started'; until [ -e '$GS_T/go' ]; do sleep 0.05; done")
gs_wait 30 "job $j to start its script" test -e "$GS_T/started" ||
	bad "job $j did not start: $(squeue -h -j "$j" -o '%t %r')"
set_plugstack timeout=5
touch "$GS_T/go"
gs_wait 30 "job $j to complete" gs_no_jobs || bad "job $j stuck"
set_plugstack
state=$(sinfo -h -n n1 -o %t)
[ "$state" = idle ] && ok "node still idle after an epilog with a bad plugstack.conf" ||
	bad "n1 is '$state': $(sinfo -h -n n1 -o '%t %E')"
end

# ------------------------------------------------------ agent unreachable
# (n1's agent is not started yet)
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
tres_recorded() {
	[ "$(sacct -n -P -j "$j" -o JobID,AllocTRES | grep -c 'gres/gshare=')" -ge 2 ]
}
gs_wait 30 "job $j AllocTRES in accounting" tres_recorded ||
	bad "job $j: $(sacct -n -P -j "$j" -o JobID,State,AllocTRES)"
out=$(sacct -n -P -j "$j" -o JobID,AllocTRES)
expect "job AllocTRES" "$out" "^$j\|.*gres/gshare=30"
expect "batch step AllocTRES" "$out" "^$j\.batch\|.*gres/gshare=30"
end

# ------------------------------------------------------------ with agents
job_gone() { ! squeue -h -j "$1" 2>/dev/null | grep -q .; }
start_agent n1
start_agent n2

begin launch-gate-preload
# the launch gate goes first in LD_PRELOAD; per job and per site opt-out
install -m 644 "$ROOT/$B/runtime/gate/libgshare-gate.so" "$GS_T/gate.so"
set_plugstack preload="$GS_T/gate.so"
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo PRELOAD=$LD_PRELOAD' 2>&1)
expect "gate preloaded" "$out" "^PRELOAD=$GS_T/gate.so\$"
out=$(timeout 30 srun -w n1 --gres=gshare:10 --gshare-preload=no bash -c 'echo PRELOAD=$LD_PRELOAD' 2>&1)
expect "--gshare-preload=no" "$out" "^PRELOAD=\$"
out=$(timeout 20 srun -w n1 --gshare-preload=maybe true 2>&1) && bad "--gshare-preload=maybe accepted"
expect "preload message" "$out" '^srun: error: gshare: --gshare-preload=maybe: expected yes or no$'
set_plugstack preload=no
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo PRELOAD=$LD_PRELOAD' 2>&1)
expect "site preload=no" "$out" "^PRELOAD=\$"
set_plugstack
end

begin env-and-lifetime
out=$(CUDA_VISIBLE_DEVICES=7 timeout 30 srun -w n1 --gres=gshare:30 \
	--gshare-weight=7 --gshare-priority=high --gshare-mode=space \
	--gshare-mem=20G bash -c 'echo ENV job=$SLURM_JOB_ID sock=$GSHARE_SOCKET alloc=$GSHARE_ALLOC cuda=$CUDA_VISIBLE_DEVICES
		"$0" status "$GSHARE_SOCKET"' "$PROBE" 2>&1)
expect "environment" "$out" "^ENV job=[0-9]+ sock=$GS_T/agent/n1.sock alloc=[0-9]+ cuda=0\$"
j=$(printf '%s\n' "$out" | sed -n 's/^ENV job=\([0-9]*\) .*/\1/p')
a=$(printf '%s\n' "$out" | sed -n 's/^ENV .*alloc=\([0-9]*\) .*/\1/p')
expect "agent shows it while it runs" "$out" \
	"^alloc $a job=$j step= node=n1 user=root shares=30 weight=7 priority=high mode=space uid=0 .* mem_limit=21474836480$"
if [ -n "$a" ] && gs_wait 10 "allocation $a to close" no_alloc n1 "$a"; then
	ok "allocation $a gone after the job"
else
	bad "allocation ${a:-?} still there after the step: $(allocs n1)"
fi
end

begin weight-policy
# issue 15.1: a user may lower the weight, not raise it past the shares
# (before: gshare:30 --gshare-weight=90 ran and took 89 % beside a
# gshare:70); the site may allow more with max_user_weight
out=$(timeout 30 srun -w n1 --gres=gshare:30 --gshare-weight=90 bash -c 'echo RAN' 2>&1); rc=$?
[ $rc != 0 ] && ok "weight above the shares refused (rc $rc)" || bad "gshare:30 --gshare-weight=90 ran"
reject "task did not run" "$out" '^RAN$'
expect "clear message" "$out" '^gshare: step [0-9]+\.0 not started: --gshare-weight=90: above 30 \(the job.s shares\); users may only lower their weight'
out=$(timeout 30 srun -w n1 --gres=gshare:30 --gshare-weight=5 bash -c 'echo RAN' 2>&1)
expect "a lower weight runs" "$out" '^RAN$'
set_plugstack max_user_weight=100
out=$(timeout 30 srun -w n1 --gres=gshare:30 --gshare-weight=90 bash -c 'echo RAN' 2>&1)
expect "max_user_weight=100 allows 90" "$out" '^RAN$'
set_plugstack
end

begin gshare-zero
# issue 15.5: what gshare:0 means.  Slurm drops a zero gres count before
# the plugin sees the step (its TRES per node names no gshare), so it
# means no request: the step runs outside gshare, like one without the
# gres, and the agent makes no allocation (docs/slurm.md).  A zero count
# that does reach the plugin is refused (test_spankopt, spank_remote.c).
# the earlier cases' job epilogs close their allocations after srun
# returns: count from a settled agent
none_open() { ! allocs "$1" | grep -q '^alloc '; }
gs_wait 10 "earlier jobs' allocations to close" none_open n1 ||
	bad "left open before the case: $(allocs n1)"
n0=$(allocs n1 | grep -c '^alloc ')
out=$(timeout 30 srun -w n1 --gres=gshare:0 bash -c \
	'echo RAN alloc=${GSHARE_ALLOC:-none} cuda=${CUDA_VISIBLE_DEVICES:-none}' 2>&1); rc=$?
[ $rc = 0 ] && ok "gshare:0 runs as a step without the gres" || bad "rc $rc: $out"
expect "no share, no gshare environment" "$out" '^RAN alloc=none cuda=none$'
reject "no gshare message" "$out" 'gshare'
[ "$(allocs n1 | grep -c '^alloc ')" = "$n0" ] && ok "no allocation made" ||
	bad "allocations: $(allocs n1)"
end

begin multi-task
# issue 15.4: srun -n2 failed its second task ("allocation N is already
# attached by pid P"); both tasks attach to the step's one allocation and
# share its token
if [ -x "$SIMJOB" ]; then
	out=$(timeout 60 srun -w n1 -n2 --gres=gshare:30 bash -c \
		'"$0" -n t$SLURM_PROCID -d 1 -t 200 2>&1 | tail -1; "$1" status "$GSHARE_SOCKET" | grep "^alloc $GSHARE_ALLOC "' \
		"$SIMJOB" "$PROBE" 2>&1); rc=$?
	[ $rc = 0 ] && ok "both tasks ran (rc 0)" || bad "srun -n2 failed (rc $rc): $out"
	[ "$(printf '%s\n' "$out" | grep -c '^event=done job=t[01] ')" = 2 ] &&
		ok "both tasks finished their work" || bad "tasks: $out"
	reject "no attach refusal" "$out" 'already attached'
	[ "$(printf '%s\n' "$out" | grep '^alloc ' | awk '{print $2}' | sort -u | wc -l)" = 1 ] ||
		bad "the tasks saw different allocations: $out"
else
	bad "gshare-simjob not built ($SIMJOB)"
fi
end

begin sbatch-steps
S=$ROOT/tests/slurm/show_step.sh
cat >"$GS_T/steps.sbatch" <<EOF
#!/bin/bash
#SBATCH -w n1 -n2 --gres=gshare:30 --gshare-priority=high
export GS_PROBE=$PROBE GS_MARKS=$GS_T/marks
$S batch
srun -n1 $S inherit
srun -n1 --gres=gshare:10 $S ten
srun -n1 --gres=none $S none
srun -n1 --exact --gres=gshare:10 $S par1 wait2 &
srun -n1 --exact --gres=gshare:10 $S par2 wait2 &
wait
EOF
mkdir -p "$GS_T/marks"
j=$(timeout 20 sbatch --parsable -o "$GS_T/steps.out" "$GS_T/steps.sbatch")
gs_wait 60 "job $j to end" job_gone "$j" || bad "job $j did not end"
out=$(cat "$GS_T/steps.out" 2>&1)
# every step runs in the job's one allocation of the job's count
expect "batch step: the job's count" "$out" "^STEP batch alloc=[0-9]+ alloc [0-9]+ job=$j step= node=n1 .*shares=30 "
expect "srun without --gres: the job's" "$out" "^STEP inherit alloc=[0-9]+ alloc [0-9]+ job=$j step= node=n1 .*shares=30 "
expect "srun --gres=gshare:10: the job's" "$out" "^STEP ten alloc=[0-9]+ alloc [0-9]+ job=$j step= node=n1 .*shares=30 "
# an #SBATCH --gshare-priority reaches the batch step and every step
for st in batch inherit ten par1 par2; do
	expect "$st: sbatch's --gshare-priority=high" "$out" "^STEP $st alloc=[0-9]+ alloc .* priority=high "
done
expect "srun --gres=none: no allocation" "$out" "^STEP none alloc=none \$"
expect "parallel step 1" "$out" "^STEP par1 alloc=[0-9]+ alloc [0-9]+ job=$j step= .*shares=30 "
expect "parallel step 2" "$out" "^STEP par2 alloc=[0-9]+ alloc [0-9]+ job=$j step= .*shares=30 "
expect "parallel steps overlapped in one allocation (1)" "$out" "^STEP par1 overlapped allocs=1\$"
expect "parallel steps overlapped in one allocation (2)" "$out" "^STEP par2 overlapped allocs=1\$"
ids=$(printf '%s\n' "$out" | sed -n 's/^STEP [a-z0-9]* alloc=\([0-9][0-9]*\) .*/\1/p' | sort -u | wc -l)
[ "$ids" = 1 ] && ok "one allocation for every step" || bad "$ids distinct allocations, want 1"
gs_wait 10 "job $j allocations to close" no_job_allocs n1 "$j" &&
	ok "all closed after the job" || bad "left open: $(allocs n1)"
end

begin steps-one-budget
# A job's count is one budget.  Two gshare:40 batch jobs (80 of 100) whose
# batch step and two concurrent `srun --overlap` steps each use the GPU
# share: each job holds exactly one allocation of 40 on the node, all its
# steps see it, and the agent never holds more than Slurm counted.
S=$ROOT/tests/slurm/show_step.sh
cat >"$GS_T/budget.sh" <<EOF
#!/bin/bash
export GS_PROBE=$PROBE GS_MARKS=$GS_T/marks.\$SLURM_JOB_ID
mkdir -p "\$GS_MARKS"
$S batch
srun --overlap $S o1 wait2 &
srun --overlap $S o2 wait2 &
wait
EOF
pair=()
for k in 1 2; do
	pair+=("$(timeout 20 sbatch --parsable -w n1 --gres=gshare:40 \
		-o "$GS_T/budget$k.out" "$GS_T/budget.sh")")
done
for j in "${pair[@]}"; do
	gs_wait 60 "job $j to end" job_gone "$j" || bad "job $j did not end"
done
for k in 1 2; do
	j=${pair[$((k - 1))]}
	out=$(cat "$GS_T/budget$k.out")
	ids=$(printf '%s\n' "$out" | sed -n 's/^STEP [a-z0-9]* alloc=\([0-9][0-9]*\) .*/\1/p' | sort -u)
	[ "$(printf '%s\n' "$ids" | grep -c .)" = 1 ] &&
		ok "job $j: batch step and both --overlap steps in allocation $ids" ||
		bad "job $j: allocations '$ids' in: $out"
	[ "$(printf '%s\n' "$out" | grep -cE "^STEP (batch|o1|o2) alloc=[0-9]+ alloc [0-9]+ job=$j step= .*shares=40 ")" = 3 ] &&
		ok "job $j: every step holds the job's 40" || bad "job $j: $out"
	expect "job $j: steps overlapped, one allocation" "$out" "^STEP o1 overlapped allocs=1\$"
	reject "job $j: no refusal" "$out" 'not started'
	c1() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'share=40,allocs=1$'; }
	gs_wait 30 "AdminComment of job $j" c1 &&
		ok "job $j totals: one allocation" ||
		bad "job $j AdminComment: $(sacct -n -X -P -j "$j" -o AdminComment)"
done
# salloc: the allocation's steps share its count the same way
out=$(timeout 60 salloc -w n1 --gres=gshare:40 bash -c "
	export GS_PROBE=$PROBE GS_MARKS=$GS_T/marks.salloc
	mkdir -p \$GS_MARKS
	srun --overlap $S s1 wait2 & srun --overlap $S s2 wait2 & wait" 2>&1)
ids=$(printf '%s\n' "$out" | sed -n 's/^STEP [a-z0-9]* alloc=\([0-9][0-9]*\) .*/\1/p' | sort -u)
[ "$(printf '%s\n' "$ids" | grep -c .)" = 1 ] && ok "salloc: both steps in allocation $ids" ||
	bad "salloc: allocations '$ids' in: $out"
expect "salloc: one allocation of 40" "$out" "^STEP s1 overlapped allocs=1\$"
expect "salloc: the job's count" "$out" "^STEP s2 alloc=[0-9]+ alloc [0-9]+ job=[0-9]+ step= .*shares=40 "
end

begin two-nodes
out=$(timeout 30 srun -N2 --ntasks-per-node=1 --gres=gshare:30 bash -c \
	'echo NODE $SLURMD_NODENAME alloc=$GSHARE_ALLOC sock=$GSHARE_SOCKET
	 "$0" status "$GSHARE_SOCKET" | grep "^alloc $GSHARE_ALLOC "' "$PROBE" 2>&1)
expect "n1 has its own agent" "$out" "^NODE n1 alloc=[0-9]+ sock=$GS_T/agent/n1.sock\$"
expect "n2 has its own agent" "$out" "^NODE n2 alloc=[0-9]+ sock=$GS_T/agent/n2.sock\$"
expect "n1 allocation" "$out" "^alloc [0-9]+ job=[0-9]+ step= node=n1 .*shares=30 "
expect "n2 allocation" "$out" "^alloc [0-9]+ job=[0-9]+ step= node=n2 .*shares=30 "
[ "$(printf '%s\n' "$out" | grep -c '^alloc ')" = 2 ] && ok "one allocation per node" ||
	bad "want exactly two allocations"
j=$(printf '%s\n' "$out" | sed -n 's/^alloc [0-9]* job=\([0-9]*\) .*/\1/p' | head -1)
# both nodes' epilogs write their own segment of the AdminComment
both_segments() {
	local c
	c=$(sacct -n -X -P -j "$j" -o AdminComment)
	case "$c" in *"gshare[n1]:"*"gshare[n2]:"* | *"gshare[n2]:"*"gshare[n1]:"*) return 0 ;; esac
	return 1
}
gs_wait 60 "both nodes in the AdminComment of job $j" both_segments &&
	ok "AdminComment has both nodes: $(sacct -n -X -P -j "$j" -o AdminComment)" ||
	bad "AdminComment: $(sacct -n -X -P -j "$j" -o AdminComment)"
end

begin gpu-placement
# n2's agent gets two simulated GPUs with GPU 0 mostly taken outside
# Slurm: the step lands on GPU 1 and CUDA_VISIBLE_DEVICES says so
GSHARECTL=$ROOT/$B/node-agent/gsharectl
stop_agent n2
start_agent n2 2
held=$("$GSHARECTL" -s "$GS_T/agent/n2.sock" create --shares 80 --gpu 0 --job outside 2>&1)
out=$(CUDA_VISIBLE_DEVICES=0 timeout 30 srun -w n2 --gres=gshare:30 bash -c \
	'echo CUDA=$CUDA_VISIBLE_DEVICES; "$0" status "$GSHARE_SOCKET" | grep "^alloc $GSHARE_ALLOC "' "$PROBE" 2>&1)
expect "placed on GPU 1" "$out" '^CUDA=1$'
expect "agent agrees" "$out" '^alloc [0-9]+ job=[0-9]+ step= node=n2 .*shares=30 .* gpu=1 '
"$GSHARECTL" -s "$GS_T/agent/n2.sock" close "$held" >/dev/null 2>&1 ||
	bad "could not close the outside allocation '$held'"
stop_agent n2
start_agent n2
end

begin four-jobs-three-run
jobs=()
for i in 1 2 3 4; do
	jobs+=("$(timeout 20 sbatch --parsable -w n1 --gres=gshare:30 -o /dev/null --wrap 'sleep 300')")
done
three_running() { [ "$(squeue -h -w n1 -t R -o %i | wc -l)" = 3 ]; }
gs_wait 30 "three jobs running" three_running || bad "not three running: $(squeue)"
# the reason comes with the scheduler's next pass: poll for it
fourth_pends() { squeue -h -t PD -o '%i %r' | grep -q "^${jobs[3]} Resources\$"; }
gs_wait 20 "the fourth pending on Resources" fourth_pends &&
	ok "the fourth pends on Resources" ||
	bad "the fourth does not pend on Resources: $(squeue -h -o '%i %t %r')"
three_allocs() { [ "$(allocs n1 | grep -c ' step= .*shares=30 ')" = 3 ]; }
gs_wait 10 "three allocations" three_allocs &&
	ok "agent holds three 30-share allocations" || bad "agent: $(allocs n1)"
# killing the jobs mid-step releases their allocations
scancel "${jobs[@]}"
for j in "${jobs[@]}"; do
	gs_wait 20 "job $j allocations released" no_job_allocs n1 "$j" ||
		bad "job $j still holds: $(allocs n1)"
done
gs_wait 20 "queue empty" gs_no_jobs || bad "jobs left: $(squeue)"
end

begin killed-mid-step
timeout 60 srun -w n1 --gres=gshare:20 sleep 300 >/dev/null 2>&1 &
srun_pid=$!
has_step() { allocs n1 | grep -q ' step= .*shares=20 '; }
gs_wait 20 "the step's allocation" has_step || bad "no allocation: $(allocs n1)"
j=$(allocs n1 | sed -n 's/.* job=\([0-9]*\) step= .*shares=20 .*/\1/p' | head -1)
if [ -n "$j" ]; then
	scancel "$j"
	gs_wait 20 "allocation of killed job $j released" no_job_allocs n1 "$j" &&
		ok "released after scancel" || bad "still there: $(allocs n1)"
fi
wait "$srun_pid" 2>/dev/null
end

begin stepd-killed
# a step whose slurmstepd dies leaves the job's allocation open; the job
# epilog closes it and counts it in the totals
j=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:30 -o /dev/null \
	--wrap 'srun --gres=gshare:20 sleep 300')
step_alloc() { allocs n1 | grep -q " job=$j step= .*shares=30 "; }
gs_wait 20 "step $j.0 allocation" step_alloc || bad "no allocation: $(allocs n1)"
# this cluster's stepd: the parent of the step's task (job ids repeat
# across clusters that other test runs may have on this host).  The
# allocation is made before the task starts: wait for the task too.
find_stepd() {
	local task
	stepd=""
	task=$(scontrol listpids "$j.0" n1 2>/dev/null | awk '$2 == "'"$j"'" && $3 == "0" { print $1; exit }')
	[ -n "$task" ] || return 1
	stepd=$(ps -o ppid= -p "$task" | tr -d ' ')
	[ "$(ps -o args= -p "$stepd" 2>/dev/null)" = "slurmstepd: [$j.0]" ] ||
		{ stepd=""; return 1; }
}
gs_wait 20 "the slurmstepd of $j.0" find_stepd || stepd=""
if [ -n "$stepd" ]; then
	kill -KILL "$stepd"
	gs_wait 10 "slurmstepd $stepd to die" bash -c "! kill -0 $stepd 2>/dev/null"
	step_alloc && ok "allocation outlives the killed slurmstepd $stepd" ||
		bad "allocation closed without the epilog"
	scancel "$j"
	gs_wait 20 "epilog to close job $j allocations" no_job_allocs n1 "$j" &&
		ok "epilog closed the leftover" || bad "left open: $(allocs n1)"
	grep -q "gshare: job $j: closed allocation" "$GS_T/log/slurmd.n1.log" &&
		ok "epilog logged it" || bad "no close line in slurmd log"
	one_alloc() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'allocs=1$'; }
	gs_wait 30 "AdminComment of job $j" one_alloc &&
		ok "counted in the totals" || bad "AdminComment: $(sacct -n -X -P -j "$j" -o AdminComment)"
else
	bad "no slurmstepd for $j.0"
	scancel "$j"
fi
end

begin uid-nobody
# nobody may not be able to reach the build tree (a checkout under /root):
# use a copy in the cluster's world-readable temp dir
install -m 755 "$PROBE" "$GS_T/gs_probe"
# a root-owned allocation of another job, to try to take over
other=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap 'sleep 300')
other_alloc() { allocs n1 | grep -q " job=$other "; }
gs_wait 20 "job $other allocation" other_alloc || bad "job $other has no allocation"
oid=$(allocs n1 | sed -n "s/^alloc \([0-9]*\) job=$other .*/\1/p")
out=$(timeout 30 srun -w n1 --uid=nobody --chdir=/tmp --gres=gshare:10 bash -c \
	'echo WHO $(id -u) alloc=$GSHARE_ALLOC
	 "$0" attach
	 "$0" attach "$GSHARE_SOCKET" "$1"
	 "$0" status "$GSHARE_SOCKET"' "$GS_T/gs_probe" "$oid" 2>&1)
expect "runs as nobody" "$out" "^WHO $(id -u nobody) alloc=[0-9]+\$"
expect "attaches to its own allocation" "$out" "^attached [0-9]+ uid=$(id -u nobody) shares=10\$"
# another user's allocation is answered as a missing one (no owner leak)
expect "cannot attach to root's" "$out" "^error ENOENT"
reject "sees only its own allocation" "$out" "^alloc $oid "
expect "sees its own allocation" "$out" "^alloc [0-9]+ job=[0-9]+ step= node=n1 user=nobody shares=10 .* uid=$(id -u nobody) "
scancel "$other"
gs_wait 20 "job $other to end" no_job_allocs n1 "$other" || bad "job $other still holds"
end

begin simjob-shares
# Three simulated GPU jobs under Slurm, 20/30/50 shares of n1's GPU, all
# busy over the same 4 s window.  Each job's part of the GPU time used
# must be its share within 2 points, the GPU must be busy >= 85% of the
# window (what is lost is hand-over latency on a loaded host, not the
# split), and each job's AdminComment must carry the GPU time it reports
# itself.
if [ -x "$SIMJOB" ]; then
	at=$(($("$SIMJOB" --now) + 4000000000))
	pids=()
	for s in 20 30 50; do
		timeout 60 srun -w n1 --gres=gshare:$s bash -c \
			'echo JOB $SLURM_JOB_ID; exec "$0" "$@"' "$SIMJOB" \
			-n "s$s" --at "$at" -d 4 -t 200 >"$GS_T/sim.$s.out" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || bad "a simjob failed: $(cat "$GS_T"/sim.*.out)"
	done
	declare -A gpu=() job=()
	total=0
	for s in 20 30 50; do
		out=$(cat "$GS_T/sim.$s.out")
		line=$(printf '%s\n' "$out" | grep '^event=done' | tail -1)
		gpu[$s]=$(printf '%s\n' "$line" | sed -n 's/.* gpu_s=\([0-9.]*\) .*/\1/p')
		job[$s]=$(printf '%s\n' "$out" | sed -n 's/^JOB \([0-9]*\)$/\1/p')
		gs_log "gshare:$s job ${job[$s]}: $line"
		[ -n "${gpu[$s]}" ] && [ -n "${job[$s]}" ] || { bad "gshare:$s: no result: $out"; gpu[$s]=0; }
		total=$(awk -v a="$total" -v b="${gpu[$s]}" 'BEGIN { print a + b }')
	done
	awk -v t="$total" 'BEGIN { exit !(t >= 0.85 * 4) }' &&
		ok "GPU busy $(awk -v t="$total" 'BEGIN { printf "%.1f", t / 4 * 100 }')% of the window" ||
		bad "GPU busy only ${total}s of 4s"
	for s in 20 30 50; do
		part=$(awk -v g="${gpu[$s]}" -v t="$total" 'BEGIN { if (t > 0) printf "%.2f", g / t * 100; else print 0 }')
		awk -v p="$part" -v w="$s" 'BEGIN { d = p - w; exit !(d <= 2 && d >= -2) }' &&
			ok "gshare:$s got $part points of the GPU time" ||
			bad "gshare:$s got $part points of the GPU time"
		j=${job[$s]}
		[ -n "$j" ] || continue
		comment() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'gshare\[n1\]:'; }
		if gs_wait 30 "AdminComment of job $j" comment; then
			c=$(sacct -n -X -P -j "$j" -o AdminComment)
			cg=$(printf '%s\n' "$c" | sed -n 's/.*gpu_s=\([0-9.]*\),.*/\1/p')
			awk -v a="$cg" -v b="${gpu[$s]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.02 * b + 0.01) }' &&
				ok "job $j AdminComment gpu_s=$cg matches the job's own ${gpu[$s]}" ||
				bad "job $j: AdminComment '$c' vs simjob gpu_s=${gpu[$s]}"
		else
			bad "job $j has no AdminComment"
		fi
	done
else
	bad "gshare-simjob not built ($SIMJOB)"
fi
end

begin agent-refuses
GSHARECTL=$ROOT/$B/node-agent/gsharectl
"$GSHARECTL" -s "$GS_T/agent/n1.sock" drain 0 >/dev/null || bad "drain failed"
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo RAN' 2>&1); rc=$?
[ $rc != 0 ] && ok "step failed (rc $rc)" || bad "step ran on a drained GPU"
reject "task did not run" "$out" '^RAN$'
expect "the agent's reason" "$out" '^gshare: step [0-9]+\.0 not started: the agent refused gshare:10: .*drain'
"$GSHARECTL" -s "$GS_T/agent/n1.sock" undrain 0 >/dev/null || bad "undrain failed"
out=$(timeout 30 srun -w n1 --gres=gshare:10 bash -c 'echo RAN' 2>&1)
expect "runs again after undrain" "$out" '^RAN$'
end

begin admin-comment
j=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:30 -o /dev/null \
	--wrap "srun true; srun --gres=gshare:10 true")
has_comment() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'gshare\[n1\]:'; }
gs_wait 60 "AdminComment of job $j" has_comment ||
	bad "no AdminComment: $(sacct -j "$j" -o JobID,State,AdminComment%80)"
out=$(sacct -n -X -P -j "$j" -o AdminComment)
expect "totals in AdminComment" "$out" \
	'^gshare\[n1\]:gpu_s=[0-9]+\.[0-9]{3},held_s=[0-9]+\.[0-9]{3},share=30,allocs=1$'
# the agent's own usage store knows the same job and steps
if [ -x "$GSACCT" ]; then
	store=$GS_T/agent/n1.state/usage.db
	acct() { "$GSACCT" --store="$store" -j "$j" -n -P -o JobID,NodeList,Share,State 2>&1; }
	one_row() { acct | grep -q "^$j|"; }
	gs_wait 20 "gsacct row of job $j" one_row || bad "gsacct: $(acct)"
	out=$(acct)
	gs_log "gsacct: $(printf "%s " $out)"
	expect "gsacct: the job's allocation" "$out" "^$j\|n1\|30\|"
	reject "gsacct: no step rows" "$out" "^$j\."
else
	bad "gsacct not built ($GSACCT)"
fi
# a job whose runtime reports device memory: its most in the totals
j=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:20 -o /dev/null \
	--wrap "srun $SIMJOB --work 0.2 --mem-mib 512")
mem_comment() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'allocs=1,mem_max=536870912$'; }
gs_wait 60 "mem_max in the AdminComment of job $j" mem_comment &&
	ok "memory in the totals: $(sacct -n -X -P -j "$j" -o AdminComment)" ||
	bad "no mem_max: $(sacct -n -X -P -j "$j" -o AdminComment)"
end

begin array-totals
# Each task of a job array gets its own totals: task k does 0.1*(k+1) s
# of GPU work, and its own AdminComment must say so.  `sacct -j A` and
# `sacctmgr modify job where jobid=A` match every task of array A, so the
# task whose own job id is A (JobIDRaw) ends last, after the others have
# their totals: writing by job id, it would overwrite them all.
if [ -x "$SIMJOB" ]; then
	a=$(timeout 20 sbatch --parsable -w n1 --array=0-3 --gres=gshare:10 \
		-o "$GS_T/arr.%a.out" --wrap "
		end=\$((\$(date +%s) + 60))
		while [ \$SLURM_JOB_ID = \$SLURM_ARRAY_JOB_ID ] && [ ! -e $GS_T/arr.go ]; do
			[ \$(date +%s) -gt \$end ] && exit 1
			sleep 0.05
		done
		exec $SIMJOB -n t\$SLURM_ARRAY_TASK_ID -d 0 -w 0.\$((SLURM_ARRAY_TASK_ID + 1)) -t 200")
	three_done() { [ "$(sacct -n -X -P -j "$a" -o AdminComment | grep -c 'gshare\[n1\]:')" = 3 ]; }
	gs_wait 60 "three tasks' AdminComments" three_done ||
		bad "array $a: $(sacct -n -X -P -j "$a" -o JobID,State,AdminComment)"
	touch "$GS_T/arr.go"
	tasks_done() { [ "$(sacct -n -X -P -j "$a" -o AdminComment | grep -c 'gshare\[n1\]:')" = 4 ] &&
		! squeue -h -r -j "$a" 2>/dev/null | grep -q .; }
	gs_wait 60 "four tasks' AdminComments" tasks_done ||
		bad "array $a: $(sacct -n -X -P -j "$a" -o JobID,State,AdminComment)"
	# the last epilog's write lands before its job leaves the queue
	for k in 0 1 2 3; do
		own=$(sed -n 's/^event=done .* gpu_s=\([0-9.]*\) .*/\1/p' "$GS_T/arr.$k.out")
		c=$(sacct -n -X -P -j "${a}_$k" -o JobID,AdminComment)
		cg=$(printf '%s\n' "$c" | sed -n 's/.*gpu_s=\([0-9.]*\),.*/\1/p')
		[ "$(printf '%s\n' "$c" | grep -c .)" = 1 ] &&
		awk -v a="$cg" -v b="$own" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.02 * b + 0.005) }' &&
			ok "task ${a}_$k: AdminComment gpu_s=$cg, its own $own" ||
			bad "task ${a}_$k: '$c' vs its own gpu_s=$own"
		# one count: the AdminComment's totals are the usage row's
		# (docs/accounting.md, Held time)
		raw=$(sacct -n -X -P -j "${a}_$k" -o JobIDRaw)
		row=$(sqlite3 -readonly -cmd '.timeout 5000' \
			"$GS_T/agent/n1.state/usage.db" \
			"SELECT gpu_ns, held_ns FROM allocs WHERE job = '$raw' AND end_ns > 0" |
			python3 -c 'import sys; g, h = map(int, sys.stdin.read().split("|")); print("gpu_s=%d.%03d,held_s=%d.%03d" % (g // 10**9, g // 10**6 % 1000, h // 10**9, h // 10**6 % 1000))' 2>&1)
		case "$c" in
		*"|gshare[n1]:$row,share=10,allocs=1") ok "task ${a}_$k: AdminComment totals are the usage row's: $row" ;;
		*) bad "task ${a}_$k: AdminComment '$c', usage row '$row'" ;;
		esac
	done
else
	bad "gshare-simjob not built ($SIMJOB)"
fi
end

begin end-states
# Slurm's end state reaches the agent's usage store (gsacct's State, like
# sacct's): a failing job FAILED, a cancelled one CANCELLED, one that
# ends well COMPLETED
jf=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap 'exit 3')
jc=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap 'sleep 300')
jd=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap 'true')
jc_alloc() { allocs n1 | grep -q " job=$jc "; }
gs_wait 20 "job $jc allocation" jc_alloc || bad "job $jc has no allocation"
scancel "$jc"
for j in "$jf" "$jc" "$jd"; do
	gs_wait 30 "job $j to end" job_gone "$j" || bad "job $j did not end"
done
states() { "$GSACCT" --store="$GS_T/agent/n1.state/usage.db" -j "$jf,$jc,$jd" -X -n -P -o JobID,State 2>&1; }
three() { [ "$(states | grep -cE '\|(COMPLETED|FAILED|CANCELLED)$')" = 3 ]; }
gs_wait 20 "three closed rows" three || bad "gsacct: $(states)"
out=$(states)
expect "failed job FAILED" "$out" "^$jf\|FAILED\$"
expect "cancelled job CANCELLED" "$out" "^$jc\|CANCELLED\$"
expect "job that ended well COMPLETED" "$out" "^$jd\|COMPLETED\$"
end

begin dbd-outage
# slurmdbd down while jobs end: their totals wait in the spool (the
# writer's .status, the agent's metrics and gsharectl status say how
# many) and all land once slurmdbd is back; then the warning goes.
empty() { grep -q '^pending=0 ' "$GS_T/gsspool/.status" &&
	[ -z "$(find "$GS_T/gsspool" -maxdepth 1 -type f ! -name '.*')" ]; }
# earlier cases' totals first, so that the spool holds only this case's
gs_wait 30 "spool empty before the outage" empty || bad "spool: $(ls -A "$GS_T/gsspool")"
gs_stop_pidfile "$GS_T/slurmdbd.pid" 10
outage=()
for k in 1 2 3; do
	outage+=("$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap true)")
done
for j in "${outage[@]}"; do
	gs_wait 60 "job $j to end" job_gone "$j" || bad "job $j did not end"
done
pending3() { grep -q '^pending=3 ' "$GS_T/gsspool/.status"; }
gs_wait 30 "three records pending in the spool" pending3 &&
	ok "three totals wait for slurmdbd: $(cat "$GS_T/gsspool/.status")" ||
	bad "spool: $(ls -A "$GS_T/gsspool") status: $(cat "$GS_T/gsspool/.status" 2>&1)"
# the agent's metrics show them too (watch_spool)
metric() { curl -s --max-time 2 "http://127.0.0.1:${METRICS_PORT[n1]}/metrics" |
	sed -n "s/^$1 //p"; }
gauge3() { [ "$(metric gshare_spool_pending_records)" = 3 ]; }
gs_wait 10 "the agent's spool gauge at 3" gauge3 &&
	ok "agent metrics: gshare_spool_pending_records 3, oldest $(metric gshare_spool_oldest_seconds) s" ||
	bad "agent metrics: pending '$(metric gshare_spool_pending_records)'"
# and gsharectl status, once the oldest has waited 10 s
n1status() { "$ROOT/$B/node-agent/gsharectl" -s "$GS_T/agent/n1.sock" status 2>&1; }
warned() { n1status | grep -q "^WARNING: 3 Slurm totals waiting in $GS_T/gsspool for slurmdbd, oldest [0-9]* s"; }
gs_wait 30 "the spool warning in gsharectl status" warned &&
	ok "gsharectl status: $(n1status | grep '^WARNING')" ||
	bad "gsharectl status: $(n1status)"
gs_start_slurmdbd
for j in "${outage[@]}"; do
	landed() { sacct -n -X -P -j "$j" -o AdminComment | grep -q 'gshare\[n1\]:.*share=10,allocs=1$'; }
	gs_wait 90 "AdminComment of job $j" landed && ok "job $j totals landed after the outage" ||
		bad "job $j: $(sacct -n -X -P -j "$j" -o JobID,State,AdminComment)"
done
gs_wait 20 "spool empty" empty && ok "spool empty" || bad "spool: $(ls -A "$GS_T/gsspool")"
gauge0() { [ "$(metric gshare_spool_pending_records)" = 0 ]; }
gs_wait 10 "the agent's spool gauge at 0" gauge0 && ok "agent metrics: nothing pending" ||
	bad "agent metrics: pending '$(metric gshare_spool_pending_records)'"
unwarned() { ! n1status | grep -q '^WARNING'; }
gs_wait 10 "no warning in gsharectl status" unwarned &&
	ok "gsharectl status: no warning once the spool is empty" ||
	bad "gsharectl status: $(n1status)"
end

begin late-epilog
# A job whose own epilog ran without the plugin (plugstack.conf broken
# while it ended: slurmd logs "job epilog skipped") leaves its allocation
# open in the agent and its directory on the node.  The next gshare job's
# epilog there closes it, once slurmctld says that job is over and has
# been for late_epilog (1 s here), and writes its totals.
# held_job SHARES: a job on n1 whose script waits for $GS_T/go
held_job() {
	rm -f "$GS_T/go" "$GS_T/started"
	timeout 20 sbatch --parsable -w n1 --gres="gshare:$1" -o /dev/null \
		--wrap "touch '$GS_T/started'; until [ -e '$GS_T/go' ]; do sleep 0.05; done"
}
job_open() { allocs n1 | grep -q " job=$1 "; }
job_closed() { ! job_open "$1"; }
# ended_ago J S: job J ended S seconds ago or more (Slurm's end times are
# whole seconds)
ended_ago() {
	local e
	e=$(sacct -n -X -P -j "$1" -o End 2>/dev/null)
	[ -n "$e" ] && [ "$e" != Unknown ] &&
		[ "$(date +%s)" -ge $(( $(date -d "$e" +%s) + $2 )) ]
}
# n1_totals J SHARES: job J's AdminComment has n1's segment
n1_totals() { sacct -n -X -P -j "$1" -o AdminComment | grep -q "gshare\[n1\]:.*share=$2,allocs=1\$"; }
# started_open J: job J runs its script and holds its allocation
started_open() {
	gs_wait 30 "job $1 to start its script" test -e "$GS_T/started" ||
		bad "job $1 did not start: $(squeue -h -j "$1" -o '%t %r')"
	gs_wait 10 "job $1's allocation" job_open "$1" ||
		bad "job $1 has no allocation: $(allocs n1)"
}
# closed_late J K SHARES: job K's epilog closed job J's allocation and
# wrote J's totals
closed_late() {
	gs_wait 30 "job $1's allocation closed by job $2's epilog" job_closed "$1" &&
		ok "job $2's epilog closed job $1's allocation" ||
		bad "job $1 still open: $(allocs n1)"
	gs_wait 60 "AdminComment of job $1" n1_totals "$1" "$3" &&
		ok "job $1's totals written late: $(sacct -n -X -P -j "$1" -o AdminComment)" ||
		bad "job $1 AdminComment: $(sacct -n -X -P -j "$1" -o AdminComment)"
}
gs_wait 30 "earlier jobs to complete" gs_no_jobs || bad "jobs left: $(squeue)"
set_plugstack late_epilog=1s
a=$(held_job 20)
started_open "$a"
set_plugstack timeout=5
touch "$GS_T/go"
gs_wait 30 "job $a to complete" gs_no_jobs || bad "job $a stuck"
set_plugstack late_epilog=1s
job_open "$a" && ok "job $a's allocation left open by its epilog" ||
	bad "job $a's allocation was closed by its own epilog: $(allocs n1)"
[ -d "$GS_T/spank/$a.n1" ] && ok "its directory left on n1" ||
	bad "no $GS_T/spank/$a.n1"
# job b ends a few seconds after job a's end (late_epilog's 1 s)
gs_wait 30 "job $a's end 3 s ago" ended_ago "$a" 3 ||
	bad "job $a: $(sacct -n -X -P -j "$a" -o State,End)"
b=$(timeout 20 sbatch --parsable -w n1 --gres=gshare:10 -o /dev/null --wrap true)
closed_late "$a" "$b" 20
gs_wait 10 "job $a's directory gone" test ! -d "$GS_T/spank/$a.n1" &&
	ok "its directory removed" || bad "$GS_T/spank/$a.n1 still there"
grep -q "gshare: job $a on n1 ended and its epilog left it open: closing it in job $b's" \
	"$GS_T"/log/slurmd.n1.log && ok "slurmd's log says so" ||
	bad "no log line: $(grep "gshare: job $a" "$GS_T"/log/slurmd.n1.log | tail -3)"
gs_wait 60 "AdminComment of job $b" n1_totals "$b" 10 &&
	ok "job $b's own totals too" ||
	bad "job $b AdminComment: $(sacct -n -X -P -j "$b" -o AdminComment)"
# the agent down while a job's epilog runs: the epilog keeps the job's
# records; with the agent back (its allocations restored), the next
# job's epilog closes the allocation and writes the totals — here a job
# without a share (any job's epilog does it)
gs_wait 30 "earlier jobs to complete" gs_no_jobs || bad "jobs left: $(squeue)"
c=$(held_job 15)
started_open "$c"
stop_agent n1
touch "$GS_T/go"
gs_wait 30 "job $c to complete" gs_no_jobs || bad "job $c stuck"
[ -d "$GS_T/spank/$c.n1" ] && ok "job $c's records kept while the agent was down" ||
	bad "no $GS_T/spank/$c.n1"
start_agent n1
gs_wait 10 "job $c's allocation restored" job_open "$c" ||
	bad "job $c's allocation not restored: $(allocs n1)"
gs_wait 30 "job $c's end 3 s ago" ended_ago "$c" 3 ||
	bad "job $c: $(sacct -n -X -P -j "$c" -o State,End)"
dj=$(timeout 20 sbatch --parsable -w n1 -o /dev/null --wrap true)
closed_late "$c" "$dj" 15
grep -q "gshare: job $c on n1 ended and its epilog left it open: closing it in job $dj's" \
	"$GS_T"/log/slurmd.n1.log && ok "a job without a share closed it (slurmd's log)" ||
	bad "no log line: $(grep "gshare: job $c" "$GS_T"/log/slurmd.n1.log | tail -3)"
[ -z "$(sacct -n -X -P -j "$dj" -o AdminComment)" ] &&
	ok "job $dj itself has no totals" ||
	bad "job $dj AdminComment: $(sacct -n -X -P -j "$dj" -o AdminComment)"
set_plugstack
end

gs_log "slurm: $PASS passed, $FAIL failed${FAILED:+ (failed:$FAILED)}"
[ "$FAIL" = 0 ]
