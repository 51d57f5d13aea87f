# common/ — code shared by every component: errors, logging, wire
# protocol, agent client, configuration.  Built once, with -fPIC (from the
# top-level flags), into a static archive that executables and shared
# objects (SPANK plugin, libgshare) both link.  Every common/gs_*.c goes in.
#
# Link line for users: $(GSCOMMON) plus $(GSCOMMON_LDLIBS) when they use
# the YAML half of gs_config.h (gs_yaml_*, gs_cfg_apply_yaml).

COMMON_SRCS := $(sort $(wildcard common/gs_*.c))
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o)
GSCOMMON    := $(B)/common/libgscommon.a
GSCOMMON_LDLIBS := -lyaml

LIBS += $(GSCOMMON)

$(GSCOMMON): $(COMMON_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# The launch gate's installed path, compiled in (gs_paths.h).
GS_GATE_PATH := $(LIBDIR)/gshare/libgshare-gate.so
BUILD_PATHS += $(GS_GATE_PATH)
$(B)/common/gs_paths.o: CFLAGS += -DGS_GATE_LIB='"$(GS_GATE_PATH)"'
$(B)/common/gs_paths.o: $(PATHS_STAMP)
