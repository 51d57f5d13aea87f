#!/bin/sh
# Run the wire-decoder fuzzer for a bounded time (FUZZ_SECONDS, default
# 20) from a seed corpus of valid frames.  Fails on any crash, sanitizer
# report or round-trip mismatch.
set -u
B=${B:-build}
F=$B/tests/fuzz/fuzz_proto
secs=${FUZZ_SECONDS:-20}
corpus=$(mktemp -d /tmp/gsfuzz.XXXXXX)
trap 'rm -rf "$corpus"' EXIT INT TERM
# seeds: one frame of each kind, written by the fuzzer's own encoder
# would need a second binary; simple hand-made frames are enough
printf 'GSHR\001\000\003\000\000\000\000\000\001\000\000\000' > "$corpus/ping"
printf 'GSHR\001\000\015\000\010\000\000\000\002\000\000\000\001\000\000\000\000\000\000\000' > "$corpus/attach"
printf 'GSHR\001\000\037\000\022\000\000\000\003\000\000\000\003\000wfq\000\011\075\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$corpus/status"
top=$(pwd)
mkdir "$corpus/seeds" && mv "$corpus"/ping "$corpus"/attach "$corpus"/status "$corpus/seeds/"
cd "$corpus" || exit 1
"$top/$F" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=4096 \
	-print_final_stats=1 "$corpus/seeds" >"$corpus/log" 2>&1
rc=$?
tail -n 8 "$corpus/log"
if [ $rc != 0 ]; then
	grep -v '^#' "$corpus/log" | tail -n 60
	for f in "$corpus"/crash-* "$corpus"/leak-* "$corpus"/timeout-*; do
		[ -e "$f" ] && { echo "input $f:"; od -A d -t x1 "$f" | head -40; }
	done
fi
exit $rc
