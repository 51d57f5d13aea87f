#!/bin/sh
# Build the DaemonSet's container image as an OCI archive (docker load,
# podman load, ctr import) from Debian's packages and this tree's own
# packages (make deb): a root file system holding only the runtime
# libraries of gshared, gshare-device-plugin and the launch gate, unpacked
# by mmdebstrap from the Debian archive, plus those packages' files.
# Usage: pkg/mkimage.sh DEBDIR OUTDIR NAME VERSION [MIRROR]
set -eu
debdir=$(realpath "$1"); out=$2; name=$3; version=$4
mirror=${5:-http://deb.debian.org/debian}
arch=$(dpkg --print-architecture)
ours="gshare gshare-device-plugin gshare-gate"

debs=""
for p in $ours; do
	f=$debdir/${p}_${version}_$arch.deb
	if [ -f "$f" ]; then
		debs="$debs $f"
	elif [ "$p" = gshare-gate ]; then
		echo "image: no $p package (no launch gate in this tree): left out"
	else
		echo "image: $f missing (make deb)" >&2; exit 1
	fi
done

# The Debian packages the programs need: the packages' Depends, less
# ours and those needed only by maintainer scripts (never run here).
deps=$(for f in $debs; do dpkg-deb -f "$f" Depends; done | tr ',' '\n' |
	sed 's/(.*)//; s/|.*//; s/ //g' | grep -v -x -e '' -e passwd \
	-e 'gshare.*' -e 'libgshare.*' | sort -u | tr '\n' ',')
deps=${deps%,}
echo "image: Debian packages: $deps (and their dependencies)"

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# a fixed time for every file (the version's release), so the same tree
# gives the same image
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l debian/changelog -S Timestamp)
export SOURCE_DATE_EPOCH
# the hooks' "$1" is mmdebstrap's root directory
# shellcheck disable=SC2016
set -- --variant=extract --include="$deps" --skip=output/dev --skip=cleanup/run \
	--extract-hook='printf "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" > "$1/etc/passwd"' \
	--extract-hook='printf "root:x:0:\nnogroup:x:65534:\n" > "$1/etc/group"' \
	--extract-hook='mkdir -p "$1/run/gshare" "$1/var/lib/gshare" "$1/var/lib/kubelet/device-plugins" "$1/var/lib/kubelet/pod-resources" "$1/tmp" && chmod 1777 "$1/tmp"' \
	--extract-hook="for f in $debs; do dpkg-deb -x \"\$f\" \"\$1\"; done" \
	--extract-hook='rm -rf "$1/usr/share/doc" "$1/usr/share/man" "$1/usr/share/locale" "$1/usr/share/lintian" "$1/var/cache/apt" "$1/var/lib/apt/lists" "$1/var/log"/*'
mmdebstrap --quiet "$@" bookworm "$tmp/rootfs.tar" "$mirror" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; echo "image: mmdebstrap failed" >&2; exit 1; }

python3 pkg/oci.py --rootfs "$tmp/rootfs.tar" --name "$name" \
	--version "$version" --arch "$arch" \
	--out "$out/gshare-$version.oci.tar"
