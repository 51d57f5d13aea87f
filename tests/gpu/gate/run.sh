#!/bin/sh
# tests/gpu/gate/run.sh — the launch gate on a real GPU, one command:
#   tests/gpu/gate/run.sh [BIN_DIR [OUT_DIR]]
# BIN_DIR holds gshared, gsharectl and libgshare-gate.so (and lib/ with
# libraries the machine lacks); default build/ paths.  Starts a private
# agent (gpus: auto), then: driver symbol check, PyTorch correctness with
# and without the gate (hashes must match), JAX and CuPy, kill -9 of a
# gated job mid-slice, the weighted split of three bf16 matmul loops
# (1:2:5) against default time-slicing, uncontended overhead of four
# PyTorch workloads, a duty-cycled job beside a busy one, and accounting
# against CUDA-event ground truth; GATE_PHASES=timeline traces every
# hold of a 20/30/50 matmul trio and samples the GPU's clocks (where the
# trio's lost throughput goes) and checks each kind's accounting over its
# timed loop (GATE_PHASES=trio: the trio's part only).  Results:
# OUT_DIR/*.json(l), the gate's exit lines (eviction latencies) in
# OUT_DIR/gate.txt, the summary table
# in OUT_DIR/summary.txt (summary.py).  Exit 1 if a correctness check
# failed.  GATE_PHASES="..." picks phases (default: all); GATE_HANDOFF
# sets the agent's handoff_spin (default: the agent's, 1ms); GATE_YAML
# adds configuration lines (e.g. "time_mps: true": gated jobs then get
# their allocation's MPS pipe directory, as from a plugin);
# GATE_PHASES=final is the short re-measurement (about 5 min on an H100):
# correctness, JAX/CuPy, the 20/30/50 guarantee, overhead of four kinds
# (one plain/gated pair each) with accounting, eviction latency of matmul
# and transformer, and a job refused on a GPU that is not its
# allocation's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-}
OUTD=${2:-${OUT:-/tmp/gate-gpu-out}}
mkdir -p "$OUTD"
if [ -z "$BIN" ]; then
	GSHARED=build/node-agent/gshared CTLB=build/node-agent/gsharectl
	GATE=$PWD/build/runtime/gate/libgshare-gate.so
else
	BIN=$(cd "$BIN" && pwd)
	GSHARED=$BIN/gshared CTLB=$BIN/gsharectl GATE=$BIN/libgshare-gate.so
	[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=python3
TO="timeout -k 5"
TMP=$(mktemp -d /tmp/gategpu.XXXXXX)
SOCK=$TMP/gshared.sock
APID=""
fail=0
cleanup() {
	[ -n "$APID" ] && kill "$APID" 2>/dev/null
	wait 2>/dev/null
	cp "$TMP/gshared.log" "$OUTD/gshared.log" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
log() { echo "== $*"; }
ctl() { "$CTLB" -s "$SOCK" "$@"; }
. "$here/../mps_env.sh"
gated() {	# ALLOC CMD...: run CMD under the gate on allocation ALLOC
	a=$1; shift
	env $(alloc_env "$a") GSHARE_SOCKET="$SOCK" GSHARE_ALLOC="$a" LD_PRELOAD="$GATE" \
	    GSHARE_GATE_DEBUG=1 ${TRACE:+GSHARE_GATE_TRACE="$TRACE"} "$@"
}
# the GPU's clocks, power and throttle reasons every 100 ms while a set
# runs (SMI=1): OUT_DIR/smi/LABEL.csv
smi_start() {
	SMIPID=""
	[ "${SMI:-0}" = 1 ] || return 0
	mkdir -p "$OUTD/smi"
	nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_throttle_reasons.active \
	    --format=csv,noheader -lms 100 >"$OUTD/smi/$1.csv" 2>&1 &
	SMIPID=$!
}
smi_stop() {
	[ -n "${SMIPID:-}" ] && kill "$SMIPID" 2>/dev/null && wait "$SMIPID" 2>/dev/null
	SMIPID=""
}
now() { $PY -c 'import time; print(time.monotonic())'; }

nvidia-smi -L
log "driver exports every hooked symbol"
lc=$(ldconfig -p | sed -n 's/.*libcuda.so.1 .*=> //p' | head -1)
missing=0
for s in $(sed -n 's/^[[:space:]]*X([A-Z]*, \(cu[A-Za-z0-9_]*\),.*/\1/p' \
	   "$here/../../../runtime/gate/gate_hooks.h" 2>/dev/null ||
	   cat "$here/hooks.txt"); do
	nm -D --defined-only "$lc" 2>/dev/null | grep -qw "$s" ||
	    { echo "  missing: $s"; missing=$((missing + 1)); }
done
echo "  $lc: $missing missing"

log "agent"
cat >"$TMP/gshare.yaml" <<YAML
socket: $SOCK
state_dir: $TMP/state
gpus: auto
policy: wfq
slice: ${GATE_SLICE:-4ms}
${GATE_HANDOFF:+handoff_spin: $GATE_HANDOFF}
${GATE_YAML:-}
log: stderr
metrics_listen: ""
YAML
mkdir -p "$TMP/state"
"$GSHARED" -d -f "$TMP/gshare.yaml" >"$TMP/gshared.log" 2>&1 &
APID=$!
i=0
until ctl ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] && kill -0 $APID 2>/dev/null ||
	    { echo "gshared did not start"; cat "$TMP/gshared.log"; exit 1; }
	sleep 0.1
done

phase() {
	if [ -z "${GATE_PHASES:-}" ]; then
		[ "$1" != final ]
	else
		echo " $GATE_PHASES " | grep -q " $1 " ||
		    { echo " $GATE_PHASES " | grep -q " final " &&
		      echo " correct other shares overhead latency wrongpu " |
		      grep -q " $1 "; }
	fi
}
# final: one overhead pair per kind, no repeat of plain JAX/CuPy runs
QUICK=0
phase final && QUICK=1

if phase correct; then
log "PyTorch correctness (plain, then gated)"
$PY "$here/correct.py" >"$OUTD/correct_plain.json" 2>"$TMP/c0.err" ||
    { cat "$TMP/c0.err"; fail=1; }
a=$(ctl create --shares 50)
gated "$a" $TO 180 $PY "$here/correct.py" >"$OUTD/correct_gate.json" \
    2>"$OUTD/correct_gate.err" || { cat "$OUTD/correct_gate.err"; fail=1; }
ctl close "$a"
cat "$OUTD/correct_plain.json" "$OUTD/correct_gate.json"
grep gshare-gate "$OUTD/correct_gate.err" | tail -3
if cmp -s "$OUTD/correct_plain.json" "$OUTD/correct_gate.json" &&
   grep -q 'submissions [1-9]' "$OUTD/correct_gate.err"; then
	echo "  PASS torch identical, gate saw the submissions"
else
	echo "  FAIL torch results differ or the gate saw nothing"; fail=1
fi
fi
if phase other; then
for w in jax cupy; do
	log "$w (plain, then gated)"
	$PY "$here/other.py" $w >"$OUTD/${w}_plain.json" 2>"$TMP/$w.err" ||
	    tail -3 "$TMP/$w.err"
	# is the framework itself deterministic from run to run?
	if [ $QUICK = 0 ]; then
	$PY "$here/other.py" $w >"$OUTD/${w}_plain2.json" 2>"$TMP/$w.err" ||
	    tail -3 "$TMP/$w.err"
	cmp -s "$OUTD/${w}_plain.json" "$OUTD/${w}_plain2.json" ||
	    echo "  note: $w differs between two plain runs:" \
		"$(cat "$OUTD/${w}_plain2.json")"
	fi
	a=$(ctl create --shares 50)
	gated "$a" $TO 120 $PY "$here/other.py" $w >"$OUTD/${w}_gate.json" \
	    2>"$OUTD/${w}_gate.err" || tail -5 "$OUTD/${w}_gate.err"
	ctl close "$a" >/dev/null
	cat "$OUTD/${w}_plain.json" "$OUTD/${w}_gate.json"
	grep gshare-gate "$OUTD/${w}_gate.err" | tail -2
	if cmp -s "$OUTD/${w}_plain.json" "$OUTD/${w}_gate.json" &&
	   [ -s "$OUTD/${w}_gate.json" ]; then
		echo "  PASS $w identical"
	else
		echo "  FAIL $w"; fail=1
	fi
done
fi

if phase kill; then
log "kill -9 of a gated job mid-slice"
a=$(ctl create --shares 50 --weight 1)
b=$(ctl create --shares 50 --weight 1)
gated "$a" $PY "$here/work.py" matmul --seconds 8 --tag victim \
    >"$TMP/victim.out" 2>&1 &
v=$!
gated "$b" $PY "$here/work.py" matmul --seconds 8 --tag other \
    >"$OUTD/kill_other.jsonl" 2>"$TMP/other.err" &
o=$!
sleep 6
kill -9 $v
wait $v 2>/dev/null
wait $o && tail -1 "$OUTD/kill_other.jsonl" &&
    ctl ping >/dev/null && echo "  PASS other job finished, agent alive" ||
    { echo "  FAIL"; tail -5 "$TMP/other.err"; fail=1; }
# a killed job leaves its allocation to whoever created it (the plugin)
ctl close "$a" >/dev/null && ctl close "$b" >/dev/null ||
    { echo "  FAIL closing the allocations"; fail=1; }
ctl status
fi

run_set() {	# LABEL SECONDS GATED(0/1) KIND:SHARES:WEIGHT...
	label=$1 secs=$2 g=$3
	shift 3
	sd=$TMP/sync.$label
	rm -rf "$sd"	# a label run again starts its jobs together too
	mkdir -p "$sd"
	pids="" allocs=""
	n=0
	for spec in "$@"; do
		k=${spec%%:*} rest=${spec#*:}
		sh=${rest%%:*} w=${rest#*:}
		n=$((n + 1))
		extra=""
		case $k in *@*) extra="--duty ${k#*@}"; k=${k%@*};; esac
		if [ "$g" = 1 ]; then
			id=$(ctl create --shares "$sh" --weight "$w") ||
			    { echo "  FAIL create for $label"; fail=1; return; }
			allocs="$allocs $id"
			TRACE=${TRACE_SETS:+$OUTD/trace/$label.$n}
			[ -n "$TRACE" ] && mkdir -p "$OUTD/trace"
			TRACE=$TRACE gated "$id" $TO $((secs + 90)) $PY "$here/work.py" "$k" --seconds "$secs" \
			    --sync "$sd" --tag "$label.$n" $extra \
			    >"$TMP/$label.$n.out" 2>"$TMP/$label.$n.err" &
		else
			$TO $((secs + 90)) $PY "$here/work.py" "$k" --seconds "$secs" --sync "$sd" \
			    --tag "$label.$n" $extra >"$TMP/$label.$n.out" \
			    2>"$TMP/$label.$n.err" &
		fi
		pids="$pids $!"
	done
	i=0
	while [ "$(ls "$sd" | grep -c '^ready')" -lt $n ] && [ $i -lt 1200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	smi_start "$label"
	$PY -c "import time; print(time.monotonic() + 0.3)" >"$sd/go.tmp"
	mv "$sd/go.tmp" "$sd/go"
	for p in $pids; do wait "$p"; done
	smi_stop
	for i in $(seq 1 $n); do
		cat "$TMP/$label.$i.out" >>"$OUTD/sets.jsonl"
		grep -h gshare-gate "$TMP/$label.$i.err" |
		    sed "s/^/$label.$i /" | tee -a "$OUTD/gate.txt" |
		    sed 's/^/  /'
		grep -h -i -m3 "error\|Traceback" "$TMP/$label.$i.err"
	done
	if [ -n "$allocs" ]; then
		ctl status --json >"$TMP/st.json"
		$PY - "$TMP/st.json" "$label" $allocs >>"$OUTD/acct.jsonl" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
ids = [int(x) for x in sys.argv[3:]]
for a in st["allocations"]:
    if a["id"] in ids:
        print(json.dumps({"set": sys.argv[2], "n": ids.index(a["id"]) + 1,
                          "gpu_ns": a["gpu_ns"], "held_ns": a["held_ns"],
                          "suspensions": a["suspensions"]}))
PY
		for id in $allocs; do ctl close "$id" >/dev/null; done
	fi
	echo "  $label done"
}

if phase split; then
log "weighted split: bf16 matmul x3, solo / time-slicing / gate 1:2:5"
run_set mm_solo 5 0 matmul:0:0
run_set mm_ts 10 0 matmul:0:0 matmul:0:0 matmul:0:0
run_set mm_gate 10 1 matmul:20:1 matmul:30:2 matmul:50:5
run_set mm_gate13 10 1 matmul:25:1 matmul:75:3
fi

if phase overhead; then
log "uncontended overhead: plain vs gated, four kinds"
# alternating plain / gated twice: run-to-run drift shows up as the
# difference between the two plain runs
reps="1 2"
[ $QUICK = 1 ] && reps=1
for k in transformer cnn mlp matmul; do
	for r in $reps; do
		run_set "oh_plain${r}_$k" 6 0 "$k:0:0"
		run_set "oh_gate${r}_$k" 6 1 "$k:100:1"
	done
done
fi

if phase mixed; then
log "mixed sets: time-slicing vs gate"
run_set mlp_solo 5 0 mlp:0:0
run_set mix_ts 8 0 mlp:0:0 matmul:0:0
run_set mix_gate 8 1 mlp:50:1 matmul:50:1
run_set duty_ts 8 0 matmul@100/100:0:0 transformer:0:0
run_set duty_gate 8 1 matmul@100/100:50:1 transformer:50:1
run_set tr_solo 5 0 transformer:0:0
fi

if phase shares; then
log "guarantee: shares 20/30/50 (weights = shares), bf16 matmul x3"
run_set mm_solo 5 0 matmul:0:0
run_set mm_gate_sh 10 1 matmul:20:20 matmul:30:30 matmul:50:50
fi

if phase timeline || phase trio; then
# where the GPU-bound trio's ~6 % goes: the solo rate before and after,
# time-slicing, the gate at 20/30/50 with one trace record per hold
# (grant, first submission, suspend written/seen, release, GPU time) and
# the GPU's clocks and power sampled through every set; then each kind
# alone under the gate, traced, for the accounting of its timed loop
log "timeline: matmul x3 at 20/30/50 with hold traces and clocks"
SMI=1
run_set tl_solo_a 5 0 matmul:0:0
run_set tl_ts 10 0 matmul:0:0 matmul:0:0 matmul:0:0
TRACE_SETS=1 run_set tl_gate 10 1 matmul:20:20 matmul:30:30 matmul:50:50
run_set tl_solo_b 5 0 matmul:0:0
SMI=0
fi
if phase timeline; then
log "accounting: each kind alone under the gate, traced"
for k in matmul transformer cnn mlp; do
	TRACE_SETS=1 run_set "ac_$k" 6 1 "$k:100:1"
done
fi

if phase slice8; then
log "guarantee at 8 ms slices (agent reloaded): shares 20/30/50, matmul x3"
sed -i "s/^slice: .*/slice: 8ms/" "$TMP/gshare.yaml"
kill -HUP $APID
sleep 0.5
run_set mm_solo 5 0 matmul:0:0
run_set s8_gate_sh 10 1 matmul:20:20 matmul:30:30 matmul:50:50
sed -i "s/^slice: .*/slice: ${GATE_SLICE:-4ms}/" "$TMP/gshare.yaml"
kill -HUP $APID
sleep 0.5
fi

if phase knobs; then
log "overhead against the monitor's poll interval (cnn, transformer)"
for k in cnn transformer; do
	run_set "kn_plain_$k" 6 0 "$k:0:0"
	export GSHARE_GATE_POLL_US=1000
	run_set "kn_poll1000_$k" 6 1 "$k:100:1"
	unset GSHARE_GATE_POLL_US
	export GSHARE_GATE_WINDOW_US=3000
	run_set "kn_win3000_$k" 6 1 "$k:100:1"
	unset GSHARE_GATE_WINDOW_US
done
log "mlp inference loop: plain / gated, three times alternating"
for r in 1 2 3; do
	run_set "mlp_plain$r" 5 0 mlp:0:0
	run_set "mlp_gate$r" 5 1 mlp:100:1
done
fi

if phase mlpoh; then
# the launch-bound loop's rate drifts by 15-20 % between runs: five
# alternating plain/gated pairs, compared pair by pair
log "mlp inference loop: plain / gated, five times alternating"
for r in 1 2 3 4 5; do
	run_set "mlp_plain$r" 4 0 mlp:0:0
	run_set "mlp_gate$r" 4 1 mlp:100:1
done
fi

if phase win05; then
# the tight window at 0.5 ms against the default 1 ms, same run: eviction
# latency of a transformer beside a matmul (and the pair's rates), a
# matmul trio's latency, and the launch-bound mlp beside a matmul
log "window 0.5 ms vs 1 ms: latency and rates under contention"
run_set mm_solo 5 0 matmul:0:0
run_set tr_solo 5 0 transformer:0:0
run_set mlp_solo 5 0 mlp:0:0
# (run_set sets w: the loop's variable is win)
for win in 1000 500; do
	export GSHARE_GATE_WINDOW_US=$win
	run_set "w${win}_trmm" 8 1 transformer:50:1 matmul:50:1
	run_set "w${win}_mm13" 8 1 matmul:25:1 matmul:75:3
	run_set "w${win}_mix" 8 1 mlp:50:1 matmul:50:1
	unset GSHARE_GATE_WINDOW_US
done
fi

if phase win2; then
log "window 2 ms: overhead (cnn, transformer) and eviction latency"
export GSHARE_GATE_WINDOW_US=2000
for k in cnn transformer; do
	unset GSHARE_GATE_WINDOW_US
	run_set "w2_plain_$k" 6 0 "$k:0:0"
	export GSHARE_GATE_WINDOW_US=2000
	run_set "w2_gate_$k" 6 1 "$k:100:1"
done
run_set w2_mm13 8 1 matmul:25:1 matmul:75:3
run_set w2_trmm 8 1 transformer:50:1 matmul:50:1
unset GSHARE_GATE_WINDOW_US
fi

if phase latency; then
log "eviction latency (suspend -> last kernel done): matmul, transformer"
run_set lat_mm 8 1 matmul:25:1 matmul:75:3
run_set lat_trmm 8 1 transformer:50:1 matmul:50:1
fi

if phase wrongpu; then
log "a job whose GPU is not its allocation's (a simulated GPU: SIM-...)"
cat >"$TMP/sim.yaml" <<YAML
socket: $TMP/sim.sock
state_dir: $TMP/simstate
gpus:
  simulated: 1
log: stderr
metrics_listen: ""
YAML
mkdir -p "$TMP/simstate"
"$GSHARED" -d -f "$TMP/sim.yaml" >"$TMP/gshared-sim.log" 2>&1 &
sp=$!
i=0
until "$CTLB" -s "$TMP/sim.sock" ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] && kill -0 $sp 2>/dev/null || break
	sleep 0.1
done
id=$("$CTLB" -s "$TMP/sim.sock" create --shares 10)
env GSHARE_SOCKET="$TMP/sim.sock" GSHARE_ALLOC="$id" LD_PRELOAD="$GATE" \
    $TO 120 $PY -c 'import torch; x = torch.ones(1 << 20, device="cuda"); print(float((x * 2).sum()))' \
    >"$OUTD/wrongpu.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "allocation $id is on GPU SIM-.*CUDA device 0 is GPU-.*CUDA_ERROR_INVALID_DEVICE" \
    "$OUTD/wrongpu.out"; then
	echo "PASS refused: $(grep -o "allocation $id is on GPU.*" "$OUTD/wrongpu.out" | head -1 | cut -c1-120)" |
	    tee "$OUTD/wrongpu.txt"
else
	echo "FAIL rc=$rc" | tee "$OUTD/wrongpu.txt"; tail -5 "$OUTD/wrongpu.out"
	fail=1
fi
kill $sp 2>/dev/null; wait $sp 2>/dev/null
fi

log "summary"
$PY "$here/summary.py" "$OUTD" >"$OUTD/summary.txt" 2>&1 || true
cat "$OUTD/summary.txt"
echo "correctness: $([ $fail = 0 ] && echo PASS || echo FAIL)" |
    tee -a "$OUTD/summary.txt"
exit $fail
