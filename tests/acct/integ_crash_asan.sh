#!/bin/sh
# integ_crash.sh (50 kill -9 of the agent under 16 jobs, every committed
# tick kept) with the ASan+UBSan gshared that `make test` builds under
# build/san: a sanitizer report (or a fault in SQLite's mapping of the WAL
# index) kills the agent and the jobs stop settling.
set -u
cd "$(dirname "$0")/../.." || exit 1
[ -x build/san/node-agent/gshared ] ||
	{ echo "FAIL build/san/node-agent/gshared not built" >&2; exit 1; }
GSHARED=build/san/node-agent/gshared \
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
UBSAN_OPTIONS=print_stacktrace=1 \
	exec tests/acct/integ_crash.sh
