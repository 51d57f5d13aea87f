# tests/lib/agent.sh — sourced by the integration tests (POSIX sh): a
# private gshared on a socket in a temporary directory, started and waited
# for with a deadline, and every process and file it and the test's jobs
# leave removed on any exit.
#
#   . tests/lib/agent.sh
#   gs_agent_init NAME [BIN...]  temp dir /tmp/NAME.XXXXXX, traps,
#                            $dir $sock; gshared, gsharectl, BINs built
#   gs_agent_conf <<CONF     write $dir/gshare.yaml: socket, state_dir,
#   ...                      metrics_listen, log, then the lines given
#   CONF
#   gs_agent_start [LABEL [VAR=VALUE...]]
#                            start gshared on it (with VARs in its
#                            environment), wait for ping (15 s)
#   $SIM ... & jpids="$jpids $!"
#   gs_wait_jobs SECONDS     wait for $jpids (deadline), check exit codes
#
# Sets B GSHARED CTL SIM PY dir sock apid jpids fail.  On exit with
# fail != 0 the end of the agent log (GS_LOG_TAIL lines, default 30; +1
# for all of it) and the job outputs ($dir/$GS_OUT_GLOB, default *.out)
# go to stderr.

B=${B:-build}
GSHARED=$B/node-agent/gshared
CTL=$B/node-agent/gsharectl
SIM=$B/runtime/sim/gshare-simjob
PY=/usr/bin/python3
apid=""
jpids=""
fail=0

ok() { echo "ok   $1"; }
bad() { echo "FAIL $1" >&2; fail=1; }

gs_agent_cleanup() {
	for p in $jpids; do kill -9 "$p" 2>/dev/null; done
	[ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
	wait 2>/dev/null
	if [ $fail != 0 ]; then
		echo "--- agent log" >&2
		[ -f "$dir/log" ] && tail -n "${GS_LOG_TAIL:-30}" "$dir/log" >&2
		for f in "$dir"/${GS_OUT_GLOB:-*.out}; do
			[ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
		done
	fi
	rm -rf "$dir"
}

gs_mps_cleanup() {	# trap: the agent first (it restarts a daemon that
	# dies), then the stand-in MPS daemons and servers
	# (tests/agent/fake_mps_control.sh writes their pids), then the rest
	[ -n "$apid" ] && kill -9 "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
	for f in "$dir"/state/mps/*/*/log/pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
	done
	for f in "$dir"/state/mps/*/*/log/servers; do
		[ -f "$f" ] && kill -9 $(cat "$f") 2>/dev/null
	done
	gs_agent_cleanup
}
gs_agent_init() {	# NAME [BIN...]: temp dir, socket, traps, binaries built
	dir=$(mktemp -d "/tmp/$1.XXXXXX") || { bad "mktemp"; exit 1; }
	shift
	sock=$dir/gshared.sock
	trap gs_agent_cleanup EXIT
	trap 'fail=1; exit 1' INT TERM
	for b in $GSHARED $CTL "$@"; do
		[ -x "$b" ] || { bad "$b not built"; exit 1; }
	done
}

gs_agent_conf() {	# config lines on stdin, after the common ones
	{
		echo "socket: $sock"
		echo "state_dir: $dir/state"
		echo 'metrics_listen: ""'
		echo "log: stderr"
		cat
	} > "$dir/gshare.yaml"
}

gs_agent_start() {	# [LABEL [VAR=VALUE...]]: start, wait for an answer
	gs_label=${1:-}
	[ $# = 0 ] || shift
	env "$@" $GSHARED -d -f "$dir/gshare.yaml" 2>"$dir/log" &
	apid=$!
	deadline=$(( $(date +%s) + 15 ))
	until $CTL -s "$sock" -t 500 ping >/dev/null 2>&1; do
		kill -0 $apid 2>/dev/null || { bad "gshared exited"; exit 1; }
		[ "$(date +%s)" -lt $deadline ] ||
			{ bad "gshared did not start"; exit 1; }
		sleep 0.05
	done
	[ -z "$gs_label" ] || ok "gshared up ($gs_label)"
}

gs_wait_exit() {	# SECONDS: until every job in $jpids exited, or fail
	deadline=$(( $(date +%s) + $1 ))
	for p in $jpids; do
		while kill -0 "$p" 2>/dev/null; do
			[ "$(date +%s)" -lt $deadline ] ||
				{ bad "jobs did not finish in time"; exit 1; }
			sleep 0.2
		done
	done
}

gs_wait_jobs() {	# SECONDS: gs_wait_exit, then each job must exit 0
	gs_wait_exit "$1"
	for p in $jpids; do
		wait "$p" || bad "job pid $p exited with status $?"
	done
	jpids=""
}

gs_field() {	# FILE KEY: value of KEY on the job's final (event=done) line
	sed -n 's/.*event=done.* '"$2"'=\([^ ]*\).*/\1/p' "$1"
}

gs_nallocs() {	# number of allocations the agent lists (empty on error)
	$CTL -s "$sock" status --json 2>/dev/null | $PY -c '
import json, sys
print(len(json.load(sys.stdin)["allocations"]))' 2>/dev/null
}
