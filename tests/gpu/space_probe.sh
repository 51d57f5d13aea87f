#!/bin/sh
# tests/gpu/space_probe.sh — A/B of space mode's SM placement (issue 12),
# one command, ~1.5 minutes on an H100.  Uses gs-smprobe
# (runtime/bench/smprobe.cu), no libgshare, no agent:
#   - the %smid values a wide grid sees and %nsmid, outside MPS and as an
#     MPS client: are smids 0..SMs-1 or do they have gaps?
#   - one eater alone on the lower and upper ranges (30/70 split): does a
#     range of N smids hold N SMs?  (raw = smid range, the runtime today;
#     rank = rank among the present smids)
#   - two eaters at once under one MPS daemon, 30/70 and 50/50, for each
#     mapping (raw, rank) and grid size (all = blocks per SM x every SM,
#     the runtime today; part = blocks per SM x the partition's SMs;
#     adapt = part + the blocks that left unused last launch), and
#     MPS active-thread percentages with no SM check: each one's rate over
#     the solo rate, the fraction it should get, the SMs where it did work
#     and its time per launch.
# Usage: tests/gpu/space_probe.sh [BUILD_DIR [OUT_DIR]]
# Reports only (exit 0 unless it could not run).
set -u
B=${1:-build}
O=${2:-$B/space-probe}
S=${GS_PROBE_S:-3}
P=$B/runtime/bench/gs-smprobe
mkdir -p "$O"
[ -x "$P" ] || { echo "space_probe: $P missing" >&2; exit 2; }
export LD_LIBRARY_PATH=$B/lib:$B/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TMP=$(mktemp -d /tmp/gs-probe.XXXXXX)
MPSCTL=$(command -v nvidia-cuda-mps-control || true)
MPIPE=$TMP/mps/pipe
mps_on=0
pids=""
ms() { echo $(( $(date +%s%N) / 1000000 )); }
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ $mps_on = 1 ]; then
		echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPIPE timeout 10 \
		    "$MPSCTL" >/dev/null 2>&1
		t0=$(ms)
		while [ -e "$MPIPE/control" ] &&
		    [ $(( $(ms) - t0 )) -lt 10000 ]; do sleep 0.1; done
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

timeout 60 "$P" smids >"$O/smids.txt" 2>&1
cat "$O/smids.txt"
SMS=$(sed -n 's/^sms \([0-9]*\) .*/\1/p' "$O/smids.txt")
[ -n "$SMS" ] || { echo "space_probe: no SM count" >&2; exit 2; }
[ -n "$MPSCTL" ] || { echo "space_probe: no nvidia-cuda-mps-control" >&2; exit 2; }
mkdir -p "$MPIPE" "$TMP/mps/log"
CUDA_MPS_PIPE_DIRECTORY=$MPIPE CUDA_MPS_LOG_DIRECTORY=$TMP/mps/log \
    "$MPSCTL" -d || exit 2
mps_on=1
t0=$(ms)
until [ -e "$MPIPE/control" ]; do
	[ $(( $(ms) - t0 )) -gt 5000 ] && { echo "no MPS" >&2; exit 2; }
	sleep 0.05
done
export CUDA_MPS_PIPE_DIRECTORY=$MPIPE
echo "--- as an MPS client:"
timeout 60 "$P" smids >"$O/smids-mps.txt" 2>&1
cat "$O/smids-mps.txt"

val() { sed -n "s/^result.* $2=\([^ ]*\).*/\1/p" "$1"; }
run1() {	# NAME MAP FIRST COUNT GRID [ENV]
	n=$1; shift
	# shellcheck disable=SC2086
	env ${5:-} timeout 60 "$P" run "$1" "$2" "$3" "$S" "$4" \
	    >"$O/$n.log" 2>&1
}
timeout 60 "$P" run none 0 0 "$S" all >"$O/solo.log" 2>&1
solo=$(val "$O/solo.log" rate)
echo "solo: $(grep '^result' "$O/solo.log")"
lo=$(( (SMS / 8 * 30 + 50) / 100 * 8 )); hi=$((SMS - lo))
half=$(( SMS / 16 * 8 ))
line() {	# CASE LOG WANT_FRACTION
	r=$(val "$2" rate)
	awk -v c="$1" -v r="${r:-0}" -v s="${solo:-0}" -v w="$3" \
	    -v ws="$(val "$2" working_sms)" -v l="$(val "$2" ms_per_launch)" \
	    'BEGIN { f = s > 0 ? r / s : 0;
		printf "%-26s %6.3f %6.3f %6.1f%% %4s %8s\n", c, f, w,
		    (w > 0 ? (f / w - 1) * 100 : 0), ws, l }' | tee -a "$O/table.txt"
}
frac() { awk -v n="$1" -v t="$SMS" 'BEGIN { printf "%.4f", n / t }'; }
: >"$O/table.txt"
echo "case                       got    want   err   SMs  ms/launch" |
    tee -a "$O/table.txt"
# GS_PROBE_MAPS: the SM-test mappings to A/B (default "raw rank"; "" for
# none); GS_PROBE_MPS=0 leaves out the MPS percentage and unchecked pairs
MAPS=${GS_PROBE_MAPS-raw rank}
for map in $MAPS; do
	run1 "alone-$map-lo" $map 0 $lo all
	line "alone $map 0:$lo" "$O/alone-$map-lo.log" "$(frac $lo)"
	run1 "alone-$map-hi" $map $lo $hi all
	line "alone $map $lo:$hi" "$O/alone-$map-hi.log" "$(frac $hi)"
done
pair() {	# NAME MAP GRID FIRST_B ENV_A ENV_B
	nb=$(($SMS - $4))
	env ${5:-} timeout 60 "$P" run "$2" 0 "$4" "$S" "$3" \
	    >"$O/$1-a.log" 2>&1 &
	pa=$!
	env ${6:-} timeout 60 "$P" run "$2" "$4" "$nb" "$S" "$3" \
	    >"$O/$1-b.log" 2>&1 &
	pb=$!
	pids="$pa $pb"
	wait "$pa"; wait "$pb"; pids=""
	line "$1 a 0:$4" "$O/$1-a.log" "$(frac "$4")"
	line "$1 b $4:$nb" "$O/$1-b.log" "$(frac "$nb")"
}
for map in $MAPS; do
	for grid in all part adapt; do
		pair "p30-$map-$grid" $map $grid $lo
		pair "p50-$map-$grid" $map $grid $half
	done
done
pct() { awk -v n="$1" -v t="$SMS" 'BEGIN { printf "%d", n * 100 / t + 0.5 }'; }
if [ "${GS_PROBE_MPS:-1}" = 1 ]; then
pair "p30-mpspct" none part $lo \
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(pct $lo)" \
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(pct $hi)"
pair "p50-mpspct" none part $half \
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" \
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"
pair "p50-none" none all $half
# no SM test, grids sized to the partition (the runtime's GSHARE_SM_MAP=blocks)
pair "p30-none-part" none part $lo
pair "p50-none-part" none part $half
fi
# green contexts: each client's launches go to a green context of its
# 8-SM groups (no SM test; grid = its SMs' worth of blocks)
if [ "${GS_PROBE_GREEN:-1}" = 1 ]; then
	run1 "alone-green-lo" green 0 $lo part
	line "alone green 0:$lo" "$O/alone-green-lo.log" "$(frac $lo)"
	run1 "alone-green-hi" green $lo $hi part
	line "alone green $lo:$hi" "$O/alone-green-hi.log" "$(frac $hi)"
	pair "p30-green" green part $lo
	pair "p50-green" green part $half
fi
echo "space_probe: table $O/table.txt (got = rate/solo, want = SM fraction)"
