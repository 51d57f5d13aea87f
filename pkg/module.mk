# pkg/ — Debian packages (debian/, `make deb`) and the DaemonSet's OCI
# image (`make image`), both built from this tree.
#
#   make deb    the packages, into $(B)/deb (lintian-clean; profiles
#               nocuda without nvcc, nogate without the launch gate)
#   make image  $(B)/image/gshare-$(GS_VERSION).oci.tar, from Debian's
#               packages (mmdebstrap, network to the Debian archive) and
#               the packages of `make deb`
#   make image-test   unpacks that image and checks it (tests/pkg/image.sh)

DEB_DIR := $(B)/deb
DEB_PROFILES = $(if $(HAVE_NVCC),,nocuda) \
	       $(if $(wildcard runtime/gate/module.mk),,nogate)
DEB_PKGS += debhelper lintian chrpath

.PHONY: deb image image-test
deb: all
	@pkg/mkdeb.sh $(B) $(DEB_PROFILES)
