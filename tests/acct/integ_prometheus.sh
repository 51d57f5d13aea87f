#!/bin/sh
# Debian's real Prometheus scrapes gshared's metrics endpoint on loopback
# (1 s interval) while two simulated jobs run.  Through Prometheus's HTTP
# API the test checks: the target is up, gshare_gpu_seconds_total has one
# series per allocation with job/user/gpu labels and grows between two
# queries, the share/suspension counters, gauges and the eviction latency
# histogram are there, and the agent's self-metrics.  `promtool check
# metrics` must accept a raw scrape.
set -u
. tests/acct/lib.sh
command -v prometheus >/dev/null || fail "prometheus not installed"

mport=$(free_port)
pport=$(free_port)
write_conf 200ms 1 "127.0.0.1:$mport"
start_agent
for n in 1 2; do
	"$JOB" --socket "$T/sock" --shares $((n * 30)) --job "90$n" \
		--user "user$n" --work 30 --task-us 2000 --mem-mib $((n * 1000)) \
		> "$T/job$n.out" 2>&1 &
	PIDS="$PIDS $!"
done
wait_for 10 sh -c "curl -sf http://127.0.0.1:$mport/metrics | grep -q 'job=\"902\"'" ||
	fail "metrics endpoint never showed job 902"
curl -sf "http://127.0.0.1:$mport/metrics" > "$T/scrape.txt"
promtool check metrics < "$T/scrape.txt" || fail "promtool check metrics"

cat > "$T/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gshare
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOC
promtool check config "$T/prometheus.yml" > /dev/null || fail "promtool check config"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$pport" > "$T/prometheus.log" 2>&1 &
PIDS="$PIDS $!"
api="http://127.0.0.1:$pport/api/v1"
wait_for 60 curl -sf "http://127.0.0.1:$pport/-/ready" ||
	fail "prometheus not ready: $(tail -5 "$T/prometheus.log")"

# query EXPR: print the API's JSON answer
query() {
	curl -sf --data-urlencode "query=$1" "$api/query"
}
# nseries EXPR: number of series in the instant vector
nseries() {
	query "$1" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))'
}
has2() { [ "$(nseries 'gshare_gpu_seconds_total{job="gshare"}')" = 2 ]; }
wait_for 30 has2 || fail "prometheus never stored 2 gshare_gpu_seconds_total series: $(query gshare_gpu_seconds_total)"
[ "$(nseries 'up{job="gshare"} == 1')" = 1 ] || fail "target not up"

query 'gshare_gpu_seconds_total' > "$T/q1.json"
# at least two more scrapes
sleep_until_scrapes() {
	[ "$(nseries 'count_over_time(gshare_agent_clients[1m]) >= 4')" = 1 ]
}
wait_for 30 sleep_until_scrapes || fail "fewer than 4 scrapes"
query 'gshare_gpu_seconds_total' > "$T/q2.json"
/usr/bin/python3 - "$T/q1.json" "$T/q2.json" <<'PY' || fail "series check"
import json, sys
a = json.load(open(sys.argv[1]))["data"]["result"]
b = json.load(open(sys.argv[2]))["data"]["result"]
def key(r):
    m = r["metric"]
    # the scrape job label is "gshare"; ours is renamed exported_job
    return m.get("exported_job")
va = {key(r): float(r["value"][1]) for r in a}
vb = {key(r): float(r["value"][1]) for r in b}
assert set(vb) == {"901", "902"}, vb
for r in b:
    m = r["metric"]
    assert m["gpu"] == "0" and m["user"] in ("user1", "user2"), m
    assert m["instance"].startswith("127.0.0.1:"), m
for j in vb:
    assert vb[j] > va[j] > 0, (j, va[j], vb[j])
total = sum(vb.values())
print("prometheus: gpu seconds %s (sum %.2f)" % (vb, total))
PY
for e in 'gshare_share_seconds_total' 'gshare_suspensions_total' \
	 'gshare_shares' 'gshare_weight' 'gshare_held_seconds_total'; do
	[ "$(nseries "$e")" = 2 ] || fail "$e: $(query "$e")"
done
# device memory: what each job reports, and the default limits of 30 and
# 60 shares of a simulated 80G GPU less the 1G reserve (24268M, 48537M),
# each less its 512M context reserve
[ "$(nseries 'gshare_memory_used_bytes{exported_job="901"} == 1048576000')" = 1 ] ||
	fail "memory used: $(query gshare_memory_used_bytes)"
[ "$(nseries 'gshare_memory_max_bytes{exported_job="902"} == 2097152000')" = 1 ] ||
	fail "memory max: $(query gshare_memory_max_bytes)"
[ "$(nseries 'gshare_memory_limit_bytes == 24909971456 or gshare_memory_limit_bytes == 50357862400')" = 2 ] ||
	fail "memory limits: $(query gshare_memory_limit_bytes)"
[ "$(nseries 'gshare_active_allocations == 2')" = 1 ] || fail "active allocations: $(query gshare_active_allocations)"
[ "$(nseries 'gshare_eviction_latency_seconds_bucket{le="+Inf"} > 0')" = 1 ] ||
	fail "eviction histogram: $(query gshare_eviction_latency_seconds_bucket)"
[ "$(nseries 'histogram_quantile(0.99, gshare_eviction_latency_seconds_bucket) > 0')" = 1 ] ||
	fail "histogram_quantile over the eviction buckets"
for e in gshare_agent_loop_lag_seconds gshare_agent_clients \
	 gshare_store_write_seconds_total gshare_store_writes_total; do
	[ "$(nseries "$e")" = 1 ] || fail "$e missing"
done
[ "$(nseries 'gshare_store_writes_total > 2')" = 1 ] || fail "store writes"
[ "$(nseries 'gshare_agent_clients >= 2')" = 1 ] || fail "clients gauge"
echo "prometheus: ok"
