#!/bin/sh
# tests/gpu/run.sh — libgshare correctness on a real GPU, one command.
#
# Every example runs with fresh random inputs and poisoned outputs against
# a CPU reference, and with GSHARE_CHECK_ONCE=1 the runtime itself checks
# that every logical block completed exactly once:
#   1. standalone (kernels start at once, never suspended);
#      gs-tasks checks narrow tasks (a task pool and its MasterKernel)
#      the same way: every task ran exactly once, with its own threads,
#      shared memory and sub-block barrier, in every mode below;
#   2. forced suspensions every 0.1–5 ms (GSHARE_FORCE_SUSPEND_US): the
#      kernels leave the GPU and resume from their counters, yield points
#      save and restore loop state;
#   3. the same every 0.1–1 ms (with the watcher warp raising the flag:
#      GSHARE_WATCHER=always) and every 0.1–0.3 ms; in the dense runs at
#      least one suspension must happen (except for the I/O server, whose
#      kernels are short and mostly wait for requests); every 0.1–1 ms
#      with each suspended round's relaunch queued behind it at the
#      suspend (GSHARE_CHAIN=1), and with it launched after the report
#      (GSHARE_CHAIN=0; by default it is queued while the round runs);
#   4. attached to a real agent (a private gshared started here): pairs of
#      examples share the GPU with an always-busy eater under the agent's
#      1 ms slices, each checked the same way (skipped with a note when
#      gshared is not built); relaunches are queued behind their gate
#      while the rounds run, and wait there until the agent resumes the
#      job; one pair with them queued at the suspend, one with them
#      launched after the report;
#   5. the agent is killed (-9) and restarted while an attached eater runs:
#      the job must finish and check out;
#   4b. each example attached alone (it launches direct chunks, long
#      kernels two at a time on two streams, and keeps the token between
#      synchronizes), and an always-busy eater arrives 0.3 s into its
#      run: the kernel in flight goes on in the persistent loop from where
#      its direct chunks stopped, and everything checks out;
#   6. a job attached to an allocation whose GPU is not the device it
#      uses (an agent with a simulated GPU: its UUID is SIM-…) is refused
#      at gs_init with a clear error (the attached runs above prove the
#      matching case).
# Usage: tests/gpu/run.sh [BUILD_DIR]   (default build; needs a GPU)
# GS_AGENT_YAML adds configuration lines to the agent of 4. and 5. (with
# "time_mps: true" the attached jobs are clients of the agent's MPS
# daemon, as a plugin would start them).
# Exit status 0 only if every run passed.  Runs in about 2–4 minutes.
set -u
B=${1:-build}
TMP=$(mktemp -d /tmp/gs-gpu.XXXXXX)
. "$(dirname "$0")/agent.sh"
cleanup() {
	agent_stop
	# a daemon of the agent's still serving an allocation (time_mps)
	mp=$TMP/state/mps/0/$(id -u)/pipe
	[ -S "$mp/control" ] && echo quit |
	    CUDA_MPS_PIPE_DIRECTORY=$mp timeout 10 nvidia-cuda-mps-control \
	    >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
EX=$B/runtime/examples
LOG=${GS_TEST_LOG:-$B/test-logs/gpu}
mkdir -p "$LOG"
export GSHARE_CHECK_ONCE=1
pass=0; fail=0; failed=""

run() {	# name label env-assignment args...
	name=$1; label=$2; envs=$3; shift 3
	log="$LOG/$name-$label.log"
	start=$(date +%s%N)
	# shellcheck disable=SC2086
	if env $envs timeout -k 5 "${GS_GPU_TIMEOUT:-240}" "$EX/gs-$name" "$@" >"$log" 2>&1; then
		rc=0
	else
		rc=$?
	fi
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	line=$(grep '^check ' "$log" | tail -n 1)
	susp=$(echo "$line" | sed -n 's/.*suspensions=\([0-9]*\).*/\1/p')
	if [ $rc = 0 ] && [ -n "$line" ] && [ "$label" = dense ] &&
	   [ "${susp:-0}" -lt 1 ] && [ "$name" != server ]; then
		echo "  (no suspension happened: the run proves nothing)" >>"$log"
		rc=99
	fi
	if [ $rc = 0 ]; then
		pass=$((pass + 1))
		printf 'gpu    PASS %-8s %-10s %6d ms  %s\n' "$name" "$label" \
		    "$ms" "$(echo "$line" | cut -d' ' -f4-9)"
	else
		fail=$((fail + 1)); failed="$failed $name/$label"
		printf 'gpu    FAIL %-8s %-10s (rc=%s)\n' "$name" "$label" "$rc"
		tail -n 20 "$log" | sed 's/^/    | /'
	fi
}

for t in vadd stencil sgemm reduce eater server tasks softmax hist triad; do
	if [ ! -x "$EX/gs-$t" ]; then
		echo "gpu: $EX/gs-$t missing (build with nvcc first)" >&2
		exit 2
	fi
done
nvidia-smi -L 2>/dev/null | head -n 1

# the C API with a GPU present (gs_init succeeds, bad launches refused)
if [ -x "$B/runtime/tests/test_api" ]; then
	if LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	    "$B/runtime/tests/test_api" >"$LOG/api.log" 2>&1; then
		pass=$((pass + 1)); echo "gpu    PASS api"
	else
		fail=$((fail + 1)); failed="$failed api"
		echo "gpu    FAIL api"; tail -n 20 "$LOG/api.log" | sed 's/^/    | /'
	fi
fi

for t in vadd stencil sgemm reduce eater server tasks softmax hist triad; do
	run "$t" standalone "" --check 2
	run "$t" forced "GSHARE_FORCE_SUSPEND_US=100:5000" --check 3
	# the watcher warp raises these rounds' flag too (by default the
	# host loop and the sentinel blocks only)
	run "$t" mid "GSHARE_FORCE_SUSPEND_US=100:1000 GSHARE_WATCHER=always" \
	    --check 2
	run "$t" dense "GSHARE_FORCE_SUSPEND_US=100:300" --check 2
	# each suspended round's relaunch queued behind it (GSHARE_CHAIN)
	run "$t" chained "GSHARE_FORCE_SUSPEND_US=100:1000 GSHARE_CHAIN=1" \
	    --check 2
	# relaunched only after the report (GSHARE_CHAIN=0; the default
	# queues the relaunch while the round runs)
	run "$t" unchained "GSHARE_FORCE_SUSPEND_US=100:1000 GSHARE_CHAIN=0" \
	    --check 2
done
# 4. attached: two checked jobs at a time under the agent, against an
# eater that always wants the GPU, so that the agent suspends them
attached() {	# label a b [VAR=VALUE for a and b]
	label=$1; a=$2; b=$3; xe=${4:-}
	ic=$(ctl create --shares 30 --weight 1) &&
	ia=$(ctl create --shares 30 --weight 1) &&
	ib=$(ctl create --shares 30 --weight 2) || {
		fail=$((fail + 1)); failed="$failed $label/create"; return; }
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ic env $(alloc_env "$ic") timeout -k 5 120 \
	    "$EX/gs-eater" --run 100 >"$LOG/competitor-$a.log" 2>&1 &
	pc=$!
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ia env $(alloc_env "$ia") $xe timeout -k 5 "${GS_GPU_TIMEOUT:-240}" \
	    "$EX/gs-$a" --check 2 >"$LOG/$a-$label.log" 2>&1 &
	pa=$!
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ib env $(alloc_env "$ib") $xe timeout -k 5 "${GS_GPU_TIMEOUT:-240}" \
	    "$EX/gs-$b" --check 2 >"$LOG/$b-$label.log" 2>&1 &
	pb=$!
	for x in "$a:$pa" "$b:$pb"; do
		n=${x%%:*}; p=${x##*:}
		if wait "$p" && grep -q "^check $n ok" "$LOG/$n-$label.log"; then
			pass=$((pass + 1))
			printf 'gpu    PASS %-8s %-10s %s\n' "$n" "$label" \
			    "$(grep '^check ' "$LOG/$n-$label.log" | cut -d' ' -f4-9)"
		else
			fail=$((fail + 1)); failed="$failed $n/$label"
			printf 'gpu    FAIL %-8s %-10s\n' "$n" "$label"
			tail -n 20 "$LOG/$n-$label.log" | sed 's/^/    | /'
		fi
	done
	kill "$pc" 2>/dev/null; wait "$pc" 2>/dev/null
	for i in $ia $ib $ic; do ctl close "$i" >/dev/null 2>&1; done
}
# 4b. attached alone, then a contender arrives (the 0.3 s is the
# scenario's arrival time, not a wait for a condition)
arrive() {	# example
	a=$1
	ia=$(ctl create --shares 50 --weight 1) &&
	ic=$(ctl create --shares 50 --weight 1) || {
		fail=$((fail + 1)); failed="$failed $a/arrive-create"; return; }
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ia env $(alloc_env "$ia") timeout -k 5 "${GS_GPU_TIMEOUT:-240}" \
	    "$EX/gs-$a" --check 2 >"$LOG/$a-arrive.log" 2>&1 &
	pa=$!
	sleep 0.3
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ic env $(alloc_env "$ic") timeout -k 5 120 \
	    "$EX/gs-eater" --run 100 >"$LOG/competitor-arrive-$a.log" 2>&1 &
	pc=$!
	if wait "$pa" && grep -q "^check $a ok" "$LOG/$a-arrive.log"; then
		pass=$((pass + 1))
		printf 'gpu    PASS %-8s %-10s %s\n' "$a" arrive \
		    "$(grep '^check ' "$LOG/$a-arrive.log" | cut -d' ' -f4-9)"
	else
		fail=$((fail + 1)); failed="$failed $a/arrive"
		printf 'gpu    FAIL %-8s %-10s\n' "$a" arrive
		tail -n 20 "$LOG/$a-arrive.log" | sed 's/^/    | /'
	fi
	kill "$pc" 2>/dev/null; wait "$pc" 2>/dev/null
	for i in $ia $ic; do ctl close "$i" >/dev/null 2>&1; done
}
# 5. the agent dies (kill -9) and comes back while an attached job runs:
# the job goes on standalone, re-attaches, and still checks out
restart() {
	ia=$(ctl create --shares 30 --weight 1) &&
	ic=$(ctl create --shares 30 --weight 1) || {
		fail=$((fail + 1)); failed="$failed restart/create"; return; }
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ic env $(alloc_env "$ic") timeout -k 5 120 \
	    "$EX/gs-eater" --run 100 >"$LOG/competitor-restart.log" 2>&1 &
	pc=$!
	GSHARE_SOCKET=$SOCK GSHARE_ALLOC=$ia env $(alloc_env "$ia") timeout -k 5 "${GS_GPU_TIMEOUT:-240}" \
	    "$EX/gs-eater" --check 4 >"$LOG/eater-restart.log" 2>&1 &
	pa=$!
	# wait (deadline 30 s) until the agent has suspended the job once
	i=0
	# (the SUSP column found by its header: columns come and go)
	while [ "$(ctl status 2>/dev/null | awk -v id="$ia" '
	    $1 == "ALLOC" { for (k = 1; k <= NF; k++) if ($k == "SUSP") c = k }
	    $1 == id && c { print $c }')" = 0 ] && [ $i -lt 300 ]; do
		i=$((i + 1)); sleep 0.1
	done
	kill -9 "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=""
	cp "$TMP/gshared.log" "$LOG/gshared-before-restart.log"
	if ! agent_start 1ms; then
		fail=$((fail + 1)); failed="$failed restart/agent"
		kill "$pa" "$pc" 2>/dev/null; return
	fi
	if wait "$pa" && grep -q "^check eater ok" "$LOG/eater-restart.log"; then
		pass=$((pass + 1))
		printf 'gpu    PASS %-8s %-10s %s\n' eater restart \
		    "$(grep '^check ' "$LOG/eater-restart.log" | cut -d' ' -f4-9)"
	else
		fail=$((fail + 1)); failed="$failed eater/restart"
		printf 'gpu    FAIL %-8s %-10s\n' eater restart
		tail -n 20 "$LOG/eater-restart.log" | sed 's/^/    | /'
	fi
	kill "$pc" 2>/dev/null; wait "$pc" 2>/dev/null
	ctl close "$ia" >/dev/null 2>&1; ctl close "$ic" >/dev/null 2>&1
}

# 6. the device the job uses is not its allocation's GPU: refused
wrong_gpu() {
	cat >"$TMP/sim.yaml" <<YAML
socket: $TMP/sim.sock
state_dir: $TMP/simstate
gpus:
  simulated: 1
log: stderr
metrics_listen: ""
YAML
	mkdir -p "$TMP/simstate"
	LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	    "$AGENTBIN" -d -f "$TMP/sim.yaml" >"$LOG/gshared-sim.log" 2>&1 &
	sp=$!
	i=0
	while ! "$CTL" -s "$TMP/sim.sock" ping >/dev/null 2>&1 &&
	    [ $i -lt 100 ]; do
		i=$((i + 1)); sleep 0.1
	done
	id=$("$CTL" -s "$TMP/sim.sock" create --shares 10)
	if GSHARE_SOCKET=$TMP/sim.sock GSHARE_ALLOC=$id timeout -k 5 60 \
	    "$EX/gs-vadd" --check 1 >"$LOG/vadd-wrong-gpu.log" 2>&1; then
		rc=0
	else
		rc=$?
	fi
	if [ $rc != 0 ] && grep -q "allocation $id is on GPU SIM-.*CUDA device 0 is GPU-.*a job must run on its allocation's GPU" \
	    "$LOG/vadd-wrong-gpu.log"; then
		pass=$((pass + 1))
		echo "gpu    PASS vadd     wrong-gpu  refused: $(grep -o "allocation $id is on GPU.*" "$LOG/vadd-wrong-gpu.log" | head -n 1 | cut -c1-110)"
	else
		fail=$((fail + 1)); failed="$failed vadd/wrong-gpu"
		printf 'gpu    FAIL %-8s %-10s (rc=%s)\n' vadd wrong-gpu "$rc"
		tail -n 20 "$LOG/vadd-wrong-gpu.log" | sed 's/^/    | /'
	fi
	kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
}

if [ -x "$AGENTBIN" ]; then
	wrong_gpu
fi
if agent_start 1ms; then
	attached agent eater sgemm
	attached agent vadd reduce
	attached agent stencil server
	attached agent tasks sgemm
	attached agent softmax hist
	# relaunches queued behind their gate (the eater's yields)
	attached chained eater triad GSHARE_CHAIN=1
	# relaunched after the report (the other pairs: queued while the
	# rounds run, by default, and at a kernel's end a launch that does
	# nothing runs after it)
	attached unchained sgemm softmax GSHARE_CHAIN=0
	for t in vadd stencil sgemm reduce eater softmax hist triad; do
		arrive "$t"
	done
	restart
	cp "$TMP/gshared.log" "$LOG/gshared.log"
	agent_stop
else
	echo "gpu: gshared not available: attached runs skipped"
fi
echo "gpu: $pass passed, $fail failed"
[ $fail = 0 ] || { echo "gpu: failed:$failed"; exit 1; }
