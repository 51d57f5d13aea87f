#!/bin/sh
# fake_mps_control.sh — a stand-in for nvidia-cuda-mps-control in tests
# without a GPU (tests/agent/test_mps.sh names it as mps_control).
#   -f   run the control daemon in the foreground: make the control FIFO
#        $CUDA_MPS_PIPE_DIRECTORY/control, record its pid and environment
#        in $CUDA_MPS_LOG_DIRECTORY (pid, control.log), start a stand-in
#        "server" child (a sleep; its pid in server.pid, as the real
#        daemon's server is its child; every one also appended to
#        servers), obey commands written into the
#        FIFO; `quit` removes the FIFO, ends the server and exits, and
#        so does a FIFO removed under it
#   -d   the same, daemonized (the parent exits at once)
#   (no argument) client: copy stdin's commands into the FIFO; fails
#        when no daemon is there
# Test knobs (files named by the environment the agent passes on):
#   $FAKE_MPS_FAIL exists: the daemon exits 1 at once (a daemon that
#        cannot start); $FAKE_MPS_DEAF exists: `quit` is ignored.
set -u
pipe=${CUDA_MPS_PIPE_DIRECTORY:?}
logd=${CUDA_MPS_LOG_DIRECTORY:-$pipe}
fifo=$pipe/control

case ${1:-} in
-d)
	setsid "$0" -f </dev/null >/dev/null 2>&1 &
	exit 0;;
-f)
	if [ -n "${FAKE_MPS_FAIL:-}" ] && [ -e "$FAKE_MPS_FAIL" ]; then
		echo "fail $$" >> "$logd/control.log"
		exit 1
	fi
	rm -f "$fifo"
	mkfifo -m 0600 "$fifo" || exit 1
	echo $$ > "$logd/pid"
	sleep 300 </dev/null >/dev/null 2>&1 &
	srv=$!
	echo $srv > "$logd/server.pid"
	echo $srv >> "$logd/servers"	# every one, for the tests' cleanup
	trap 'kill $srv 2>/dev/null' EXIT
	trap 'exit 0' TERM
	echo "start $$ CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}" \
		"pipe=$pipe" >> "$logd/control.log"
	# a writer's close ends the read loop: open the FIFO again, while
	# it is there (a test that removed its directory under a daemon it
	# left running ends it here, instead of spinning on a failed open)
	while [ -p "$fifo" ]; do
		while read -r cmd; do
			echo "cmd $$ $cmd" >> "$logd/control.log"
			if [ "$cmd" = quit ]; then
				if [ -n "${FAKE_MPS_DEAF:-}" ] &&
				    [ -e "$FAKE_MPS_DEAF" ]; then
					continue
				fi
				rm -f "$fifo" "$logd/pid" "$logd/server.pid"
				echo "quit $$" >> "$logd/control.log"
				exit 0
			fi
		done < "$fifo" 2>/dev/null
	done
	exit 0;;
'')
	[ -p "$fifo" ] || {
		echo "Cannot find MPS control daemon process" >&2
		exit 1
	}
	cat > "$fifo";;
*)
	echo "usage: $0 [-d | -f]" >&2
	exit 2;;
esac
