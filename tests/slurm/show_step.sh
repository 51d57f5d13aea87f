#!/bin/bash
# show_step.sh NAME [wait2] — run as a task of the sbatch-steps case.
# Prints "STEP NAME alloc=<GSHARE_ALLOC|none> <the agent's line for it>".
# With wait2, also waits (20 s at most) until the other parallel step
# runs too, and prints how many allocations the job holds then.
# GS_PROBE: path of gs_probe; GS_MARKS: an empty directory.
set -u
name=$1
line=""
if [ -n "${GSHARE_ALLOC:-}" ]; then
	line=$("$GS_PROBE" status "$GSHARE_SOCKET" | grep "^alloc $GSHARE_ALLOC ")
fi
echo "STEP $name alloc=${GSHARE_ALLOC:-none} $line"
[ "${2:-}" = wait2 ] || exit 0
# Each parallel step marks that it runs and stays until the other has
# marked too (GS_MARKS: a directory both can write), then says how many
# allocations its job holds on the node at that moment (one: the job's).
touch "$GS_MARKS/$name"
end=$(($(date +%s) + 20))
until [ "$(find "$GS_MARKS" -type f | wc -l)" -ge 2 ]; do
	if [ "$(date +%s)" -gt "$end" ]; then
		echo "STEP $name never overlapped"
		exit 1
	fi
	sleep 0.05
done
n=$("$GS_PROBE" status "$GSHARE_SOCKET" | grep -c " job=$SLURM_JOB_ID ")
echo "STEP $name overlapped allocs=$n"
