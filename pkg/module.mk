# pkg/ — Debian packages (debian/, `make deb`) and the DaemonSet's OCI
# image (`make image`), both built from this tree.
#
#   make deb    the packages, into $(B)/deb (lintian-clean; profiles
#               nocuda without nvcc, nogate while `make all` builds no
#               launch gate library)
#   make image  $(B)/image/gshare-$(GS_VERSION).oci.tar, from Debian's
#               packages (mmdebstrap, network to the Debian archive) and
#               the packages of `make deb`
#   make image-test   unpacks that image and checks it (tests/pkg/image.sh)

DEB_DIR := $(B)/deb
# the launch gate's library, where runtime/gate/ builds it (nogate while
# the tree does not)
GATE_SO_BUILT = $(B)/runtime/gate/libgshare-gate.so
DEB_PROFILES = $(if $(HAVE_NVCC),,nocuda) \
	       $(if $(wildcard $(GATE_SO_BUILT)),,nogate)
DEB_PKGS += debhelper lintian chrpath

.PHONY: deb image image-test
deb: all
	@pkg/mkdeb.sh $(B) $(DEB_PROFILES)

# The image's name: a site sets IMAGE to its registry's repository (and
# the manifests' image: lines to the same, see docs/kubernetes.md).
IMAGE ?= localhost/gshare/gshare
IMAGE_DIR := $(B)/image
IMAGE_TAR := $(IMAGE_DIR)/gshare-$(GS_VERSION).oci.tar
DEBIAN_MIRROR ?= http://deb.debian.org/debian

image: deb
	@tests/deps.sh mmdebstrap
	@pkg/mkimage.sh $(DEB_DIR) $(IMAGE_DIR) $(IMAGE) $(GS_VERSION) \
	    $(DEBIAN_MIRROR)

# Checks an image built by `make image` (does not rebuild it).
image-test:
	@tests/deps.sh umoci python3-yaml
	@IMAGE=$(IMAGE) tests/pkg/image.sh $(IMAGE_TAR)
