#!/bin/sh
# Run the wire-decoder fuzzer for a bounded time (FUZZ_SECONDS, default
# 20) from a seed corpus of valid frames.  Fails on any crash, sanitizer
# report or round-trip mismatch.
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzz
# seeds: one frame of each kind, written by the fuzzer's own encoder
# would need a second binary; simple hand-made frames are enough
printf 'GSHR\001\000\003\000\000\000\000\000\001\000\000\000' > "$dir/seeds/ping"
printf 'GSHR\001\000\015\000\010\000\000\000\002\000\000\000\001\000\000\000\000\000\000\000' > "$dir/seeds/attach"
printf 'GSHR\001\000\037\000\022\000\000\000\003\000\000\000\003\000wfq\000\011\075\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$dir/seeds/status"
# STATUS with its 1.2 after_id, and one byte short of it (refused)
printf 'GSHR\001\000\036\000\010\000\000\000\004\000\000\000\005\000\000\000\000\000\000\000' > "$dir/seeds/status_after"
printf 'GSHR\001\000\036\000\007\000\000\000\005\000\000\000\005\000\000\000\000\000\000' > "$dir/seeds/status_short"
gs_fuzz_run "$B/tests/fuzz/fuzz_proto" "${FUZZ_SECONDS:-20}" 4096
