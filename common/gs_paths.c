/*
 * gs_paths.c — paths fixed at build time (see gs_paths.h).
 */
#include "gs_paths.h"

#ifndef GS_GATE_LIB
#error "GS_GATE_LIB is set by common/module.mk (LIBDIR/gshare/libgshare-gate.so)"
#endif

const char gs_gate_lib[] = GS_GATE_LIB;
