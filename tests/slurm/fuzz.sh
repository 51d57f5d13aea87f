#!/bin/sh
# Run the SPANK parsers' fuzzer for a bounded time (FUZZ_SECONDS, default
# 15) from a few seeds.  Fails on any crash, sanitizer report or broken
# invariant (see tests/slurm/fuzz_spankopt.c).
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzz-spank
printf '\000gres:gpu:a100:1,gres:gshare:30' >"$dir/seeds/gres"
printf '\001gshare-record 1 id=7 shares=30 gpu_ns=15 held_ns=20\n' >"$dir/seeds/record"
printf '\002note;gshare[n1]:gpu_s=1;gshare[n2]:x' >"$dir/seeds/comment"
printf '\003agent=/run/%%n.sock\ntimeout=250ms\non_agent_down=unmanaged' >"$dir/seeds/conf"
printf '\004/run/gshare/%%n/%%%%.sock' >"$dir/seeds/expand"
gs_fuzz_run "$B/tests/slurm/fuzz_spankopt" "${FUZZ_SECONDS:-15}" 4096
