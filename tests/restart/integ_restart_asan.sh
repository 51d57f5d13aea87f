#!/bin/sh
# integ_restart.sh (kill -9 and SIGTERM with attached jobs, restore,
# re-attach, a GPU gone, a corrupt state file) with the ASan+UBSan gshared
# that `make test` builds under build/san; every SIGTERM there must exit 0,
# which a sanitizer report prevents.
set -u
cd "$(dirname "$0")/../.." || exit 1
[ -x build/san/node-agent/gshared ] ||
	{ echo "FAIL build/san/node-agent/gshared not built" >&2; exit 1; }
GSHARED=build/san/node-agent/gshared \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
UBSAN_OPTIONS=print_stacktrace=1 \
	exec tests/restart/integ_restart.sh
