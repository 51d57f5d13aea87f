#!/bin/sh
# Device memory limits through the launch gate, without a GPU: a live
# gshared (one listed 16G GPU, GPU-fake-0), the stand-in libcuda.so.1 (80 GiB) and
# mem_app under libgshare-gate.so.  Checks: the allocation's limit is
# what cuMemGetInfo reports; allocations up to it pass and one byte over
# fails with CUDA_ERROR_OUT_OF_MEMORY (plain, managed, pitched,
# stream-ordered); frees give back; stream-ordered pools are charged what
# they keep, and trimmed before an allocation is refused; 8 threads never pass it together; the
# agent sees what the job holds (status mem_used / mem_peak) and nothing
# once it is killed -9; a level-2 job (libgshare linked) is limited too; CUDA
# arrays count at their descriptor's size; graph memory nodes count
# (trimmed when an allocation needs the room); NVML's
# memory queries answer with the allocation's view for its GPU only;
# two processes of one allocation hold no more than its limit together
# (the later one refused with CUDA_ERROR_OUT_OF_MEMORY), and a kill -9 of
# one gives its share to the other; not under an
# allocation, nothing is limited.
# Cleans up every process and file on any exit.
set -u
GS_LOG_TAIL=40
. "$(dirname "$0")/../lib/agent.sh"
APP=$B/tests/gate/mem_app
GATE=$PWD/$B/runtime/gate/libgshare-gate.so
L2=$PWD/$B/tests/gate/fake_libgshare.so
NVML_DIR=$PWD/$B/tests/agent/fakenvml
gs_agent_init gsmemg "$APP" "$GATE" "$B/tests/gate/standin/libcuda.so.1" "$L2" \
    "$NVML_DIR/libnvidia-ml.so.1"
export LD_LIBRARY_PATH=$PWD/$B/tests/gate/standin
# the GPU has the UUID of the stand-in NVML's first GPU (NVML queries)
gs_agent_conf <<CONF
gpus:
  - {index: 0, uuid: GPU-fake-0, name: fake, memory: 16G}
CONF
gs_agent_start "listed GPU"
export GSHARE_SOCKET=$sock
MIB=1048576

# figures of allocation ID from status --json: "used peak limit"
figs() {
	$CTL status --json | $PY -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])][0]
print(a["mem_used"], a["mem_peak"], a["mem_limit"])' "$1"
}

a=$($CTL create --shares 10 --mem 64M) || bad "create"
GSHARE_ALLOC=$a LD_PRELOAD=$GATE "$APP" limit $((64 * MIB)) > "$dir/limit.out" 2>&1; echo "rc=$?" >> "$dir/limit.out"; grep -q "^rc=0$" "$dir/limit.out" &&
	ok "limit: $(grep -c '^ok' "$dir/limit.out") checks" ||
	bad "limit: $(grep FAIL "$dir/limit.out"; tail -3 "$dir/limit.out")"
GSHARE_ALLOC=$a LD_PRELOAD=$GATE "$APP" pool $((64 * MIB)) > "$dir/pool.out" 2>&1; echo "rc=$?" >> "$dir/pool.out"; grep -q "^rc=0$" "$dir/pool.out" &&
	ok "pools: $(grep -c '^ok' "$dir/pool.out") checks" ||
	bad "pools: $(grep FAIL "$dir/pool.out"; tail -3 "$dir/pool.out")"
GSHARE_ALLOC=$a LD_PRELOAD=$GATE "$APP" threads $((64 * MIB)) > "$dir/threads.out" 2>&1 &&
	ok "threads: $(grep '^ok' "$dir/threads.out" | tr '\n' ' ')" ||
	bad "threads: $(cat "$dir/threads.out")"
# a level-2 job (libgshare linked: launches are its own): the memory
# limit and the cuMemGetInfo view still hold
GSHARE_ALLOC=$a LD_PRELOAD="$GATE $L2" "$APP" limit $((64 * MIB)) > "$dir/l2.out" 2>&1; echo "rc=$?" >> "$dir/l2.out"; grep -q "^rc=0$" "$dir/l2.out" &&
	ok "level 2: $(grep -c '^ok' "$dir/l2.out") checks" ||
	bad "level 2: $(grep FAIL "$dir/l2.out"; tail -3 "$dir/l2.out")"
GSHARE_ALLOC=$a LD_PRELOAD=$GATE "$APP" arrays $((64 * MIB)) > "$dir/arrays.out" 2>&1; echo "rc=$?" >> "$dir/arrays.out"; grep -q "^rc=0$" "$dir/arrays.out" &&
	ok "arrays: $(grep -c '^ok' "$dir/arrays.out") checks" ||
	bad "arrays: $(grep FAIL "$dir/arrays.out"; tail -3 "$dir/arrays.out")"
# NVML's memory queries: the allocation's GPU shows the allocation's view
GSHARE_ALLOC=$a LD_PRELOAD=$GATE LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$NVML_DIR" \
    "$APP" nvml $((64 * MIB)) > "$dir/nvml.out" 2>&1; echo "rc=$?" >> "$dir/nvml.out"; grep -q "^rc=0$" "$dir/nvml.out" &&
	ok "NVML: $(grep -c '^ok' "$dir/nvml.out") checks" ||
	bad "NVML: $(grep FAIL "$dir/nvml.out"; tail -3 "$dir/nvml.out")"
# the peak the agent saw: at most the limit, and the limit was reached
f=$(figs "$a")
set -- $f
[ "$1" = 0 ] && [ "$2" -le $((64 * MIB)) ] && [ "$2" -ge $((63 * MIB)) ] &&
	[ "$3" = $((64 * MIB)) ] && ok "agent: used 0, peak $2, limit $3" ||
	bad "agent figures after the runs: $f"

# a job holding 40 MiB: the agent sees it; kill -9: nothing held
GSHARE_ALLOC=$a LD_PRELOAD=$GATE "$APP" hold 40 30 > "$dir/hold.out" 2>&1 &
hp=$!
jpids=$hp
end=$(( $(date +%s) + 10 ))
until [ "$(figs "$a" | cut -d' ' -f1)" = $((40 * MIB)) ]; do
	[ "$(date +%s)" -lt $end ] || { bad "agent never saw 40 MiB: $(figs "$a")"; break; }
	sleep 0.05
done
[ "$(figs "$a" | cut -d' ' -f1)" = $((40 * MIB)) ] && ok "agent sees the 40 MiB held"
kill -9 $hp; wait $hp 2>/dev/null; jpids=""
end=$(( $(date +%s) + 10 ))
until [ "$(figs "$a" | cut -d' ' -f1)" = 0 ]; do
	[ "$(date +%s)" -lt $end ] || { bad "still held after kill -9: $(figs "$a")"; break; }
	sleep 0.05
done
[ "$(figs "$a" | cut -d' ' -f1)" = 0 ] && ok "kill -9: nothing held any more"

# graph memory, on an allocation of its own: as a level-2 job, whose
# launches are its own (the listed GPU's UUID is the stand-in NVML's,
# which the stand-in driver's device does not have: a gated launch would
# be refused as on another GPU).  A launch that passes the limit has
# happened when its memory shows: the agent's peak says so
ga=$($CTL create --shares 10 --mem 64M) || bad "create (graphs)"
GSHARE_ALLOC=$ga LD_PRELOAD="$GATE $L2" "$APP" graphs $((64 * MIB)) > "$dir/graphs.out" 2>&1; echo "rc=$?" >> "$dir/graphs.out"; grep -q "^rc=0$" "$dir/graphs.out" &&
	ok "graph memory: $(grep -c '^ok' "$dir/graphs.out") checks" ||
	bad "graph memory: $(grep FAIL "$dir/graphs.out"; tail -3 "$dir/graphs.out")"
f=$(figs "$ga")
set -- $f
[ "$1" = 0 ] && [ "$2" = $((72 * MIB)) ] &&
	ok "graph memory: the agent saw the launch past the limit (peak $2), nothing held after" ||
	bad "graph memory: agent figures $f"
$CTL close "$ga" >/dev/null || bad "close (graphs)"
# two processes of one allocation (the memory page they share): A takes
# 24 MiB, then B fills what it can, 1 MiB at a time: 40 MiB, then
# CUDA_ERROR_OUT_OF_MEMORY (2), though alone it could hold 64; A asked to
# fill again gets nothing more.  Then kill -9 of B: the agent takes its
# share out of the shared counter and A, asked again, fills the limit.
s=$($CTL create --shares 10 --mem 64M) || bad "create (shared)"
# the last "filled BYTES rc RC" line of FILE: "BYTES RC", "" before one
filled() { sed -n 's/^filled \([0-9]*\) rc \([0-9-]*\)$/\1 \2/p' "$1" | tail -1; }
# wait (10 s at most) until FILE has more than N "filled" lines
wait_filled() {
	end=$(( $(date +%s) + 10 ))
	until [ "$(grep -c '^filled' "$1")" -gt "$2" ]; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.05
	done
}
fa="$dir/fa.out" fb="$dir/fb.out"
: > "$fa"; : > "$fb"
GSHARE_ALLOC=$s LD_PRELOAD=$GATE "$APP" fill 30 24 > "$fa" 2>&1 &
pa=$!
jpids=$pa
wait_filled "$fa" 0
GSHARE_ALLOC=$s LD_PRELOAD=$GATE "$APP" fill 30 > "$fb" 2>&1 &
pb=$!
jpids="$pa $pb"
wait_filled "$fb" 0
kill -USR1 $pa
wait_filled "$fa" 1
ra=$(filled "$fa") rb=$(filled "$fb")
[ "$ra" = "$((24 * MIB)) 2" ] && [ "$rb" = "$((40 * MIB)) 2" ] &&
	ok "two processes: 24 + 40 MiB, the limit together; both refused (rc 2) beyond it" ||
	bad "two processes: A holds/rc '$ra', B '$rb'; want 24 and 40 MiB, rc 2: $(cat "$fa" "$fb")"
# the agent's view: the sum of the two pages
end=$(( $(date +%s) + 10 ))
until [ "$(figs "$s" | cut -d' ' -f1)" = $((64 * MIB)) ]; do
	[ "$(date +%s)" -lt $end ] || { bad "agent: $(figs "$s"), want $((64 * MIB)) held"; break; }
	sleep 0.05
done
kill -9 $pb; wait $pb 2>/dev/null; jpids=$pa
end=$(( $(date +%s) + 10 ))
until [ "$(figs "$s" | cut -d' ' -f1)" = $((24 * MIB)) ]; do
	[ "$(date +%s)" -lt $end ] || { bad "agent after kill -9: $(figs "$s"), want $((24 * MIB)) held"; break; }
	sleep 0.05
done
kill -USR1 $pa
wait_filled "$fa" 2
ra=$(filled "$fa")
[ "$ra" = "$((64 * MIB)) 2" ] &&
	ok "kill -9 of B: A now fills the whole limit (64 MiB)" ||
	bad "after kill -9 of B, A holds/rc '$ra', want $((64 * MIB)) 2: $(cat "$fa")"
kill -9 $pa; wait $pa 2>/dev/null; jpids=""
$CTL close "$s" > /dev/null || bad "close (shared)"

# not under an allocation: the driver's own figures, no limit
out=$(LD_PRELOAD=$GATE "$APP" limit $((80 * 1024 * MIB)) 2>&1)
printf '%s\n' "$out" | grep -q "^ok   cuMemGetInfo: free 85899345920 total 85899345920" &&
	ok "no allocation: the device's own view" || bad "ungated: $out"
$CTL close "$a" > /dev/null || bad "close"
exit $fail
