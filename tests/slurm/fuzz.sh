#!/bin/sh
# Run the SPANK parsers' fuzzer for a bounded time (FUZZ_SECONDS, default
# 15) from a few seeds.  Fails on any crash, sanitizer report or broken
# invariant (see tests/slurm/fuzz_spankopt.c).
set -u
B=${B:-build}
F=$(pwd)/$B/tests/slurm/fuzz_spankopt
secs=${FUZZ_SECONDS:-15}
dir=$(mktemp -d /tmp/gsfuzz-spank.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
mkdir "$dir/seeds"
printf '\000gres:gpu:a100:1,gres:gshare:30' >"$dir/seeds/gres"
printf '\001gshare-record 1 id=7 shares=30 gpu_ns=15 held_ns=20\n' >"$dir/seeds/record"
printf '\002note;gshare[n1]:gpu_s=1;gshare[n2]:x' >"$dir/seeds/comment"
printf '\003agent=/run/%%n.sock\ntimeout=250ms\non_agent_down=unmanaged' >"$dir/seeds/conf"
printf '\004/run/gshare/%%n/%%%%.sock' >"$dir/seeds/expand"
cd "$dir" || exit 1
"$F" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=4096 \
	-print_final_stats=1 "$dir/seeds" >"$dir/log" 2>&1
rc=$?
tail -n 6 "$dir/log"
if [ $rc != 0 ]; then
	grep -v '^#' "$dir/log" | tail -n 40
	for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-*; do
		[ -e "$f" ] && { echo "input $f:"; od -A d -c "$f" | head -20; }
	done
fi
exit $rc
