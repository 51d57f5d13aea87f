#!/bin/sh
# Crash test: 16 simulated jobs run on two simulated GPUs while the agent
# is killed with SIGKILL at random moments, CRASHES times (default 50),
# one in five of them while it is still recovering and re-adopting.
# Before each kill the test reads, read-only, which ticks are committed and
# every allocation's GPU time; after each restart the store must pass
# PRAGMA integrity_check, hold every one of those ticks and at least that
# GPU time.  The agent restores its allocations (same ids) and the jobs
# re-attach to them, as the runtime does; each continues its own row, so
# in the end there are exactly 16 rows, all COMPLETED, and each row's GPU time is at most what its job
# measured itself and, summed over the jobs, within 1% of it: a job that
# re-attaches marks its page `resumed` and continues its counters, so even
# usage not yet committed at a kill is charged once.
set -u
. tests/acct/lib.sh
CRASHES=${CRASHES:-50}
NJOBS=16
WORK=${WORK:-3}
db=$T/state/usage.db
q() { sqlite3 -readonly -cmd ".timeout 5000" "$db" "$1"; }

# a generous grace: on a loaded machine a sleeping job may be scheduled
# late, and an escalation would charge it more than it measured
GRACE=2s write_conf 100ms 2 ""
start_agent
i=0
while [ $i -lt $NJOBS ]; do
	"$JOB" --socket "$T/sock" --shares 6 --job $((800 + i)) --step 0 \
		--work "$WORK" --task-us 1000 --reconnect --close \
		> "$T/job$i.out" 2> "$T/job$i.err" &
	PIDS="$PIDS $!"
	i=$((i + 1))
done

alive() {
	n=0
	for p in $PIDS; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
	echo $n
}
# every running job is attached again and two ticks went by since start
settled() {
	[ "$(q 'SELECT COUNT(*) FROM allocs WHERE end_ns = 0')" -ge "$(alive)" ] &&
	[ "$(ticks)" -ge $(( $1 + 2 )) ]
}

c=0
while [ $c -lt "$CRASHES" ]; do
	c=$((c + 1))
	base=$(ticks)
	# every fifth kill comes right after the start, while the agent
	# recovers and the jobs re-register; the others once all are back
	if [ $((c % 5)) != 0 ]; then
		wait_for 20 settled "$base" || fail "crash $c: jobs did not settle (open $(q 'SELECT COUNT(*) FROM allocs WHERE end_ns = 0'), alive $(alive))"
	fi
	# random moment: 0-255 ms later
	r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
	sleep "$(printf '0.%03d' "$r")"
	snap_tick=$(q 'SELECT COALESCE(MAX(tick), 0) FROM ticks')
	snap_n=$(q "SELECT COUNT(*) FROM ticks WHERE tick <= $snap_tick")
	q 'SELECT key, gpu_ns FROM allocs ORDER BY key' > "$T/snap"
	kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
	ok=$(q 'PRAGMA integrity_check')
	[ "$ok" = ok ] || fail "crash $c: integrity_check after the kill: $ok"
	start_agent
	ok=$(q 'PRAGMA integrity_check')
	[ "$ok" = ok ] || fail "crash $c: integrity_check after restart: $ok"
	n=$(q "SELECT COUNT(*) FROM ticks WHERE tick <= $snap_tick")
	[ "$n" = "$snap_n" ] || fail "crash $c: $snap_n ticks up to $snap_tick committed before the kill, $n after"
	while IFS='|' read -r key gpu; do
		now=$(q "SELECT gpu_ns FROM allocs WHERE key = $key")
		[ "$now" -ge "$gpu" ] || fail "crash $c: allocation $key had $gpu ns, now $now"
	done < "$T/snap"
done
echo "crash: $CRASHES kills, every committed tick kept, integrity ok"

for p in $PIDS; do
	wait "$p" || fail "a job failed: $(cat "$T"/job*.err)"
done
PIDS=""
wait_for 10 sh -c "[ \$(sqlite3 -readonly $db 'SELECT COUNT(*) FROM allocs WHERE end_ns = 0') = 0 ]" ||
	fail "allocations still open after every job closed"
rows=$(q "SELECT COUNT(*) FROM allocs")
[ "$rows" = $NJOBS ] || fail "$rows rows for $NJOBS jobs (re-adoption failed)"
# A close is made durable at once (not at the next tick), but a kill in
# the few hundred microseconds between the agent's reply and the commit
# leaves the row to be closed as NODE_FAIL by the next start.
nf=$(q "SELECT COUNT(*) FROM allocs WHERE state = 4")
bad=$(q "SELECT COUNT(*) FROM allocs WHERE state NOT IN (1, 4)")
[ "$bad" = 0 ] || fail "$bad rows neither COMPLETED nor NODE_FAIL: $(q 'SELECT job, state FROM allocs')"
[ "$nf" -le 1 ] || fail "$nf rows NODE_FAIL: closes were not made durable"
echo "crash: $rows rows, $nf closed as NODE_FAIL by a kill during the close"
# job side against store side
cat "$T"/job*.out | /usr/bin/python3 -c '
import sys, subprocess
db, crashes = sys.argv[1], int(sys.argv[2])
rows = dict(l.split("|") for l in subprocess.run(
    ["sqlite3", "-readonly", "-cmd", ".timeout 5000", db,
     "SELECT job || \".\" || step, gpu_ns FROM allocs"],
    capture_output=True, text=True, check=True).stdout.split())
own_total = store_total = 0
for line in sys.stdin:
    f = line.split()
    jid = f[0]
    own = int(f[1].split("=")[1])
    store = int(rows[jid])
    own_total += own
    store_total += store
    # the store never holds more than the job did (1 ms slack)
    assert store <= own + 1000000, "%s: store %d > job %d" % (jid, store, own)
lost = own_total - store_total
# resumed counters recover even what was not committed at a kill, and a
# close commits the usage so far before the table drops the allocation
# (integ_close_crash.sh), so a kill during a close loses nothing either
print("crash: jobs measured %.3f s, store holds %.3f s, lost %.3f s (%.3f%%) "
      "in %d kills" % (own_total / 1e9, store_total / 1e9, lost / 1e9,
      100.0 * lost / own_total, crashes))
assert lost <= 0.01 * own_total, "more than 1% of the usage lost"
' "$db" "$CRASHES" || fail "job-side totals"
# per-tick samples add up to each row total
d=$(q "SELECT COUNT(*) FROM allocs a WHERE gpu_ns != (SELECT COALESCE(SUM(gpu_ns), 0) FROM samples s WHERE s.key = a.key)")
[ "$d" = 0 ] || fail "$d rows whose samples do not add up to their total"
echo "crash: ok"
