#!/bin/bash
#
# bench.sh — what the SPANK plugin costs a Slurm step, and how long the
# loopback cluster takes to come up.
#
# Brings up the cluster of cluster.sh (one node, with and then without
# slurmdbd) and one simulated gshared, then times N runs (default 20) of
#   srun -w n1 true                       (plugin loaded, no gshare)
#   srun -w n1 --gres=gshare:30 true      (step gres query + allocation
#                                          create + close)
# and prints median and p90 wall time of each, in ms.  Root only.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=${B:-build}
N=${N:-20}
. tests/slurm/cluster.sh

PLUGIN=${PLUGIN:-$ROOT/$B/spank/spank_gshare.so}
# an older plugin (PLUGIN=...) may not know spool_dir: SPOOL_ARG=''
SPOOL_ARG=${SPOOL_ARG-spool_dir=@T@/gsspool}
GSHARED=${GSHARED:-$ROOT/$B/node-agent/gshared}
PROBE=$ROOT/$B/tests/slurm/gs_probe
[ "$(id -u)" = 0 ] || { echo "bench.sh: must run as root" >&2; exit 1; }

APID=""
cleanup() {
	local rc=$? wpid
	# the plugin's detached spool writer, if still at work
	if [ -n "$GS_T" ] && [ -s "$GS_T/gsspool/.writer" ]; then
		wpid=$(tr -dc 0-9 <"$GS_T/gsspool/.writer")
		[ -n "$wpid" ] && gs_pid_alive "$wpid" &&
			[ "$(readlink "/proc/$wpid/cwd")" = / ] &&
			kill -TERM "$wpid" 2>/dev/null
	fi
	if [ -n "$APID" ]; then
		kill -TERM "$APID" 2>/dev/null
		wait "$APID" 2>/dev/null
	fi
	gs_cluster_down
	return $rc
}
trap cleanup EXIT

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# stats LABEL VALUES...: median and p90
stats() {
	local label=$1
	shift
	printf '%s\n' "$@" | sort -n | awk -v l="$label" '
		{ v[NR] = $1 }
		END { printf "%-36s n=%d median=%d ms p90=%d ms\n", l, NR,
		      v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.999)] }'
}

GS_NODES=1
GS_DBD=0
t=$(date +%s%N)
gs_cluster_up
echo "cluster up without slurmdbd:           $(ms "$t") ms"
gs_cluster_down

GS_DBD=1
GS_PLUGSTACK="required $PLUGIN agent=@T@/agent.sock state_dir=@T@/spank $SPOOL_ARG timeout=2s"
t=$(date +%s%N)
gs_cluster_up
echo "cluster up with MariaDB + slurmdbd:    $(ms "$t") ms"

mkdir -p "$GS_T/agent.state"
printf '%s\n' "socket: $GS_T/agent.sock" "state_dir: $GS_T/agent.state" \
	"gpus:" "  simulated: 1" "log: file" "log_file: $GS_T/log/gshared.log" \
	"metrics_listen: ''" >"$GS_T/agent.yaml"
"$GSHARED" -d -f "$GS_T/agent.yaml" >"$GS_T/log/gshared.out" 2>&1 &
APID=$!
gs_wait 10 gshared "$PROBE" status "$GS_T/agent.sock" || gs_die "no gshared"

# Step launch inside one allocation: --gres=none steps skip the plugin's
# work after the gres query; the others inherit gshare:30 and find the
# job's allocation (created by the first of them, closed by the epilog).
cat >"$GS_T/steps.sh" <<EOF
#!/bin/bash
ms() { echo \$(( (\$(date +%s%N) - \$1) / 1000000 )); }
for ((i = 0; i < $N; i++)); do
	t=\$(date +%s%N); srun -n1 --gres=none true; echo "none \$(ms \$t)"
	t=\$(date +%s%N); srun -n1 true; echo "gshare \$(ms \$t)"
done
EOF
chmod 755 "$GS_T/steps.sh"
out=$(salloc -Q -w n1 --gres=gshare:30 "$GS_T/steps.sh") || gs_die "salloc failed"
stats "step, --gres=none (no allocation)" $(printf '%s\n' "$out" | awk '$1 == "none" { print $2 }')
stats "step, gshare:30 (the job's allocation)" $(printf '%s\n' "$out" | awk '$1 == "gshare" { print $2 }')

# Whole jobs back to back: the epilog (close, sum, spool the totals for
# the detached writer) runs before slurmctld starts the next job on the
# node.
for flag in no yes; do
	from=$(($(wc -l <"$GS_T/log/slurmd.n1.log") + 1))
	sed -i "s/ admin_comment=[a-z]*//; s/\$/ admin_comment=$flag/" "$GS_T/plugstack.conf"
	v=()
	for ((i = 0; i < N / 2; i++)); do
		t=$(date +%s%N)
		srun -Q -w n1 --gres=gshare:30 true || gs_die "srun failed"
		gs_wait 20 "queue empty" gs_no_jobs || gs_die "job stuck"
		v+=("$(ms "$t")")
	done
	stats "job to job, admin_comment=$flag" "${v[@]}"
	# the epilog itself, from slurmd's log: slurmd "calling
	# .../slurmstepd spank epilog" to "completed epilog for jobid J"
	mapfile -t e < <(tail -n +"$from" "$GS_T/log/slurmd.n1.log" | awk '
		function ms(s) { gsub(/[][]/, "", s); split(s, a, "T")
			split(a[2], b, ":"); return (b[1] * 3600 + b[2] * 60 + b[3]) * 1000 }
		/calling .*slurmstepd spank epilog/ { c = ms($1) }
		/Running spank\/epilog for jobid \[/ { id = $0
			sub(/.*jobid \[/, "", id); sub(/\].*/, "", id); s[id] = c }
		/completed epilog for jobid/ { id = $NF
			if (id in s) printf "%d\n", ms($1) - s[id] }')
	[ "${#e[@]}" -gt 0 ] && stats "epilog, admin_comment=$flag" "${e[@]}"
done
