/*
 * gs_paths.h — paths fixed when the project is built, from the make
 * variables (`make LIBDIR=...`; common/module.mk passes them, and the
 * object is rebuilt when one changes: see BUILD_PATHS in the Makefile).
 */
#ifndef GS_PATHS_H
#define GS_PATHS_H

/* Where `make install` puts the launch gate: LIBDIR/gshare/
 * libgshare-gate.so (/usr/local/lib/... by default, /usr/lib/<multiarch>/
 * ... in the Debian packages).  The SPANK plugin's `preload` default and
 * the device plugin's `preload_source` default. */
extern const char gs_gate_lib[];

#endif /* GS_PATHS_H */
