#!/bin/sh
# Agent restart: running jobs survive the agent going away, re-attach to
# the same allocations, and nothing is lost or counted twice.
#
# One simulated GPU, three gshare-simjob jobs of shares 10:20:30 and
# weights 1:2:3 sharing it (guarantee plus surplus: 1/6, 2/6, 3/6).
#  1. kill -9 of the agent mid-run: the jobs keep running (their GPU time
#     grows during the outage); the restarted agent restores the same
#     allocation ids and the jobs re-attach; over a window after that the
#     shares are again 1/6, 2/6, 3/6 within SHARE_TOL.
#  2. SIGTERM and restart: the same again (a clean stop keeps them too);
#     a job that created its own allocation closes it after the restart.
#  3. When the jobs are done: `gsharectl close` works on the restored
#     allocations and its reply's GPU time covers their whole life (within
#     3% of what each job measured); gsacct's GPU seconds per job equal
#     what each job measured within 1% (or above it within the held time
#     the agent bills), rows COMPLETED.
#  4. A restart with the table file as it was before those closes (a kill
#     after the final rows were written, before the file was): the closed
#     allocations are not revived.
#  5. A run with a second GPU and an allocation on it, then a restart with
#     that GPU gone: the allocation is not restored and its usage row is
#     NODE_FAIL; a new allocation gets an id above every earlier one.
#  5b. A kill in the middle of a table save: the other slot is restored.
#  6. Restart with a corrupt state file: the agent starts, logs why, keeps
#     the file aside, and the allocations it held close as NODE_FAIL; new
#     ids still continue above the old ones (from the usage store).  A job
#     attached to one of them finds it gone and runs on unmanaged.
set -u
B=${B:-build}
GSHARED=${GSHARED:-$B/node-agent/gshared}
CTL=$B/node-agent/gsharectl
GSACCT=$B/node-agent/gsacct/gsacct
SIM=$B/runtime/sim/gshare-simjob
PY=/usr/bin/python3
DUR=${DUR:-22}			# job length, seconds
SHARE_TOL=${SHARE_TOL:-0.04}	# absolute, per job
T=$(mktemp -d /tmp/gs-restart.XXXXXX)
AGENT=""
JOBS=""

cleanup() {
	for p in $JOBS $AGENT; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() {
	echo "FAIL: $*"
	[ -f "$T/agent.log" ] && tail -25 "$T/agent.log"
	for f in "$T"/j?.err; do [ -s "$f" ] && { echo "$f:"; cat "$f"; }; done
	exit 1
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
wait_for() {
	_end=$(( $(date +%s) + $1 )); shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
	return 0
}

write_conf() {	# NGPUS
	cat > "$T/gshare.yaml" <<EOC
socket: $T/sock
state_dir: $T/state
gpus: {simulated: $1}
accounting_tick: 250ms
grace: 2s
log: stderr
EOC
}

start_agent() {
	rm -f "$T/sock"
	touch "$T/agent.log"
	_from=$(( $(wc -l < "$T/agent.log") + 1 ))
	"$GSHARED" -d -f "$T/gshare.yaml" >> "$T/agent.log" 2>&1 &
	AGENT=$!
	wait_for 10 sh -c "tail -n +$_from '$T/agent.log' | grep -q 'accounting: usage store'" ||
		fail "agent did not start"
	wait_for 10 "$CTL" -s "$T/sock" ping || fail "agent does not answer"
}

ctl() { "$CTL" -s "$T/sock" "$@"; }
status_json() { ctl status --json > "$T/status.json" || fail "status"; }
mono_now() { "$SIM" --now; }

# ids and attached pids of the allocations, "id:pid ..." in id order
attached() {
	status_json
	$PY - "$T/status.json" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1]))
print(" ".join("%d:%d" % (a["id"], a["pid"])
               for a in sorted(st["allocations"], key=lambda a: a["id"])))
EOF
}

# all three jobs attached again (every allocation of GPU 0 has a pid)
all_attached() {
	status_json
	$PY - "$T/status.json" "$A1" "$A2" "$A3" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1]))
want = set(int(x) for x in sys.argv[2:])
got = {a["id"]: a["pid"] for a in st["allocations"]}
sys.exit(0 if all(got.get(i, 0) != 0 for i in want) else 1)
EOF
}

# last progress gpu_s of job file $1
job_gpu() {
	$PY - "$1" <<'EOF'
import json, sys
g = 0.0
for line in open(sys.argv[1]):
    try:
        g = json.loads(line)["gpu_s"]
    except Exception:
        pass
print(g)
EOF
}

[ -x "$SIM" ] || fail "$SIM not built"
mkdir -p "$T/state" "$T/before-close"
write_conf 1
start_agent
A1=$(ctl create --shares 10 --weight 1 --gpu 0 --job r1) || fail "create"
A2=$(ctl create --shares 20 --weight 2 --gpu 0 --job r2) || fail "create"
A3=$(ctl create --shares 30 --weight 3 --gpu 0 --job r3) || fail "create"
IDS0="$A1 $A2 $A3"

AT=$(( $(mono_now) + 300000000 ))
for n in 1 2 3; do
	eval id=\$A$n
	"$SIM" --socket "$T/sock" --alloc "$id" --name "j$n" --at "$AT" \
		--duration "$DUR" --task-us 500 --interval-ms 250 --json \
		> "$T/j$n.out" 2> "$T/j$n.err" &
	JOBS="$JOBS $!"
done
wait_for 10 all_attached || fail "jobs did not attach"
# let them run a while under the agent
wait_for 10 sh -c "[ \$(( \$($SIM --now) - $AT )) -gt 3500000000 ]"

# ---- 1. kill -9 ----
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
g0=""
for n in 1 2 3; do g0="$g0 $(job_gpu "$T/j$n.out")"; done
# the outage: every job keeps running and makes progress on its own
grew() {
	i=0
	for n in 1 2 3; do
		i=$((i + 1))
		was=$(echo $g0 | cut -d' ' -f$i)
		now=$(job_gpu "$T/j$n.out")
		$PY -c "import sys; sys.exit(0 if $now > $was + 0.2 else 1)" ||
			return 1
	done
}
wait_for 10 grew || fail "jobs did not run on during the outage ($g0)"
for p in $JOBS; do
	kill -0 "$p" 2>/dev/null || fail "a job died with the agent"
done
start_agent
grep -q "restored 3 of 3 allocation" "$T/agent.log" ||
	fail "agent did not restore the 3 allocations"
wait_for 10 all_attached || fail "jobs did not re-attach after kill -9"
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "$IDS0" ] || fail "allocation ids after restart: '$ids', want '$IDS0'"
W0=$(( $(mono_now) - AT + 1000000000 ))	# window: 1 s after re-attach
echo "kill -9: jobs ran through the outage, re-attached to $ids"

# shares over [W0, W1] from the jobs' own progress lines
wait_for 15 sh -c "[ \$(( \$($SIM --now) - $AT )) -gt $(( W0 + 5000000000 )) ]"
W1=$(( $(mono_now) - AT ))
$PY - "$W0" "$W1" "$SHARE_TOL" "$T"/j1.out "$T"/j2.out "$T"/j3.out <<'EOF' ||
import json, sys
w0, w1 = int(sys.argv[1]) / 1e9, int(sys.argv[2]) / 1e9
tol = float(sys.argv[3])
d = []
for f in sys.argv[4:]:
    pts = [json.loads(l) for l in open(f) if l.startswith("{")]
    pts = [(p["wall_s"], p["gpu_s"]) for p in pts if p["event"] == "progress"]
    a = min((p for p in pts if p[0] >= w0), key=lambda p: p[0])
    b = max((p for p in pts if p[0] <= w1), key=lambda p: p[0])
    d.append(b[1] - a[1])
tot = sum(d)
sh = [x / tot for x in d]
print("shares after re-attach: %s (want 1/6 2/6 3/6)" %
      " ".join("%.3f" % x for x in sh))
ok = all(abs(s - w / 6) <= tol for s, w in zip(sh, (1, 2, 3)))
sys.exit(0 if ok else 1)
EOF
	fail "shares did not converge to 1:2:3 after the restart"

# ---- 2. SIGTERM, clean restart ----
# plus a job that created its own allocation (--create) on GPU 1: it
# must close it over a new connection when it ends after the restart
"$SIM" --socket "$T/sock" --create 10 --gpu 0 --name j4 --duration 4 \
	--task-us 500 > "$T/j4.out" 2> "$T/j4.err" &
J4=$!
JOBS="$JOBS $J4"
wait_for 10 sh -c "$CTL -s $T/sock status | grep -q j4" ||
	fail "j4 did not create its allocation"
kill -TERM "$AGENT"; wait "$AGENT"; rc=$?; AGENT=""
[ $rc = 0 ] || fail "agent exit status $rc on SIGTERM"
start_agent
wait_for 10 all_attached || fail "jobs did not re-attach after SIGTERM"
wait "$J4" || fail "j4 (--create) failed across the restart: $(cat "$T/j4.err")"
JOBS=$(echo "$JOBS" | sed "s/ $J4//")
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "$IDS0" ] || fail "allocation ids after SIGTERM: '$ids' (j4's closed?)"
echo "SIGTERM: allocations kept, jobs re-attached; j4 closed its own"

# ---- 3. the jobs end; close; accounting ----
for p in $JOBS; do wait "$p" || fail "a job failed"; done
JOBS=""
cp "$T/state/allocs.0" "$T/state/allocs.1" "$T/before-close/" ||
	fail "no table files to keep"
# the close reply covers the allocation's whole life, across both
# restarts (what the Slurm plugin puts into the job's totals), within 3%:
# a kill -9 loses what the jobs used after the last accounting tick from
# the agent's count (the usage store is exact: the jobs' own counters)
k=0
for id in $A1 $A2 $A3; do
	k=$((k + 1))
	ctl close "$id" > "$T/close.$k" || fail "gsharectl close $id (restored)"
done
"$GSACCT" --store "$T/state/usage.db" -S now-1hour --json > "$T/acct.json" ||
	fail "gsacct"
$PY - "$T/acct.json" "$T"/j1.out "$T"/j2.out "$T"/j3.out <<'EOF' ||
import json, sys
rows = json.load(open(sys.argv[1]))
if isinstance(rows, dict):
    rows = rows.get("jobs", rows.get("rows", []))
by = {}
for r in rows:
    by.setdefault(str(r.get("JobID", r.get("jobid"))), []).append(r)
ok = True
for i, f in enumerate(sys.argv[2:], 1):
    done = [json.loads(l) for l in open(f) if '"event":"done"' in l][-1]
    rs = by.get("r%d" % i, [])
    if len(rs) != 1:
        print("job r%d: %d usage rows, want 1" % (i, len(rs)))
        ok = False
        continue
    r = rs[0]
    g = float(r.get("GPUSec", r.get("gpusec", 0)))
    st = r.get("State", r.get("state"))
    h = float(r.get("HeldSec", r.get("heldsec", 0)))
    err = abs(g - done["gpu_s"]) / done["gpu_s"]
    print("job r%d: gsacct %.3f s (held %.3f s), job measured %.3f s "
          "(%.3f%%), %s" % (i, g, h, done["gpu_s"], 100 * err, st))
    # within 1% of the job's own figure, or above it but within what
    # the agent saw held (it bills at least 7/8 of the held time: on a
    # loaded machine a job's wake-up after a grant is billed to it)
    ok = ok and (err <= 0.01 or done["gpu_s"] < g <= h) and \
        st == "COMPLETED"
    c = open(f.replace("/j%d.out" % i, "/close.%d" % i)).read()
    cg = float(c.split("gpu time ")[1].split(" s")[0])
    cerr = abs(cg - done["gpu_s"]) / done["gpu_s"]
    print("job r%d: close reply %.3f s (%.3f%%)" % (i, cg, 100 * cerr))
    ok = ok and cerr <= 0.03
sys.exit(0 if ok else 1)
EOF
	fail "accounting does not match what the jobs measured"

# ---- 4. a kill after the final rows of a close, before the table file
# was rewritten (simulated by putting the old file back): the closed
# allocations are not revived, their rows stay COMPLETED ----
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
cp "$T/before-close/allocs.0" "$T/before-close/allocs.1" "$T/state/" ||
	fail "cannot put the old table files back"
start_agent
for id in $A1 $A2 $A3; do
	grep -q "allocation $id: closed before the restart" "$T/agent.log" ||
		fail "closed allocation $id revived from an old table file"
done
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "" ] || fail "closed allocations restored: '$ids'"
n=$(sqlite3 -readonly "$T/state/usage.db" \
	"SELECT COUNT(*) FROM allocs WHERE job IN ('r1','r2','r3') AND state = 1")
[ "$n" = 3 ] || fail "rows of the closed allocations: $n COMPLETED, want 3"
echo "stale table file: closed allocations not revived"

# ---- 5. a GPU gone ----
# a second GPU appears for one run, gets an allocation, and is gone again
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
write_conf 2
start_agent
A4=$(ctl create --shares 10 --weight 1 --gpu 1 --job r4) || fail "create"
wait_for 5 sh -c "[ \"\$(sqlite3 -readonly $T/state/usage.db \"SELECT COUNT(*) FROM allocs WHERE job = 'r4'\")\" = 1 ]" ||
	fail "row of r4 not stored"
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
write_conf 1
start_agent
grep -q "allocation $A4 .*not restored: its GPU is gone" "$T/agent.log" ||
	fail "no log line for the allocation whose GPU is gone"
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "" ] || fail "allocations after restart without GPU 1: '$ids'"
st=$(sqlite3 -readonly "$T/state/usage.db" \
	"SELECT state FROM allocs WHERE agent_id = $A4 AND job = 'r4'")
[ "$st" = 4 ] || fail "allocation $A4 stored state $st, want NODE_FAIL (4)"
A5=$(ctl create --shares 10 --gpu 0 --job r5) || fail "create"
[ "$A5" -gt "$A4" ] || fail "new allocation id $A5 reuses an earlier one"
echo "GPU gone: allocation $A4 NODE_FAIL; new id $A5"

# ---- 5b. a kill in the middle of a save: the slot being written (the
# older generation) is torn, the newer one has every acknowledged change
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
g0=$(sed -n 's/^seq //p' "$T/state/allocs.0")
g1=$(sed -n 's/^seq //p' "$T/state/allocs.1")
[ -n "$g0" ] && [ -n "$g1" ] || fail "table slots without a generation"
if [ "$g0" -lt "$g1" ]; then old=0; else old=1; fi
head -c 100 "$T/state/allocs.$old" > "$T/torn" && mv "$T/torn" "$T/state/allocs.$old"
start_agent
grep -q "damaged copy skipped" "$T/agent.log" ||
	fail "no log line for the torn table slot"
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "$A5" ] || fail "after a torn slot: allocations '$ids', want $A5"
echo "torn table slot: generation $g0/$g1, the newer one restored ($A5)"

# ---- 6. corrupt state file; a job whose allocation is then gone ----
A6=$(ctl create --shares 10 --gpu 0 --job r6) || fail "create"
wait_for 5 sh -c "[ \"\$(sqlite3 -readonly $T/state/usage.db \"SELECT COUNT(*) FROM allocs WHERE job IN ('r5','r6')\")\" = 2 ]" ||
	fail "rows of r5/r6 not stored"
"$SIM" --socket "$T/sock" --alloc "$A6" --name j6 --duration 4 \
	--task-us 500 --json > "$T/j6.out" 2> "$T/j6.err" &
JOBS=$!
A1=$A6 A2=$A6 A3=$A6 wait_for 10 all_attached || fail "j6 did not attach"
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
for f in "$T"/state/allocs.0 "$T"/state/allocs.1; do echo junk >> "$f"; done
start_agent
grep -q "cannot restore allocations: .*allocs" "$T/agent.log" ||
	fail "no log line for the corrupt state file"
[ -f "$T/state/allocs.0.bad" ] && [ -f "$T/state/allocs.1.bad" ] ||
	fail "corrupt files not kept aside"
ids=$(attached | sed 's/:[0-9]*//g')
[ "$ids" = "" ] || fail "allocations restored from a corrupt file: '$ids'"
n=$(sqlite3 -readonly "$T/state/usage.db" \
	"SELECT COUNT(*) FROM allocs WHERE job IN ('r5','r6') AND state = 4")
[ "$n" = 2 ] || fail "$n of 2 allocations NODE_FAIL after a corrupt state file"
# j6 cannot re-attach (ENOENT): it runs on unmanaged, alone on the GPU,
# and ends normally having had the GPU all the time
wait "$JOBS" || fail "j6 failed once its allocation was gone"
JOBS=""
$PY - "$T/j6.out" <<'EOF' || fail "j6 did not run on unmanaged"
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if '"event":"done"' in l][-1]
print("unmanaged job: gpu_s %.3f of wall_s %.3f" % (d["gpu_s"], d["wall_s"]))
sys.exit(0 if d["gpu_s"] >= 0.9 * d["wall_s"] else 1)
EOF
# the id counter is lost with the file: the usage store still knows it
A7=$(ctl create --shares 10 --gpu 0 --job r7) || fail "create"
[ "$A7" -gt "$A6" ] || fail "id $A7 after a corrupt state file reuses one"
echo "corrupt state file: agent started, allocations NODE_FAIL, next id $A7"
echo "PASS"
