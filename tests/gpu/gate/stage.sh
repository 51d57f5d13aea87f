#!/bin/sh
# tests/gpu/gate/stage.sh — after `make`, gather what tests/gpu/gate/run.sh
# needs on a GPU machine into one folder under build/ (default
# build/gate-gpu): gshared, gsharectl, libgshare-gate.so, and lib/ with the
# agent's shared libraries that a bare machine may lack (libyaml,
# libsqlite3).  Then, on the GPU machine, from the repository root:
#   GATE_PHASES=final tests/gpu/gate/run.sh build/gate-gpu "$OUT"
set -eu
D=${1:-build/gate-gpu}
B=${B:-build}
for f in "$B/node-agent/gshared" "$B/node-agent/gsharectl" \
	 "$B/runtime/gate/libgshare-gate.so"; do
	[ -f "$f" ] || { echo "stage.sh: $f missing: run make first" >&2; exit 1; }
done
rm -rf "$D"
mkdir -p "$D/lib"
cp "$B/node-agent/gshared" "$B/node-agent/gsharectl" \
   "$B/runtime/gate/libgshare-gate.so" "$D/"
for l in $(ldd "$B/node-agent/gshared" "$B/node-agent/gsharectl" |
	   sed -n 's/.*\(libyaml[^ ]*\|libsqlite3[^ ]*\) => \([^ ]*\).*/\2/p' |
	   sort -u); do
	cp -L "$l" "$D/lib/"
done
ls -l "$D" "$D/lib"
