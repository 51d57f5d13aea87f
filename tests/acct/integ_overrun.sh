#!/bin/sh
# Overrun charging against the real agent: a well-behaved job runs while a
# misbehaving one takes the token five times, keeps it 300 ms regardless
# of the agent's suspend, and reports no GPU time at all.  The agent
# escalates it (grace 50 ms, escalation hold) and accounting must charge
# it the whole time it held the GPU: gsacct's GPUSec within 10% of the
# hold time the job measured itself, although it reported zero.  The
# well-behaved job is still charged exactly what it measured.  Then
# SIGHUP: a new tick and retention apply, a new store path is refused.
set -u
. tests/acct/lib.sh

GRACE=50ms write_conf 200ms 1 ""
start_agent
db=$T/state/usage.db
"$JOB" --socket "$T/sock" --shares 50 --job 601 --step 0 --work 4 \
	--task-us 1000 --close > "$T/good.out" 2>&1 &
PIDS="$!"
good=$!
# let the good job be busy before the hog arrives, so that every hold of
# the hog is contested (a lone holder is never asked to suspend)
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' $db \"SELECT COALESCE(MAX(gpu_ns), 0) FROM allocs WHERE job = '601'\") -gt 0 ]" ||
	fail "the good job never ran"
"$JOB" --socket "$T/sock" --shares 50 --job 602 --step 0 --hog-ms 300 \
	--hogs 5 --close > "$T/hog.out" 2>&1 &
hog=$!
PIDS="$PIDS $hog"
wait "$hog" || fail "hog job: $(cat "$T/hog.out")"
wait "$good" || fail "good job: $(cat "$T/good.out")"
PIDS=""
n=$(grep -c "602.*ignored a suspend\|ignored a suspend" "$T/agent.log")
[ "$n" -ge 1 ] || fail "the agent never escalated the hog"
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' $db \"SELECT COUNT(*) FROM allocs WHERE end_ns > 0\") = 2 ]" ||
	fail "closes not stored"
"$GSACCT" --store "$db" -j 601,602 -X -P -n -o JobID,GPUSec,HeldSec > "$T/acct.txt"
/usr/bin/python3 - "$T/acct.txt" "$T/hog.out" "$T/good.out" "$n" <<'PY' || fail "charges"
import sys
rows = dict((l.split("|")[0], l.strip().split("|")[1:]) for l in open(sys.argv[1]))
hold = int(open(sys.argv[2]).read().split("hold_ns=")[1]) / 1e9
good = int(open(sys.argv[3]).read().split("gpu_ns=")[1].split()[0]) / 1e9
hog_gpu = float(rows["602"][0])
good_gpu = float(rows["601"][0])
print("overrun: hog held %.3f s and reported 0; charged %.2f GPU-s (%.1f%%), "
      "%s escalations; good job measured %.3f s, charged %.2f s"
      % (hold, hog_gpu, 100 * hog_gpu / hold, sys.argv[4], good, good_gpu))
assert 0.90 * hold <= hog_gpu <= 1.10 * hold, "hog not charged its holds"
assert abs(good_gpu - good) <= 0.01 * good, "good job charged wrongly"
PY

# SIGHUP: a new accounting tick and retention apply without a restart; a
# new store path is refused with a warning
sed -i 's/^accounting_tick: .*/accounting_tick: 50ms/' "$T/gshare.yaml"
echo "usage_retention_days: 7" >> "$T/gshare.yaml"
kill -HUP "$AGENT"
wait_for 10 grep -q "accounting: tick 0.200 s -> 0.050 s" "$T/agent.log" ||
	fail "tick not reloaded"
grep -q "accounting: retention 90 -> 7 days" "$T/agent.log" ||
	fail "retention not reloaded"
before=$(ticks)
sleep 1
after=$(ticks)
[ $((after - before)) -ge 10 ] || fail "ticks after reload: $((after - before)) in 1 s"
echo "usage_db: $T/other.db" >> "$T/gshare.yaml"
kill -HUP "$AGENT"
wait_for 10 grep -q "reload: usage store or metrics address change needs a restart" "$T/agent.log" ||
	fail "store path change not refused"
[ ! -e "$T/other.db" ] || fail "a reload opened another store"
grep -q "needs a restart; keeping $T/state/usage.db and" "$T/agent.log" ||
	fail "the warning does not name the store in use: $(grep 'needs a restart' "$T/agent.log")"
# reload_settled WHAT: SIGHUP, wait for the reload and three more ticks
# of the store in use; then exactly one "needs a restart" warning so far
reload_settled() {
	nrel=$(grep -c "configuration reloaded" "$T/agent.log")
	kill -HUP "$AGENT"
	wait_for 10 sh -c "[ \$(grep -c 'configuration reloaded' '$T/agent.log') -gt $nrel ]" ||
		fail "$1: reload not logged"
	before=$(ticks)
	wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' '$T/state/usage.db' 'SELECT COUNT(*) FROM ticks') -ge $((before + 3)) ]" ||
		fail "$1: no ticks after the reload"
	[ "$(grep -c 'needs a restart' "$T/agent.log")" = 1 ] ||
		fail "$1: warned again: $(grep 'needs a restart' "$T/agent.log" | tail -1)"
}
# the same config again: no second warning
reload_settled "unchanged config"
# back to the path in use: nothing to warn about
sed -i '/^usage_db: /d' "$T/gshare.yaml"
reload_settled "config back to the store in use"
echo "overrun: ok"
