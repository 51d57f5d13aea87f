# tests/pkg — the Debian packages (`make deb`, built once by debs.sh:
# lintian, files, dependencies, maintainer scripts in a scratch root,
# pkg-config), `make install`'s pkg-config file, and the DaemonSet's
# image (make image, about 15 s with the download from the Debian
# archive; then tests/pkg/image.sh, also `make image-test`).

INTEG_TESTS += tests/pkg/debs.sh tests/pkg/install_pc.sh \
	       tests/pkg/image_build.sh
DEB_PKGS += mmdebstrap umoci python3-yaml
