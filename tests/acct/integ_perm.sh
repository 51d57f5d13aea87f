#!/bin/sh
# Who may read the usage store.  A real gshared (simulated GPU) with
# store_group set to a temporary group keeps usage.db, -wal and -shm at
# 0640 root:<group> while it writes; other users cannot read them, and a
# copy of gsacct installed setgid to the group (as `make install` does)
# works for nobody, shows only nobody's rows, drops the group before it
# writes --plot's file and keeps it only for the default store (reached
# in a private mount namespace: the test's state directory mounted on the
# default store's directory).  A gsacct without the group says why it
# cannot read.  Then: a group that does not exist gives 0600 and a log
# line, store_group "" gives 0644, and a world-readable store (with the
# -wal/-shm a kill -9 left, and another owner) is fixed at the next start.
set -u
. tests/acct/lib.sh

CTL=$B/node-agent/gsharectl
G=gstest$$
NOGROUP=gsnone$$
NOBODY_GID=$(id -g nobody)
trap 'cleanup; groupdel "$G" 2>/dev/null' EXIT INT TERM

getent group "$G" > /dev/null && fail "group $G exists already"
getent group "$NOGROUP" > /dev/null && fail "group $NOGROUP exists"
groupadd "$G" || fail "groupadd $G"
DB=$T/state/usage.db
chmod 755 "$T"	# nobody reaches the socket and the binaries

# modes FILE... : "mode owner group" of each, one line each
modes() {
	for f in "$@"; do stat -c '%a %U %G' "$f" || echo "missing $f"; done
}

# expect_modes WANT: usage.db, -wal and -shm all WANT ("640 root G")
expect_modes() {
	got=$(modes "$DB" "$DB-wal" "$DB-shm" | sort -u)
	[ "$got" = "$1" ] || fail "store files: want '$1', got: $got"
}

# start with store_group $1 and wait until the store is being written:
# the WAL and its index exist and two more ticks commit
start_with_group() {
	STORE_GROUP=$1
	write_conf 100ms 1 ""
	start_agent
	wait_for 10 test -e "$DB-wal" -a -e "$DB-shm" ||
		fail "no -wal/-shm while the agent runs"
	_t0=$(ticks)
	wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' \
		$DB 'SELECT COUNT(*) FROM ticks') -ge $((_t0 + 2)) ]" ||
		fail "no ticks committed"
}

stop_agent() {
	kill "$AGENT" && wait "$AGENT"
	AGENT=""
}

# --- a fresh store, group exists: 0640 root:G while it runs
start_with_group "$G"
grep -q "usage store $DB: mode 0640, group $G" "$T/agent.log" ||
	fail "no log line for mode 0640"
nb=$("$CTL" -s "$T/sock" create --shares 40 --uid 65534 --job 801 \
	--step 0) || fail "gsharectl create (uid 65534)"
rt=$("$CTL" -s "$T/sock" create --shares 40 --job 802 --step 0) ||
	fail "gsharectl create (root)"
# nobody's job uses the GPU (the runtime's loop, CPU executor)
SIMJOB=$B/runtime/sim/gshare-simjob
[ -x "$SIMJOB" ] || fail "$SIMJOB not built"
runuser -u nobody -- "$SIMJOB" --socket "$T/sock" --alloc "$nb" \
	--name 801 --work 0.3 --duration 0 > "$T/sim.out" 2>&1 ||
	fail "simjob as nobody: $(cat "$T/sim.out")"
"$CTL" -s "$T/sock" close "$nb" > /dev/null || fail "gsharectl close"
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' $DB \
	\"SELECT COUNT(*) FROM allocs WHERE job = '801' AND end_ns > 0 \
	AND gpu_ns > 0\") = 1 ]" || fail "nobody's usage not stored"
wait_for 10 sh -c "[ \$(sqlite3 -readonly -cmd '.timeout 5000' $DB \
	\"SELECT COUNT(*) FROM allocs WHERE job = '802'\") = 1 ]" ||
	fail "root's allocation not stored"
expect_modes "640 root $G"
for f in "$DB" "$DB-wal" "$DB-shm"; do
	runuser -u nobody -- cat "$f" > /dev/null 2>&1 &&
		fail "nobody can read $f"
done
echo "ok   store files 0640 root:$G while the agent writes"

# The rest runs a setgid gsacct as nobody against its built-in default
# store, which a private mount namespace puts in place.  A host that
# cannot give either (no CAP_SYS_ADMIN, every candidate dir nosuid) says
# so loudly and skips the rest rather than pass it silently.
skip_rest() {
	echo "SKIP setgid gsacct cases: $*"
	echo "perm: ok (setgid cases skipped)"
	exit 0
}
unshare -m --propagation private true 2>/dev/null ||
	skip_rest "no mount namespace here (unshare -m needs CAP_SYS_ADMIN)"
# gsacct installed setgid to the group, in a world-readable directory on
# a file system that honours setgid
for base in "$T" "$PWD/$B"; do
	findmnt -no OPTIONS --target "$base" | grep -qw nosuid && continue
	BIN=$(mktemp -d "$base/gsacct-bin.XXXXXX") && break
done
[ -n "${BIN:-}" ] || skip_rest "no directory without nosuid for the setgid copy"
trap 'cleanup; rm -rf "$BIN"; groupdel "$G" 2>/dev/null' EXIT INT TERM
chmod 755 "$BIN"
cp "$GSACCT" "$BIN/gsacct"
chgrp "$G" "$BIN/gsacct" && chmod 2755 "$BIN/gsacct" || fail "setgid copy"
[ "$(stat -c '%a %G' "$BIN/gsacct")" = "2755 $G" ] || fail "setgid copy mode"
mkdir -m 777 "$T/out"

# the default store the binary was built with, for the mount namespace
DEF=$("$GSACCT" --help | sed -n 's/.*default $GSHARE_STORE or \(.*\))$/\1/p')
DEFDIR=$(dirname "$DEF")
[ "$(basename "$DEF")" = usage.db ] ||
	fail "gsacct's default store $DEF is not named usage.db"
# refused WHAT MESSAGE CMD...: CMD must fail, with MESSAGE in its output
refused() {
	_what=$1 _msg=$2
	shift 2
	"$@" > "$T/nb.txt" 2>&1 &&
		fail "$_what: not refused: $(cat "$T/nb.txt")"
	grep -qF -- "$_msg" "$T/nb.txt" ||
		fail "$_what: unclear error: $(cat "$T/nb.txt")"
}

# as_nobody CMD...: run as nobody with $T/state on DEFDIR (private
# mounts, gone with the command; a tmpfs provides DEFDIR when missing)
as_nobody() {
	unshare -m --propagation private sh -c '
		d=$1; s=$2; shift 2
		if [ ! -d "$d" ]; then
			mount -t tmpfs tmpfs "$(dirname "$d")" &&
				mkdir "$d" || exit 99
		fi
		mount --bind "$s" "$d" || exit 99
		exec runuser -u nobody -- "$@"' sh "$DEFDIR" "$T/state" "$@"
}

as_nobody "$BIN/gsacct" -j 801,802 -P -n -o JobID,UID,GPUSec \
	> "$T/nb.txt" 2> "$T/nb.err" ||
	fail "setgid gsacct as nobody: $(cat "$T/nb.err")"
grep -q '^801.0|65534|0.3' "$T/nb.txt" || fail "nobody's row missing: $(cat "$T/nb.txt")"
grep -q '^802' "$T/nb.txt" && fail "nobody sees root's row: $(cat "$T/nb.txt")"
# -a and -u root do not widen it: filtering is by the real uid
as_nobody "$BIN/gsacct" -a -u root,nobody -S 2020-01-01 -P -n -o JobID,UID \
	> "$T/nb2.txt" 2> "$T/nb.err" || fail "gsacct -a: $(cat "$T/nb.err")"
grep -qv '|65534$' "$T/nb2.txt" && fail "rows of other uids: $(cat "$T/nb2.txt")"
grep -q '^801' "$T/nb2.txt" || fail "-a: nobody's row missing"
echo "ok   setgid gsacct as nobody shows nobody's rows only"

# --plot: the file is created after the group is dropped
as_nobody "$BIN/gsacct" -j 801 -n -o JobID --plot "$T/out/p.svg" \
	> /dev/null 2> "$T/nb.err" || fail "--plot: $(cat "$T/nb.err")"
[ "$(stat -c '%u %g' "$T/out/p.svg")" = "65534 $NOBODY_GID" ] ||
	fail "--plot file: $(stat -c '%U:%G' "$T/out/p.svg"), want nobody's gid"
grep -q '<svg' "$T/out/p.svg" || fail "--plot wrote no SVG"
echo "ok   --plot's file belongs to nobody's group"

# --store / $GSHARE_STORE naming another path: opened without the group
# (the same file through another name is refused too: only the default
# path gets the group)
refused "setgid gsacct, --store" \
	"gsacct reads with its group only the default store" \
	as_nobody "$BIN/gsacct" --store "$DB" -j 801
refused "setgid gsacct, \$GSHARE_STORE" "only the default store" \
	as_nobody env GSHARE_STORE="$DB" "$BIN/gsacct" -j 801
# a plain (not setgid) gsacct: a clear error
refused "plain gsacct, --store" "permission denied: readable by root and group $G only (mode 0640), and this gsacct is not installed setgid $G" \
	runuser -u nobody -- "$GSACCT" --store "$DB" -j 801
refused "plain gsacct, default store" "not installed setgid $G" \
	as_nobody "$GSACCT" -j 801
echo "ok   --store, GSHARE_STORE and a plain gsacct do not get the group"

# --- the group does not exist: 0600 and a log line; gsacct says why
stop_agent
start_with_group "$NOGROUP"
grep -q "group '$NOGROUP' (store_group) does not exist: mode 0600" \
	"$T/agent.log" || fail "no log line for the missing group"
got=$(modes "$DB" "$DB-wal" "$DB-shm" | cut -d' ' -f1,2 | sort -u)
[ "$got" = "600 root" ] || fail "missing group: store files $got"
refused "gsacct, 0600 store" "readable by its owner only (mode 0600)" \
	as_nobody "$BIN/gsacct" -j 801
echo "ok   missing group: 0600, logged, gsacct explains"

# --- store_group "": world-readable, as before
stop_agent
start_with_group ""
got=$(modes "$DB" "$DB-wal" "$DB-shm" | cut -d' ' -f1,2 | sort -u)
[ "$got" = "644 root" ] || fail "store_group \"\": store files $got"
runuser -u nobody -- "$GSACCT" --store "$DB" -j 801 -n -P -o JobID \
	> "$T/nb.txt" 2>&1 || fail "plain gsacct, 0644: $(cat "$T/nb.txt")"
grep -qx 801.0 "$T/nb.txt" || fail "0644: $(cat "$T/nb.txt")"
echo "ok   store_group \"\": 0644"

# --- a world-readable store, -wal and -shm left by kill -9: fixed at
# the next start
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT=""
[ -e "$DB-wal" ] && [ -e "$DB-shm" ] || fail "kill -9 left no -wal/-shm"
chown nobody:root "$DB" "$DB-wal" "$DB-shm"	# and a stranger owning it
start_with_group "$G"
expect_modes "640 root $G"
as_nobody "$BIN/gsacct" -j 801 -n -P -o JobID > "$T/nb.txt" 2>&1 ||
	fail "setgid gsacct after the upgrade: $(cat "$T/nb.txt")"
grep -qx 801.0 "$T/nb.txt" || fail "after the upgrade: $(cat "$T/nb.txt")"
echo "ok   an existing 0644 store is 0640 root:$G after a restart"
echo "perm: ok"
