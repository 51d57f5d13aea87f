#!/bin/sh
# Integration test of the agent's MPS control daemon supervision
# (node-agent/mps.c) against a stand-in control daemon
# (tests/agent/fake_mps_control.sh, named by mps_control).  Checks: the
# first space allocation on a GPU starts one daemon there (environment,
# pipe directory owned by the allocation's uid, mode 0700), the CREATE
# reply and STATUS carry the pipe directory; a second allocation of that
# uid shares it, another uid's gets none, time mode starts nothing; a
# killed daemon is restarted and the allocations stay; a daemon that keeps
# dying marks the GPU unhealthy and a recovered one healthy again; the
# planner's partitions, thread percentages and reasons show in STATUS and
# reach a job's control page only with space_partitions, resized as
# allocations come and go; the
# last close quits it (and kills one that ignores quit); a daemon serving
# open allocations outlives the agent's stop or kill and is adopted by the
# next agent; with time_mps, time allocations of the served uid are
# clients too (another uid's are not) and the last close quits it.  Polls with deadlines; cleans up on any exit.
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsmps
# the daemons run as the users they serve: they reach their directories
# (and the test's knob files) under $dir
chmod 755 "$dir"
FAKE=$(cd "$(dirname "$0")" && pwd)/fake_mps_control.sh
# per user: <state_dir>/mps/<gpu>/<uid>/{pipe,log}
log0=$dir/state/mps/0/1000/log
pipe0=$dir/state/mps/0/1000/pipe
cur=1000	# the uid GPU 0's daemon serves now (dpid)
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# the stand-ins this test may have left: killed by pid, on any exit
trap gs_mps_cleanup EXIT
# until CMD succeeds (5 s): until5 DESC CMD...
until5() {
	desc=$1; shift
	t0=$(ms)
	until "$@"; do
		if [ $(( $(ms) - t0 )) -gt 5000 ]; then
			bad "$desc: not after 5 s"
			return 1
		fi
		sleep 0.05
	done
	ok "$desc ($(( $(ms) - t0 )) ms)"
}
dpid() { cat "$dir/state/mps/0/$cur/log/pid" 2>/dev/null; }
alive() { p=$(dpid) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }
field() {	# field ALLOC KEY: from status --json
	$CTL -s "$sock" status --json | $PY -c '
import json, sys
a = [a for a in json.load(sys.stdin)["allocations"] if a["id"] == int(sys.argv[1])]
print(a[0][sys.argv[2]] if a else "none")' "$1" "$2"
}
# an allocation still open (created, or idle after the probe left)
live() { case $(field "$1" state) in created|idle) return 0;; esac; return 1; }
healthy() {
	$CTL -s "$sock" status --json | $PY -c '
import json, sys
print([g for g in json.load(sys.stdin)["gpus"] if g["index"] == 0][0]["healthy"])'
}

gs_agent_conf <<CONF
gpus: {simulated: 2}
mps_control: $FAKE
space_partitions: false
CONF
gs_agent_start "" FAKE_MPS_FAIL=$dir/fail FAKE_MPS_DEAF=$dir/deaf

t=$($CTL -s "$sock" create --shares 10 --gpu 0 --uid 1000)
[ -d "$dir/state/mps" ] && bad "a time-mode allocation started MPS" ||
	ok "time mode starts no daemon"
a=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
until5 "first space allocation starts the daemon" alive
p1=$(dpid)
grep -q "^start $p1 CUDA_VISIBLE_DEVICES=0 pipe=$pipe0\$" "$log0/control.log" &&
	ok "daemon environment: GPU 0, its pipe directory" ||
	bad "control.log: $(cat "$log0/control.log")"
[ "$(stat -c %u "/proc/$p1")" = 1000 ] &&
	ok "daemon runs as uid 1000, the user it serves" ||
	bad "daemon uid $(stat -c %u "/proc/$p1")"
[ "$(stat -c '%u %a' "$pipe0")" = "1000 700" ] &&
	ok "pipe directory owned by uid 1000, mode 700" ||
	bad "pipe directory: $(stat -c '%u %a' "$pipe0")"
[ "$(field "$a" mps_pipe)" = "$pipe0" ] && ok "STATUS carries the pipe" ||
	bad "mps_pipe of $a: $(field "$a" mps_pipe)"
[ "$(field "$t" mps_pipe)" = "" ] && ok "time mode: no pipe" ||
	bad "time mode pipe: $(field "$t" mps_pipe)"
b=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid 1000 --mode space)
c=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid 1001 --mode space)
[ "$(dpid)" = "$p1" ] && [ "$(grep -c '^start' "$log0/control.log")" = 1 ] &&
	ok "a second allocation of the uid shares the daemon" ||
	bad "second allocation: pid $(dpid), log $(cat "$log0/control.log")"
[ "$(field "$b" mps_pipe)" = "$pipe0" ] && [ "$(field "$c" mps_pipe)" = "" ] &&
	ok "uid 1001 gets no pipe (MPS serves uid 1000)" ||
	bad "pipes: $b '$(field "$b" mps_pipe)', $c '$(field "$c" mps_pipe)'"
# the planner's decisions (classes unknown: co-run; 30:20 of 16 granules)
sp() { echo "$(field "$1" sm_first)+$(field "$1" sm_count) $(field "$1" mps_pct) $(field "$1" space)"; }
[ "$(sp "$a")" = "0+80 0 co-runs with $b: unknown + unknown" ] &&
[ "$(sp "$b")" = "80+52 0 co-runs with $a: unknown + unknown" ] &&
[ "$(sp "$c")" = "0+132 0 time-shared: uid 1001, MPS serves uid 1000" ] &&
	ok "partitions 80/52 SMs, no thread cap (space_unmodified: turns), uid 1001 time-shared" ||
	bad "plan: $(sp "$a") / $(sp "$b") / $(sp "$c")"
# space_unmodified: cap (reloaded): jobs without libgshare get a thread
# cap sized by share
gs_agent_conf <<CONF
gpus: {simulated: 2}
mps_control: $FAKE
space_partitions: false
space_unmodified: cap
CONF
kill -HUP "$apid"
capped() { [ "$(field "$a" mps_pct) $(field "$b" mps_pct) $(field "$c" mps_pct)" = "30 20 0" ]; }
until5 "reloaded with space_unmodified: cap: thread percentages 30/20, uid 1001 none" capped
# without space_partitions the plan stays out of the control pages
PROBE=$B/tests/agent/space_probe
$PROBE "$sock" "$a" 1 > "$dir/probe0" 2>&1 < /dev/null
[ "$(cat "$dir/probe0")" = "part 0 0 0" ] &&
	ok "space_partitions off: the page keeps no partition" ||
	bad "page with space_partitions off: $(cat "$dir/probe0")"
$CTL -s "$sock" status | grep -q "space: .*MPS $pipe0" &&
	ok "gsharectl status shows the pipe" ||
	bad "status: $($CTL -s "$sock" status)"
[ -d "$dir/state/mps/1" ] && bad "GPU 1 got a daemon" || ok "GPU 1: none"

# death: restarted, the allocations stay
kill -9 "$p1"
newpid() { p=$(dpid) && [ "$p" != "$p1" ] && alive; }
until5 "killed daemon restarted" newpid
grep -q "control daemon died (signal 9); restarting" "$dir/log" &&
	ok "death logged" || bad "no death in the log"
live "$a" && live "$b" &&
	ok "allocations survive the restart" ||
	bad "allocations: $(field "$a" state) $(field "$b" state)"

# the user it runs as kills it again and again: restarted each time, the
# GPU stays healthy (only daemons that exit by themselves count)
for k in 1 2 3 4 5 6; do
	pk=$(dpid)
	kill -9 "$pk"
	np() { p=$(dpid) && [ "$p" != "$pk" ] && alive; }
	t0=$(ms)
	until np || [ $(( $(ms) - t0 )) -gt 8000 ]; do sleep 0.05; done
done
np && [ "$(healthy)" = True ] &&
	ok "6 kills in a row: restarted each time, GPU 0 still healthy" ||
	bad "after 6 kills: daemon '$(dpid)', healthy $(healthy)"
# started after a job attached: none of the agent's fds (control pages,
# sockets) reached it
fds=$(ls -l "/proc/$(dpid)/fd" 2>&1)
case $fds in
*gshare-ctl*|*socket:*|*usage.db*) bad "daemon holds agent fds: $fds";;
*) ok "the daemon holds none of the agent's fds";;
esac
# a daemon that keeps dying: GPU unhealthy; recovered: healthy
: > "$dir/fail"
kill -9 "$(dpid)"
sick() { [ "$(healthy)" = False ]; }
well() { [ "$(healthy)" = True ]; }
until5 "a daemon dying at start makes GPU 0 unhealthy" sick
rm -f "$dir/fail"
t0=$(ms)
until alive && well; do
	[ $(( $(ms) - t0 )) -gt 9000 ] && { bad "no recovery in 9 s"; break; }
	sleep 0.1
done
alive && well && ok "daemon back, GPU healthy ($(( $(ms) - t0 )) ms)"
live "$a" && ok "allocations kept" ||
	bad "allocation $a: $(field "$a" state)"

# the last close of uid 1000 quits it; uid 1001's does not count
p2=$(dpid)
$CTL -s "$sock" close "$a" >/dev/null && $CTL -s "$sock" close "$c" >/dev/null
alive && [ "$(dpid)" = "$p2" ] && ok "daemon stays while $b is open" ||
	bad "daemon gone early"
[ "$(sp "$b")" = "0+132 20 whole GPU: no complementary partner" ] &&
	ok "alone again: the whole GPU" || bad "after closes: $(sp "$b")"
nst=$(grep -c '^start' "$log0/control.log")
$CTL -s "$sock" close "$b" >/dev/null
# within mps_linger (2 s) the next allocation of the uid reuses it
x=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1000 --mode space)
[ "$(dpid)" = "$p2" ] && [ "$(field "$x" mps_pipe)" = "$pipe0" ] &&
	! grep -q "^quit $p2" "$log0/control.log" &&
	[ "$(grep -c '^start' "$log0/control.log")" = "$nst" ] &&
	ok "a job right after the last close reuses the daemon (mps_linger)" ||
	bad "linger: pid $(dpid), pipe '$(field "$x" mps_pipe)', $(tail -n 2 "$log0/control.log")"
t0=$(ms)
$CTL -s "$sock" close "$x" >/dev/null
until5 "last close stops it" gone "$p2"
[ $(( $(ms) - t0 )) -ge 1900 ] && ok "... after the 2 s linger" ||
	bad "quit $(( $(ms) - t0 )) ms after the last close"
grep -q "^quit $p2" "$log0/control.log" && ok "stopped by quit" ||
	bad "not by quit: $(tail -n 3 "$log0/control.log")"

# a new user owns the next daemon
d=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1001 --mode space)
cur=1001
log0=$dir/state/mps/0/1001/log
pipe1=$dir/state/mps/0/1001/pipe
until5 "new daemon for uid 1001" alive
[ "$(stat -c '%u %a' "$pipe1")" = "1001 700" ] &&
	[ "$(field "$d" mps_pipe)" = "$pipe1" ] &&
	[ "$(stat -c '%u %a' "$dir/state/mps/0/1001")" = "0 755" ] &&
	ok "uid 1001 gets its own pipe directory (root owns the parent)" ||
	bad "pipe of 1001: $(ls -la "$dir/state/mps/0/1001")"
p3=$(dpid)
nstart=$(grep -c "^start" "$log0/control.log")
# the agent stopped (SIGTERM): the daemon serving $d stays, so its jobs
# keep running; the next agent adopts it
kill -TERM "$apid"
until5 "agent exits" gone "$apid"
wait "$apid" 2>/dev/null
apid=""
alive && [ "$(dpid)" = "$p3" ] && ok "daemon $p3 outlives the agent's stop" ||
	bad "daemon gone with the stopped agent"
grep -q "control daemon $p3 left running for the next agent" "$dir/log" &&
	ok "left running, logged" || bad "not logged: $(grep mps "$dir/log")"
gs_agent_start "" FAKE_MPS_FAIL=$dir/fail FAKE_MPS_DEAF=$dir/deaf
adopted() {	# PID: the new agent took it over and started none
	grep -q "adopted control daemon $1 for uid 1001" "$dir/log" &&
	[ "$(dpid)" = "$1" ] &&
	[ "$(grep -c "^start" "$log0/control.log")" = "$nstart" ]
}
adopted "$p3" && ok "the next agent adopts daemon $p3, starts none" ||
	bad "no adoption: $(grep mps "$dir/log")"
# the agent killed outright: the same
kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=""
alive && [ "$(dpid)" = "$p3" ] && ok "daemon $p3 outlives a killed agent" ||
	bad "daemon gone with the killed agent"
gs_agent_start "" FAKE_MPS_FAIL=$dir/fail FAKE_MPS_DEAF=$dir/deaf
adopted "$p3" && ok "adopted again after kill -9" ||
	bad "no adoption after kill -9: $(grep mps "$dir/log")"
# adopted, it is supervised like our own: killed, restarted
kill -9 "$p3"
newpid3() { p=$(dpid) && [ "$p" != "$p3" ] && alive; }
until5 "adopted daemon killed: restarted" newpid3
# a daemon that ignores quit is killed 5 s after the last close
p4=$(dpid)
: > "$dir/deaf"
$CTL -s "$sock" close "$d" >/dev/null
t0=$(ms)
while ! gone "$p4" && [ $(( $(ms) - t0 )) -lt 8000 ]; do sleep 0.1; done
gone "$p4" && grep -q "ignored quit; killing it" "$dir/log" &&
	ok "deaf daemon killed $(( $(ms) - t0 )) ms after the last close" ||
	bad "daemon $p4 still there after 8 s"
rm -f "$dir/deaf"
# an allocation that comes while a quit runs (a quit cannot be taken
# back) gets no pipe (its job would reach a daemon on its way out); the
# next daemon starts once the old one is gone
y=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1001 --mode space)
until5 "daemon for $y" alive
p5=$(dpid)
: > "$dir/deaf"
ndied=$(grep -c "control daemon died" "$dir/log")
$CTL -s "$sock" close "$y" >/dev/null
quitting() { grep -q "^cmd $p5 quit" "$log0/control.log"; }
until5 "quit sent after the linger" quitting
z=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1001 --mode space)
[ "$(field "$z" mps_pipe)" = "" ] &&
	ok "an allocation during the quit: no pipe (outside MPS)" ||
	bad "pipe during the quit: '$(field "$z" mps_pipe)'"
rm -f "$dir/deaf"
newpid5() { p=$(dpid) && [ -n "$p" ] && [ "$p" != "$p5" ] && alive; }
t0=$(ms)
while ! newpid5 && [ $(( $(ms) - t0 )) -lt 8000 ]; do sleep 0.1; done
newpid5 && ok "then a new daemon for the allocation that came ($(( $(ms) - t0 )) ms)" ||
	bad "no new daemon after the quit: $(grep mps "$dir/log" | tail -n 3)"
[ "$(grep -c "control daemon died" "$dir/log")" = "$ndied" ] &&
	ok "the quit is no death" ||
	bad "the asked-for quit logged as a death"
z2=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1001 --mode space)
[ "$(field "$z2" mps_pipe)" = "$pipe1" ] && ok "the next allocation gets the pipe" ||
	bad "pipe after the restart: '$(field "$z2" mps_pipe)'"
$CTL -s "$sock" close "$z" >/dev/null; $CTL -s "$sock" close "$z2" >/dev/null
kill -TERM "$apid"
until5 "agent exits" gone "$apid"
wait "$apid" 2>/dev/null
apid=""

# space_partitions (the default): the plan reaches the control page of a
# job and is resized as allocations come and go
gs_agent_conf <<CONF
gpus: {simulated: 2}
mps_control: $FAKE
CONF
gs_agent_start "" FAKE_MPS_FAIL=$dir/fail FAKE_MPS_DEAF=$dir/deaf
$CTL -s "$sock" close "$t" >/dev/null
d=$($CTL -s "$sock" create --shares 30 --gpu 0 --uid 1001 --mode space)
e=$($CTL -s "$sock" create --shares 50 --gpu 0 --uid 1001 --mode space)
mkfifo "$dir/probe-in"
$PROBE "$sock" "$e" 30 < "$dir/probe-in" > "$dir/probe1" 2>&1 &
ppid=$!
jpids="$jpids $ppid"
exec 9> "$dir/probe-in"		# the probe runs until this closes
seen() { grep -q "^part [0-9]* $1\$" "$dir/probe1"; }
until5 "job of $e on SMs 48-131 beside $d (30:50)" seen "48 84"
f=$($CTL -s "$sock" create --shares 20 --gpu 0 --uid 1001 --mode space)
until5 "a third arrives: 40-103 (30:50:20)" seen "40 64"
$CTL -s "$sock" close "$d" >/dev/null
# 50:20 of 16 granules is 11:5; the 4 odd SMs go to the 50 (94.3 SMs
# wanted, 88 held), placed last
until5 "$d leaves: 40-131 (50:20)" seen "40 92"
$CTL -s "$sock" close "$f" >/dev/null
until5 "alone: the whole GPU" seen "0 132"
exec 9>&-
wait "$ppid" 2>/dev/null
kill -TERM "$apid"; wait "$apid" 2>/dev/null; apid=""

# time_mps: time-mode allocations are clients too (the same user's;
# another user's run outside MPS and take turns as before); the last one
# closed quits the daemon.  GPU 1 (GPU 0's daemon still serves uid 1001's
# restored allocation)
gs_agent_conf <<CONF
gpus: {simulated: 2}
mps_control: $FAKE
time_mps: true
CONF
gs_agent_start "" FAKE_MPS_FAIL=$dir/fail FAKE_MPS_DEAF=$dir/deaf
pipe1=$dir/state/mps/1/1000/pipe
dpid1() { cat "$dir/state/mps/1/1000/log/pid" 2>/dev/null; }
alive1() { p=$(dpid1) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
h=$($CTL -s "$sock" create --shares 30 --gpu 1 --uid 1000)
until5 "time_mps: a time allocation starts the daemon" alive1
ph=$(dpid1)
i=$($CTL -s "$sock" create --shares 30 --gpu 1 --uid 1000)
j=$($CTL -s "$sock" create --shares 30 --gpu 1 --uid 1001)
[ "$(field "$h" mps_pipe)" = "$pipe1" ] &&
	[ "$(field "$i" mps_pipe)" = "$pipe1" ] &&
	[ "$(field "$j" mps_pipe)" = "" ] && [ "$(dpid1)" = "$ph" ] &&
	ok "time_mps: uid 1000's time allocations share one daemon, uid 1001's none" ||
	bad "time_mps pipes: '$(field "$h" mps_pipe)' '$(field "$i" mps_pipe)' '$(field "$j" mps_pipe)'"
[ "$(field "$h" space)" = "" ] && [ "$(field "$h" mps_pct)" = 0 ] &&
	ok "time_mps: no partition, no thread cap for time mode" ||
	bad "time_mps plan: '$(field "$h" space)' pct $(field "$h" mps_pct)"
for x in $h $i $j; do $CTL -s "$sock" close "$x" >/dev/null; done
until5 "time_mps: the last close quits the daemon" gone "$ph"
kill -TERM "$apid"; wait "$apid" 2>/dev/null; apid=""

# a control binary that cannot run: space allocations still work (outside
# MPS), the GPU stays healthy, the reason is logged
gs_agent_conf <<CONF
gpus: {simulated: 2}
mps_control: $dir/no-such-mps-control
CONF
gs_agent_start
g=$($CTL -s "$sock" create --shares 10 --gpu 1 --uid 1000 --mode space) &&
	[ "$(field "$g" mps_pipe)" = "" ] &&
	$CTL -s "$sock" status | grep -q "space: .*; outside MPS" &&
	grep -q "cannot run $dir/no-such-mps-control" "$dir/log" &&
	[ "$($CTL -s "$sock" status --json | $PY -c '
import json, sys
print([g for g in json.load(sys.stdin)["gpus"] if g["index"] == 1][0]["healthy"])')" = True ] &&
	ok "missing control binary: allocation outside MPS, GPU healthy, logged" ||
	bad "missing control binary: $(grep mps "$dir/log")"
exit $fail
