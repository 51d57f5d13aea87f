#!/bin/sh
# tests/gpu/stage.sh — after `make` on a machine with nvcc, gather what every
# GPU script under tests/gpu needs into one folder (default .gpu-final/b) to
# carry to a GPU machine that lacks the build's libraries:
#   D/node-agent, D/runtime (library, examples, bench, gate, test_api), and
#   D/lib (libyaml, libsqlite3, libcmocka) for tests/gpu/run.sh, agent.sh,
#   space.sh, space_probe.sh, bench;
#   D/commit.txt (HEAD when staged, "+" if tracked files had changes);
#   D/bin (gshared, gsharectl, libgshare-gate.so, fake_libgshare.so, standin,
#   lib/) for tests/gpu/gate/run.sh and tests/gpu/mem/run.sh.
set -eu
D=${1:-.gpu-final/b}
B=${B:-build}
for f in "$B/node-agent/gshared" "$B/runtime/libgshare.so" \
	 "$B/runtime/gate/libgshare-gate.so" "$B/runtime/bench/gs-smprobe"; do
	[ -f "$f" ] || { echo "stage.sh: $f missing: run make first" >&2; exit 1; }
done
rm -rf "$D"
mkdir -p "$D/node-agent" "$D/runtime/examples" "$D/runtime/bench" \
	 "$D/runtime/gate" "$D/runtime/tests" "$D/lib" "$D/bin/standin"
cp "$B/node-agent/gshared" "$B/node-agent/gsharectl" \
   "$D/node-agent/"
cp "$B/node-agent/gsacct/gsacct" "$D/node-agent/"
cp -P "$B"/runtime/libgshare.so* "$D/runtime/"
for f in "$B"/runtime/examples/gs-* "$B"/runtime/bench/gs-*; do
	case $f in *.d|*.o) continue;; esac
	cp "$f" "$D/${f#"$B"/}"
done
cp "$B/runtime/gate/libgshare-gate.so" "$D/runtime/gate/"
cp "$B/runtime/tests/test_api" "$D/runtime/tests/"
for l in libyaml-0.so.2 libsqlite3.so.0 libcmocka.so.0; do
	p=$(ldconfig -p | sed -n "s/.*$l (libc6,x86-64) => //p" | head -1)
	[ -n "$p" ] || { echo "stage.sh: $l not found" >&2; exit 1; }
	cp -L "$p" "$D/lib/"
done
cp "$D/node-agent/gshared" "$D/node-agent/gsharectl" \
   "$D/runtime/gate/libgshare-gate.so" "$B/tests/gate/fake_libgshare.so" \
   "$D/bin/"
cp "$B/tests/gate/standin/libcuda.so.1" "$D/bin/standin/"
cp -r "$D/lib" "$D/bin/lib"
# the commit the build is of, for the benchmarks' headers ("+": with
# changes to tracked files not committed yet)
c=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || c="$c+"
echo "$c" > "$D/commit.txt"
du -sh "$D"
