#!/bin/sh
# test_agent's whole battery (admission, paged status, permissions, tokens,
# escalation, malformed and random frames, reload, SIGTERM) against the
# ASan+UBSan gshared that `make test` builds under build/san.  A sanitizer
# report makes the agent exit non-zero, which test_agent's checks catch;
# on failure it prints the agent's log.
set -u
B=${B:-build}
SAN_GSHARED=build/san/node-agent/gshared
[ -x "$SAN_GSHARED" ] || { echo "FAIL $SAN_GSHARED not built" >&2; exit 1; }
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
UBSAN_OPTIONS=print_stacktrace=1 \
	exec "$B/tests/agent/test_agent" "$SAN_GSHARED"
