# tests/acct/lib.sh — helpers for the accounting integration tests
# (sourced).  Every test gets a private directory $T, removed on exit with
# every process it started (agent, jobs, prometheus).
B=${B:-build}
GSHARED=${GSHARED:-$B/node-agent/gshared}
GSACCT=$B/node-agent/gsacct/gsacct
JOB=$B/tests/acct/acct_job
T=$(mktemp -d /tmp/gs-acct.XXXXXX)
PIDS=""
AGENT=""

cleanup() {
	for p in $PIDS $AGENT; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*"; [ -f "$T/agent.log" ] && tail -20 "$T/agent.log"; exit 1; }

# free TCP port on loopback
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
wait_for() {
	_end=$(( $(date +%s) + $1 )); shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
	return 0
}

# write_conf TICK NGPUS METRICS_ADDR (store_group: $STORE_GROUP when set)
write_conf() {
	cat > "$T/gshare.yaml" <<EOC
socket: $T/sock
state_dir: $T/state
gpus: {simulated: $2}
accounting_tick: $1
metrics_listen: "$3"
grace: ${GRACE:-100ms}
log: stderr
EOC
	[ -z "${STORE_GROUP+set}" ] ||
		echo "store_group: \"$STORE_GROUP\"" >> "$T/gshare.yaml"
}

# started() LINE: this start's log (from LINE on) says accounting is up
started() {
	tail -n +"$1" "$T/agent.log" | grep -q "accounting: usage store"
}

start_agent() {
	# a socket file left by a killed agent must not look like a live one
	rm -f "$T/sock"
	touch "$T/agent.log"
	_from=$(( $(wc -l < "$T/agent.log") + 1 ))
	"$GSHARED" -d -f "$T/gshare.yaml" >> "$T/agent.log" 2>&1 &
	AGENT=$!
	wait_for 10 started "$_from" || fail "agent did not start accounting"
	wait_for 10 test -S "$T/sock" || fail "agent did not start"
}

# ticks committed so far (read-only, like gsacct)
ticks() {
	sqlite3 -readonly -cmd ".timeout 5000" "$T/state/usage.db" \
		"SELECT COUNT(*) FROM ticks" 2>/dev/null
}
