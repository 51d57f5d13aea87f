#!/bin/sh
# Run the gsacct parser fuzzer for a bounded time (FUZZ_SECONDS, default
# 10) from seeds covering every time form and a few format lists.
set -u
B=${B:-build}
F=$B/tests/acct/fuzz_gsacct
secs=${FUZZ_SECONDS:-10}
dir=$(mktemp -d /tmp/gsfuzz-acct.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
mkdir "$dir/seeds"
i=0
for t in now now-1hour now+3days 10:30 1:05pm 1120 112025 1120-08:15 \
	 11/20/25 11.20 2026-01-02T03:04:05 midnight teatime 1795292656 \
	 127.0.0.1:9464 '[::1]:80'; do
	for f in JobID,GPUSec%12 'User%-20,State' 'jobid,share,weight%3'; do
		printf '%s\0%s' "$t" "$f" > "$dir/seeds/s$i"
		i=$((i + 1))
	done
done
top=$(pwd)
cd "$dir" || exit 1
"$top/$F" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=256 \
	-print_final_stats=1 "$dir/seeds" > "$dir/log" 2>&1
rc=$?
tail -n 4 "$dir/log"
if [ $rc != 0 ]; then
	grep -v '^#' "$dir/log" | tail -n 40
	for c in "$dir"/crash-* "$dir"/timeout-*; do
		[ -e "$c" ] && { echo "input $c:"; od -c "$c" | head; }
	done
fi
exit $rc
