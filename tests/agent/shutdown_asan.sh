#!/bin/sh
# gshared built with ASan+UBSan (build/san, made by `make test`) through
# the paths that free things while jobs are attached: three simulated jobs
# attached, a SIGHUP reload, a job killed -9 (its connection dropped), a
# SIGTERM with two jobs still attached, a restart that restores their
# allocations and takes their re-attach, and a second SIGTERM.  Each stop
# must exit 0 with no sanitizer report (leaks included) in the log.  The
# jobs run on through the agent's absence, as they would in production.
# Cleans up every process and file on any exit.
set -u
GS_LOG_TAIL=60
. "$(dirname "$0")/../lib/agent.sh"
GSHARED=build/san/node-agent/gshared
gs_agent_init gsasan "$SIM"
SAN="detect_leaks=1:abort_on_error=0"

gs_agent_conf <<CONF
gpus:
  simulated: 1
slice: 2ms
accounting_tick: 100ms
CONF

# LINES PATTERN SECONDS: wait until the log has LINES lines matching
log_count() { grep -c -- "$1" "$dir/log" 2>/dev/null || true; }
wait_log() {
	deadline=$(( $(date +%s) + $3 ))
	until [ "$(log_count "$2")" -ge "$1" ]; do
		[ "$(date +%s)" -lt $deadline ] || return 1
		sleep 0.05
	done
}

# stop the agent with SIGTERM; it must exit 0 with a clean log
stop_clean() {	# LABEL
	kill -TERM "$apid"
	deadline=$(( $(date +%s) + 30 ))
	while kill -0 "$apid" 2>/dev/null; do
		[ "$(date +%s)" -lt $deadline ] ||
			{ bad "$1: gshared did not stop"; exit 1; }
		sleep 0.05
	done
	wait "$apid"
	rc=$?
	apid=""
	[ $rc = 0 ] && ok "$1: exit 0" || bad "$1: exit status $rc"
	if grep -qE 'Sanitizer|runtime error' "$dir/log"; then
		bad "$1: sanitizer report"
		grep -m 20 -E 'Sanitizer|runtime error|^    #' "$dir/log" >&2
	else
		ok "$1: no sanitizer report"
	fi
	cat "$dir/log" >> "$dir/log.all"
}

gs_agent_start "sanitized" ASAN_OPTIONS=$SAN UBSAN_OPTIONS=print_stacktrace=1
for n in 1 2 3; do
	$SIM -s "$sock" --create "10:$n" -n "j$n" -d 60 -t 500 \
		>"$dir/j$n.out" 2>&1 &
	jpids="$jpids $!"
	eval "j$n=\$!"
done
wait_log 3 "attached by pid" 20 && ok "three jobs attached" ||
	{ bad "jobs did not attach"; exit 1; }
kill -HUP "$apid"
wait_log 1 "configuration reloaded" 10 && ok "reloaded with jobs attached" ||
	bad "no reload"
kill -9 "$j1"
wait_log 1 "detached" 10 && ok "killed job's connection dropped" ||
	bad "no detach after kill -9"
stop_clean "SIGTERM with two jobs attached"

# restart: the allocations come back from the state file, the jobs
# re-attach, then stop again
: > "$dir/log"
gs_agent_start "" ASAN_OPTIONS=$SAN UBSAN_OPTIONS=print_stacktrace=1
wait_log 1 "restored" 10 && ok "allocations restored" ||
	bad "nothing restored"
wait_log 2 "attached by pid" 20 && ok "two jobs re-attached" ||
	bad "jobs did not re-attach"
stop_clean "SIGTERM after restore"

[ $fail = 0 ] && echo "shutdown_asan: all passed"
exit $fail
