#!/bin/sh
# integ_restart.sh (kill -9 and SIGTERM with attached jobs, restore,
# re-attach, a GPU gone, a corrupt state file) against the sanitized
# gshared; every SIGTERM there must exit 0, leaks included.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/san.sh
gs_san_exec tests/restart/integ_restart.sh
