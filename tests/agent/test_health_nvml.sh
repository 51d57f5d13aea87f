#!/bin/sh
# Integration test of gshared's NVML health path without a GPU: gshared
# runs with `gpus: nvml` against a stand-in libnvidia-ml.so.1
# (tests/agent/fake_nvml.c, two GPUs whose health a state file sets).
# Checks: the health worker starts; a lost GPU (GPU_IS_LOST) and a GPU
# NVML no longer finds turn unhealthy in STATUS within the check period,
# with NVML's reason, refuse allocations, and recover; one log line per
# transition; faults cannot be injected into real GPUs; a critical XID
# (not an application's) makes a GPU unhealthy until `gsharectl gpu-ok`;
# an NVML call that
# hangs does not stall the agent (ping and status keep answering) nor
# SIGTERM.  Polls with deadlines; cleans up on any exit.
set -u
GS_LOG_TAIL=+1
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gshealth
state=$dir/nvml-state
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# health GPU: "True " / "False NVML: GPU is lost" from status --json
health() {
	$CTL -s "$sock" -t 2000 status --json | /usr/bin/python3 -c '
import json, sys
g = [g for g in json.load(sys.stdin)["gpus"] if g["index"] == int(sys.argv[1])][0]
print(g["healthy"], g["health"])' "$1"
}
# wait_health GPU WANT DESC: poll until health GPU prints WANT (5 s)
wait_health() {
	t0=$(ms)
	while [ "$(health "$1")" != "$2" ]; do
		if [ $(( $(ms) - t0 )) -gt 5000 ]; then
			bad "$3: still '$(health "$1")' after 5 s"
			return
		fi
		sleep 0.05
	done
	ok "$3 after $(( $(ms) - t0 )) ms"
}

gs_agent_conf <<CONF
gpus: nvml
CONF
: > "$state"
gs_agent_start "" LD_LIBRARY_PATH=$B/tests/agent/fakenvml \
	FAKE_NVML_STATE=$state
grep -q "GPU health: checking 2 GPUs through NVML every 500 ms, critical XIDs watched" "$dir/log" &&
	ok "health worker started for 2 NVML GPUs" ||
	bad "no health worker: $(cat "$dir/log")"
[ "$(health 0)" = "True " ] && [ "$(health 1)" = "True " ] &&
	ok "both GPUs healthy" || bad "start: $(health 0) / $(health 1)"
# SIGHUP reloads, whatever threads NVML started (the stand-in starts one
# in nvmlInit, as the real library does): the agent must survive it
kill -HUP "$apid"
t0=$(ms)
until grep -q "configuration reloaded" "$dir/log"; do
	[ $(( $(ms) - t0 )) -gt 5000 ] && break
	kill -0 "$apid" 2>/dev/null || break
	sleep 0.05
done
kill -0 "$apid" 2>/dev/null && grep -q "configuration reloaded" "$dir/log" &&
	$CTL -s "$sock" ping >/dev/null &&
	ok "SIGHUP with NVML's threads running: reloaded, still answering" ||
	bad "SIGHUP killed the agent or was not seen: $(tail -3 "$dir/log")"

echo "1 lost" > "$state"
wait_health 1 "False NVML: GPU is lost" "GPU_IS_LOST: GPU 1 unhealthy"
[ "$(health 0)" = "True " ] && ok "GPU 0 unaffected" || bad "GPU 0: $(health 0)"
out=$($CTL -s "$sock" create --shares 5 --gpu 1 2>&1)
case $out in
*"GPU 1 is unhealthy (NVML: GPU is lost): no new allocations"*)
	ok "create on the lost GPU refused";;
*) bad "create on the lost GPU: $out";;
esac
a=$($CTL -s "$sock" create --shares 5 2>&1)
[ "$a" = 1 ] && $CTL -s "$sock" status --json | grep -q '"gpu": 0' &&
	ok "placement avoids the lost GPU" || bad "placement: $a"
out=$($CTL -s "$sock" gpu-fail 0 2>&1)
case $out in
*"GPU 0 is not simulated"*) ok "no injected faults on real GPUs";;
*) bad "gpu-fail on a real GPU: $out";;
esac
: > "$state"
wait_health 1 "True " "GPU 1 healthy again"
[ "$(grep -c 'gpu 1 GPU-fake-1: unhealthy (NVML: GPU is lost)' "$dir/log")" = 1 ] &&
	[ "$(grep -c 'gpu 1 GPU-fake-1: healthy again' "$dir/log")" = 1 ] &&
	ok "one log line per transition" || bad "log: $(grep 'gpu 1' "$dir/log")"

echo "0 gone" > "$state"
wait_health 0 "False NVML: Not Found" "GPU NVML no longer finds: unhealthy"
: > "$state"
wait_health 0 "True " "GPU 0 healthy again"

# Critical XIDs: an application's (13) is ignored, a GPU's (79) makes it
# unhealthy until root clears it.
printf '1 xid 13\n1 xid 79\n' > "$state"
wait_health 1 "False critical XID 79" "critical XID 79: GPU 1 unhealthy"
grep -q "XID 13" "$dir/log" && bad "XID 13 (an application's error) counted" ||
	ok "XID 13 (an application's error) ignored"
echo "0 gone" > "$state"
wait_health 0 "False NVML: Not Found" "a later check ran"
[ "$(health 1)" = "False critical XID 79" ] &&
	ok "the XID outlives later good checks" || bad "XID: $(health 1)"
: > "$state"
wait_health 0 "True " "GPU 0 healthy again"
out=$($CTL -s "$sock" gpu-ok 1 2>&1)
[ -z "$out" ] && [ "$(health 1)" = "True " ] &&
	grep -q "gpu 1: critical XID 79 cleared by uid 0" "$dir/log" &&
	ok "gpu-ok clears the XID" || bad "gpu-ok 1: $out / $(health 1)"

# A hanging NVML call stalls only the worker.
echo "1 hang" > "$state"
sleep 1.5
t0=$(ms); n=0; slow=0
while [ $(( $(ms) - t0 )) -lt 2000 ]; do
	s=$(ms)
	$CTL -s "$sock" -t 1000 ping >/dev/null 2>&1 || { slow=$((slow + 1)); }
	[ $(( $(ms) - s )) -gt 500 ] && slow=$((slow + 1))
	n=$((n + 1))
	sleep 0.02
done
[ $slow = 0 ] && ok "NVML hung: $n pings in 2 s, none slow or failed" ||
	bad "NVML hung: $slow of $n pings slow or failed"
[ "$(health 1)" = "True " ] && ok "hung check keeps the last state" ||
	bad "hung: $(health 1)"
t0=$(ms)
kill -TERM $apid
while kill -0 $apid 2>/dev/null; do
	[ $(( $(ms) - t0 )) -gt 10000 ] && { bad "no exit on SIGTERM"; break; }
	sleep 0.05
done
wait $apid; rc=$?
apid=""
[ $rc = 0 ] && ok "SIGTERM with NVML hung: exit 0 after $(( $(ms) - t0 )) ms" ||
	bad "SIGTERM: exit $rc"
grep -q "health worker stuck in NVML" "$dir/log" && ok "stuck worker logged" ||
	bad "stuck worker not logged"
exit $fail
