#!/bin/sh
# make image (Debian's packages from the archive, ours from make deb),
# then tests/pkg/image.sh on the archive it wrote.
set -eu
start=$(date +%s)
make --no-print-directory image >build/image-build.log 2>&1 ||
	{ tail -n 30 build/image-build.log; echo "FAIL: make image"; exit 1; }
echo "ok: make image ($(($(date +%s) - start)) s)"
exec tests/pkg/image.sh "build/image/gshare-$(cat VERSION).oci.tar"
