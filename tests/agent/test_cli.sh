#!/bin/sh
# Integration test of gsharectl against a live gshared (simulated GPU):
# every subcommand (gpu-fail/gpu-ok and create --any-uid included, with
# gshare-simjob attaching as nobody), JSON output, what a non-root user
# sees, usage errors
# and the message when the agent is not running.  Cleans up on any exit.
set -u
GS_LOG_TAIL=+1
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gscli "$SIM"
chmod 755 "$dir"
# expect RC DESCRIPTION PATTERN COMMAND...: exit status and output match
expect() {
	want=$1 desc=$2 pat=$3; shift 3
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" != "$want" ]; then
		bad "$desc: exit $rc, wanted $want: $out"
	elif ! printf '%s\n' "$out" | grep -q -- "$pat"; then
		bad "$desc: output does not match '$pat': $out"
	else
		ok "$desc"
	fi
}
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

expect 1 "agent not running" "cannot connect to gshared at $sock (is the agent running?)" \
	$CTL -s "$sock" status
expect 2 "usage" "usage: gsharectl" $CTL -s "$sock" frobnicate

gs_agent_conf <<CONF
gpus:
  simulated: 2
CONF
gs_agent_start
ok "gshared up"

export GSHARE_SOCKET=$sock
expect 0 "create" "^1$" $CTL create --shares 30 --job 4242 --step 0
expect 0 "create for nobody" "^2$" $CTL create --shares 20 --uid 65534 --gpu 1
expect 1 "admission" "GPU 1: 90 shares requested, only 80 of 100 free" \
	$CTL create --shares 90 --gpu 1
long=$(printf 'j%.0s' $(seq 64))
expect 2 "--job longer than the protocol's limit" "job: 'jjjjjjjjjjjjjjjjjjjj...' is 64 characters, longer than the protocol's limit of 63" \
	$CTL create --shares 1 --job "$long"
expect 2 "--step longer than the protocol's limit" "step: .* longer than the protocol's limit" \
	$CTL create --shares 1 --job 1 --step "$long"
expect 2 "--uid with --any-uid" "--uid and --any-uid exclude each other" \
	$CTL create --shares 1 --uid 65534 --any-uid
expect 2 "--any-uid with --uid" "--uid and --any-uid exclude each other" \
	$CTL create --shares 1 --any-uid --uid 0
expect 0 "nothing created by refused requests" "^2$" sh -c \
	"$CTL status --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)[\"allocations\"]))'"
# long options, as gsacct and the Slurm tools take them
expect 0 "--socket PATH --timeout MS ping" "^ok$" \
	$CTL --socket "$sock" --timeout 2000 ping
expect 0 "--socket=PATH" "^ok$" $CTL --socket="$sock" ping
expect 0 "--help" "^usage: gsharectl" $CTL --help
expect 0 "-h" "--socket PATH" $CTL -h
expect 0 "--version" "^gsharectl (gshare) protocol 1\." $CTL --version
expect 2 "unknown long option" "usage: gsharectl" $CTL --frobnicate ping
expect 2 "--timeout without a number" "is not a number" $CTL --timeout x ping
expect 0 "status table" "job 4242.0" $CTL status
# memory: 30 shares of a simulated 80G GPU less the 1G reserve (24268M),
# less the allocation's 512M context reserve
expect 0 "memory in the table" " 23.2G  job 4242.0" $CTL status
expect 0 "GPU memory in the table" "memory limits 23.2G/80.0G" $CTL status
expect 1 "memory admission" "GPU 1: memory limit 70G does not fit" \
	$CTL create --shares 10 --gpu 1 --mem 70G
expect 2 "--mem not a size" "mem: '20Q' is not a size" \
	$CTL create --shares 10 --mem 20Q
m=$($CTL status --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
a = [x for x in d["allocations"] if x["id"] == 1][0]
print(a["mem_limit"], a["mem_used"], a["mem_peak"], d["gpus"][0]["mem_total"],
      d["gpus"][0]["mem_limits"])')
[ "$m" = "24909971456 0 0 85899345920 24909971456" ] && ok "status --json memory" ||
	bad "status --json memory: $m"
expect 0 "set-mem" "allocation 1: memory limit 10240 MiB" $CTL set-mem 1 10G
expect 0 "memory in the table after set-mem" " 10.0G  job 4242.0" $CTL status
expect 0 "set-mem default" "allocation 1: memory limit 23756 MiB" \
	$CTL set-mem 1 default
expect 1 "set-mem above what the GPU offers" "exceeds the 80384M the GPU offers" $CTL set-mem 1 79G
expect 2 "set-mem not a size" "set-mem: '10Q' is not a size" $CTL set-mem 1 10Q
expect 1 "set-mem unknown" "no allocation 9" $CTL set-mem 9 1G
expect 1 "set-mem by a user" "" nobody $CTL set-mem 1 1G
expect 0 "limit unchanged by the refusals" " 23.2G  job 4242.0" $CTL status
expect 0 "set-weight" "" $CTL set-weight 1 55
expect 0 "set-priority" "" $CTL set-priority 1 high
json=$($CTL status --json)
w=$(printf '%s' "$json" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
a = [x for x in d["allocations"] if x["id"] == 1][0]
print(a["weight"], a["priority"], a["gpu"], len(d["gpus"]), d["policy"])')
[ "$w" = "55 2 0 2 wfq" ] && ok "status --json" || bad "status --json: $w"
expect 1 "set-weight unknown" "no allocation 9" $CTL set-weight 9 5
expect 2 "set-weight not a number" "is not a number" $CTL set-weight x 5
expect 0 "drain" "" $CTL drain 0
expect 0 "drained in status" "DRAINED" $CTL status
expect 1 "create on drained GPU" "GPU 0 is drained" $CTL create --shares 5 --gpu 0
expect 0 "undrain" "" $CTL undrain 0
# GPU health: faults injected into a simulated GPU (root only)
expect 0 "gpu-fail" "" $CTL gpu-fail 1
expect 0 "unhealthy in status" "UNHEALTHY (fault injected" $CTL status
h=$($CTL status --json | /usr/bin/python3 -c '
import json, sys
g = json.load(sys.stdin)["gpus"][1]
print(g["healthy"], g["health"])')
[ "$h" = "False fault injected into a simulated GPU" ] && ok "status --json health" ||
	bad "status --json health: $h"
expect 1 "create on unhealthy GPU" "GPU 1 is unhealthy (fault injected" \
	$CTL create --shares 5 --gpu 1
expect 1 "nobody gpu-fail" "only root may do this" nobody $CTL gpu-fail 0
expect 1 "gpu-fail unknown GPU" "no GPU 5 on this node" $CTL gpu-fail 5
expect 2 "gpu-fail not a number" "is not a number" $CTL gpu-fail x
expect 0 "gpu-ok" "" $CTL gpu-ok 1
[ "$(grep -c 'gpu 1 .*: unhealthy (' "$dir/log")" = 1 ] &&
	ok "one log line per transition" || bad "log: $(grep 'gpu 1' "$dir/log")"
# allocations any uid may attach to
expect 0 "create --any-uid" "^3$" $CTL create --shares 5 --gpu 0 --any-uid
expect 0 "any in status" " 3 *any " $CTL status
u=$($CTL status --json | /usr/bin/python3 -c '
import json, sys
print(sorted((a["id"], a["any_uid"]) for a in
             json.load(sys.stdin)["allocations"]))')
[ "$u" = "[(1, False), (2, False), (3, True)]" ] && ok "status --json any_uid" ||
	bad "status --json any_uid: $u"
expect 0 "nobody attaches the any-uid allocation" "event=done" \
	nobody $SIM -s "$sock" -a 3 -d 0.05
expect 1 "nobody attaches root's allocation" "no allocation 1" \
	nobody $SIM -s "$sock" -a 1 -d 0.05
expect 0 "close any-uid" "allocation 3" $CTL close 3
expect 1 "nobody set-weight" "only root may do this" nobody $CTL set-weight 2 5
expect 1 "nobody create" "only root may do this" nobody $CTL create --shares 5
n=$(nobody $CTL status --json | /usr/bin/python3 -c '
import json, sys
print([a["id"] for a in json.load(sys.stdin)["allocations"]])')
[ "$n" = "[2]" ] && ok "nobody sees only its own" || bad "nobody sees $n"
expect 0 "close" "allocation 1: gpu time" $CTL close 1
expect 1 "close again" "no allocation 1" $CTL close 1
expect 0 "ping" "ok" $CTL ping

kill -TERM $apid
i=0
while kill -0 $apid 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 200 ] && { bad "no exit on SIGTERM"; break; }
	sleep 0.05
done
wait $apid; rc=$?
apid=""
[ $rc = 0 ] && ok "SIGTERM: exit 0" || bad "SIGTERM: exit $rc"
[ -e "$sock" ] && bad "socket left behind" || ok "socket removed"
exit $fail
