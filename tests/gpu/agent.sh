# tests/gpu/agent.sh — sourced by tests/gpu/run.sh and tests/gpu/bench:
# start a private gshared (own socket, state and config under $TMP) for
# the agent-attached runs, and stop it.  Needs B and TMP set; sets
# AGENT_PID, SOCK, CTL.  GS_AGENT_YAML: more configuration lines (e.g.
# "time_mps: true").  alloc_env ID prints what a plugin puts into that
# allocation's job environment beside the socket (its MPS pipe directory,
# once the daemon listens).  Libraries found next to the binaries (lib/)
# come first, for machines without libyaml/libsqlite3.
AGENTBIN=$B/node-agent/gshared
CTL=$B/node-agent/gsharectl
SOCK=$TMP/gshared.sock
AGENT_PID=""
. "$(dirname "$0")/mps_env.sh"

agent_start() {	# [slice [extra yaml line]]
	[ -x "$AGENTBIN" ] && [ -x "$CTL" ] || return 1
	cat >"$TMP/gshare.yaml" <<YAML
socket: $SOCK
state_dir: $TMP/state
gpus: auto
policy: wfq
slice: ${1:-4ms}
${2:-}
${GS_AGENT_YAML:-}
log: stderr
metrics_listen: ""
YAML
	mkdir -p "$TMP/state"
	LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	    "$AGENTBIN" -d -f "$TMP/gshare.yaml" >"$TMP/gshared.log" 2>&1 &
	AGENT_PID=$!
	i=0
	while ! ctl ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$AGENT_PID" 2>/dev/null; then
			echo "gshared did not start:" >&2
			tail -n 20 "$TMP/gshared.log" >&2
			AGENT_PID=""
			return 1
		fi
		sleep 0.1
	done
}

ctl() {
	LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	    "$CTL" -s "$SOCK" "$@"
}

agent_stop() {
	if [ -n "$AGENT_PID" ]; then
		kill "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
		AGENT_PID=""
	fi
}
