#!/bin/sh
# The host loop is linked into jobs (libgshare, gshare-simjob): it must
# never print or exit.  Compile common/gs_session.c on its own (so the
# check does not depend on a build tree) and check the symbols it imports.
set -u
cc=${CC:-cc}
tmp=$(mktemp -d /tmp/gsnoprint.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ! $cc -std=gnu11 -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=2 -Icommon \
	-c -o "$tmp/s.o" common/gs_session.c; then
	echo "FAIL common/gs_session.c does not compile"
	exit 1
fi
deny='printf|fprintf|vfprintf|puts|fputs|putchar|perror|dprintf|syslog'
deny="$deny|__printf_chk|__fprintf_chk|__vfprintf_chk|__dprintf_chk"
deny="$deny|exit|_exit|abort|err|errx|warn|warnx|fwrite|write"
bad=$(nm -u "$tmp/s.o" | awk '{print $2}' | grep -E "^($deny)\$")
if [ -n "$bad" ]; then
	echo "FAIL gs_session.c imports: $bad"
	exit 1
fi
echo "ok   gs_session.c imports no printing or exiting function"
