#!/bin/sh
# gsacct golden files: build a usage store from golden.spec with acct_fill,
# run every case of golden.cases and compare stdout, stderr and the exit
# status with tests/acct/NAME.ok.  Also: a non-root caller sees only its
# own rows, and --plot writes a well-formed SVG with one polygon per job.
# UPDATE=1 rewrites the .ok files.
set -u
B=${B:-build}
here=tests/acct
gsacct=$B/node-agent/gsacct/gsacct
fill=$B/tests/acct/acct_fill
tmp=$(mktemp -d /tmp/gs-golden.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
chmod 755 "$tmp"
fail=0

"$fill" "$tmp/usage.db" < $here/golden.spec || { echo "acct_fill failed"; exit 1; }
export TZ=UTC GSACCT_NOW=2026-11-21T12:30:00
unset GSHARE_STORE

grep -v '^#' $here/golden.cases | while IFS='|' read -r name args; do
	name=$(echo "$name" | tr -d ' ')
	[ -n "$name" ] || continue
	out="$tmp/$name.out"
	# shellcheck disable=SC2086
	{ echo "\$ gsacct$args"; \
	  "$gsacct" --store "$tmp/usage.db" $args 2>"$tmp/err"; \
	  echo "exit=$?"; sed 's/^/stderr: /' "$tmp/err"; } > "$out" 2>&1
	sed -i "s|$tmp|TMP|g" "$out"
	if [ "${UPDATE:-0}" = 1 ]; then
		cp "$out" "$here/$name.ok"
	elif ! diff -u "$here/$name.ok" "$out"; then
		echo "golden: $name differs"
		echo x >> "$tmp/failed"
	fi
done
[ -f "$tmp/failed" ] && fail=1

# -j with more ids than one store query takes (600, pages of 200): the
# same rows as the short list, once each although 4242 is selected on two
# pages (as 4242 and 4242.1), in start order
long=$(/usr/bin/python3 -c '
ids = [str(900000 + i) for i in range(600)]
ids[5] = "4243"; ids[250] = "4242"; ids[590] = "4242.1"
print(",".join(ids))')
want=$("$gsacct" --store "$tmp/usage.db" -j 4243,4242 -P -o JobID,GPUSec,State 2>&1)
got=$("$gsacct" --store "$tmp/usage.db" -j "$long" -P -o JobID,GPUSec,State 2>&1)
if [ "$got" != "$want" ] || [ -z "$want" ]; then
	echo "golden: -j with 600 ids: got"; echo "$got"; echo "want"; echo "$want"
	fail=1
fi

# non-root: nobody (uid 65534) owns job 4244 only, whatever it asks for
if id nobody >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	for args in "-S 2026-11-21 -X -P -n -o JobID,User" \
		    "-S 2026-11-21 -X -P -n -o JobID,User -u root,nobody" \
		    "-S 2026-11-21 -X -P -n -o JobID,User -u root"; do
		# shellcheck disable=SC2086
		got=$(runuser -u nobody -- "$gsacct" --store "$tmp/usage.db" $args 2>&1)
		case "$args" in
		*"-u root") want="" ;;
		*) want="4244|nobody" ;;
		esac
		if [ "$got" != "$want" ]; then
			echo "non-root ($args): got '$got', want '$want'"
			fail=1
		fi
	done
fi

# --json parses as JSON for every row, and the memory fields are strings
# with their unit (like sacct's MaxRSS)
"$gsacct" --store "$tmp/usage.db" -S 2026-11-20 --json > "$tmp/all.json" ||
	{ echo "json failed"; fail=1; }
/usr/bin/python3 - "$tmp/all.json" <<'PY' || fail=1
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text)
except ValueError as e:
    sys.exit("json: not JSON: %s" % e)
rows = [r for v in (d.values() if isinstance(d, dict) else [d])
        for r in (v if isinstance(v, list) else [])]
if len(rows) < 5:
    sys.exit("json: %d rows" % len(rows))
m = [r for r in rows if r.get("JobID") == "4243"]
if not m or m[0].get("MaxMem") != "39.06G" or m[0].get("MemLimit") != "55.30G":
    sys.exit("json: job 4243 memory %s" % m[:1])
PY

# --plot: well-formed SVG, one polygon per job and GPU, legend labels
"$gsacct" --store "$tmp/usage.db" -S 2026-11-21T10:00 -E 2026-11-21T12:30 \
	-X -n --plot "$tmp/plot.svg" > /dev/null || { echo "plot failed"; fail=1; }
/usr/bin/python3 - "$tmp/plot.svg" <<'PY' || fail=1
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
polys = root.findall(".//s:polygon", ns)
titles = sorted(p.find("s:title", ns).text for p in polys)
want = sorted(["4242", "4243", "team-a/train-7/main", "4244", "4245"])
if titles != want:
    sys.exit("plot: series %s, want %s" % (titles, want))
panels = root.findall(".//s:g[@class='gpu']", ns)
if len(panels) != 2:
    sys.exit("plot: %d GPU panels, want 2" % len(panels))
# job 4243 used 70% of GPU 0 from 10:00 to 10:15: its polygon reaches
# 0.7 of the panel height above the bottom somewhere
for p in polys:
    if p.find("s:title", ns).text == "4243":
        ys = [float(xy.split(",")[1]) for xy in p.get("points").split()]
        top = 40.0 + 220.0 - 220.0 * 0.70
        if not any(abs(y - top) < 0.2 for y in ys):
            sys.exit("plot: 4243 never at 70%% (ys %s)" % sorted(set(ys))[:5])
# every text stays inside the picture (width estimated at 0.55 em per
# character, which sans-serif digits exceed): the last time label was cut
W = float(root.get("width"))
for t in root.iter("{http://www.w3.org/2000/svg}text"):
    if not t.text or t.get("x") is None:
        continue
    x = float(t.get("x"))
    w = len(t.text) * 0.55 * float(t.get("font-size", root.get("font-size")))
    a = t.get("text-anchor", "start")
    lo, hi = {"start": (x, x + w), "middle": (x - w / 2, x + w / 2),
              "end": (x - w, x)}[a]
    if lo < 0 or hi > W:
        sys.exit("plot: text %r at x=%s (%s) runs off the %g px picture"
                 % (t.text, t.get("x"), a, W))
print("plot: ok, %d series, every text inside" % len(polys))
PY
"$gsacct" --store "$tmp/usage.db" -j 999 --plot "$tmp/none.svg" 2>"$tmp/err" >/dev/null
if [ $? != 1 ] || ! grep -q "no usage in the selected window" "$tmp/err"; then
	echo "plot of nothing: want an error"; fail=1
fi

# The default store follows gshared's config file (gsacct-cfgtest reads
# $B/tests/acct/cfgtest/gshare.yaml; its built-in store does not exist)
cfgt=$B/tests/acct/gsacct-cfgtest
cfgdir=$B/tests/acct/cfgtest
rm -rf "$cfgdir"
default_of() { "$cfgt" --help | sed -n 's/.*default $GSHARE_STORE or \(.*\))$/\1/p'; }
[ "$(default_of)" = /nonexistent/gshare/usage.db ] ||
	{ echo "no config file: default $(default_of)"; fail=1; }
mkdir -p "$cfgdir"
printf 'state_dir: %s\n' "$tmp" > "$cfgdir/gshare.yaml"
[ "$(default_of)" = "$tmp/usage.db" ] ||
	{ echo "state_dir: default $(default_of)"; fail=1; }
got=$("$cfgt" -j 4242 -X -n -P -o JobID 2>&1)
[ "$got" = 4242 ] || { echo "state_dir: no --store read: $got"; fail=1; }
printf 'state_dir: /elsewhere\nusage_db: %s/usage.db\n' "$tmp" > "$cfgdir/gshare.yaml"
[ "$(default_of)" = "$tmp/usage.db" ] ||
	{ echo "usage_db: default $(default_of)"; fail=1; }
# a config that does not load: warned, built-in default kept
printf 'state_dir: [\n' > "$cfgdir/gshare.yaml"
got=$("$cfgt" -j 4242 -X -n -P -o JobID 2>&1)
case $got in
*"gsacct: warning: "*"/tests/acct/cfgtest/gshare.yaml:"*"; using /nonexistent/gshare/usage.db"*) ;;
*) echo "bad config: $got"; fail=1 ;;
esac
rm -rf "$cfgdir"
[ $fail = 0 ] && echo "golden: config-file default store ok"

[ $fail = 0 ] && echo "golden: all cases match"
exit $fail
