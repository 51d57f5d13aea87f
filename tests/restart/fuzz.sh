#!/bin/sh
# Run the state file fuzzer for a bounded time (FUZZ_SECONDS, default 10)
# from seeds written the way gshared writes them (format version 2) and
# the way older agents did (version 1).
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzz-state
# crc32 of the body, as state.c computes it
seed() {	# NAME BODY COUNT
	crc=$(printf '%s' "$2" | /usr/bin/python3 -c \
		'import sys, zlib; print("%08x" % zlib.crc32(sys.stdin.buffer.read()))')
	printf '%send allocs=%s crc32=%s\n' "$2" "$3" "$crc" > "$dir/seeds/$1"
}
L=' cluster=c1 job=42 step=0 node=n1 ns= pod= container= user=bob account=a%20b'
seed empty "$(printf 'gshare-allocs 1\nnext_id 1\n')
" 0
seed one "gshare-allocs 1
next_id 8
alloc id=3 gpu=0 uuid=GPU-sim-0 shares=10 weight=1 priority=16 mode=0 uid=0 flags=0 created=1795292656000000000$L
" 1
seed two "gshare-allocs 1
next_id 18
alloc id=3 gpu=0 uuid=GPU-sim-0 shares=10 weight=1 priority=16 mode=0 uid=0 flags=1 created=1$L
alloc id=17 gpu=1 uuid=GPU-sim-1 shares=90 weight=900 priority=31 mode=1 uid=1000 flags=0 created=2 cluster= job= step= node= ns=kube pod=p%25%3D container=c user= account=
" 2
seed v2-empty "$(printf 'gshare-allocs 2\nseq 1\nnext_id 1\n')
" 0
seed v2-one "gshare-allocs 2
seq 18446744073709551615
next_id 8
alloc id=3 gpu=0 uuid=GPU-sim-0 shares=10 weight=1 priority=16 mode=0 uid=0 flags=0 created=1795292656000000000$L
" 1
gs_fuzz_run "$B/tests/restart/fuzz_state" "${FUZZ_SECONDS:-10}" 4096
