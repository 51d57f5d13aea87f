#!/bin/bash
#
# shard.sh — per-GPU capacity on a two-GPU node, with real Slurm 22.05.
#
# One slurmd (n1) with two stand-in GPUs counted by Slurm's shard gres
# (gres.conf: per GPU a gpu line and `Name=shard File=... Count=100`),
# one gshared with two simulated GPUs, the plugin with required_gres=shard.
# Three shard:60 jobs: Slurm runs two, one per GPU, and the third waits
# in the queue (Resources) instead of starting and failing for want of a
# GPU with 60 free shares; each job's allocation is on the GPU Slurm gave
# it; when the first ends, the third runs, on the GPU it freed.  Every
# wait has a deadline; everything started here is stopped on exit.
# Must run as root.  Exit 0 only if every check passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=${B:-build}
. tests/slurm/cluster.sh

PLUGIN=$ROOT/$B/spank/spank_gshare.so
PROBE=$ROOT/$B/tests/slurm/gs_probe
GSHARED=${GSHARED:-$ROOT/$B/node-agent/gshared}
FAIL=0
ok() { gs_log "ok: $*"; }
bad() { gs_log "FAIL: $*"; FAIL=1; }

if [ "$(id -u)" != 0 ]; then
	echo "shard.sh: must run as root (starts Slurm daemons)" >&2
	exit 1
fi
for f in "$PLUGIN" "$PROBE" "$GSHARED"; do
	[ -e "$f" ] || { echo "shard.sh: $f missing (make first)" >&2; exit 1; }
done

AGENT_PID=""
cleanup() {
	local rc=$?
	if [ -n "$AGENT_PID" ]; then
		kill -TERM "$AGENT_PID" 2>/dev/null
		gs_wait 5 "gshared to exit" bash -c "! kill -0 $AGENT_PID" ||
			kill -KILL "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
	fi
	gs_cluster_down
	return $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

GS_NODES=1 GS_GPUS=2 GS_DBD=0
GS_PLUGSTACK="required $PLUGIN agent=@T@/agent/%n.sock state_dir=@T@/spank timeout=3s required_gres=shard admin_comment=no"
gs_cluster_up

d=$GS_T/agent
mkdir -p "$d/n1.state"
chmod 755 "$d"
printf '%s\n' "socket: $d/n1.sock" "state_dir: $d/n1.state" "gpus:" \
	"  simulated: 2" "log: file" "log_file: $GS_T/log/gshared.n1.log" \
	"metrics_listen: ''" >"$d/n1.yaml"
"$GSHARED" -d -f "$d/n1.yaml" >>"$GS_T/log/gshared.n1.out" 2>&1 &
AGENT_PID=$!
gs_wait 10 "gshared" "$PROBE" status "$d/n1.sock" || gs_die "gshared did not come up"
allocs() { "$PROBE" status "$d/n1.sock"; }

# each job prints its GPU and its allocation, then waits for its go file
cat >"$GS_T/job.sh" <<EOF
#!/bin/bash
echo "JOB \$SLURM_JOB_ID cuda=\$CUDA_VISIBLE_DEVICES \$("$PROBE" status "\$GSHARE_SOCKET" | grep "^alloc \$GSHARE_ALLOC ")"
end=\$((\$(date +%s) + 60))
until [ -e "$GS_T/go.\$SLURM_JOB_ID" ]; do
	[ "\$(date +%s)" -gt "\$end" ] && exit 1
	sleep 0.05
done
EOF
jobs=()
for k in 1 2 3; do
	jobs+=("$(timeout 20 sbatch --parsable -w n1 --gres=shard:60 \
		-o "$GS_T/job$k.out" "$GS_T/job.sh")")
done
two_printed() { [ "$(cat "$GS_T"/job*.out 2>/dev/null | grep -c '^JOB ')" -ge 2 ]; }
gs_wait 30 "two jobs running" two_printed || bad "jobs: $(squeue -o '%i %t %r')"
pend=$(squeue -h -t PD -o '%i %r')
[ "$pend" = "${jobs[2]} Resources" ] && ok "third shard:60 job waits: $pend" ||
	bad "want ${jobs[2]} pending on Resources, queue: $(squeue -o '%i %t %r')"
gpu_of() { sed -n "s/^JOB $1 cuda=\([0-9]*\) .* gpu=\([0-9]*\) .*/\1 \2/p" "$GS_T"/job*.out; }
slurm_idx() { scontrol show job -d "$1" | sed -n 's/.*GRES=shard:60(IDX:\([0-9]*\)).*/\1/p' | head -1; }
seen=""
for j in "${jobs[0]}" "${jobs[1]}"; do
	g=$(gpu_of "$j")
	idx=$(slurm_idx "$j")
	[ -n "$g" ] && [ "$g" = "$idx $idx" ] &&
		ok "job $j: Slurm IDX $idx, agent GPU and CUDA_VISIBLE_DEVICES agree" ||
		bad "job $j: Slurm IDX '$idx', CUDA and agent GPU '$g': $(cat "$GS_T"/job*.out)"
	seen="$seen $idx"
done
[ "$(echo $seen | tr ' ' '\n' | sort -u | wc -l)" = 2 ] && ok "one job per GPU:$seen" ||
	bad "both jobs on GPU$seen"
grep -h "not started" "$GS_T"/job*.out && bad "a job failed to start"
# the first ends: the third runs on the GPU it freed
freed=$(slurm_idx "${jobs[0]}")
touch "$GS_T/go.${jobs[0]}"
third_printed() { grep -q "^JOB ${jobs[2]} " "$GS_T"/job*.out 2>/dev/null; }
gs_wait 30 "the third job to run" third_printed || bad "third job never ran: $(squeue)"
g=$(gpu_of "${jobs[2]}")
[ "$g" = "$freed $freed" ] && ok "third job runs on GPU $freed" ||
	bad "third job on '$g', want GPU $freed: $(cat "$GS_T"/job*.out)"
touch "$GS_T/go.${jobs[1]}" "$GS_T/go.${jobs[2]}"
gs_wait 30 "jobs to end" gs_no_jobs || bad "jobs left: $(squeue)"
for j in "${jobs[@]}"; do
	st=$(scontrol show job "$j" 2>/dev/null | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p')
	[ "$st" = COMPLETED ] && ok "job $j COMPLETED" || bad "job $j: $st"
done
no_allocs() { ! allocs | grep -q '^alloc '; }
gs_wait 10 "allocations closed" no_allocs && ok "all allocations closed" ||
	bad "left open: $(allocs)"
gs_log "shard: $([ $FAIL = 0 ] && echo passed || echo FAILED)"
[ "$FAIL" = 0 ]
