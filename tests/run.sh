#!/bin/sh
# Run a list of test programs, each in its own process with a timeout,
# and print one line per test plus a summary.  Exit 1 if any failed.
# Usage: tests/run.sh LABEL PROGRAM...
# TEST_TIMEOUT (seconds, default 300) bounds each program.
# Logs go to build/test-logs/; with LABEL "bench" (or TEST_VERBOSE=1) each
# program's output is printed too, since there the figures are the result.
set -u
label=$1; shift
pass=0; fail=0; failed=""
logdir=${TEST_LOGDIR:-build/test-logs}
mkdir -p "$logdir"
for t in "$@"; do
	name=$(echo "$t" | tr '/' '_')
	start=$(date +%s%N)
	if timeout -k 10 "${TEST_TIMEOUT:-300}" "$t" >"$logdir/$name.log" 2>&1; then
		rc=0
	else
		rc=$?
	fi
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	if [ $rc = 0 ]; then
		pass=$((pass + 1))
		printf '%-6s PASS %-50s %6d ms\n' "$label" "$t" "$ms"
		if [ "$label" = bench ] || [ "${TEST_VERBOSE:-0}" = 1 ]; then
			sed 's/^/    | /' "$logdir/$name.log"
		fi
	else
		fail=$((fail + 1)); failed="$failed $t"
		printf '%-6s FAIL %-50s (rc=%s)\n' "$label" "$t" "$rc"
		# the first failures say most; the tail says how it ended
		if grep -qE 'FAIL|FATAL' "$logdir/$name.log"; then
			echo "    | first failures:"
			grep -m 30 -E 'FAIL|FATAL' "$logdir/$name.log" |
				sed 's/^/    | /'
			echo "    | last lines:"
		fi
		sed 's/^/    | /' "$logdir/$name.log" | tail -n 60
	fi
done
echo "$label: $pass passed, $fail failed"
[ $fail = 0 ] || { echo "$label: failed:$failed"; exit 1; }
