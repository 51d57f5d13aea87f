#!/bin/sh
# The host loop is linked into jobs (libgshare, gshare-simjob): it must
# never print or exit.  Check the symbols its object file imports.
set -u
obj=${B:-build}/common/gs_session.o
[ -f "$obj" ] || { echo "FAIL $obj not built"; exit 1; }
deny='printf|fprintf|vfprintf|puts|fputs|putchar|perror|dprintf|syslog'
deny="$deny|__printf_chk|__fprintf_chk|__vfprintf_chk|__dprintf_chk"
deny="$deny|exit|_exit|abort|err|errx|warn|warnx"
bad=$(nm -u "$obj" | awk '{print $2}' | grep -E "^($deny)\$")
if [ -n "$bad" ]; then
	echo "FAIL gs_session.o imports: $bad"
	exit 1
fi
echo "ok   gs_session.o imports no printing or exiting function"
