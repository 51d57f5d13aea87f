#!/bin/sh
# integ_diskfault.sh (read-only, full and frozen disks under the agent's
# state and usage store) against the sanitized gshared: the retry and
# writer-thread paths under ASan+UBSan, leaks checked at each SIGTERM.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/san.sh
gs_san_exec sh tests/acct/integ_diskfault.sh
