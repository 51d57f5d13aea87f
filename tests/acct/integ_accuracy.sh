#!/bin/sh
# Accounting accuracy against the real agent: four simulated jobs of known
# length share one simulated GPU (shares 10/20/30/40); each measures its own
# GPU time.  gsacct's GPUSec must be within 1% of each job's measurement
# or, when above it, not above the token time the agent saw it hold (a
# job is billed at least 7/8 of its held time: on a badly loaded machine
# its own wake-up after a grant can be billed; docs/accounting.md),
# suspensions must match exactly, and HeldSec >= GPUSec.  Meanwhile the
# metrics endpoint is scraped and checked with `promtool check metrics`.
# Old usage put in the store beforehand is purged by the retention.
# Finally gsacct reads the store with the agent stopped and after kill -9.
set -u
. tests/acct/lib.sh

port=$(free_port)
# the store readable by every user (store_group ""), for the check as
# nobody below; tests/acct/integ_perm.sh covers the group
STORE_GROUP=""
write_conf 200ms 1 "127.0.0.1:$port"
# old usage (2023) in the store: the default retention (90 days) must
# purge it in small batches while the agent runs
mkdir -p "$T/state"
echo "bench 5000 10" | $B/tests/acct/acct_fill "$T/state/usage.db" > /dev/null ||
	fail "acct_fill"
start_agent
n=0
for spec in "10 0.6" "20 0.9" "30 1.2" "40 1.5"; do
	set -- $spec
	n=$((n + 1))
	"$JOB" --socket "$T/sock" --shares "$1" --job "70$n" --step 0 \
		--work "$2" --task-us 500 --close > "$T/job$n.out" 2>&1 &
	PIDS="$PIDS $!"
done
# scrape while they run
wait_for 10 sh -c "curl -sf http://127.0.0.1:$port/metrics | grep -q 'job=\"704.0\"'" ||
	fail "metrics never showed job 704.0"
curl -sf "http://127.0.0.1:$port/metrics" > "$T/scrape.txt" || fail "scrape"
promtool check metrics < "$T/scrape.txt" || fail "promtool check metrics"
grep -c '^gshare_gpu_seconds_total{' "$T/scrape.txt" | grep -qx 4 ||
	fail "want 4 gpu_seconds series: $(grep gshare_gpu_seconds_total "$T/scrape.txt")"
for p in $PIDS; do wait "$p" || fail "a job failed: $(cat "$T"/job*.out)"; done
PIDS=""
# the closes are stored with the next tick
wait_for 10 sh -c "[ \$(sqlite3 -readonly $T/state/usage.db \"SELECT COUNT(*) FROM allocs WHERE end_ns > 0\") = 4 ]" ||
	fail "closed allocations not stored"

old=$(sqlite3 -readonly "$T/state/usage.db" "SELECT COUNT(*) FROM samples WHERE t_ns < 1750000000000000000")
[ "$old" = 0 ] || fail "$old samples older than the retention left"
old=$(sqlite3 -readonly "$T/state/usage.db" "SELECT COUNT(*) FROM allocs WHERE job LIKE '900%'")
[ "$old" = 0 ] || fail "$old allocations older than the retention left"
grep -q "10 allocation(s) left open by the previous run closed as NODE_FAIL" "$T/agent.log" ||
	fail "recovery of the old open rows not logged"

check() {
	TZ=UTC "$GSACCT" --store "$T/state/usage.db" -j 701,702,703,704 -P -n \
		-o JobID,GPUSec,HeldSec,Suspends,State > "$T/acct.txt" ||
		fail "gsacct failed"
	for n in 1 2 3 4; do
		read -r id own held tasks susp att < "$T/job$n.out"
		own=${own#gpu_ns=}; susp=${susp#suspensions=}
		line=$(grep "^$id|" "$T/acct.txt") || fail "no row for $id"
		/usr/bin/python3 - "$line" "$own" "$susp" <<'PY' || fail "$1: $line vs job $own ns"
import sys
jid, gpusec, heldsec, susp, state = sys.argv[1].split("|")
own = int(sys.argv[2]) / 1e9
err = abs(float(gpusec) - own) / own
print("%s: gsacct %.2f s, job measured %.4f s, error %.3f%%, %s suspensions"
      % (jid, float(gpusec), own, err * 100, susp))
assert err <= 0.01 or own < float(gpusec) <= float(heldsec), \
    "more than 1% off, and not within what the agent saw held (%s s)" % heldsec
assert int(susp) == int(sys.argv[3]), "suspensions differ"
assert float(heldsec) >= float(gpusec), "held < gpu"
assert state == "COMPLETED", state
PY
	done
}
check
# the job rows (sum of the step) are there too, and the store is readable
# with the agent stopped
kill "$AGENT"; wait "$AGENT"; AGENT=""
check
"$GSACCT" --store "$T/state/usage.db" -j 701 -X -P -n -o JobID | grep -qx 701 ||
	fail "job row for 701"
# and after a kill -9 (WAL and index left behind), also as non-root
start_agent
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
check
chmod 755 "$T" "$T/state"
runuser -u nobody -- "$GSACCT" --store "$T/state/usage.db" -j 701 -n -P -o JobID > "$T/nobody.txt" 2>&1 ||
	fail "gsacct as nobody: $(cat "$T/nobody.txt")"
[ -s "$T/nobody.txt" ] && fail "nobody sees root's rows: $(cat "$T/nobody.txt")"

# The same with the project's simulated job (gshare-simjob, the GPU
# runtime's host loop with a CPU executor) on allocations created the way
# the plugins do (gsharectl create with job/step labels, then close).
SIMJOB=$B/runtime/sim/gshare-simjob
CTL=$B/node-agent/gsharectl
if [ -x "$SIMJOB" ]; then
	start_agent
	n=0
	for spec in "20 0.8" "30 1.0" "50 1.2"; do
		set -- $spec
		n=$((n + 1))
		id=$("$CTL" -s "$T/sock" create --shares "$1" --job "75$n" \
			--step 0) || fail "gsharectl create"
		echo "$id" > "$T/sim$n.id"
		"$SIMJOB" --socket "$T/sock" --alloc "$id" --name "75$n" \
			--work "$2" --duration 0 > "$T/sim$n.out" 2>&1 &
		PIDS="$PIDS $!"
	done
	for p in $PIDS; do wait "$p" || fail "simjob: $(cat "$T"/sim*.out)"; done
	PIDS=""
	for n in 1 2 3; do
		"$CTL" -s "$T/sock" close "$(cat "$T/sim$n.id")" > /dev/null ||
			fail "gsharectl close"
	done
	wait_for 10 sh -c "[ \$(sqlite3 -readonly $T/state/usage.db \"SELECT COUNT(*) FROM allocs WHERE job LIKE '75_' AND end_ns > 0\") = 3 ]" ||
		fail "simjob allocations not closed in the store"
	"$GSACCT" --store "$T/state/usage.db" -j 751,752,753 -P -n \
		-o JobID,GPUSec,Suspends,State,HeldSec > "$T/acct.txt"
	for n in 1 2 3; do
		line=$(grep "^75$n.0|" "$T/acct.txt") || fail "no row 75$n.0"
		/usr/bin/python3 - "$line" "$(tail -1 "$T/sim$n.out")" <<'PY' || fail "simjob 75$n: $line"
import sys
jid, gpusec, susp, state, heldsec = sys.argv[1].split("|")
kv = dict(f.split("=", 1) for f in sys.argv[2].split() if "=" in f)
own = float(kv["gpu_s"])
err = abs(float(gpusec) - own) / own
print("%s (gshare-simjob): gsacct %.2f s, job measured %.4f s, error %.3f%%"
      % (jid, float(gpusec), own, err * 100))
assert err <= 0.01 or own < float(gpusec) <= float(heldsec), \
    "more than 1% off, and not within what the agent saw held (%s s)" % heldsec
assert int(susp) == int(kv["suspensions"]), (susp, kv["suspensions"])
assert state == "COMPLETED", state
PY
	done
fi
echo "accuracy: ok"
