# spank/ — spank_gshare.so, the Slurm SPANK plugin.  Only plugin_* and
# slurm_spank_* are exported (spank_gshare.lds); libslurm's symbols
# resolve from the libslurmfull already loaded by srun/slurmstepd, so the
# plugin is not linked against libslurm.

SPANK_SRCS := spank/spank_gshare.c spank/spank_local.c spank/spank_remote.c \
	      spank/spank_slurmd.c spank/spank_spool.c \
	      spank/slurm_query.c
SPANK_OBJS := $(SPANK_SRCS:%.c=$(B)/%.o)
SPANK_SO   := $(B)/spank/spank_gshare.so

LIBS += $(SPANK_SO)
DEB_PKGS += libslurm-dev
INSTALL_RULES += install-spank

$(SPANK_OBJS): EXTRA_CFLAGS += -fvisibility=hidden

$(SPANK_SO): $(SPANK_OBJS) $(GSCOMMON) spank/spank_gshare.lds
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=spank/spank_gshare.lds \
	    -Wl,--no-undefined-version -o $@ $(SPANK_OBJS) $(GSCOMMON)

.PHONY: install-spank
install-spank: $(SPANK_SO)
	install -d $(DESTDIR)$(LIBDIR)/gshare
	install -m 0644 $(SPANK_SO) $(DESTDIR)$(LIBDIR)/gshare/spank_gshare.so
	install -d $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 docs/man/spank_gshare.8 $(DESTDIR)$(PREFIX)/share/man/man8/
