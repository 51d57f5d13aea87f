#!/bin/sh
# integ_crash.sh (50 kill -9 of the agent under 16 jobs, every committed
# tick kept) against the sanitized gshared: a sanitizer report, or a fault
# in SQLite's mapping of the WAL index, kills the agent and the jobs stop
# settling.  (kill -9 leaves nothing for the leak check.)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/san.sh
ASAN_OPTIONS=detect_leaks=0 gs_san_exec tests/acct/integ_crash.sh
