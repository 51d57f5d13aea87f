#!/bin/sh
# The DaemonSet's image (make image): unpack the OCI archive, check the
# layout (every digest and size, tag, docker manifest), unpack the image
# independently with umoci, check crds/daemonset.yaml against it (image
# tag, program paths, probes, user, mount points), then run inside its
# root file system (chroot, no mounts): gshared -n and
# gshare-device-plugin -h, and each container's command with -n against
# the ConfigMap's configuration.
# Usage: tests/pkg/image.sh ARCHIVE   (IMAGE: the image's repository)
set -eu
. tests/pkg/lib.sh
tar=$1
IMAGE=${IMAGE:-localhost/gshare/gshare}
V=$(cat VERSION)
[ -f "$tar" ] || fail "$tar: no image (make image)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/layout"
tar -xf "$tar" -C "$tmp/layout"
umoci unpack --image "$tmp/layout:$V" "$tmp/bundle" >"$tmp/umoci.log" 2>&1 ||
	{ cat "$tmp/umoci.log"; fail "umoci unpack"; }
ok "umoci unpacks $IMAGE:$V"
root=$tmp/bundle/rootfs
python3 tests/pkg/check_image.py "$tmp/layout" "$root" "$IMAGE" "$V" \
	crds/daemonset.yaml >"$tmp/check" || { cat "$tmp/check"; exit 1; }
grep -v '^RUN ' "$tmp/check"
# umoci's runtime config says the same about the process
python3 - "$tmp/bundle/config.json" <<'PY' || fail "umoci's config.json"
import json, sys
c = json.load(open(sys.argv[1]))
p = c["process"]
assert p["args"][0] == "/usr/sbin/gshared", p["args"]
assert p["user"]["uid"] == 0, p["user"]
PY
ok "runtime bundle: process /usr/sbin/gshared as uid 0"

run() { # run DESC ARGV...: run inside the image's root
	desc=$1; shift
	chroot "$root" "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "$desc"; }
	ok "$desc"
}
run "gshared -n (image's gshare.yaml)" /usr/sbin/gshared -n \
	-f /etc/gshare/gshare.yaml
run "gshare-device-plugin -h" /usr/sbin/gshare-device-plugin -h
# the ConfigMap's files where the DaemonSet mounts them
python3 - crds/configmap.yaml "$root/etc/gshare" <<'PY'
import os, sys, yaml
cm = yaml.safe_load(open(sys.argv[1]))
for name, text in cm["data"].items():
    with open(os.path.join(sys.argv[2], name), "w") as f:
        f.write(text)
PY
grep '^RUN ' "$tmp/check" | sed 's/^RUN //' | while read -r argv; do
	# shellcheck disable=SC2046
	eval "set -- $(python3 -c 'import json,shlex,sys; print(" ".join(shlex.quote(a) for a in json.loads(sys.argv[1])))' "$argv")"
	run "in the image: $*" "$@"
done
if [ -e "$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/gshare/libgshare-gate.so" ]; then
	ok "launch gate library present"
	# what the device plugin copies into the socket directory for pods
	chroot "$root" /usr/sbin/gshare-device-plugin -n \
		-f /etc/gshare/device-plugin.yaml >"$tmp/dp" 2>&1 ||
		{ cat "$tmp/dp"; fail "gshare-device-plugin -n"; }
	src=$(sed -n 's/^preload_source: //p' "$tmp/dp")
	grep -qx 'preload: no' "$tmp/dp" && fail "the ConfigMap turns the gate off"
	case $src in /*) ;; *) fail "preload_source: '$src' (none)" ;; esac
	if [ ! -f "$root$src" ] || [ -L "$root$src" ]; then
		fail "preload_source $src: not a file in the image"
	fi
	ok "the device plugin installs the image's launch gate ($src)"
elif [ -e "${B:-build}/runtime/gate/libgshare-gate.so" ]; then
	fail "the image has no launch gate library"
fi
echo PASS
