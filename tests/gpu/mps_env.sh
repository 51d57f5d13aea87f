# tests/gpu/mps_env.sh — sourced by tests/gpu/agent.sh and
# tests/gpu/gate/run.sh (after they define ctl): alloc_env ID prints what a
# plugin puts into allocation ID's job environment beside the socket, its
# MPS pipe directory (space mode, time_mps), once the daemon listens.
alloc_env() {	# ID
	p=$(ctl status --json | ${PY:-python3} -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])]
print(a[0].get("mps_pipe", "") if a else "")' "$1")
	[ -n "$p" ] || return 0
	i=0
	while [ ! -S "$p/control" ] && [ $i -lt 100 ]; do
		i=$((i + 1))
		sleep 0.05
	done
	echo "CUDA_MPS_PIPE_DIRECTORY=$p"
}
