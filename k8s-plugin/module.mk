# k8s-plugin/ — gshare-device-plugin, the kubelet device plugin (API
# v1beta1) that advertises GPU shares and creates allocations in the agent.
#
# Messages are protobuf-c code generated at build time from kubelet.proto
# (messages only; protoc-c cannot take the service definitions) into
# $(B)/k8s-plugin/gen/.  The generated C is compiled with the project's
# flags minus the warnings it was not written for.  gRPC core (Debian's
# libgrpc-dev) is used by dp_grpc.c only.

DP_BIN      := $(B)/k8s-plugin/gshare-device-plugin
DP_GEN      := $(B)/k8s-plugin/gen
DP_PB_C     := $(DP_GEN)/kubelet.pb-c.c
DP_PB_H     := $(DP_GEN)/kubelet.pb-c.h
DP_PB_O     := $(DP_GEN)/kubelet.pb-c.o
# Modules without gRPC, unit-tested (dp_install.c: the only file I/O).
DP_PURE_OBJS := $(B)/k8s-plugin/dp_logic.o $(B)/k8s-plugin/dp_state.o \
		$(B)/k8s-plugin/dp_install.o
DP_OBJS     := $(B)/k8s-plugin/dp_main.o $(B)/k8s-plugin/dp_grpc.o \
	       $(DP_PURE_OBJS) $(DP_PB_O)
DP_GRPC_CFLAGS := $(shell pkg-config --cflags grpc 2>/dev/null)
DP_GRPC_LIBS   := $(shell pkg-config --libs grpc 2>/dev/null)
DP_LDLIBS   := $(DP_GRPC_LIBS) -lprotobuf-c $(GSCOMMON_LDLIBS) -lpthread

BINS += $(DP_BIN)
DEB_PKGS += libgrpc-dev protobuf-c-compiler libprotobuf-c-dev \
	    python3-grpcio python3-protobuf valgrind

$(DP_PB_C) $(DP_PB_H) &: k8s-plugin/kubelet.proto
	@mkdir -p $(DP_GEN)
	protoc-c --c_out=$(DP_GEN) -Ik8s-plugin k8s-plugin/kubelet.proto

$(DP_PB_O): $(DP_PB_C) $(DP_PB_H)
	$(CC) $(CSTD) $(OPT) $(HARDEN) -MMD -MP -I$(DP_GEN) \
	    $(EXTRA_CFLAGS) -c -o $@ $<

# Plugin objects that speak protobuf see the generated header.
$(B)/k8s-plugin/dp_grpc.o $(B)/k8s-plugin/dp_main.o: | $(DP_PB_H)
$(B)/k8s-plugin/dp_grpc.o $(B)/k8s-plugin/dp_main.o: \
	CFLAGS += -I$(DP_GEN) -Ik8s-plugin $(DP_GRPC_CFLAGS)
$(B)/k8s-plugin/%.o: CFLAGS += -Ik8s-plugin

$(DP_BIN): $(DP_OBJS) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(DP_LDLIBS)

INSTALL_RULES += install-k8s-plugin
.PHONY: install-k8s-plugin
install-k8s-plugin: $(DP_BIN)
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/gshare/crds \
	    $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 755 $(DP_BIN) $(DESTDIR)$(PREFIX)/sbin/
	install -m 644 crds/*.yaml $(DESTDIR)$(PREFIX)/share/gshare/crds/
	install -m 644 docs/man/gshare-device-plugin.8 \
	    $(DESTDIR)$(PREFIX)/share/man/man8/
