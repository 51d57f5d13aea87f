# Helpers of the packaging tests (sourced).  Every check prints one
# line; fail() stops the test (the caller's trap cleans up).  The caller
# sets tmp, its scratch directory.

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

# gs_pc_link ROOT: compile and link a small program against libgshare
# with `pkg-config --cflags --libs gshare`, the .pc file and headers
# taken from ROOT (sysroot), then run it: without a GPU (or with one but
# no agent) gs_init must fail cleanly with a message.
gs_pc_link() {
	root=$1
	: "${tmp:?}"
	pcdir=$(dirname "$(find "$root" -name gshare.pc | head -n 1)")
	[ -f "$pcdir/gshare.pc" ] || fail "no gshare.pc under $root"
	flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$pcdir \
		PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 \
		pkg-config --cflags --libs gshare) ||
		fail "pkg-config --cflags --libs gshare"
	ok "pkg-config --cflags --libs gshare: $flags"
	cat >"$tmp/pc.c" <<'PROG'
#include <stdio.h>
#include <gshare.h>
int main(void)
{
	int rc = gs_init(GS_INIT_STANDALONE);
	printf("gs_init: %d %s\n", rc, rc ? gs_strerror(rc) : "ok");
	if (rc == 0)
		return gs_finalize() == 0 ? 0 : 3;
	return gs_strerror(rc) != NULL ? 2 : 4;
}
PROG
	# shellcheck disable=SC2086
	cc -Wall -Werror -o "$tmp/pc" "$tmp/pc.c" $flags ||
		fail "compile and link with pkg-config gshare"
	ok "compiled and linked with pkg-config gshare"
	libdir=$(dirname "$(find "$root" -name libgshare.so.1 | head -n 1)")
	rc=0
	LD_LIBRARY_PATH=$libdir "$tmp/pc" >"$tmp/pc.out" 2>&1 || rc=$?
	cat "$tmp/pc.out"
	case $rc in
	0|2) ok "the program runs against $libdir/libgshare.so.1 (rc $rc)" ;;
	*) fail "the program linked with libgshare: rc $rc" ;;
	esac
	LD_LIBRARY_PATH=$libdir ldd "$tmp/pc" | grep -q "$libdir/libgshare.so.1" ||
		fail "the program does not load $libdir/libgshare.so.1"
	# a CUDA job, compiled as docs/runtime.md says (flags from pkg-config)
	nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
	[ -x "$nvcc" ] || return 0
	cat >"$tmp/job.cu" <<'PROG'
#include <gshare_device.cuh>
struct job_args { float *x; };
GS_KERNEL(job, struct job_args, p) { p.x[gs_block_linear()] = 1.0f; }
int main(void) { return gs_init(GS_INIT_STANDALONE) == 0 ? gs_finalize() : 2; }
PROG
	# shellcheck disable=SC2086
	"$nvcc" -std=c++17 -O3 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
		-cudart shared $flags "$tmp/job.cu" -o "$tmp/job" ||
		fail "nvcc with pkg-config gshare"
	rc=0
	LD_LIBRARY_PATH=$libdir "$tmp/job" || rc=$?
	case $rc in 0|2) ;; *) fail "the CUDA job: rc $rc" ;; esac
	ok "nvcc -cudart shared \$(pkg-config --cflags --libs gshare) compiles and links a GS_KERNEL job (rc $rc)"
}
