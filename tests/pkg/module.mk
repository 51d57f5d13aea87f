# tests/pkg — the Debian packages (`make deb`, built once by debs.sh:
# lintian, files, dependencies, maintainer scripts in a scratch root,
# pkg-config) and `make install`'s pkg-config file.  The image has its
# own target, `make image-test` (pkg/module.mk).

INTEG_TESTS += tests/pkg/debs.sh tests/pkg/install_pc.sh
