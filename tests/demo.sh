#!/bin/sh
# make demo — gshare in 20 seconds.
#
# Starts gshared with a temporary configuration (GPUs found through NVML,
# else one simulated GPU), creates three allocations on GPU 0 with 20, 30
# and 50 shares, runs one job on each, shows the live share of each job
# once a second (GPU time as each job's host loop reports it), then the
# final totals.  Stops and removes everything it started, also on ^C.
#
# Hook for other jobs: DEMO_JOB is the command run for each job; it gets
# GSHARE_SOCKET, GSHARE_ALLOC, DEMO_NAME and DEMO_SECONDS in its
# environment and should run ~DEMO_SECONDS busy on the GPU through
# libgshare's host loop.  Default: when gshared found a real GPU and
# PyTorch can use it, an unmodified PyTorch bf16 matmul loop
# (tests/gpu/gate/work.py) with the launch gate preloaded; else, when the
# runtime's examples are built (nvcc present), the GPU eater example
#   gs-eater --run $DEMO_SECONDS   (libgshare, persistent kernels)
# else the simulated job,
#   gshare-simjob -n $DEMO_NAME -d $DEMO_SECONDS
# DEMO_SECONDS (default 15) changes the length.
set -u
B=${B:-build}
GSHARED=$B/node-agent/gshared
CTL=$B/node-agent/gsharectl
SIM=$B/runtime/sim/gshare-simjob
EATER=$B/runtime/examples/gs-eater
GATE=$B/runtime/gate/libgshare-gate.so
PY=/usr/bin/python3
DEMO_SECONDS=${DEMO_SECONDS:-15}
DEMO_JOB=${DEMO_JOB:-}

if [ "$(id -u)" != 0 ]; then
	echo "demo: run as root (creating allocations is root's job, as the" \
	     "Slurm and Kubernetes plugins do)" >&2
	exit 1
fi
for b in $GSHARED $CTL $SIM; do
	[ -x "$b" ] || { echo "demo: $b is not built (run make)" >&2; exit 1; }
done
case $DEMO_SECONDS in
''|*[!0-9]*) echo "demo: DEMO_SECONDS must be a number of seconds" >&2
	exit 1 ;;
esac

dir=$(mktemp -d /tmp/gshare-demo.XXXXXX)
sock=$dir/gshared.sock
apid=""
jpids=""
allocs=""

cleanup() {
	for p in $jpids; do kill "$p" 2>/dev/null; done
	for p in $jpids; do wait "$p" 2>/dev/null; done
	if [ -n "$apid" ]; then
		for a in $allocs; do
			$CTL -s "$sock" -t 2000 close "$a" >/dev/null 2>&1
		done
		kill "$apid" 2>/dev/null
		wait "$apid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM HUP
# output closed (e.g. piped into head): stop quietly, still cleaning up
trap 'exit 141' PIPE

cat > "$dir/gshare.yaml" <<CONF
socket: $sock
state_dir: $dir/state
metrics_listen: ""
log: stderr
gpus: auto
policy: wfq
slice: 4ms
CONF
echo "demo: starting gshared (config $dir/gshare.yaml)"
$GSHARED -d -f "$dir/gshare.yaml" 2>"$dir/gshared.log" &
apid=$!
deadline=$(( $(date +%s) + 15 ))
until $CTL -s "$sock" -t 500 ping >/dev/null 2>&1; do
	if ! kill -0 $apid 2>/dev/null; then
		echo "demo: gshared exited:" >&2
		cat "$dir/gshared.log" >&2
		apid=""
		exit 1
	fi
	if [ "$(date +%s)" -ge $deadline ]; then
		echo "demo: gshared did not answer within 15 s" >&2
		exit 1
	fi
	sleep 0.05
done
sed 's/^/  | /' "$dir/gshared.log"

# A real GPU: the jobs are real GPU jobs.  With PyTorch and the launch
# gate built: unmodified PyTorch programs under the gate; else the
# libgshare eater example.
real_gpu() {
	$CTL -s "$sock" status --json 2>/dev/null |
	$PY -c 'import json,sys; g=json.load(sys.stdin)["gpus"]; sys.exit(0 if g and not g[0]["simulated"] else 1)'
}
if [ -z "$DEMO_JOB" ] && [ -f "$GATE" ] && real_gpu &&
   python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
	>/dev/null 2>&1
then
	DEMO_JOB="LD_PRELOAD=$PWD/$GATE exec python3 $PWD/tests/gpu/gate/work.py matmul --seconds \$DEMO_SECONDS"
	echo "demo: real GPU and PyTorch found: each job is an unmodified" \
	     "PyTorch bf16 matmul loop under the launch gate ($GATE)"
elif [ -z "$DEMO_JOB" ] && [ -x "$EATER" ] && real_gpu
then
	DEMO_JOB="exec $EATER --run \$DEMO_SECONDS"
	echo "demo: real GPU found: each job is $EATER (libgshare)"
else
	[ -n "$DEMO_JOB" ] || echo "demo: no GPU found: each job is the simulated job $SIM"
fi

for spec in demo-a:20 demo-b:30 demo-c:50; do
	name=${spec%%:*}
	shares=${spec#*:}
	id=$($CTL -s "$sock" create --shares "$shares" --gpu 0 --job "$name") ||
		{ echo "demo: cannot create allocation for $name" >&2; exit 1; }
	allocs="$allocs $id"
	echo "demo: allocation $id: $name, $shares shares on GPU 0"
	if [ -n "$DEMO_JOB" ]; then
		GSHARE_SOCKET=$sock GSHARE_ALLOC=$id DEMO_NAME=$name \
		DEMO_SECONDS=$DEMO_SECONDS sh -c "$DEMO_JOB" \
			>"$dir/$name.out" 2>&1 &
	else
		GSHARE_SOCKET=$sock GSHARE_ALLOC=$id \
		$SIM -n "$name" -d "$DEMO_SECONDS" >"$dir/$name.out" 2>&1 &
	fi
	jpids="$jpids $!"
done

# Live table: once a second from the agent's status (GPU time reported
# by each job's host loop), until every job has ended.
$PY - "$CTL" "$sock" "$DEMO_SECONDS" "$dir" $jpids <<'EOF'
import json, os, subprocess, sys, time

ctl, sock, secs, d = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pids = [int(p) for p in sys.argv[5:]]
tty = sys.stdout.isatty()

def status():
    r = subprocess.run([ctl, "-s", sock, "-t", "2000", "status", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)

def alive(p):
    """The jobs are the shell's children: a zombie has ended too."""
    try:
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False

prev, first, t0 = {}, {}, time.monotonic()
last = status()
if last is None:
    print("demo: gshared does not answer")
    sys.exit(1)
for a in last["allocations"]:
    prev[a["id"]] = first[a["id"]] = (a["gpu_ns"], t0)
deadline = t0 + secs + 20
tick = 1
while True:
    time.sleep(max(0.0, t0 + tick - time.monotonic()))
    st = status()
    if st is None:
        print("demo: gshared does not answer")
        sys.exit(1)
    now = time.monotonic()
    gpu = st["gpus"][0]
    kind = "simulated GPU" if gpu["simulated"] else gpu["name"]
    rows = []
    busy = 0.0
    for a in st["allocations"]:
        i = a["id"]
        g = a["gpu_ns"]
        p = prev.get(i, (g, now))
        first.setdefault(i, (g, now))
        dt = now - p[1]
        s1 = (g - p[0]) / 1e9 / dt if dt > 0 else 0.0
        f = first[i]
        tt = now - t0
        stot = (g - f[0]) / 1e9 / tt if tt > 0 else 0.0
        busy += s1
        rows.append((a["labels"]["job"], a["shares"], a["weight"],
                     a["state"], s1, stot, g / 1e9, a["suspensions"]))
        prev[i] = (g, now)
    out = []
    out.append(f"gshare demo  t={now - t0:5.1f}s  GPU 0: {kind}  "
               f"policy {st['policy']}  busy {100 * busy:5.1f}%")
    out.append(f"  {'JOB':<8} {'SHARES':>6} {'WEIGHT':>6} {'STATE':<10} "
               f"{'SHARE(1s)':>9} {'SHARE(all)':>10} {'GPU s':>7} "
               f"{'SUSP':>6}")
    for r in rows:
        out.append(f"  {r[0]:<8} {r[1]:>6} {r[2]:>6} {r[3]:<10} "
                   f"{100 * r[4]:>8.1f}% {100 * r[5]:>9.1f}% {r[6]:>7.2f} "
                   f"{r[7]:>6}")
    if tty:
        sys.stdout.write("\033[H\033[J")
    print("\n".join(out), flush=True)
    if not tty:
        print()
    last = st
    if not any(alive(p) for p in pids) or now > deadline:
        break
    tick += 1

# Final totals: the agent's accounting and the jobs' own measurement.
print("final totals (agent: GPU time reported by the jobs' host loops)")
tot = sum(a["gpu_ns"] for a in last["allocations"]) or 1
print(f"  {'JOB':<8} {'SHARES':>6} {'GPU s':>7} {'OF GPU TIME':>11} "
      f"{'HELD s':>7} {'SUSPENSIONS':>11}")
for a in last["allocations"]:
    print(f"  {a['labels']['job']:<8} {a['shares']:>6} "
          f"{a['gpu_ns'] / 1e9:>7.2f} {100 * a['gpu_ns'] / tot:>10.1f}% "
          f"{a['held_ns'] / 1e9:>7.2f} {a['suspensions']:>11}")
print("jobs' own reports:")
for a in last["allocations"]:
    name = a["labels"]["job"]
    try:
        lines = open(f"{d}/{name}.out").read().split("\n")
        done = [l for l in lines if l.startswith("event=done")]
        print(f"  {done[-1] if done else (lines[-2] if len(lines) > 1 else '(no output)')}")
    except OSError:
        print(f"  {name}: (no output)")
EOF
rc=$?
# close the allocations (as the plugins do at step end) and show the
# same usage, durable, as sacct-style rows from the usage store
GSACCT="$B/node-agent/gsacct/gsacct --store $dir/state/usage.db -X -S now-1hour"
for a in $allocs; do $CTL -s "$sock" -t 2000 close "$a" >/dev/null; done
allocs=""
n=0
while [ -n "$($GSACCT -s RUNNING -n 2>/dev/null)" ] && [ $n -lt 100 ]; do
	sleep 0.02; n=$((n + 1))	# the closes commit within milliseconds
done
echo "usage store (gsacct -X):"
$GSACCT -o JobID,Share,Weight,GPUSec,HeldSec,Elapsed,AvgShare,Suspends,State |
	sed 's/^/  /'
jpids_left=""
for p in $jpids; do
	if kill -0 "$p" 2>/dev/null; then jpids_left="$jpids_left $p"; fi
done
jpids=$jpids_left
echo "demo: done; stopping gshared and removing $dir"
exit $rc
