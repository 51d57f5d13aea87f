#!/bin/sh
# Weighted share error end to end: a live gshared with one simulated GPU
# and 2, 4, 8 gshare-simjob processes (weights 1:3, 1:1:2:4,
# 1:1:1:1:2:2:4:4) running SECONDS (default 10) in the same window.  Each
# job reports its GPU time once a second; per 1 s window, each job's
# share of the GPU time delivered in that window is compared with its
# weight's share.  Prints a markdown table: worst and mean error
# (percentage points) over all windows and jobs, and how busy the GPU
# was.  Target (DESIGN §6): <= 1 point per 1 s window, 2-8 jobs.
# Usage: tests/sched/bench_shares.sh [SECONDS] [TASK_US]
set -u
secs=${1:-10}
task=${2:-500}
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsbench "$SIM"

gs_agent_conf <<CONF
gpus:
  simulated: 1
policy: wfq
slice: 4ms
CONF
gs_agent_start

echo "weighted share error, gshared + gshare-simjob, ${secs} s per set," \
	"${task} us block-tasks, slice 4 ms, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| jobs | weights | worst error (1 s windows) | mean error | worst error (whole run) | GPU busy |"
echo "|---:|---|---:|---:|---:|---:|"
for set in "1 3" "1 1 2 4" "1 1 1 1 2 2 4 4"; do
	n=0
	sum=0
	for w in $set; do sum=$((sum + w)); done
	at=$(( $($SIM --now) + 1500000000 ))
	rm -f "$dir"/j*.out
	jpids=""
	for w in $set; do
		n=$((n + 1))
		shares=$(( w * 80 / sum ))
		[ $shares -ge 1 ] || shares=1
		$SIM -s "$sock" --create "$shares:$w" -n "j$n" -d "$secs" \
			--at $at -t "$task" -i 1000 >"$dir/j$n.out" 2>&1 &
		jpids="$jpids $!"
	done
	for p in $jpids; do wait "$p" || { echo "job failed" >&2; exit 1; }; done
	jpids=""
	$PY - "$dir" "$set" "$secs" <<'EOF'
import sys
d, ws, secs = sys.argv[1], [int(x) for x in sys.argv[2].split()], int(sys.argv[3])
series = []
for i in range(len(ws)):
    pts = [(0.0, 0.0)]
    for ln in open(f"{d}/j{i + 1}.out"):
        kv = dict(x.split("=", 1) for x in ln.split() if "=" in x)
        pts.append((float(kv["wall_s"]), float(kv["gpu_s"])))
    series.append(pts)

def gpu_at(pts, t):
    return min(pts, key=lambda p: abs(p[0] - t))[1]

tw = sum(ws)
errs, busy = [], []
for k in range(secs):
    g = [gpu_at(s, k + 1) - gpu_at(s, k) for s in series]
    tot = sum(g)
    busy.append(tot)
    for x, w in zip(g, ws):
        errs.append(abs(100.0 * x / tot - 100.0 * w / tw))
g = [gpu_at(s, secs) for s in series]
whole = max(abs(100.0 * x / sum(g) - 100.0 * w / tw) for x, w in zip(g, ws))
print(f"| {len(ws)} | {':'.join(map(str, ws))} | {max(errs):.2f} | "
      f"{sum(errs) / len(errs):.2f} | {whole:.2f} | "
      f"{100.0 * sum(busy) / secs:.1f}% |")
EOF
done
