/*
 * test_dp_logic.c — unit tests of the device plugin's pure modules
 * (k8s-plugin/dp_logic.c, k8s-plugin/dp_state.c): resource names, device
 * IDs, the device list, preferred allocation (packing, must_include,
 * spanning fallback), Allocate checks with every rejection, the container
 * environment, PodResources reconciliation (labels, grace, adoption), and
 * the launch gate's install into the socket directory (dp_install.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_install.h"
#include "dp_logic.h"
#include "dp_state.h"

#define U0 "GPU-00000000-0000-0000-0000-000000000000"
#define U1 "GPU-11111111-1111-1111-1111-111111111111"

static const struct gs_dp_gpu gpus[2] = {
	{ 0, U0, 1 },
	{ 1, U1, 1 },
};

static void
test_resource_names(void **state)
{
	struct gs_error err;
	static const char *const good[] = {
		"gshare.io/gpu-share", "example.com/a", "a.b-c.d/x_y.z9",
		"x/Y",
	};
	static const char *const bad[] = {
		"", "gpu-share", "gshare.io/", "/gpu", "Gshare.io/gpu",
		"gshare..io/gpu", "-gshare.io/gpu", "gshare.io/gpu/x",
		"gshare.io/-gpu", "gshare.io/gpu-", "kubernetes.io/gpu",
		"node.kubernetes.io/gpu", "gshare.io/g pu",
		"gshare.io/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaa",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(gs_dp_resource_check(good[i], &err), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		assert_int_equal(gs_dp_resource_check(bad[i], &err), -1);
		assert_int_equal(err.code, GS_EINVAL);
		assert_true(strlen(err.msg) > 0);
	}
}

static void
test_device_ids(void **state)
{
	struct gs_error err;
	char buf[GS_DP_ID_MAX], uuid[GS_UUID_MAX];
	char longu[80];
	unsigned n;

	(void)state;
	assert_int_equal(gs_dp_device_id(buf, sizeof(buf), U1, 42, &err), 0);
	assert_string_equal(buf, U1 "::42");
	assert_int_equal(gs_dp_device_id_parse(buf, uuid, &n, &err), 0);
	assert_string_equal(uuid, U1);
	assert_int_equal(n, 42);
	assert_int_equal(gs_dp_device_id_parse("GPU-x::0", uuid, &n, &err), 0);
	assert_int_equal(n, 0);
	memset(longu, 'a', 70);
	longu[70] = '\0';
	assert_int_equal(gs_dp_device_id(buf, sizeof(buf), longu, 1, &err),
			 -1);
	assert_int_equal(gs_dp_device_id(buf, sizeof(buf), "", 1, &err), -1);
	assert_int_equal(gs_dp_device_id_parse("GPU-x::100", uuid, &n, &err),
			 -1);
	assert_non_null(strstr(err.msg, "out of range"));
	assert_int_equal(gs_dp_device_id_parse("GPU-x", uuid, &n, &err), -1);
	assert_int_equal(gs_dp_device_id_parse("::3", uuid, &n, &err), -1);
	assert_int_equal(gs_dp_device_id_parse("GPU-x::", uuid, &n, &err), -1);
	assert_int_equal(gs_dp_device_id_parse("GPU-x::1a", uuid, &n, &err),
			 -1);
	assert_int_equal(gs_dp_device_id_parse("", uuid, &n, &err), -1);
	assert_int_equal(gs_dp_device_id_parse(longu, uuid, &n, &err), -1);
}

static void
test_devices_build(void **state)
{
	struct gs_dp_gpu g[2];
	struct gs_dp_device *d = NULL;
	struct gs_error err;
	size_t n, i;

	(void)state;
	memcpy(g, gpus, sizeof(g));
	assert_int_equal(gs_dp_devices_build(g, 2, 1, &d, &n, &err), 0);
	assert_int_equal(n, 200);
	assert_string_equal(d[0].id, U0 "::0");
	assert_string_equal(d[199].id, U1 "::99");
	for (i = 0; i < n; i++)
		assert_true(d[i].healthy);
	free(d);
	g[1].healthy = 0;
	assert_int_equal(gs_dp_devices_build(g, 2, 1, &d, &n, &err), 0);
	assert_true(d[99].healthy);
	assert_false(d[100].healthy);
	assert_int_equal(d[100].gpu, 1);
	free(d);
	assert_int_equal(gs_dp_devices_build(g, 2, 0, &d, &n, &err), 0);
	for (i = 0; i < n; i++)
		assert_false(d[i].healthy);
	free(d);
	assert_int_equal(gs_dp_devices_build(g, 0, 1, &d, &n, &err), 0);
	assert_null(d);
	assert_int_equal(n, 0);
}

/* avail: GPU0 IDs [lo0, hi0), GPU1 IDs [lo1, hi1); strings in ids. */
static size_t
mk_avail(char ids[][GS_DP_ID_MAX], const char **p, unsigned lo0,
	 unsigned hi0, unsigned lo1, unsigned hi1)
{
	struct gs_error err;
	size_t k = 0;
	unsigned s;

	for (s = lo1; s < hi1; s++, k++) {
		assert_int_equal(gs_dp_device_id(ids[k], GS_DP_ID_MAX, U1, s,
						 &err), 0);
		p[k] = ids[k];
	}
	for (s = lo0; s < hi0; s++, k++) {
		assert_int_equal(gs_dp_device_id(ids[k], GS_DP_ID_MAX, U0, s,
						 &err), 0);
		p[k] = ids[k];
	}
	return k;
}

static size_t
count_on(const char **out, size_t n, const char *uuid)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (strncmp(out[i], uuid, strlen(uuid)) == 0)
			k++;
	return k;
}

static void
test_preferred_packs(void **state)
{
	static char ids[200][GS_DP_ID_MAX];
	const char *avail[200], *out[200];
	struct gs_error err;
	size_t n;

	(void)state;
	/* GPU0 has 70 free, GPU1 has 40 free: a 30 request best-fits
	 * GPU1 (tightest that fits), a 50 request must go to GPU0. */
	n = mk_avail(ids, avail, 30, 100, 60, 100);
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 30, out, &err),
			 0);
	assert_int_equal(count_on(out, 30, U1), 30);
	assert_string_equal(out[0], U1 "::60");	/* lowest first */
	assert_string_equal(out[29], U1 "::89");
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 50, out, &err),
			 0);
	assert_int_equal(count_on(out, 50, U0), 50);
	/* Exactly fits GPU1. */
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 40, out, &err),
			 0);
	assert_int_equal(count_on(out, 40, U1), 40);
}

static void
test_preferred_must_include(void **state)
{
	static char ids[200][GS_DP_ID_MAX];
	const char *avail[200], *out[200];
	const char *must[2] = { U0 "::50", U0 "::51" };
	const char *must2[2] = { U0 "::50", U1 "::70" };
	struct gs_error err;
	size_t n;

	(void)state;
	n = mk_avail(ids, avail, 30, 100, 60, 100);
	/* must on GPU0 pulls the request to GPU0 even though GPU1 is the
	 * tighter fit. */
	assert_int_equal(gs_dp_preferred(avail, n, must, 2, 10, out, &err),
			 0);
	assert_string_equal(out[0], U0 "::50");
	assert_string_equal(out[1], U0 "::51");
	assert_int_equal(count_on(out, 10, U0), 10);
	/* must spanning GPUs: kept, filled, right size. */
	assert_int_equal(gs_dp_preferred(avail, n, must2, 2, 5, out, &err),
			 0);
	assert_string_equal(out[0], U0 "::50");
	assert_string_equal(out[1], U1 "::70");
	/* must larger than size, size 0, not enough IDs, bad IDs. */
	assert_int_equal(gs_dp_preferred(avail, n, must, 2, 1, out, &err), -1);
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 0, out, &err), -1);
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 111, out, &err),
			 -1);
	assert_non_null(strstr(err.msg, "only 110 available"));
	avail[3] = "garbage";
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 3, out, &err), -1);
}

static void
test_preferred_spans_when_needed(void **state)
{
	static char ids[200][GS_DP_ID_MAX];
	const char *avail[200], *out[200];
	struct gs_error err;
	size_t n, i, j;

	(void)state;
	n = mk_avail(ids, avail, 70, 100, 80, 100);	/* 30 + 20 free */
	assert_int_equal(gs_dp_preferred(avail, n, NULL, 0, 45, out, &err),
			 0);
	assert_int_equal(count_on(out, 45, U0), 30);
	assert_int_equal(count_on(out, 45, U1), 15);
	for (i = 0; i < 45; i++)
		for (j = 0; j < i; j++)
			assert_string_not_equal(out[i], out[j]);
}

static void
test_allocate_check(void **state)
{
	struct gs_dp_group g[2];
	struct gs_error err;
	const char *one[3] = { U1 "::3", U1 "::4", U1 "::5" };
	const char *span[3] = { U1 "::3", U0 "::4", U0 "::5" };
	const char *dup[2] = { U1 "::3", U1 "::3" };
	const char *unk[1] = { "GPU-nope::3" };
	const char *bad[1] = { "GPU-nope" };

	(void)state;
	assert_int_equal(gs_dp_allocate_check(gpus, 2, one, 3, 0, g, &err), 1);
	assert_int_equal(g[0].gpu, 1);
	assert_int_equal(g[0].count, 3);
	assert_int_equal(gs_dp_allocate_check(gpus, 2, span, 3, 0, g, &err),
			 -1);
	assert_non_null(strstr(err.msg, "spans 2 GPUs"));
	assert_non_null(strstr(err.msg, "no single GPU of this node had 3 "
			       "free shares"));
	assert_int_equal(gs_dp_allocate_check(gpus, 2, span, 3, 1, g, &err), 2);
	assert_int_equal(g[0].gpu, 0);	/* largest group first */
	assert_int_equal(g[0].count, 2);
	assert_int_equal(g[1].count, 1);
	assert_int_equal(gs_dp_allocate_check(gpus, 2, one, 0, 0, g, &err), -1);
	assert_non_null(strstr(err.msg, "names no device IDs"));
	assert_int_equal(gs_dp_allocate_check(gpus, 2, dup, 2, 0, g, &err), -1);
	assert_non_null(strstr(err.msg, "named twice"));
	assert_int_equal(gs_dp_allocate_check(gpus, 2, unk, 1, 0, g, &err), -1);
	assert_int_equal(err.code, GS_ENOENT);
	assert_non_null(strstr(err.msg, "GPU-nope"));
	assert_int_equal(gs_dp_allocate_check(gpus, 2, bad, 1, 0, g, &err), -1);
	assert_int_equal(gs_dp_allocate_check(gpus, 0, one, 1, 0, g, &err), -1);
}

static const char *
env_get(const struct gs_dp_container *c, const char *key)
{
	size_t i;

	for (i = 0; i < c->nenv; i++)
		if (strcmp(c->env[i].key, key) == 0)
			return c->env[i].value;
	return NULL;
}

static void
test_container_build(void **state)
{
	struct gs_dp_container c;
	struct gs_error err;
	uint64_t ids[2] = { 17, 18 };
	const char *uu[2] = { U1, U0 };

	(void)state;
	assert_int_equal(gs_dp_container_build("/run/gshare/gshared.sock",
	    NULL, ids, uu, 1, &c, &err), 0);
	assert_string_equal(env_get(&c, "GSHARE_SOCKET"),
			    "/run/gshare/gshared.sock");
	assert_string_equal(env_get(&c, "GSHARE_ALLOC"), "17");
	assert_null(env_get(&c, "GSHARE_ALLOCS"));
	assert_string_equal(env_get(&c, "NVIDIA_VISIBLE_DEVICES"), U1);
	assert_string_equal(env_get(&c, "CUDA_VISIBLE_DEVICES"), U1);
	assert_string_equal(c.mount_host, "/run/gshare");
	assert_string_equal(c.mount_container, "/run/gshare");
	assert_true(c.mount_read_only);
	assert_int_equal(gs_dp_container_build("/tmp/x/a.sock", "/gshare/",
	    ids, uu, 2, &c, &err), 0);
	assert_string_equal(env_get(&c, "GSHARE_SOCKET"), "/gshare/a.sock");
	assert_string_equal(env_get(&c, "GSHARE_ALLOCS"), "17,18");
	assert_string_equal(env_get(&c, "CUDA_VISIBLE_DEVICES"), U1 "," U0);
	assert_string_equal(c.mount_host, "/tmp/x");
	assert_int_equal(gs_dp_container_build("rel.sock", NULL, ids, uu, 1,
	    &c, &err), -1);
	assert_int_equal(gs_dp_container_build("/a/", NULL, ids, uu, 1, &c,
	    &err), -1);
	assert_int_equal(gs_dp_container_build("/a/b", "rel", ids, uu, 1, &c,
	    &err), -1);
	assert_int_equal(gs_dp_container_build("/a/b", NULL, ids, uu, 0, &c,
	    &err), -1);

	/* the launch gate, through the socket directory's mount */
	assert_int_equal(gs_dp_container_build("/tmp/x/a.sock", "/gshare/",
	    ids, uu, 2, &c, &err), 0);
	assert_null(env_get(&c, "LD_PRELOAD"));
	assert_int_equal(gs_dp_container_preload(&c, "libgshare-gate.so",
	    &err), 0);
	assert_string_equal(env_get(&c, "LD_PRELOAD"),
			    "/gshare/libgshare-gate.so");
	assert_int_equal(gs_dp_container_preload(&c, "../etc/x.so", &err),
			 -1);
	assert_int_equal(gs_dp_container_preload(&c, "", &err), -1);
	assert_int_equal(gs_dp_container_preload(&c, "..", &err), -1);
}

/* Space mode: the MPS server's pipe directory in the environment and
 * mounted read-write; the thread cap when given; bad paths refused
 * with nothing changed. */
static void
test_container_mps(void **state)
{
	struct gs_dp_container c;
	struct gs_error err;
	uint64_t ids[2] = { 17, 18 };
	const char *uu[2] = { U1, U0 };
	const char *pipe = "/var/lib/gshare/mps/0/1000/pipe";

	(void)state;
	assert_int_equal(gs_dp_container_build("/run/gshare/gshared.sock",
	    NULL, ids, uu, 1, &c, &err), 0);
	assert_string_equal(c.mps_mount, "");
	assert_int_equal(gs_dp_container_mps(&c, "pipe", 30, &err), -1);
	assert_int_equal(gs_dp_container_mps(&c, "/a/../etc", 30, &err), -1);
	assert_int_equal(gs_dp_container_mps(&c, "/a/./b", 30, &err), -1);
	assert_int_equal(gs_dp_container_mps(&c, "/a/..", 30, &err), -1);
	assert_int_equal(gs_dp_container_mps(&c, pipe, 101, &err), -1);
	assert_null(env_get(&c, "CUDA_MPS_PIPE_DIRECTORY"));
	assert_string_equal(c.mps_mount, "");
	assert_int_equal(gs_dp_container_mps(&c, pipe, 30, &err), 0);
	assert_string_equal(env_get(&c, "CUDA_MPS_PIPE_DIRECTORY"), pipe);
	assert_string_equal(env_get(&c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
			    "30");
	assert_string_equal(c.mps_mount, pipe);
	/* the socket directory's mount is unchanged */
	assert_string_equal(c.mount_host, "/run/gshare");
	assert_true(c.mount_read_only);
	/* no cap: only the pipe; with the gate and two allocations the
	 * environment still has room */
	assert_int_equal(gs_dp_container_build("/tmp/x/a.sock", "/gshare/",
	    ids, uu, 2, &c, &err), 0);
	assert_int_equal(gs_dp_container_preload(&c, "libgshare-gate.so",
	    &err), 0);
	assert_int_equal(gs_dp_container_mps(&c, "/p..q/.x/pipe", 0, &err),
			 0);
	assert_string_equal(env_get(&c, "CUDA_MPS_PIPE_DIRECTORY"),
			    "/p..q/.x/pipe");
	assert_null(env_get(&c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
}

static void
test_state_reconcile(void **state)
{
	struct gs_dp_state st;
	struct gs_dp_action acts[8];
	struct gs_error err;
	const char *a1[2] = { U0 "::0", U0 "::1" };
	const char *a2[1] = { U1 "::9" };
	const char *c1[3] = { U0 "::0", U0 "::1", "other" };
	struct gs_dp_podctr pc[1] = {
		{ "default", "pod-a", "main", c1, 3, NULL },
	};
	uint64_t ov[4], same;
	int n;

	(void)state;
	gs_dp_state_init(&st);
	assert_int_equal(gs_dp_state_add(&st, 5, U0, 2, a1, 2, 1000, &err), 0);
	assert_int_equal(gs_dp_state_add(&st, 6, U1, 1, a2, 1, 1000, &err), 0);
	assert_int_equal(gs_dp_state_add(&st, 6, U1, 1, a2, 1, 1000, &err),
			 -1);
	/* 5 is in pod-a: labelled.  6 is in no pod, still in grace. */
	n = gs_dp_reconcile(&st, pc, 1, 2000, 5000, acts, &err);
	assert_int_equal(n, 1);
	assert_int_equal(acts[0].kind, GS_DP_ACT_LABEL);
	assert_int_equal(acts[0].id, 5);
	assert_string_equal(gs_dp_state_find(&st, 5)->pod, "pod-a");
	gs_dp_state_find(&st, 5)->label_pending = 0;
	/* Grace over for 6: closed; 5 stays quiet. */
	n = gs_dp_reconcile(&st, pc, 1, 6000, 5000, acts, &err);
	assert_int_equal(n, 1);
	assert_int_equal(acts[0].kind, GS_DP_ACT_CLOSE);
	assert_int_equal(acts[0].id, 6);
	gs_dp_state_remove(&st, 6);
	/* Overlap: U0::1 handed out again after the window makes 5 stale. */
	assert_int_equal(gs_dp_state_overlap(&st, &a1[1], 1,
	    NULL, 0, 6000, 4000, ov,
	    &same), 1);
	assert_int_equal(ov[0], 5);
	assert_int_equal(same, 0);
	assert_int_equal(gs_dp_state_overlap(&st, a2, 1,
	    NULL, 0, 6000, 4000, ov,
	    &same), 0);
	/* pod-a gone: 5 had been seen in it, so it closes at once. */
	n = gs_dp_reconcile(&st, NULL, 0, 6100, 5000, acts, &err);
	assert_int_equal(n, 1);
	assert_int_equal(acts[0].kind, GS_DP_ACT_CLOSE);
	gs_dp_state_clear(&st);
	assert_int_equal(st.n, 0);
}

/* A pod with an init container: the kubelet hands the init container's
 * device IDs to the app containers within the same admission.  The init
 * container's allocation must stay (it has not run yet); the same IDs
 * share it, other IDs get their own; after the window the IDs mean the
 * holder is gone. */
static void
test_state_init_reuse(void **state)
{
	struct gs_dp_state st;
	struct gs_error err;
	const char *init[3] = { U0 "::0", U0 "::1", U0 "::2" };
	const char *app1[2] = { U0 "::0", U0 "::1" };
	const char *app2[2] = { U0 "::2", U0 "::3" };
	const char *c1[3] = { U0 "::0", U0 "::1", U0 "::2" };
	const char *c2[2] = { U0 "::0", U0 "::1" };
	const char *c3[2] = { U0 "::2", U0 "::3" };
	struct gs_dp_podctr pc[2] = {
		{ "default", "pod-i", "app1", c2, 2, NULL },
		{ "default", "pod-i", "app2", c3, 2, NULL },
	};
	struct gs_dp_podctr other[2] = {
		{ "default", "pod-k", "main", c2, 2, NULL },
		{ "default", "pod-i", "app2", c3, 2, NULL },
	};
	struct gs_dp_action acts[4];
	uint64_t ov[4], same;
	int n;

	(void)state;
	gs_dp_state_init(&st);
	assert_int_equal(gs_dp_state_add(&st, 7, U0, 3, init, 3, 1000, &err),
			 0);
	/* The same IDs, next container: shared, nothing stale. */
	assert_int_equal(gs_dp_state_overlap(&st, c1, 3,
	    NULL, 0, 1200, 10000, ov,
	    &same), 0);
	assert_int_equal(same, 7);
	gs_dp_state_find(&st, 7)->handed_ms = 1200;
	/* Part of them: kept, not shared. */
	assert_int_equal(gs_dp_state_overlap(&st, app1, 2,
	    NULL, 0, 1300, 10000, ov,
	    &same), 0);
	assert_int_equal(same, 0);
	assert_int_equal(gs_dp_state_add(&st, 8, U0, 2, app1, 2, 1300, &err),
			 0);
	/* A PodResources poll lists app1 only (init containers are not
	 * listed); 7 and 8 both match it, nothing closes. */
	n = gs_dp_reconcile(&st, pc, 1, 1400, 5000, acts, &err);
	assert_int_equal(n, 2);
	assert_int_equal(acts[0].kind, GS_DP_ACT_LABEL);
	assert_int_equal(acts[1].kind, GS_DP_ACT_LABEL);
	gs_dp_state_find(&st, 7)->label_pending = 0;
	gs_dp_state_find(&st, 8)->label_pending = 0;
	/* app2 reuses the rest of the init container's IDs plus one: the
	 * seen init allocation still counts as the same pod's. */
	assert_int_equal(gs_dp_state_overlap(&st, app2, 2,
	    NULL, 0, 1500, 10000, ov,
	    &same), 0);
	assert_int_equal(same, 0);
	assert_int_equal(gs_dp_state_add(&st, 9, U0, 2, app2, 2, 1500, &err),
			 0);
	n = gs_dp_reconcile(&st, pc, 2, 1600, 5000, acts, &err);
	assert_int_equal(n, 1);		/* label 9 */
	assert_int_equal(acts[0].id, 9);
	gs_dp_state_find(&st, 9)->label_pending = 0;
	/* app1's IDs now held by another pod: 8's holder is gone (closed);
	 * 7 still has IDs in its own pod (app2). */
	n = gs_dp_reconcile(&st, other, 2, 1650, 5000, acts, &err);
	assert_int_equal(n, 2);	/* 7 relabelled (app2), 8 closed */
	assert_int_equal(acts[0].kind, GS_DP_ACT_LABEL);
	assert_int_equal(acts[0].id, 7);
	assert_int_equal(acts[1].kind, GS_DP_ACT_CLOSE);
	assert_int_equal(acts[1].id, 8);
	assert_string_equal(gs_dp_state_find(&st, 7)->pod, "pod-i");
	/* Seen in a pod: kept within the window, but never shared. */
	assert_int_equal(gs_dp_state_overlap(&st, c3, 2,
	    NULL, 0, 1660, 10000, ov,
	    &same), 0);
	assert_int_equal(same, 0);
	/* Seen holders of app2's IDs: 7 and 9 (8 holds none of them). */
	assert_int_equal(gs_dp_state_seen_holders(&st, c3, 2, ov), 2);
	assert_int_equal(ov[0], 7);
	assert_int_equal(ov[1], 9);
	/* Pod gone: all three close. */
	n = gs_dp_reconcile(&st, NULL, 0, 1700, 5000, acts, &err);
	assert_int_equal(n, 3);
	/* Offered as free by the last GetPreferredAllocation: the kubelet
	 * no longer counts them as the pod's, whatever the time. */
	assert_int_equal(gs_dp_state_overlap(&st, c3, 2, &c3[1], 1, 1700,
					     10000, ov, &same), 1);
	assert_int_equal(ov[0], 9);
	/* Long after: the same IDs mean their holder is gone. */
	assert_int_equal(gs_dp_state_overlap(&st, c1, 3,
	    NULL, 0, 60000, 10000, ov,
	    &same), 3);
	assert_int_equal(same, 0);
	gs_dp_state_clear(&st);
}

static void
test_state_adopt(void **state)
{
	struct gs_dp_state st;
	struct gs_dp_action acts[8];
	struct gs_error err;
	const char *c1[2] = { U0 "::7", U0 "::8" };
	const char *c2[3] = { U1 "::1", U1 "::2", U1 "::3" };
	struct gs_dp_podctr pc[2] = {
		{ "ns1", "p1", "c", c1, 2, NULL },
		{ "ns2", "p2", "c", c2, 3, NULL },
	};
	struct gs_dp_alloc *a;
	uint64_t ov[4], same;
	int n;

	(void)state;
	gs_dp_state_init(&st);
	/* 1: adopted with labels; 2: adopted unlabelled, 3 shares on U1;
	 * 3: adopted unlabelled, no matching container. */
	assert_int_equal(gs_dp_state_add(&st, 1, U0, 2, NULL, 0, 0, &err), 0);
	gs_dp_state_set_labels(gs_dp_state_find(&st, 1), "ns1", "p1", "c", 0);
	assert_int_equal(gs_dp_state_add(&st, 2, U1, 3, NULL, 0, 0, &err), 0);
	assert_int_equal(gs_dp_state_add(&st, 3, U1, 4, NULL, 0, 0, &err), 0);
	n = gs_dp_reconcile(&st, pc, 2, 100, 1000, acts, &err);
	assert_int_equal(n, 1);	/* only 2 needs its labels stored */
	assert_int_equal(acts[0].kind, GS_DP_ACT_LABEL);
	assert_int_equal(acts[0].id, 2);
	a = gs_dp_state_find(&st, 1);
	assert_int_equal(a->nids, 2);
	assert_string_equal(a->ids[1], U0 "::8");
	a = gs_dp_state_find(&st, 2);
	assert_int_equal(a->nids, 3);
	assert_string_equal(a->pod, "p2");
	/* adopted: reused IDs always mean the holder is gone */
	assert_int_equal(gs_dp_state_overlap(&st, &c2[2], 1,
	    NULL, 0, 100, 1000, ov,
	    &same), 1);
	assert_int_equal(ov[0], 2);
	n = gs_dp_reconcile(&st, pc, 2, 2000, 1000, acts, &err);
	assert_int_equal(n, 2);	/* 2 still pending, 3 closed */
	assert_int_equal(acts[1].kind, GS_DP_ACT_CLOSE);
	assert_int_equal(acts[1].id, 3);
	gs_dp_state_clear(&st);
}

static void
test_state_long_labels(void **state)
{
	struct gs_dp_state st;
	struct gs_dp_action acts[2];
	struct gs_error err;
	char pod[300];
	const char *ids[1] = { U0 "::1" };
	struct gs_dp_podctr pc[1] = { { "ns", pod, "c", ids, 1, NULL } };
	int n;

	(void)state;
	memset(pod, 'p', sizeof(pod) - 1);
	pod[sizeof(pod) - 1] = '\0';
	gs_dp_state_init(&st);
	assert_int_equal(gs_dp_state_add(&st, 1, U0, 1, ids, 1, 0, &err), 0);
	n = gs_dp_reconcile(&st, pc, 1, 1, 1000, acts, &err);
	assert_int_equal(n, 1);
	gs_dp_state_find(&st, 1)->label_pending = 0;
	n = gs_dp_reconcile(&st, pc, 1, 2, 1000, acts, &err);
	assert_int_equal(n, 0);	/* cut label compares equal */
	gs_dp_state_clear(&st);
}

/* -- the launch gate's install (dp_install.c) ------------------------------ */

struct inst {
	char top[64];		/* mkdtemp */
	char src[128];		/* top/src */
	char dir[128];		/* top/sock: the agent socket directory */
	char dst[160];		/* dir/gate.so */
	char victim[128];	/* top/victim: a link target */
};

static void
put(const char *path, const char *bytes, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static size_t
get(const char *path, char *buf, size_t sz)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sz);
	assert_true(n >= 0);
	close(fd);
	return (size_t)n;
}

/* The entries of t->dir other than . and .., counted; the only one
 * expected is gate.so (no temporary file left behind). */
static int
entries(const struct inst *t)
{
	DIR *d = opendir(t->dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		assert_string_equal(e->d_name, "gate.so");
		n++;
	}
	closedir(d);
	return n;
}

static int
inst_setup(void **state)
{
	struct inst *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -1;
	snprintf(t->top, sizeof(t->top), "/tmp/gs-dpinst.XXXXXX");
	if (mkdtemp(t->top) == NULL) {
		free(t);
		return -1;
	}
	snprintf(t->src, sizeof(t->src), "%s/src", t->top);
	snprintf(t->dir, sizeof(t->dir), "%s/sock", t->top);
	snprintf(t->dst, sizeof(t->dst), "%s/gate.so", t->dir);
	snprintf(t->victim, sizeof(t->victim), "%s/victim", t->top);
	if (mkdir(t->dir, 0755) == -1)
		return -1;
	*state = t;
	return 0;
}

static int
inst_teardown(void **state)
{
	struct inst *t = *state;
	char path[sizeof(t->dir) + 1 + 256];	/* dir / d_name */
	DIR *d;
	struct dirent *e;

	if ((d = opendir(t->dir)) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.' && (e->d_name[1] == '\0' ||
			    strcmp(e->d_name, "..") == 0))
				continue;
			snprintf(path, sizeof(path), "%s/%s", t->dir,
			    e->d_name);
			if (unlink(path) == -1)
				rmdir(path);
		}
		closedir(d);
	}
	rmdir(t->dir);
	unlink(t->src);
	rmdir(t->src);
	unlink(t->victim);
	rmdir(t->top);
	free(t);
	return 0;
}

static void
test_install_copies_atomically(void **state)
{
	struct inst *t = *state;
	struct gs_error err;
	struct stat a, b;
	static char big[200000], back[sizeof(big) + 1];
	char buf[64];
	size_t i;

	/* fresh: the bytes, 0644, ours; nothing else in the directory */
	put(t->src, "gate-v1", 7);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(get(t->dst, buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "gate-v1", 7);
	assert_int_equal(lstat(t->dst, &a), 0);
	assert_true(S_ISREG(a.st_mode));
	assert_int_equal(a.st_mode & 07777, 0644);
	assert_int_equal(a.st_uid, geteuid());
	assert_int_equal(entries(t), 1);

	/* the same again: left alone (same inode) */
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 0);
	assert_int_equal(lstat(t->dst, &b), 0);
	assert_true(a.st_ino == b.st_ino);

	/* new bytes of the same size: replaced by a new file (rename) */
	put(t->src, "gate-v2", 7);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(get(t->dst, buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "gate-v2", 7);
	assert_int_equal(lstat(t->dst, &b), 0);
	assert_true(a.st_ino != b.st_ino);

	/* a wrong mode is repaired */
	assert_int_equal(chmod(t->dst, 0600), 0);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(lstat(t->dst, &b), 0);
	assert_int_equal(b.st_mode & 07777, 0644);

	/* larger than one copy buffer; a change in the last byte counts */
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + 3);
	put(t->src, big, sizeof(big));
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(get(t->dst, back, sizeof(back)), sizeof(big));
	assert_memory_equal(back, big, sizeof(big));
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 0);
	big[sizeof(big) - 1]++;
	put(t->src, big, sizeof(big));
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(get(t->dst, back, sizeof(back)), sizeof(big));
	assert_memory_equal(back, big, sizeof(big));

	/* an empty source is a file too */
	put(t->src, "", 0);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(lstat(t->dst, &b), 0);
	assert_int_equal(b.st_size, 0);
	assert_int_equal(entries(t), 1);
}

static void
test_install_refuses(void **state)
{
	struct inst *t = *state;
	struct gs_error err;
	struct stat st;
	char tmp[512], buf[64];

	put(t->src, "gate", 4);
	put(t->victim, "victim", 6);

	/* a symbolic link at the destination: neither followed nor replaced */
	assert_int_equal(symlink(t->victim, t->dst), 0);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "symbolic link"));
	assert_non_null(strstr(err.msg, t->dst));
	assert_int_equal(get(t->victim, buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "victim", 6);
	assert_int_equal(lstat(t->dst, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(entries(t), 1);
	assert_int_equal(unlink(t->dst), 0);

	/* a directory there */
	assert_int_equal(mkdir(t->dst, 0755), 0);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(rmdir(t->dst), 0);

	/* a temporary file left by a run that died (here: a link) goes;
	 * its target is not written */
	snprintf(tmp, sizeof(tmp), "%s/.gate.so.tmp.%ld", t->dir,
		 (long)getpid());
	assert_int_equal(symlink(t->victim, tmp), 0);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "gate.so", &err),
			 1);
	assert_int_equal(get(t->victim, buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "victim", 6);
	assert_int_equal(get(t->dst, buf, sizeof(buf)), 4);
	assert_int_equal(entries(t), 1);

	/* bad sources, directories and names: clear errors, nothing made */
	assert_int_equal(gs_dp_install_file("/nonexistent/gate.so", t->dir,
					    "gate.so", &err), -1);
	assert_int_equal(err.code, GS_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/gate.so"));
	assert_int_equal(gs_dp_install_file(t->top, t->dir, "gate.so", &err),
			 -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(gs_dp_install_file(t->src, "/nonexistent/dir",
					    "gate.so", &err), -1);
	assert_int_equal(err.code, GS_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/dir"));
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "", &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "a/b", &err), -1);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, ".", &err), -1);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, "..", &err), -1);
	assert_int_equal(gs_dp_install_file(t->src, t->dir, NULL, &err), -1);
	assert_int_equal(entries(t), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resource_names),
		cmocka_unit_test(test_device_ids),
		cmocka_unit_test(test_devices_build),
		cmocka_unit_test(test_preferred_packs),
		cmocka_unit_test(test_preferred_must_include),
		cmocka_unit_test(test_preferred_spans_when_needed),
		cmocka_unit_test(test_allocate_check),
		cmocka_unit_test(test_container_build),
		cmocka_unit_test(test_container_mps),
		cmocka_unit_test(test_state_reconcile),
		cmocka_unit_test(test_state_init_reuse),
		cmocka_unit_test(test_state_adopt),
		cmocka_unit_test(test_state_long_labels),
		cmocka_unit_test_setup_teardown(test_install_copies_atomically,
						inst_setup, inst_teardown),
		cmocka_unit_test_setup_teardown(test_install_refuses,
						inst_setup, inst_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
