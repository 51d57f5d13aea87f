#!/bin/sh
# make install lays out libgshare for developers: the libgshare.so link,
# the headers and gshare.pc, with which a program compiles and links
# (pkg-config --cflags --libs gshare) and runs.  Needs libgshare, i.e.
# nvcc at build time; without it the test says so and passes.
set -eu
. tests/pkg/lib.sh
B=${B:-build}
if [ ! -e "$B/runtime/libgshare.so.1" ]; then
	echo "skipped: libgshare is not built here (no nvcc)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
make --no-print-directory -s install DESTDIR="$tmp/root" \
	PREFIX=/usr/local >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "make install"; }
for f in lib/libgshare.so.1 lib/libgshare.so lib/pkgconfig/gshare.pc \
	 include/gshare.h include/gshare_device.cuh; do
	[ -e "$tmp/root/usr/local/$f" ] || fail "make install: no $f"
done
[ "$(readlink "$tmp/root/usr/local/lib/libgshare.so")" = libgshare.so.1 ] ||
	fail "libgshare.so is not a link to libgshare.so.1"
ok "make install: library, link, headers, gshare.pc"
grep -qx "Version: $(cat VERSION)" "$tmp/root/usr/local/lib/pkgconfig/gshare.pc" ||
	fail "gshare.pc: Version is not $(cat VERSION)"
gs_pc_link "$tmp/root"
echo "PASS"
