#!/bin/sh
# The metrics endpoint on a Unix socket (metrics_listen: unix:PATH), for
# nodes where not every local user may see everyone's usage.  With
# store_group set to a temporary group the socket is 0660 root:<group>:
# nobody cannot connect, nobody with the group can; Debian's real
# Prometheus, which cannot dial a Unix socket itself, scrapes it through
# socat running as nobody with the group (the documented way) and stores
# the job's series.  A group that does not exist gives 0600, store_group
# "" 0666; a path that is not a socket is refused (no metrics, the agent
# runs); the socket is removed when the agent stops.
set -u
. tests/acct/lib.sh
command -v prometheus >/dev/null || fail "prometheus not installed"
command -v socat >/dev/null || fail "socat not installed"
G=gsmet$$
trap 'cleanup; groupdel "$G" 2>/dev/null' EXIT INT TERM
getent group "$G" > /dev/null && fail "group $G exists already"
groupadd "$G" || fail "groupadd $G"
chmod 755 "$T"	# nobody reaches the socket
MS=$T/metrics.sock
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
member() { setpriv --reuid=65534 --regid=65534 --groups="$G" "$@"; }
scrape() { curl -sf --max-time 5 --unix-socket "$MS" http://x/metrics; }

stop_agent() {
	kill "$AGENT" && wait "$AGENT"
	AGENT=""
}

STORE_GROUP=$G
write_conf 200ms 1 "unix:$MS"
start_agent
wait_for 10 test -S "$MS" || fail "no metrics socket"
[ "$(stat -c '%a %U %G' "$MS")" = "660 root $G" ] ||
	fail "socket: $(stat -c '%a %U %G' "$MS"), want 660 root $G"
grep -q "metrics: unix socket $MS, mode 0660, group $G" "$T/agent.log" ||
	fail "no log line for the socket"
"$JOB" --socket "$T/sock" --shares 30 --job 951 --user u951 --work 30 \
	--task-us 2000 > "$T/job.out" 2>&1 &
PIDS="$PIDS $!"
wait_for 10 sh -c "$(command -v curl) -sf --unix-socket $MS http://x/metrics | grep -q 'job=\"951\"'" ||
	fail "root: the socket never showed job 951"
nobody curl -sf --max-time 5 --unix-socket "$MS" http://x/metrics \
	> /dev/null 2>&1 && fail "nobody without the group read the metrics"
member curl -sf --max-time 5 --unix-socket "$MS" http://x/metrics \
	> "$T/member.txt" || fail "a member of $G cannot read the metrics"
grep -q 'job="951"' "$T/member.txt" || fail "member's scrape lacks job 951"
promtool check metrics < "$T/member.txt" || fail "promtool check metrics"
echo "ok   0660 root:$G; nobody refused, the group's member served"

# real Prometheus through socat (as the group's member) on loopback
sport=$(free_port)
pport=$(free_port)
member socat "TCP-LISTEN:$sport,bind=127.0.0.1,reuseaddr,fork" \
	"UNIX-CONNECT:$MS" > "$T/socat.log" 2>&1 &
PIDS="$PIDS $!"
cat > "$T/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: gshare
    static_configs:
      - targets: ['127.0.0.1:$sport']
EOC
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$pport" > "$T/prometheus.log" 2>&1 &
PIDS="$PIDS $!"
api="http://127.0.0.1:$pport/api/v1"
wait_for 60 curl -sf "http://127.0.0.1:$pport/-/ready" ||
	fail "prometheus not ready: $(tail -5 "$T/prometheus.log")"
nseries() {
	curl -sf --data-urlencode "query=$1" "$api/query" |
		/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))'
}
stored() { [ "$(nseries 'gshare_gpu_seconds_total{exported_job="951"} > 0')" = 1 ]; }
wait_for 30 stored || fail "prometheus never stored job 951's GPU seconds"
[ "$(nseries 'up{job="gshare"} == 1')" = 1 ] || fail "target not up"
echo "ok   prometheus scrapes the socket through socat"
stop_agent
[ -e "$MS" ] && fail "metrics socket left behind"

# a group that does not exist: root only; store_group "": everyone
STORE_GROUP=gsnone$$
write_conf 200ms 1 "unix:$MS"
start_agent
wait_for 10 test -S "$MS" || fail "no metrics socket (missing group)"
[ "$(stat -c '%a' "$MS")" = 600 ] || fail "missing group: $(stat -c '%a' "$MS")"
stop_agent
STORE_GROUP=""
write_conf 200ms 1 "unix:$MS"
start_agent
wait_for 10 test -S "$MS" || fail "no metrics socket (store_group '')"
[ "$(stat -c '%a' "$MS")" = 666 ] || fail "store_group '': $(stat -c '%a' "$MS")"
nobody curl -sf --max-time 5 --unix-socket "$MS" http://x/metrics \
	> /dev/null || fail "store_group '': nobody cannot read"
stop_agent
echo "ok   missing group 0600, store_group \"\" 0666"

# not a socket: refused, the agent runs without metrics
echo keep > "$MS"
start_agent
grep -q "metrics: $MS exists and is not a socket; running without metrics" \
	"$T/agent.log" || fail "a regular file at the path was not refused"
[ "$(cat "$MS")" = keep ] || fail "the file was replaced"
stop_agent
echo "metrics on a unix socket: ok"
