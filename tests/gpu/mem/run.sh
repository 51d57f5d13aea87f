#!/bin/sh
# tests/gpu/mem/run.sh — device memory limits through the launch gate on
# a real GPU, one command (about 3 minutes; MEMGPU_BUDGET seconds at most,
# default 300):
#   tests/gpu/mem/run.sh [--dry-run] [BIN_DIR [OUT_DIR]]
# BIN_DIR holds gshared, gsharectl, libgshare-gate.so and
# fake_libgshare.so (build/tests/gate: it makes a process look like a
# level-2 job, one that links libgshare), and lib/ with
# libraries the machine lacks (default: the build/ paths).  OUT_DIR
# (default $OUT, else /tmp/memgpu-out) gets results.jsonl, summary.md
# and gshared.log.  A private agent (gpus: auto) and, each under its own
# allocation and LD_PRELOAD of the gate:
#  1. PyTorch under a 10 GiB limit: mem_get_info's total, OutOfMemoryError
#     for a tensor over it and for one beside another, empty_cache and the
#     allocator's own retry recovering, the memory the process really holds
#     (NVML) within the limit + 1 GiB;
#  2. the same with expandable_segments:True and backend:cudaMallocAsync
#     (whose pool keeps freed memory: the gate charges what pools hold);
#  3. JAX with its default preallocation in a 30 % share, a jitted step
#     whose loss per step must match (1e-3 relative) the same program run
#     without the gate (both printed);
#  4. two jobs at 30 % and 70 % filling their quotas at once through
#     cuMemAlloc (never above, each reaching it; the agent's figures;
#     NVML's memory query, dlopen'ed, answering with the allocation's
#     view), then a level-2 job (libgshare linked: launches its own) held
#     to its limit all the same;
#  5. cuMemAlloc/cuMemFree pairs (4 KiB..1 GiB, ctypes on libcuda.so.1:
#     the driver entry points the gate hooks) and a warm PyTorch training
#     step, plain and gated, twice each, alternating: ratios.
# Every check prints PASS/FAIL with its figures; exit 1 if one failed (or
# was skipped), after writing the summary in any case.  --dry-run: a
# simulated GPU and the gate tests' stand-in libcuda.so.1 (BIN_DIR/standin
# or build/tests/gate/standin); what needs PyTorch or JAX is skipped where
# they are not installed.  Cleans up every process and file on any exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
DRY=0
[ "${1:-}" = --dry-run ] && { DRY=1; shift; }
BIN=${1:-}
OUTD=${2:-${OUT:-/tmp/memgpu-out}}
mkdir -p "$OUTD" || exit 1
OUTD=$(cd "$OUTD" && pwd)
if [ -z "$BIN" ]; then
	GSHARED=build/node-agent/gshared CTLB=build/node-agent/gsharectl
	GATE=$PWD/build/runtime/gate/libgshare-gate.so
	STANDIN=$PWD/build/tests/gate/standin
	L2=$PWD/build/tests/gate/fake_libgshare.so
else
	BIN=$(cd "$BIN" && pwd) || exit 1
	GSHARED=$BIN/gshared CTLB=$BIN/gsharectl GATE=$BIN/libgshare-gate.so
	STANDIN=$BIN/standin L2=$BIN/fake_libgshare.so
	[ -d "$BIN/lib" ] &&
	    export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for f in "$GSHARED" "$CTLB" "$GATE"; do
	[ -e "$f" ] || { echo "run.sh: $f missing" >&2; exit 1; }
done
if [ $DRY = 1 ]; then
	[ -e "$STANDIN/libcuda.so.1" ] ||
	    { echo "run.sh: $STANDIN/libcuda.so.1 missing" >&2; exit 1; }
	export LD_LIBRARY_PATH="$STANDIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export MEMGPU_DRY=1
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=python3
RES=$OUTD/results.jsonl
rm -f "$RES" "$OUTD/summary.md"
START=$(date +%s)
BUDGET=${MEMGPU_BUDGET:-300}
TMP=$(mktemp -d /tmp/memgpu.XXXXXX) || exit 1
SOCK=$TMP/gshared.sock
APID="" JOBS="" fail=0
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	for p in $JOBS; do kill -9 "$p" 2>/dev/null; done
	[ -n "$APID" ] && kill "$APID" 2>/dev/null
	wait 2>/dev/null
	cp "$TMP/gshared.log" "$OUTD/gshared.log" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
log() { echo "== $*"; }
ctl() { "$CTLB" -s "$SOCK" "$@"; }
chk() {	# NAME pass|fail|skip DETAIL
	$PY "$here/memcommon.py" check "$RES" "$1" "$2" "$3"
	[ "$2" = pass ] || { [ "$2" = skip ] && [ $DRY = 1 ]; } || fail=1
}
left() { echo $((BUDGET - $(date +%s) + START)); }
# TO MAX: a timeout of MAX seconds, or what is left of the budget
to() {
	l=$(( $(left) - 5 ))
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
# enough SECS left for the next step? otherwise record it as not run
budget() {
	[ "$(left)" -ge "$1" ] && return 0
	chk "$2" fail "not run: $(left) s of the budget left, needs $1"
	return 1
}
gated() {	# ALLOC CMD...: CMD under the gate on allocation ALLOC
	g_a=$1; shift
	env GSHARE_SOCKET="$SOCK" GSHARE_ALLOC="$g_a" LD_PRELOAD="$GATE" \
	    GSHARE_GATE_DEBUG=1 "$@"
}
# FIELD ALLOC: a figure of ALLOC from status --json
fig() {
	ctl status --json | $PY -c '
import json, sys
for a in json.load(sys.stdin)["allocations"]:
    if a["id"] == int(sys.argv[2]):
        print(a[sys.argv[1]])' "$1" "$2"
}
# TAG RC ERRFILE: a helper that ended other than 0/1 (crash, timeout)
ended() {
	case $2 in
	0|1) ;;
	*) chk "$1 exits" fail "exit status $2 (124: timeout; 128+N: signal N): $(tail -c 400 "$3" | tr '\n' ' ')";;
	esac
}
# TAG ALLOC LIMIT: the agent's peak for ALLOC within LIMIT
agent_peak() {
	pk=$(fig mem_peak "$2")
	if [ -n "$pk" ] && [ "$pk" -le "$3" ] && [ "$pk" -gt 0 ]; then
		chk "$1: agent's peak within the limit" pass "mem_peak $pk, limit $3"
	else
		chk "$1: agent's peak within the limit" fail "mem_peak '$pk', limit $3"
	fi
}

[ $DRY = 1 ] || nvidia-smi -L
log "agent"
if [ $DRY = 1 ]; then
	gpus='gpus:
  simulated: 1
  memory: 80G'
else
	gpus='gpus: auto'
fi
cat >"$TMP/gshare.yaml" <<YAML
socket: $SOCK
state_dir: $TMP/state
$gpus
policy: wfq
slice: 4ms
log: stderr
metrics_listen: ""
YAML
[ -n "${MEMGPU_RESERVE:-}" ] &&
    echo "memory_reserve: $MEMGPU_RESERVE" >>"$TMP/gshare.yaml"
mkdir -p "$TMP/state"
"$GSHARED" -d -f "$TMP/gshare.yaml" >"$TMP/gshared.log" 2>&1 &
APID=$!
i=0
until ctl ping >/dev/null 2>&1; do
	i=$((i + 1))
	{ [ $i -lt 150 ] && kill -0 $APID 2>/dev/null; } ||
	    { echo "gshared did not start"; cat "$TMP/gshared.log"; exit 1; }
	sleep 0.1
done
ctl status | head -3

# MEMGPU_ONLY=bench: only the benchmarks (5)
if [ "${MEMGPU_ONLY:-}" != bench ]; then
# ---- 1, 2: PyTorch under 10 GiB, three allocator configurations -------
for conf in native expandable_segments:True backend:cudaMallocAsync; do
	case $conf in
	native) tag=torch-native ac="";;
	expandable*) tag=torch-expandable ac=$conf;;
	*) tag=torch-async ac=$conf;;
	esac
	budget 40 "$tag" || continue
	log "$tag: PyTorch under a 10 GiB limit (PYTORCH_CUDA_ALLOC_CONF='$ac')"
	a=$(ctl create --shares 20 --mem 10G) ||
	    { chk "$tag create" fail "gsharectl create failed"; continue; }
	L=$(fig mem_limit "$a")
	if [ "$L" = 10737418240 ]; then
		chk "$tag: allocation's limit" pass "$L"
	else
		chk "$tag: allocation's limit" fail "'$L', not 10 GiB"
	fi
	PYTORCH_CUDA_ALLOC_CONF=$ac gated "$a" timeout -k 5 "$(to 90)" \
	    $PY "$here/torch_limit.py" --limit "$L" --tag "$tag" --out "$RES" \
	    2>"$OUTD/$tag.err"
	ended "$tag" $? "$OUTD/$tag.err"
	grep -h gshare-gate "$OUTD/$tag.err" | tail -2
	[ $DRY = 1 ] || agent_peak "$tag" "$a" "$L"
	ctl close "$a" >/dev/null
done

# ---- 3: JAX with default preallocation in a 30 % share -----------------
if budget 70 jax; then
	log "jax: default preallocation in a 30 % share (plain run first)"
	# the same program and seeds without the gate: its losses are what
	# the gated run must reproduce (a NaN in both is the program's own)
	timeout -k 5 "$(to 60)" env -u XLA_PYTHON_CLIENT_PREALLOCATE \
	    -u XLA_PYTHON_CLIENT_MEM_FRACTION $PY "$here/jax_prealloc.py" \
	    --plain --losses "$TMP/jax_plain.json" --tag jax-plain \
	    --out "$RES" 2>"$OUTD/jax-plain.err"
	ended jax-plain $? "$OUTD/jax-plain.err"
	a=$(ctl create --shares 30)
	L=$(fig mem_limit "$a")
	echo "  limit $L"
	gated "$a" timeout -k 5 "$(to 90)" env -u XLA_PYTHON_CLIENT_PREALLOCATE \
	    -u XLA_PYTHON_CLIENT_MEM_FRACTION $PY "$here/jax_prealloc.py" \
	    --limit "$L" --ref "$TMP/jax_plain.json" --tag jax --out "$RES" \
	    2>"$OUTD/jax.err"
	ended jax $? "$OUTD/jax.err"
	grep -h gshare-gate "$OUTD/jax.err" | tail -2
	[ $DRY = 1 ] || agent_peak jax "$a" "$L"
	ctl close "$a" >/dev/null
fi

# ---- 4: two jobs 30 % / 70 % fill their quotas at once -----------------
if budget 30 fill; then
	log "fill: 30 % and 70 % allocate until refused, at once"
	a=$(ctl create --shares 30) b=$(ctl create --shares 70)
	LA=$(fig mem_limit "$a") LB=$(fig mem_limit "$b")
	sd=$TMP/sync
	mkdir -p "$sd"
	t=$(to 60)
	gated "$a" timeout -k 5 "$t" $PY "$here/drv.py" fill --limit "$LA" \
	    --sync "$sd" --tag fill30 --out "$RES" 2>"$OUTD/fill30.err" &
	pa=$!
	gated "$b" timeout -k 5 "$t" $PY "$here/drv.py" fill --limit "$LB" \
	    --sync "$sd" --tag fill70 --out "$RES" 2>"$OUTD/fill70.err" &
	pb=$!
	JOBS="$pa $pb"
	waitf() {	# FILE...: all there within 60 s
		end=$(( $(date +%s) + 60 ))
		for w in "$@"; do
			until [ -e "$w" ]; do
				[ "$(date +%s)" -lt $end ] || return 1
				sleep 0.02
			done
		done
	}
	if waitf "$sd/ready.fill30" "$sd/ready.fill70"; then
		touch "$sd/go"
		if waitf "$sd/full.fill30" "$sd/full.fill70"; then
			for x in "30:$a:$LA" "70:$b:$LB"; do
				n=${x%%:*} al=${x#*:} lim=${x##*:}
				al=${al%%:*}
				u=$(fig mem_used "$al")
				h=$(cat "$sd/full.fill$n")
				if [ "$u" = "$h" ] && [ "$u" -le "$lim" ]; then
					chk "fill$n: the agent sees what it holds" pass "mem_used $u, held $h, limit $lim"
				else
					chk "fill$n: the agent sees what it holds" fail "mem_used '$u', held $h, limit $lim"
				fi
			done
			[ $DRY = 1 ] || nvidia-smi --query-compute-apps=pid,used_memory \
			    --format=csv,noheader >"$OUTD/fill_nvidia_smi.txt" 2>&1
			[ $DRY = 1 ] || sed 's/^/  nvidia-smi: /' "$OUTD/fill_nvidia_smi.txt"
		else
			chk "fill: both full" fail "a job did not report full within 60 s"
		fi
	else
		chk "fill: both ready" fail "a job did not start within 60 s"
	fi
	touch "$sd/release"
	wait "$pa"; ra=$?
	wait "$pb"; rb=$?
	JOBS=""
	ended fill30 $ra "$OUTD/fill30.err"
	ended fill70 $rb "$OUTD/fill70.err"
	ctl close "$a" >/dev/null
	ctl close "$b" >/dev/null
fi

# ---- 4b: a level-2 job keeps its memory limit ---------------------------
if budget 25 level2; then
	log "level2: libgshare linked (launches its own), memory still limited"
	if [ -e "$L2" ]; then
		a=$(ctl create --shares 20 --mem 4G)
		L=$(fig mem_limit "$a")
		sd=$TMP/sync2
		mkdir -p "$sd" && touch "$sd/go" "$sd/release"
		env GSHARE_SOCKET="$SOCK" GSHARE_ALLOC="$a" \
		    LD_PRELOAD="$GATE $L2" GSHARE_GATE_DEBUG=1 \
		    timeout -k 5 "$(to 60)" $PY "$here/drv.py" fill --limit "$L" \
		    --sync "$sd" --tag level2 --out "$RES" 2>"$OUTD/level2.err"
		ended level2 $? "$OUTD/level2.err"
		if grep -q "libgshare is linked: launches are its own" \
		    "$OUTD/level2.err"; then
			chk "level2: seen as level 2 (launch gating off)" pass "the gate's message"
		else
			chk "level2: seen as level 2 (launch gating off)" fail "$(tail -c 300 "$OUTD/level2.err" | tr '\n' ' ')"
		fi
		ctl close "$a" >/dev/null
	else
		chk level2 fail "$L2 missing"
	fi
fi

fi	# MEMGPU_ONLY

# ---- 5: benchmarks ------------------------------------------------------
a=$(ctl create --shares 100 --mem 4G)
L=$(fig mem_limit "$a")
if budget 25 "bench pairs"; then
	# preload: the gate loaded but the process attached to no
	# allocation (its hooks pass through): what interposition costs
	# apart from the quota's bookkeeping
	log "cuMemAlloc/cuMemFree pairs: plain, gated, preload, x${MEMGPU_BENCH_REPS:-2}"
	BS=${MEMGPU_BENCH_S:-0.4}
	r=0
	while [ $r -lt "${MEMGPU_BENCH_REPS:-2}" ]; do
		r=$((r + 1))
		timeout -k 5 "$(to 60)" $PY "$here/drv.py" bench --label plain \
		    --seconds "$BS" --tag "bench-plain$r" --out "$RES" \
		    2>"$OUTD/bench-plain$r.err"
		ended "bench-plain$r" $? "$OUTD/bench-plain$r.err"
		gated "$a" timeout -k 5 "$(to 60)" $PY "$here/drv.py" bench \
		    --label gated --limit "$L" --seconds "$BS" \
		    --tag "bench-gated$r" --out "$RES" \
		    2>"$OUTD/bench-gated$r.err"
		ended "bench-gated$r" $? "$OUTD/bench-gated$r.err"
		env LD_PRELOAD="$GATE" timeout -k 5 "$(to 60)" $PY \
		    "$here/drv.py" bench --label preload --seconds "$BS" \
		    --tag "bench-preload$r" --out "$RES" \
		    2>"$OUTD/bench-preload$r.err"
		ended "bench-preload$r" $? "$OUTD/bench-preload$r.err"
	done
	# in one process, the gate's hooks against the driver's own entry
	# points, alternating batches (across processes the pairs' cost
	# varies more than the target); the same without the gate is the
	# method's noise
	log "cuMemAlloc/cuMemFree pairs in one process: hooks vs driver"
	for r in $(seq 1 "${MEMGPU_AB_REPS:-2}"); do
		gated "$a" timeout -k 5 "$(to 60)" $PY "$here/drv.py" bench --ab \
		    --label gated --seconds "$BS" --tag "ab-gated$r" \
		    --out "$RES" 2>"$OUTD/ab-gated$r.err"
		ended "ab-gated$r" $? "$OUTD/ab-gated$r.err"
		timeout -k 5 "$(to 60)" $PY "$here/drv.py" bench --ab \
		    --label plain --seconds "$BS" --tag "ab-plain$r" \
		    --out "$RES" 2>"$OUTD/ab-plain$r.err"
		ended "ab-plain$r" $? "$OUTD/ab-plain$r.err"
	done
fi
if [ "${MEMGPU_STEP:-1}" = 1 ] && budget 40 "training step"; then
	log "PyTorch training step, warm allocator: plain, gated, plain, gated"
	for r in 1 2; do
		timeout -k 5 "$(to 60)" $PY "$here/torch_step.py" --label plain \
		    --tag "step-plain$r" --out "$RES" 2>"$OUTD/step-plain$r.err"
		ended "step-plain$r" $? "$OUTD/step-plain$r.err"
		gated "$a" timeout -k 5 "$(to 60)" $PY "$here/torch_step.py" \
		    --label gated --tag "step-gated$r" --out "$RES" \
		    2>"$OUTD/step-gated$r.err"
		ended "step-gated$r" $? "$OUTD/step-gated$r.err"
	done
fi
ctl close "$a" >/dev/null

log "summary ($(( $(date +%s) - START )) s)"
$PY "$here/summary.py" "$OUTD" || fail=1
exit $fail
