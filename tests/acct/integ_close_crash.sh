#!/bin/sh
# A crash in the middle of a CLOSE loses none of the job's usage.  The
# agent kills itself (SIGKILL, test hook GSHARED_TEST_CRASH) at each
# named point of the close of a job's allocation:
#   close-usage  the allocation's usage so far is committed, the table
#                without it not yet written: the next start restores the
#                allocation, the job re-attaches (counters `resumed`) and
#                closes it again;
#   close-table  the table without the allocation is on disk, its final
#                usage row not yet committed: the next start closes the
#                row COMPLETED with what is committed, and the job finds
#                its allocation gone.
# The accounting tick is long (60 s), so that no periodic tick commits the
# job's usage before it closes: only the close itself can.  Either way
# the store holds one COMPLETED row with what the job measured (1 ms
# slack), and its samples add up to it.  (Before the close committed the
# usage so far ahead of the table write, a kill at close-table lost all
# of it: the job, its allocation gone, cannot report it again.)
set -u
. tests/acct/lib.sh
db=$T/state/usage.db
q() { sqlite3 -readonly -cmd ".timeout 5000" "$db" "$1"; }
# the agent exited (or is a zombie not yet waited for)
dead() {
	s=$(ps -o stat= -p "$AGENT" 2>/dev/null)
	[ -z "$s" ] || [ "${s#Z}" != "$s" ]
}

n=0
for point in close-usage close-table; do
	n=$((n + 1))
	rm -rf "$T/state"
	write_conf 60s 1 ""
	export GSHARED_TEST_CRASH=$point
	start_agent
	unset GSHARED_TEST_CRASH
	"$JOB" --socket "$T/sock" --shares 10 --job $((900 + n)) --step 0 \
		--work 0.3 --task-us 1000 --reconnect --close \
		> "$T/job$n.out" 2> "$T/job$n.err" &
	job=$!
	PIDS=$job
	wait_for 20 dead || fail "$point: the agent did not stop there"
	wait "$AGENT" 2>/dev/null
	rc=$?
	# SIGKILL by the hook, not an exit of its own (a sanitizer report)
	[ "$rc" = 137 ] || fail "$point: the agent exited with $rc"
	AGENT=""
	start_agent
	wait "$job" || fail "$point: the job failed: $(cat "$T/job$n.err")"
	PIDS=""
	wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' $db 'SELECT COUNT(*) FROM allocs WHERE end_ns = 0') = 0 ]" ||
		fail "$point: the row is still open"
	rows=$(q "SELECT COUNT(*) || ' ' || COALESCE(MIN(state), '-') || ' ' || COALESCE(MAX(state), '-') FROM allocs")
	[ "$rows" = "1 1 1" ] ||
		fail "$point: want one COMPLETED row, have (rows, states) $rows"
	own=$(sed -n 's/.* gpu_ns=\([0-9]*\) .*/\1/p' "$T/job$n.out")
	[ -n "$own" ] || fail "$point: no measurement from the job"
	store=$(q "SELECT gpu_ns FROM allocs")
	sum=$(q "SELECT COALESCE(SUM(gpu_ns), 0) FROM samples")
	echo "$point: job measured $own ns, store holds $store ns (samples $sum)"
	[ "$store" -ge $((own - 1000000)) ] ||
		fail "$point: $((own - store)) ns of the job's usage lost"
	[ "$store" -le $((own + 1000000)) ] ||
		fail "$point: $((store - own)) ns charged beyond the job's usage"
	[ "$sum" = "$store" ] ||
		fail "$point: samples add up to $sum, the row says $store"
	kill "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
done
echo "close crash: ok"
