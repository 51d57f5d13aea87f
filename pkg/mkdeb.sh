#!/bin/sh
# Build the Debian packages from this tree into BUILD/deb, reusing the
# objects already in BUILD (see debian/rules, GS_B).
# Usage: pkg/mkdeb.sh BUILD [PROFILE...]
# The source is copied (mtimes kept, so nothing is rebuilt) to
# BUILD/deb/src, where dpkg-buildpackage runs: its outputs land in
# BUILD/deb and nothing is written outside BUILD.
set -eu
b=$(realpath "$1"); shift
out=$b/deb
src=$out/src
profiles=$(echo "$*" | tr ' ' ',')
rm -rf "$out"
mkdir -p "$src"
tar -cf - --exclude=./build --exclude="./$(basename "$b")" \
	--exclude='./.wt-*' --exclude=./.git . | tar -xf - -C "$src"
cd "$src"
echo "deb: dpkg-buildpackage -us -uc -b${profiles:+ -P$profiles} (build tree $b)"
GS_B=$b dpkg-buildpackage -us -uc -b -nc ${profiles:+-P"$profiles"} \
	>"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	echo "deb: dpkg-buildpackage failed; log: $out/build.log" >&2
	exit 1
}
rm -rf "$src"
ls "$out"/*.deb
