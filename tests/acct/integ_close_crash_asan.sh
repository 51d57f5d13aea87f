#!/bin/sh
# integ_close_crash.sh (the agent killed at each point of a close, the
# job's usage kept) against the sanitized gshared: a sanitizer report on
# the close's paths (the usage commit it waits for, the table write after
# it) kills the agent before the hook does and the job's row is missing
# or short.  (kill -9 leaves nothing for the leak check.)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/san.sh
ASAN_OPTIONS=detect_leaks=0 gs_san_exec tests/acct/integ_close_crash.sh
