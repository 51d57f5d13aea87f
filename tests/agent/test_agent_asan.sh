#!/bin/sh
# test_agent's whole battery (admission, paged status, permissions, tokens,
# escalation, malformed and random frames, reload, SIGTERM) against the
# sanitized gshared; leaks at its exit count as failures.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/san.sh
gs_san_exec sh -c 'exec "${B:-build}/tests/agent/test_agent" "$GSHARED"'
