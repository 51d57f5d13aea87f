#!/bin/sh
# Run the gsacct parser fuzzer for a bounded time (FUZZ_SECONDS, default
# 10) from seeds covering every time form and a few format lists.
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzz-acct
i=0
for t in now now-1hour now+3days 10:30 1:05pm 1120 112025 1120-08:15 \
	 11/20/25 11.20 2026-01-02T03:04:05 midnight teatime 1795292656 \
	 127.0.0.1:9464 '[::1]:80'; do
	for f in JobID,GPUSec%12 'User%-20,State' 'jobid,share,weight%3'; do
		printf '%s\0%s' "$t" "$f" > "$dir/seeds/s$i"
		i=$((i + 1))
	done
done
gs_fuzz_run "$B/tests/acct/fuzz_gsacct" "${FUZZ_SECONDS:-10}" 256
