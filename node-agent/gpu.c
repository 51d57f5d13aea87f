/*
 * gpu.c — GPU discovery.  NVML is opened with dlopen("libnvidia-ml.so.1")
 * so gshared has no link-time or header dependency on the driver: the few
 * entry points used are declared here by hand (types as in the NVML API:
 * nvmlReturn_t is an int-sized enum, nvmlDevice_t an opaque pointer).
 * Discovery runs once at start-up, before the event loop, so its blocking
 * calls do not stall clients.  Health checks (end of file) run on the
 * agent's health worker thread for the same reason.
 */
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

typedef int nvml_ret;
typedef struct nvml_device *nvml_dev;

struct nvml_memory {		/* nvmlMemory_t (v1) */
	unsigned long long total, free, used;
};

#define NVML_SUCCESS 0
#define NVML_BUF 96

struct nvml {
	void *h;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*count)(unsigned int *);
	nvml_ret (*by_index)(unsigned int, nvml_dev *);
	nvml_ret (*uuid)(nvml_dev, char *, unsigned int);
	nvml_ret (*name)(nvml_dev, char *, unsigned int);
	nvml_ret (*meminfo)(nvml_dev, struct nvml_memory *);	/* optional */
};

static const char *nv_err(const struct nvml *nv, nvml_ret r)
{
	return nv->error_string ? nv->error_string(r) : "unknown NVML error";
}

/* Resolve sym from the library handle `lib` into obj->field; a missing
 * symbol is named in the caller's `missing`. */
#define NVML_SYM_IN(lib, obj, field, sym)                                    \
	do {                                                                 \
		*(void **)(&(obj)->field) = dlsym(lib, sym);                 \
		if ((obj)->field == NULL)                                    \
			missing = sym;                                       \
	} while (0)
#define NVML_SYM(nv, field, sym) NVML_SYM_IN((nv)->h, nv, field, sym)

/* What the usage sampler and the health checker both need: their own
 * handle on the library (each lives on its own thread, opened and closed
 * on its own), initialized, with devices looked up by UUID. */
struct nvml_lib {
	void *h;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*by_uuid)(const char *, nvml_dev *);
};

/* dlopen, the common entry points and nvmlInit.  0, or -1 with nothing
 * left open. */
static int nvml_lib_open(struct nvml_lib *l, struct gs_error *err)
{
	const char *missing = NULL;
	nvml_ret r;

	memset(l, 0, sizeof(*l));
	l->h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (l->h == NULL)
		return gs_error_set(err, GS_EIO, "NVML not available: %s",
				    dlerror());
	NVML_SYM(l, init, "nvmlInit_v2");
	NVML_SYM(l, shutdown, "nvmlShutdown");
	NVML_SYM(l, error_string, "nvmlErrorString");
	NVML_SYM(l, by_uuid, "nvmlDeviceGetHandleByUUID");
	if (missing != NULL) {
		gs_error_set(err, GS_EIO, "NVML: symbol %s missing", missing);
		goto out_close;
	}
	r = l->init();
	if (r != NVML_SUCCESS) {
		gs_error_set(err, GS_EIO, "nvmlInit: %s", l->error_string(r));
		goto out_close;
	}
	return 0;
out_close:
	dlclose(l->h);
	l->h = NULL;
	return -1;
}

static void nvml_lib_close(struct nvml_lib *l)
{
	l->shutdown();
	dlclose(l->h);
}

static int nvml_discover(struct gs_gpu_desc *out, uint32_t *n,
			 struct gs_error *err)
{
	struct nvml nv;
	const char *missing = NULL;
	unsigned int cnt = 0, i;
	nvml_ret r;
	int rv = -1;

	memset(&nv, 0, sizeof(nv));
	nv.h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (nv.h == NULL)
		return gs_error_set(err, GS_EIO, "NVML not available: %s",
				    dlerror());
	NVML_SYM(&nv, init, "nvmlInit_v2");
	NVML_SYM(&nv, shutdown, "nvmlShutdown");
	NVML_SYM(&nv, error_string, "nvmlErrorString");
	NVML_SYM(&nv, count, "nvmlDeviceGetCount_v2");
	NVML_SYM(&nv, by_index, "nvmlDeviceGetHandleByIndex_v2");
	NVML_SYM(&nv, uuid, "nvmlDeviceGetUUID");
	NVML_SYM(&nv, name, "nvmlDeviceGetName");
	if (missing != NULL) {
		gs_error_set(err, GS_EIO, "NVML: symbol %s missing", missing);
		goto out_close;
	}
	/* optional: without it the GPU's memory is unknown (no default
	 * limits, no memory admission) */
	*(void **)(&nv.meminfo) = dlsym(nv.h, "nvmlDeviceGetMemoryInfo");
	r = nv.init();
	if (r != NVML_SUCCESS) {
		gs_error_set(err, GS_EIO, "nvmlInit: %s", nv_err(&nv, r));
		goto out_close;
	}
	r = nv.count(&cnt);
	if (r != NVML_SUCCESS) {
		gs_error_set(err, GS_EIO, "nvmlDeviceGetCount: %s",
			     nv_err(&nv, r));
		goto out_shutdown;
	}
	if (cnt == 0) {
		gs_error_set(err, GS_EIO, "NVML found no GPUs");
		goto out_shutdown;
	}
	if (cnt > GS_MAX_GPUS)
		cnt = GS_MAX_GPUS;
	for (i = 0; i < cnt; i++) {
		char buf[NVML_BUF];
		nvml_dev d;

		memset(&out[i], 0, sizeof(out[i]));
		out[i].index = (int32_t)i;
		r = nv.by_index(i, &d);
		if (r != NVML_SUCCESS) {
			gs_error_set(err, GS_EIO,
				     "nvmlDeviceGetHandleByIndex(%u): %s", i,
				     nv_err(&nv, r));
			goto out_shutdown;
		}
		memset(buf, 0, sizeof(buf));
		r = nv.uuid(d, buf, sizeof(buf));
		if (r != NVML_SUCCESS) {
			gs_error_set(err, GS_EIO, "nvmlDeviceGetUUID(%u): %s",
				     i, nv_err(&nv, r));
			goto out_shutdown;
		}
		snprintf(out[i].uuid, sizeof(out[i].uuid), "%.*s",
			 (int)sizeof(out[i].uuid) - 1, buf);
		memset(buf, 0, sizeof(buf));
		if (nv.name(d, buf, sizeof(buf)) == NVML_SUCCESS)
			snprintf(out[i].name, sizeof(out[i].name), "%.*s",
				 (int)sizeof(out[i].name) - 1, buf);
		if (nv.meminfo != NULL) {
			struct nvml_memory mi;

			memset(&mi, 0, sizeof(mi));
			if (nv.meminfo(d, &mi) == NVML_SUCCESS)
				out[i].mem_total = mi.total;
		}
	}
	*n = cnt;
	rv = 0;
out_shutdown:
	nv.shutdown();
out_close:
	dlclose(nv.h);
	return rv;
}

static void simulated(uint32_t count, uint64_t mem, struct gs_gpu_desc *out,
		      uint32_t *n)
{
	uint32_t i;

	for (i = 0; i < count && i < GS_MAX_GPUS; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].index = (int32_t)i;
		snprintf(out[i].uuid, sizeof(out[i].uuid),
			 "SIM-00000000-0000-0000-0000-%012u", i);
		snprintf(out[i].name, sizeof(out[i].name), "simulated GPU");
		out[i].simulated = 1;
		out[i].mem_total = mem;
	}
	*n = i;
}

/* Read the first line of a sysfs file into buf; 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int rv = -1;

	if (f == NULL)
		return -1;
	if (fgets(buf, (int)len, f) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		rv = 0;
	}
	fclose(f);
	return rv;
}

/*
 * Whether this node has, or is labelled as having, NVIDIA GPUs, for
 * `gpus: auto`, which may simulate one only where there is none.  Signs:
 * GSHARE_GPU_NODE=1 in the environment (the DaemonSet sets it: it runs
 * only on nodes labelled gshare.io/gpu=true), an NVIDIA display or 3D
 * controller on the PCI bus (vendor 0x10de, class 0x03xxxx), or a
 * /dev/nvidia<N> device node.  GSHARE_HOST_ROOT prefixes the paths (a
 * host /sys mounted elsewhere; the tests).  why receives the sign.
 */
static int host_has_gpus(char *why, size_t len)
{
	const char *root = getenv("GSHARE_HOST_ROOT");
	const char *label = getenv("GSHARE_GPU_NODE");
	char pat[512], path[600], v[32], cls[32];
	glob_t g;
	size_t i;
	int found = 0;

	if (label != NULL && strcmp(label, "1") == 0) {
		snprintf(why, len, "the node is labelled as a GPU node "
			 "(GSHARE_GPU_NODE=1)");
		return 1;
	}
	if (root == NULL)
		root = "";
	snprintf(pat, sizeof(pat), "%s/sys/bus/pci/devices/*", root);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc && !found; i++) {
			snprintf(path, sizeof(path), "%s/vendor",
				 g.gl_pathv[i]);
			if (read_line(path, v, sizeof(v)) < 0 ||
			    strcmp(v, "0x10de") != 0)
				continue;
			snprintf(path, sizeof(path), "%s/class", g.gl_pathv[i]);
			if (read_line(path, cls, sizeof(cls)) < 0 ||
			    strncmp(cls, "0x03", 4) != 0)
				continue;
			snprintf(why, len, "the node has an NVIDIA GPU on "
				 "the PCI bus (%s)", strrchr(g.gl_pathv[i],
				 '/') + 1);
			found = 1;
		}
		globfree(&g);
	}
	if (found)
		return 1;
	snprintf(pat, sizeof(pat), "%s/dev/nvidia[0-9]*", root);
	if (glob(pat, 0, NULL, &g) == 0) {
		snprintf(why, len, "the node has %s", g.gl_pathv[0]);
		globfree(&g);
		return 1;
	}
	return 0;
}

int gs_gpu_discover(const struct gs_agent_config *c, struct gs_gpu_desc *out,
		    uint32_t *n, const char **note, struct gs_error *err)
{
	char why[160], nv[sizeof(err->msg)];
	uint32_t i;

	if (note != NULL)
		*note = NULL;
	switch (c->gpu_source) {
	case GS_GPUS_SIM:
		simulated(c->nsim, c->sim_memory, out, n);
		return 0;
	case GS_GPUS_LIST:
		for (i = 0; i < c->ngpus; i++) {
			memset(&out[i], 0, sizeof(out[i]));
			out[i].index = (int32_t)c->gpus[i].index;
			memcpy(out[i].uuid, c->gpus[i].uuid,
			       sizeof(out[i].uuid));
			memcpy(out[i].name, c->gpus[i].name,
			       sizeof(out[i].name));
			out[i].mem_total = c->gpus[i].memory;
		}
		*n = c->ngpus;
		return 0;
	case GS_GPUS_AUTO:
		if (nvml_discover(out, n, err) == 0)
			return 0;
		snprintf(nv, sizeof(nv), "%s", err->msg);
		if (host_has_gpus(why, sizeof(why)))
			return gs_error_set(err, GS_ECONFIG, "gpus: auto: "
			    "NVML is not usable (%s) but %s; refusing to "
			    "simulate a GPU: give the agent the NVIDIA driver "
			    "(docs/kubernetes.md: runtime class) or ask for "
			    "simulation with gpus: {simulated: N}", nv, why);
		if (note != NULL)
			*note = "NVML found no GPU; using one simulated GPU";
		simulated(1, c->sim_memory, out, n);
		return 0;
	default:
		return nvml_discover(out, n, err);
	}
}

/*
 * Per-process utilization for accounting estimates (jobs that never
 * attach).  NVML stays open while the agent runs; devices are found by
 * UUID so explicitly listed GPUs work too.  Simulated GPUs have none.
 */
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7

struct nvml_proc_util {		/* nvmlProcessUtilizationSample_t */
	unsigned int pid;
	unsigned long long ts;
	unsigned int sm, mem, enc, dec;
};

struct nvml_proc_info {		/* nvmlProcessInfo_t (v2 and v3 alike) */
	unsigned int pid;
	unsigned long long used_mem;	/* usedGpuMemory */
	unsigned int gpu_instance, compute_instance;
};

#define NVML_VALUE_NOT_AVAILABLE (~0ull)

struct nvml_utilization {	/* nvmlUtilization_t */
	unsigned int gpu, memory;
};

struct gs_gpu_util {
	struct nvml_lib lib;
	nvml_ret (*proc_util)(nvml_dev, struct nvml_proc_util *,
			      unsigned int *, unsigned long long);
	/* nvmlDeviceGetComputeRunningProcesses_v3, else _v2; NULL: none */
	nvml_ret (*compute_procs)(nvml_dev, unsigned int *,
				  struct nvml_proc_info *);
	/* nvmlDeviceGetUtilizationRates; NULL: none */
	nvml_ret (*dev_util)(nvml_dev, struct nvml_utilization *);
	int32_t index[GS_MAX_GPUS];
	nvml_dev dev[GS_MAX_GPUS];
	uint32_t n;
};

int gs_gpu_util_open(const struct gs_gpu_desc *gpus, uint32_t n,
		     struct gs_gpu_util **out, struct gs_error *err)
{
	struct gs_gpu_util *u;
	const char *missing = NULL;
	nvml_ret r;
	uint32_t i;

	for (i = 0; i < n; i++)
		if (gpus[i].simulated)
			return gs_error_set(err, GS_EUNSUPP,
					    "simulated GPUs have no NVML");
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	if (nvml_lib_open(&u->lib, err) < 0)
		goto out_free;
	NVML_SYM_IN(u->lib.h, u, proc_util, "nvmlDeviceGetProcessUtilization");
	/* optional: older drivers lack _v3 */
	*(void **)(&u->compute_procs) = dlsym(u->lib.h,
			"nvmlDeviceGetComputeRunningProcesses_v3");
	if (u->compute_procs == NULL)
		*(void **)(&u->compute_procs) = dlsym(u->lib.h,
			"nvmlDeviceGetComputeRunningProcesses_v2");
	*(void **)(&u->dev_util) = dlsym(u->lib.h,
			"nvmlDeviceGetUtilizationRates");
	if (missing != NULL) {
		gs_error_set(err, GS_EIO, "NVML: symbol %s missing", missing);
		goto out_close;
	}
	for (i = 0; i < n && i < GS_MAX_GPUS; i++) {
		r = u->lib.by_uuid(gpus[i].uuid, &u->dev[i]);
		if (r != NVML_SUCCESS) {
			gs_error_set(err, GS_EIO,
				     "nvmlDeviceGetHandleByUUID(%s): %s",
				     gpus[i].uuid, u->lib.error_string(r));
			goto out_close;
		}
		u->index[i] = gpus[i].index;
	}
	u->n = i;
	*out = u;
	return 0;
out_close:
	nvml_lib_close(&u->lib);
out_free:
	free(u);
	return -1;
}

void gs_gpu_util_close(struct gs_gpu_util *u)
{
	if (u == NULL)
		return;
	nvml_lib_close(&u->lib);
	free(u);
}

int gs_gpu_proc_util(struct gs_gpu_util *u, int32_t index, uint64_t since_us,
		     struct gs_gpu_proc_sample *out, unsigned max,
		     struct gs_error *err)
{
	struct nvml_proc_util s[256];
	unsigned int cnt = sizeof(s) / sizeof(s[0]), i, n = 0;
	nvml_ret r;
	uint32_t g;

	for (g = 0; g < u->n; g++)
		if (u->index[g] == index)
			break;
	if (g == u->n)
		return gs_error_set(err, GS_ENOENT, "no GPU %d", index);
	r = u->proc_util(u->dev[g], s, &cnt, since_us);
	if (r == NVML_ERROR_NOT_FOUND)
		return 0;	/* no samples since since_us */
	if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
		return gs_error_set(err, GS_EIO,
				    "nvmlDeviceGetProcessUtilization: %s",
				    u->lib.error_string(r));
	if (cnt > sizeof(s) / sizeof(s[0]))
		cnt = sizeof(s) / sizeof(s[0]);
	for (i = 0; i < cnt && n < max; i++) {
		if (s[i].ts <= since_us)
			continue;
		out[n].pid = s[i].pid;
		out[n].sm_util = s[i].sm;
		out[n].ts_us = s[i].ts;
		n++;
	}
	return (int)n;
}

int gs_gpu_dev_util(struct gs_gpu_util *u, int32_t index, uint32_t *gpu_pct,
		    uint32_t *mem_pct, struct gs_error *err)
{
	struct nvml_utilization ut;
	nvml_ret r;
	uint32_t g;

	for (g = 0; g < u->n; g++)
		if (u->index[g] == index)
			break;
	if (g == u->n)
		return gs_error_set(err, GS_ENOENT, "no GPU %d", index);
	if (u->dev_util == NULL)
		return gs_error_set(err, GS_EUNSUPP, "NVML has no "
				    "nvmlDeviceGetUtilizationRates");
	r = u->dev_util(u->dev[g], &ut);
	if (r != NVML_SUCCESS)
		return gs_error_set(err, GS_EIO,
				    "nvmlDeviceGetUtilizationRates: %s",
				    u->lib.error_string(r));
	*gpu_pct = ut.gpu > 100 ? 100 : ut.gpu;
	*mem_pct = ut.memory > 100 ? 100 : ut.memory;
	return 0;
}

int gs_gpu_compute_procs(struct gs_gpu_util *u, int32_t index,
			 struct gs_gpu_proc_mem *out, unsigned max,
			 struct gs_error *err)
{
	struct nvml_proc_info p[256];
	unsigned int cnt = sizeof(p) / sizeof(p[0]), i;
	nvml_ret r;
	uint32_t g;

	if (u->compute_procs == NULL)
		return gs_error_set(err, GS_EUNSUPP, "NVML has no "
				    "nvmlDeviceGetComputeRunningProcesses");
	for (g = 0; g < u->n; g++)
		if (u->index[g] == index)
			break;
	if (g == u->n)
		return gs_error_set(err, GS_ENOENT, "no GPU %d", index);
	memset(p, 0, sizeof(p));
	r = u->compute_procs(u->dev[g], &cnt, p);
	if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
		return gs_error_set(err, GS_EIO,
				    "nvmlDeviceGetComputeRunningProcesses: %s",
				    u->lib.error_string(r));
	if (r == NVML_ERROR_INSUFFICIENT_SIZE || cnt > sizeof(p) / sizeof(p[0]))
		return gs_error_set(err, GS_EIO, "GPU %d: more than %u "
				    "compute processes", index,
				    (unsigned)(sizeof(p) / sizeof(p[0])));
	for (i = 0; i < cnt && i < max; i++) {
		out[i].pid = p[i].pid;
		out[i].bytes = p[i].used_mem == NVML_VALUE_NOT_AVAILABLE ?
			       GS_GPU_MEM_UNKNOWN : p[i].used_mem;
	}
	return (int)i;
}

/*
 * Health checks.  A private NVML reference (nvmlInit counts references)
 * with its own symbols, so the worker thread shares no state with the
 * loop thread's NVML users.  The device handle is looked up by UUID on
 * every check: a GPU that fell off the bus is no longer found.  Critical
 * XID events come from an NVML event set registered for every monitored
 * GPU at open; when the driver cannot register them (not supported, no
 * permission) XIDs are simply not watched.
 */
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_EVENT_XID_CRITICAL 0x8ull
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_RESET_REQUIRED 16
#define NVML_ERROR_UNKNOWN 999

typedef struct nvml_event_set *nvml_evset;

struct nvml_event_data {	/* nvmlEventData_t */
	nvml_dev device;
	unsigned long long type;
	unsigned long long data;	/* the XID */
	unsigned int gpu_instance, compute_instance;
	unsigned int spare[8];	/* room should the driver's struct grow */
};

struct gs_gpu_health {
	struct nvml_lib lib;
	nvml_ret (*power)(nvml_dev, unsigned int *);
	nvml_ret (*evset_create)(nvml_evset *);
	nvml_ret (*evset_free)(nvml_evset);
	nvml_ret (*register_events)(nvml_dev, unsigned long long, nvml_evset);
	nvml_ret (*evset_wait)(nvml_evset, struct nvml_event_data *,
			       unsigned int);
	nvml_evset evset;	/* NULL: XIDs not watched */
	nvml_dev dev[GS_MAX_GPUS];	/* handles at open, for events */
	int32_t index[GS_MAX_GPUS];
	char uuid[GS_MAX_GPUS][GS_UUID_MAX];
	uint32_t n;
};

/* Event set for critical XIDs on every monitored GPU; leaves h->evset
 * NULL when the driver cannot give one (then XIDs are not watched). */
static void xid_open(struct gs_gpu_health *h)
{
	const char *missing = NULL;
	nvml_evset set = NULL;
	uint32_t i;

	NVML_SYM_IN(h->lib.h, h, evset_create, "nvmlEventSetCreate");
	NVML_SYM_IN(h->lib.h, h, evset_free, "nvmlEventSetFree");
	NVML_SYM_IN(h->lib.h, h, register_events, "nvmlDeviceRegisterEvents");
	NVML_SYM_IN(h->lib.h, h, evset_wait, "nvmlEventSetWait_v2");
	if (missing != NULL || h->evset_create(&set) != NVML_SUCCESS)
		return;
	for (i = 0; i < h->n; i++) {
		if (h->lib.by_uuid(h->uuid[i], &h->dev[i]) != NVML_SUCCESS ||
		    h->register_events(h->dev[i], NVML_EVENT_XID_CRITICAL,
				       set) != NVML_SUCCESS) {
			h->evset_free(set);
			return;
		}
	}
	h->evset = set;
}

int gs_gpu_health_open(const struct gs_gpu_desc *gpus, uint32_t n,
		       struct gs_gpu_health **out, struct gs_error *err)
{
	struct gs_gpu_health *u;
	const char *missing = NULL;
	uint32_t i;

	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	for (i = 0; i < n && u->n < GS_MAX_GPUS; i++) {
		if (gpus[i].simulated)
			continue;
		u->index[u->n] = gpus[i].index;
		memcpy(u->uuid[u->n], gpus[i].uuid, GS_UUID_MAX);
		u->n++;
	}
	if (u->n == 0) {
		gs_error_set(err, GS_EUNSUPP, "no NVML GPUs to monitor");
		goto out_free;
	}
	if (nvml_lib_open(&u->lib, err) < 0)
		goto out_free;
	NVML_SYM_IN(u->lib.h, u, power, "nvmlDeviceGetPowerUsage");
	if (missing != NULL) {
		gs_error_set(err, GS_EIO, "NVML: symbol %s missing", missing);
		nvml_lib_close(&u->lib);
		goto out_free;
	}
	xid_open(u);
	*out = u;
	return 0;
out_free:
	free(u);
	return -1;
}

void gs_gpu_health_close(struct gs_gpu_health *h)
{
	if (h == NULL)
		return;
	if (h->evset != NULL)
		h->evset_free(h->evset);
	nvml_lib_close(&h->lib);
	free(h);
}

uint32_t gs_gpu_health_count(const struct gs_gpu_health *h)
{
	return h->n;
}

int32_t gs_gpu_health_index(const struct gs_gpu_health *h, uint32_t i)
{
	return i < h->n ? h->index[i] : -1;
}

int gs_gpu_health_check(struct gs_gpu_health *h, uint32_t i, char *why,
			size_t len)
{
	unsigned int mw = 0;
	nvml_dev d;
	nvml_ret r;

	if (i >= h->n) {
		snprintf(why, len, "not monitored");
		return 0;
	}
	r = h->lib.by_uuid(h->uuid[i], &d);
	if (r != NVML_SUCCESS) {
		snprintf(why, len, "NVML: %s", h->lib.error_string(r));
		return 0;
	}
	r = h->power(d, &mw);
	switch (r) {
	case NVML_ERROR_GPU_IS_LOST:
	case NVML_ERROR_RESET_REQUIRED:
	case NVML_ERROR_DRIVER_NOT_LOADED:
	case NVML_ERROR_UNKNOWN:
		snprintf(why, len, "NVML: %s", h->lib.error_string(r));
		return 0;
	default:
		/* success, not supported, no permission, ...: alive */
		why[0] = '\0';
		return 1;
	}
}

int gs_gpu_health_xids(const struct gs_gpu_health *h)
{
	return h->evset != NULL;
}

int gs_gpu_health_xid_critical(uint64_t xid)
{
	/* errors of the application, not of the GPU: graphics engine
	 * exception, GPU memory page fault, GPU stopped processing,
	 * preemptive cleanup, video decoder exception, context switch
	 * timeout */
	static const uint64_t app[] = { 13, 31, 43, 45, 68, 109 };
	size_t k;

	for (k = 0; k < sizeof(app) / sizeof(app[0]); k++)
		if (xid == app[k])
			return 0;
	return 1;
}

int gs_gpu_health_xid_wait(struct gs_gpu_health *h, unsigned int timeout_ms,
			   uint32_t *i, uint64_t *xid)
{
	struct nvml_event_data ev;
	nvml_ret r;
	uint32_t k;

	if (h->evset == NULL)
		return -1;
	memset(&ev, 0, sizeof(ev));
	r = h->evset_wait(h->evset, &ev, timeout_ms);
	if (r == NVML_ERROR_TIMEOUT)
		return 0;
	if (r != NVML_SUCCESS)
		return -1;
	if (!(ev.type & NVML_EVENT_XID_CRITICAL))
		return 0;
	for (k = 0; k < h->n; k++) {
		if (h->dev[k] == ev.device) {
			*i = k;
			*xid = ev.data;
			return 1;
		}
	}
	return 0;
}
