#!/bin/sh
# The agent's NVML view of device memory, without a GPU: gshared with
# `gpus: nvml` against the stand-in libnvidia-ml.so.1 (80 GiB GPUs).
# Checks: the GPU's memory comes from NVML (status mem_total, default
# limits); the job-reported figure and NVML's figure for the attached
# process are both on the metrics page; a process NVML sees holding more
# than its limit plus memory_reserve is logged once; after the job goes,
# the NVML gauge returns to 0.  Polls with deadlines; cleans up on exit.
set -u
GS_LOG_TAIL=+1
. "$(dirname "$0")/../lib/agent.sh"
JOB=$B/tests/acct/acct_job
gs_agent_init gsmemnv "$JOB" "$B/tests/agent/fakenvml/libnvidia-ml.so.1"
state=$dir/nvml-state
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$dir/gshare.yaml" <<CONF
socket: $sock
state_dir: $dir/state
log: stderr
metrics_listen: "127.0.0.1:$port"
accounting_tick: 100ms
store_group: ""
gpus: nvml
CONF
: > "$state"
gs_agent_start "" LD_LIBRARY_PATH=$B/tests/agent/fakenvml \
	FAKE_NVML_STATE=$state
export GSHARE_SOCKET=$sock
t=$($CTL status --json | $PY -c '
import json, sys
print(json.load(sys.stdin)["gpus"][0]["mem_total"])')
[ "$t" = 85899345920 ] && ok "GPU memory from NVML: $t" || bad "mem_total $t"

metric() {	# NAME: its value for job 77
	curl -sf "http://127.0.0.1:$port/metrics" |
		sed -n "s/^$1{.*job=\"77\".*} //p"
}
# poll until metric NAME equals WANT (5 s)
wait_metric() {
	end=$(( $(date +%s) + 5 ))
	while [ "$(metric "$1")" != "$2" ]; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.05
	done
}

"$JOB" --socket "$sock" --shares 10 --job 77 --work 60 --task-us 2000 \
	--mem-mib 100 > "$dir/job.out" 2>&1 &
jpid=$!
jpids=$jpid
# 10 shares of 80G less the 1G reserve (8089M), less the 512M context
# reserve: 7577M
wait_metric gshare_memory_limit_bytes 7945060352 &&
	ok "default limit from NVML's memory" || bad "limit: $(metric gshare_memory_limit_bytes)"
wait_metric gshare_memory_used_bytes 104857600 &&
	ok "job-reported memory" || bad "used: $(metric gshare_memory_used_bytes)"
echo "0 procmem $jpid 1073741824" >> "$state"
wait_metric gshare_memory_nvml_bytes 1073741824 &&
	ok "NVML's figure for the job's process" || bad "nvml: $(metric gshare_memory_nvml_bytes)"
grep -q "NVML sees its" "$dir/log" && bad "warned within limit + reserve"
# 30G: beyond 7577M + 1G
echo "0 procmem $jpid 32212254720" > "$state"
wait_metric gshare_memory_nvml_bytes 32212254720 || bad "nvml 30G: $(metric gshare_memory_nvml_bytes)"
end=$(( $(date +%s) + 5 ))
until grep -q "allocation [0-9]*: NVML sees its 1 process(es) (pid $jpid...) holding 30G of device memory, beyond its limit of 7577M and the memory_reserve" "$dir/log"; do
	[ "$(date +%s)" -lt $end ] || { bad "no warning"; break; }
	sleep 0.05
done
sleep 0.5	# five more ticks: still one line
[ "$(grep -c 'NVML sees its' "$dir/log")" = 1 ] && ok "warned once" ||
	bad "warnings: $(grep -c 'NVML sees its' "$dir/log")"
kill "$jpid"; wait "$jpid" 2>/dev/null; jpids=""
wait_metric gshare_memory_nvml_bytes 0 && ok "job gone: NVML gauge 0" ||
	bad "after the job: $(metric gshare_memory_nvml_bytes)"
exit $fail
