#!/bin/sh
# Golden-file test of gshared's configuration parser: for every
# tests/config/NAME.in, `gshared -n -f NAME.in` (stdout, stderr and a
# non-zero exit status) must equal NAME.ok; every config that loads is
# printed, parsed again and must print identically (print → parse round
# trip).  UPDATE=1 rewrites the .ok files.
set -u
B=${B:-build}
GSHARED=$B/node-agent/gshared
tmp=$(mktemp -d /tmp/gscfg.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
n=0
for in in tests/config/*.in; do
	name=${in%.in}
	n=$((n + 1))
	out=$("$GSHARED" -n -f "$in" 2>&1); rc=$?
	[ $rc != 0 ] && out="$out
exit $rc"
	if [ "${UPDATE:-0}" = 1 ]; then
		printf '%s\n' "$out" > "$name.ok"
	fi
	if ! printf '%s\n' "$out" | diff -u "$name.ok" - >"$tmp/diff"; then
		echo "FAIL $in"
		cat "$tmp/diff"
		fail=1
		continue
	fi
	if [ $rc = 0 ]; then
		printf '%s\n' "$out" > "$tmp/rt.yaml"
		again=$("$GSHARED" -n -f "$tmp/rt.yaml" 2>&1)
		if [ "$again" != "$out" ]; then
			echo "FAIL $in: print -> parse round trip differs"
			printf '%s\n' "$again" | diff -u "$name.ok" -
			fail=1
			continue
		fi
	fi
	echo "ok   $in"
done
# the shipped example config documents exactly the defaults
if "$GSHARED" -n -f node-agent/gshare.yaml 2>&1 |
    diff -u tests/config/empty.ok - >"$tmp/diff"; then
	echo "ok   node-agent/gshare.yaml is the defaults"
else
	echo "FAIL node-agent/gshare.yaml differs from the defaults"
	cat "$tmp/diff"
	fail=1
fi
[ $n -gt 0 ] || { echo "no golden files"; exit 1; }
exit $fail
