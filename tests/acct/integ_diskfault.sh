#!/bin/sh
# Disk faults lose nothing and stall nothing (issue 14, items 5-7).  A
# real gshared (simulated GPUs), root only, in a private mount namespace
# (every mount goes away with the test):
#  1. State directory read-only (a tmpfs remounted ro): CREATE, CLOSE,
#     SET_WEIGHT and LABEL... fail with "refused, nothing changed"; after a
#     kill -9 and a restart with the directory writable again the table is
#     exactly what was acknowledged (the closed-refused allocation is
#     back with its shares, the refused create is not there, the weight is
#     the acknowledged one).
#  2. Usage store on a full filesystem (a small tmpfs filled up): jobs run
#     and close their allocations during the outage; gsharectl status
#     warns (beside a Slurm spool record waiting: both warnings); once
#     space returns every row is there, COMPLETED, with the GPU time its
#     job measured (within 1 %), and the store's warning is gone, the
#     spool's stays until the spool is empty.
#     A close during an outage followed by a kill -9: at the next start its
#     row is COMPLETED (not NODE_FAIL) and the allocation is not revived.
#  3. State directory frozen (fsfreeze on a loop-mounted ext4): a
#     set-weight waits for the disk while PING answers fast and the token
#     keeps rotating between two busy jobs; it succeeds once thawed.  A
#     create whose caller gave up meanwhile is not carried out (not in
#     memory, nor after a kill -9).
#     Prints the PING latency figures (docs/agent.md).
#  4. Usage store frozen: a close is answered (after at most 2 s), status
#     warns of the stall, and after the thaw the row is COMPLETED with the
#     GPU time its job measured.
set -u
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root (mounts, fsfreeze)"
	exit 0
fi
if [ -z "${GS_DISKFAULT_NS:-}" ] &&
   ! unshare -m --propagation private true 2>/dev/null; then
	echo "SKIP: cannot make a private mount namespace (unshare -m)"
	exit 0
fi
if [ -z "${GS_DISKFAULT_NS:-}" ]; then
	GS_DISKFAULT_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. tests/acct/lib.sh
CTL=$B/node-agent/gsharectl
ctl() { "$CTL" -s "$T/sock" -t 20000 "$@"; }
unmount_all() {
	fsfreeze -u "$T/frozen" 2>/dev/null
	for m in "$T/frozen" "$T/store" "$T/state"; do
		mountpoint -q "$m" && umount -l "$m"
	done
}
trap 'unmount_all; cleanup' EXIT INT TERM

# conf STATE_DIR STORE_PATH
conf() {
	cat > "$T/gshare.yaml" <<EOC
socket: $T/sock
state_dir: $1
usage_db: $2
gpus: {simulated: 1}
accounting_tick: 100ms
metrics_listen: ""
watch_spool: $T/spool
grace: 2s
log: stderr
EOC
}
q() { sqlite3 -readonly -cmd ".timeout 5000" "$1" "$2"; }
# weight ID: the allocation's weight per gsharectl status --json
weight() {
	ctl status --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(a["weight"]) for a in d["allocations"] if a["id"] == int(sys.argv[1])))' "$1"
}
memlim() {	# memlim ID: the allocation's memory limit in MiB
	ctl status --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(a["mem_limit"] >> 20) for a in d["allocations"] if a["id"] == int(sys.argv[1])))' "$1"
}
ids() {
	ctl status --json | /usr/bin/python3 -c '
import json, sys
print(" ".join(str(a["id"]) for a in json.load(sys.stdin)["allocations"]))'
}
# billed_ok OWN GPU HELD: the stored GPU time is the job's own within 1 %,
# or above it but within the time the agent saw held (it bills at least
# 7/8 of the held time: on a loaded machine a job's wake-up after a grant
# is billed to it)
billed_ok() {
	/usr/bin/python3 -c "import sys; o, g, h = map(int, sys.argv[1:4]); sys.exit(0 if abs(g - o) <= o / 100 or o < g <= h else 1)" "$1" "$2" "$3"
}

refused() {	# refused WHAT CMD...: must fail, nothing changed
	what=$1; shift
	if out=$(ctl "$@" 2>&1); then
		fail "$what succeeded on a read-only state dir: $out"
	fi
	echo "$out" | grep -q "refused, nothing changed" ||
		fail "$what: unclear error: $out"
}

# ---- 1. read-only state directory ----
mkdir -p "$T/state" "$T/store" "$T/frozen"
mount -t tmpfs -o size=4m tmpfs "$T/state" || fail "mount tmpfs"
conf "$T/state" "$T/store/usage.db"
start_agent
a=$(ctl create --shares 30 --job 901) || fail "create a"
b=$(ctl create --shares 20 --job 902) || fail "create b"
ctl set-weight "$a" 7 > /dev/null || fail "set-weight"
ctl set-mem "$a" 10G > /dev/null || fail "set-mem"
mount -o remount,ro "$T/state" || fail "remount ro"
refused close close "$b"
refused set-weight set-weight "$a" 9
refused set-mem set-mem "$a" 12G
[ "$(memlim "$a")" = 10240 ] || fail "limit after a refused set-mem: $(memlim "$a") MiB"
refused create create --shares 10 --job 903
[ "$(ids)" = "$a $b" ] || fail "in memory after refusals: $(ids)"
[ "$(weight "$a")" = 7 ] || fail "weight after a refused set: $(weight "$a")"
grep -q "state file: .*refused, nothing changed" "$T/agent.log" ||
	fail "no log line for the refused writes"
ctl ping > /dev/null || fail "agent down after refused writes"
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
mount -o remount,rw "$T/state" || fail "remount rw"
start_agent
[ "$(ids)" = "$a $b" ] || fail "after kill -9: $(ids), want '$a $b'"
[ "$(weight "$a")" = 7 ] || fail "weight after kill -9: $(weight "$a")"
[ "$(memlim "$a")" = 10240 ] || fail "limit after kill -9: $(memlim "$a") MiB"
c=$(ctl create --shares 10 --job 904) || fail "create after restart"
[ "$c" -gt "$b" ] || fail "id $c reused"
for x in $a $b $c; do ctl close "$x" > /dev/null || fail "close $x"; done
echo "read-only state dir: refused requests changed nothing, kill -9 kept exactly what was acknowledged"

# ---- 2. usage store on a full filesystem ----
kill "$AGENT"; wait "$AGENT" || fail "agent stop: exit $?"; AGENT=""
mount -t tmpfs -o size=2m tmpfs "$T/store" || fail "mount store tmpfs"
start_agent
wait_for 10 test -s "$T/store/usage.db-wal" || fail "no WAL"
dd if=/dev/zero of="$T/store/fill" bs=16k 2>/dev/null
[ "$(df --output=avail "$T/store" | tail -1)" -lt 64 ] ||
	fail "store filesystem not full"
NJ=6
i=0
while [ $i -lt $NJ ]; do
	"$JOB" --socket "$T/sock" --shares 10 --job $((950 + i)) --step 0 \
		--work 0.3 --task-us 1000 --close > "$T/job$i.out" \
		2> "$T/job$i.err" &
	PIDS="$PIDS $!"
	i=$((i + 1))
done
# beside them, a job that writes counters of nearly 2^64 (its usage is
# cut to what it could have used, acct.c bound_delta): the honest rows
# below still come out whole, its own row bounded
"$B/runtime/sim/gshare-simjob" -s "$T/sock" --create 10 -n scrib --scribble \
	-d 1 > "$T/scrib.out" 2>&1 &
PIDS="$PIDS $!"
for p in $PIDS; do wait "$p" || fail "job: $(cat "$T"/job*.err "$T/scrib.out")"; done
PIDS=""
# a Slurm total waiting for slurmdbd at the same time: both warnings
mkdir -p "$T/spool"
touch -d '-1 min' "$T/spool/job-77"
wait_for 15 sh -c "'$CTL' -s '$T/sock' status | grep -q 'WARNING: .*usage store behind'" ||
	fail "no warning in gsharectl status while the store is full: $(ctl status)"
wait_for 5 sh -c "'$CTL' -s '$T/sock' status | grep -q 'WARNING: 1 Slurm totals waiting in .*; usage store behind'" ||
	fail "the store and the spool warnings are not both shown: $(ctl status)"
grep -q "usage store .*behind by .*full" "$T/agent.log" ||
	fail "no log line naming the store and the error"
n=$(q "$T/store/usage.db" "SELECT COUNT(*) FROM allocs WHERE job LIKE '95_' AND end_ns > 0")
echo "during the outage: $n of $NJ closed rows on disk"
rm -f "$T/store/fill"
wait_for 20 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' '$T/store/usage.db' \"SELECT COUNT(*) FROM allocs WHERE job LIKE '95_' AND state = 1\") = $NJ ]" ||
	fail "rows after space returned: $(q "$T/store/usage.db" "SELECT job, state, gpu_ns FROM allocs")"
i=0
while [ $i -lt $NJ ]; do
	own=$(sed -n 's/.* gpu_ns=\([0-9]*\) .*/\1/p' "$T/job$i.out")
	got=$(q "$T/store/usage.db" "SELECT gpu_ns || ' ' || held_ns FROM allocs WHERE job = '$((950 + i))'")
	billed_ok "$own" $got ||
		fail "job $((950 + i)): stored $got ns, measured $own ns"
	i=$((i + 1))
done
wait_for 10 sh -c "[ \"\$(sqlite3 -readonly -cmd '.timeout 5000' '$T/store/usage.db' \"SELECT state FROM allocs WHERE job = 'scrib'\")\" = 1 ]" ||
	fail "the scribbler's row: $(q "$T/store/usage.db" "SELECT job, state FROM allocs WHERE job = 'scrib'")"
sc=$(q "$T/store/usage.db" "SELECT state || ' ' || gpu_ns || ' ' || held_ns FROM allocs WHERE job = 'scrib'")
echo "the scribbler's row (state gpu_ns held_ns): $sc"
set -- $sc
# closed, and no more than its age (under 10 s) times 16 streams plus 2 s
[ "${1:-}" = 1 ] && [ "${2:-x}" -ge 0 ] && [ "$2" -le 162000000000 ] &&
	[ "${3:-x}" -ge 0 ] && [ "$3" -le 162000000000 ] ||
	fail "the scribbler's row: '$sc'"
sums=$(q "$T/store/usage.db" "SELECT SUM(gpu_ns) >= 0 AND SUM(block_tasks) >= 0 AND SUM(suspensions) >= 0 FROM allocs")
[ "$sums" = 1 ] || fail "the store's sums: '$sums'"
wait_for 10 sh -c "! '$CTL' -s '$T/sock' status | grep -q 'usage store behind'" ||
	fail "warning still shown after the store caught up"
ctl status | grep -q 'WARNING: 1 Slurm totals waiting in' ||
	fail "the spool warning went with the store's: $(ctl status)"
rm -f "$T/spool/job-77"
wait_for 5 sh -c "! '$CTL' -s '$T/sock' status | grep -q WARNING" ||
	fail "warning still shown after the spool emptied: $(ctl status)"
grep -q "caught up, nothing lost" "$T/agent.log" || fail "no caught-up line"
echo "full usage store: $NJ allocations closed during the outage, every row COMPLETED with its measured GPU time"
# a kill while the store is behind: a close that reached the table file
# but not the store finishes as COMPLETED at the next start (not
# NODE_FAIL, and the allocation is not revived)
"$JOB" --socket "$T/sock" --shares 10 --job 959 --step 0 --work 1.5 \
	--task-us 1000 --close > "$T/job959.out" 2>&1 &
J=$!
PIDS="$J"
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' '$T/store/usage.db' \"SELECT COUNT(*) FROM allocs WHERE job = '959'\") = 1 ]" ||
	fail "no row for job 959"
dd if=/dev/zero of="$T/store/fill" bs=16k 2>/dev/null
wait "$J" || fail "job 959: $(cat "$T/job959.out")"
PIDS=""
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
rm -f "$T/store/fill"
start_agent
[ "$(ids)" = "" ] || fail "closed allocation revived: $(ids)"
st=$(q "$T/store/usage.db" "SELECT state FROM allocs WHERE job = '959'")
[ "$st" = 1 ] || fail "row of a close cut by a kill: state '$st', want 1 (COMPLETED)"
grep -q "closed just before the previous run ended" "$T/agent.log" ||
	fail "no log line for the finished row"
echo "kill while behind: the close's row finished COMPLETED at the next start"

# ---- 3. frozen state directory ----
kill "$AGENT"; wait "$AGENT" || fail "agent stop: exit $?"; AGENT=""
truncate -s 16M "$T/ext4.img"
if ! command -v mkfs.ext4 > /dev/null || ! command -v fsfreeze > /dev/null
then
	echo "SKIP parts 3 and 4: no mkfs.ext4 or fsfreeze"
	echo PASS
	exit 0
fi
mkfs.ext4 -q "$T/ext4.img" || fail "mkfs"
if ! mount -o loop "$T/ext4.img" "$T/frozen"; then
	echo "SKIP parts 3 and 4: no loop device"
	echo PASS
	exit 0
fi
conf "$T/frozen" "$T/store/usage.db"
start_agent
for i in 0 1; do
	"$JOB" --socket "$T/sock" --shares 40 --job $((960 + i)) \
		--work 30 --task-us 500 > /dev/null 2>&1 &
	PIDS="$PIDS $!"
done
wait_for 10 sh -c "[ \$('$CTL' -s '$T/sock' status --json | grep -o '\"id\"' | wc -l) -ge 2 ]" ||
	fail "jobs did not start"
x=$(ids | cut -d' ' -f1)
before=$(ids)
fsfreeze -f "$T/frozen" || fail "fsfreeze"
# a create whose caller gives up while its write waits for the disk is
# not carried out (nobody would know the allocation)
"$CTL" -s "$T/sock" -t 300 create --shares 5 --job 969 > "$T/create.out" 2>&1 &&
	fail "create answered while the state dir was frozen"
ctl set-weight "$x" 5 > "$T/setw.out" 2>&1 &
SETW=$!
sleep 0.3	# let the write reach the frozen disk (not a wait on a result)
/usr/bin/python3 - "$CTL" "$T/sock" > "$T/ping.txt" <<'PY' || fail "while frozen: $(cat "$T/ping.txt")"
import json, subprocess, sys, time
ctl, sock = sys.argv[1], sys.argv[2]
lat, holders = [], set()
end = time.time() + 3
while time.time() < end:
    t = time.monotonic()
    subprocess.run([ctl, "-s", sock, "-t", "2000", "ping"], check=True,
                   stdout=subprocess.DEVNULL)
    lat.append(time.monotonic() - t)
    st = json.loads(subprocess.run([ctl, "-s", sock, "status", "--json"],
                                   check=True, capture_output=True).stdout)
    holders.update(g["holder"] for g in st["gpus"] if g["holder"])
lat.sort()
print("ping during a frozen state write: %d pings, median %.1f ms, max %.1f ms; token holders seen: %d"
      % (len(lat), lat[len(lat) // 2] * 1e3, lat[-1] * 1e3, len(holders)))
assert lat[-1] < 1.0, "a ping took %.2f s" % lat[-1]
assert len(holders) >= 2, "the token stopped rotating"
PY
cat "$T/ping.txt"
kill -0 "$SETW" 2>/dev/null || fail "set-weight returned while the disk was frozen: $(cat "$T/setw.out")"
fsfreeze -u "$T/frozen" || fail "thaw"
wait "$SETW" || fail "set-weight after the thaw: $(cat "$T/setw.out")"
[ "$(weight "$x")" = 5 ] || fail "weight after the thaw: $(weight "$x")"
[ "$(ids)" = "$before" ] || fail "allocations after the thaw: $(ids), want $before"
grep -q "not created: its requester left" "$T/agent.log" ||
	fail "no log line for the abandoned create"
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
start_agent
[ "$(ids)" = "$before" ] || fail "after kill -9: $(ids), want $before"
echo "frozen state dir: PING and the token went on, the set-weight waited for the disk"

# ---- 4. frozen usage store ----
for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
PIDS=""
kill "$AGENT"; wait "$AGENT" || fail "agent stop: exit $?"; AGENT=""
conf "$T/state" "$T/frozen/usage.db"
start_agent
"$JOB" --socket "$T/sock" --shares 10 --job 970 --step 0 --work 1.5 \
	--task-us 1000 --close > "$T/job970.out" 2>&1 &
J=$!
PIDS="$J"
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' '$T/frozen/usage.db' \"SELECT COUNT(*) FROM allocs WHERE job = '970'\") = 1 ]" ||
	fail "no row for job 970"
fsfreeze -f "$T/frozen" || fail "fsfreeze the store"
# the close's reply waits for its final row at most 2 s, then goes
wait "$J" || fail "job 970 (its close) while the store is frozen: $(cat "$T/job970.out")"
PIDS=""
wait_for 10 sh -c "'$CTL' -s '$T/sock' status | grep -q 'WARNING: usage store behind.*a write has not finished'" ||
	fail "no stall warning: $(ctl status)"
ctl ping > /dev/null || fail "ping while the store is frozen"
fsfreeze -u "$T/frozen" || fail "thaw the store"
own=$(sed -n 's/.* gpu_ns=\([0-9]*\) .*/\1/p' "$T/job970.out")
wait_for 20 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' '$T/frozen/usage.db' \"SELECT state FROM allocs WHERE job = '970'\") = 1 ]" ||
	fail "row of job 970 after the thaw: $(q "$T/frozen/usage.db" "SELECT state, gpu_ns FROM allocs WHERE job = '970'")"
got=$(q "$T/frozen/usage.db" "SELECT gpu_ns || ' ' || held_ns FROM allocs WHERE job = '970'")
billed_ok "$own" $got ||
	fail "job 970: stored $got ns, measured $own ns"
grep -q "final usage row is not on disk yet" "$T/agent.log" ||
	fail "no log line for the close answered before its row"
echo "frozen usage store: the close was answered, its row landed COMPLETED after the thaw"
echo PASS
