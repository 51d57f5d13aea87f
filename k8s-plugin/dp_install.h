/*
 * dp_install.h — put the launch gate where containers find it: a copy of
 * the packaged library in the agent socket directory, which every
 * gshare container mounts (see gs_dp_container_preload).
 */
#ifndef GS_DP_INSTALL_H
#define GS_DP_INSTALL_H

#include "gs_error.h"

/*
 * Install the regular file `src` as dir/name (name: a plain file name),
 * atomically: the bytes go to a new temporary file in dir, which is made
 * mode 0644 (owner root when the caller is root), synced, and renamed
 * over dir/name; the directory is synced after.  Readers see the old file
 * or the new one, never a part.
 *
 * 1: installed; 0: dir/name already held these bytes as a regular file of
 * mode 0644 (left untouched).  -1 with err set, dir/name untouched: src
 * missing or not a regular file, dir missing, no room (GS_EIO), or
 * dir/name a symbolic link or something else than a regular file
 * (GS_EINVAL: never followed nor replaced).  No temporary file is left
 * behind.
 */
int gs_dp_install_file(const char *src, const char *dir, const char *name,
		       struct gs_error *err);

#endif /* GS_DP_INSTALL_H */
