#!/bin/bash
# show_step.sh NAME [wait2] — run as a task of the sbatch-steps case.
# Prints "STEP NAME alloc=<GSHARE_ALLOC|none> <the agent's line for it>".
# With wait2, also waits (20 s at most) until two 10-share allocations of
# this job exist at once, proving the two --exact steps overlap.
# GS_PROBE: path of gs_probe; GS_MARKS: an empty directory.
set -u
name=$1
line=""
if [ -n "${GSHARE_ALLOC:-}" ]; then
	line=$("$GS_PROBE" status "$GSHARE_SOCKET" | grep "^alloc $GSHARE_ALLOC ")
fi
echo "STEP $name alloc=${GSHARE_ALLOC:-none} $line"
[ "${2:-}" = wait2 ] || exit 0
# Each parallel step marks when it has seen both allocations, and stays
# until the other has marked too (GS_MARKS: a directory both can write).
end=$(($(date +%s) + 20))
while :; do
	if [ ! -e "$GS_MARKS/$name" ]; then
		n=$("$GS_PROBE" status "$GSHARE_SOCKET" |
			grep " job=$SLURM_JOB_ID " | grep -c " shares=10 ")
		[ "$n" -ge 2 ] && touch "$GS_MARKS/$name"
	fi
	[ "$(find "$GS_MARKS" -type f | wc -l)" -ge 2 ] && break
	if [ "$(date +%s)" -gt "$end" ]; then
		echo "STEP $name never overlapped"
		exit 1
	fi
	sleep 0.05
done
echo "STEP $name overlapped"
