/*
 * fake_nvml.c — a stand-in libnvidia-ml.so.1 for testing gshared's NVML
 * health path without a GPU (tests/agent/test_health_nvml.sh).
 *
 * It exports the few NVML entry points gshared loads and reports two GPUs,
 * GPU-fake-0 and GPU-fake-1.  Their health comes from the file named by
 * $FAKE_NVML_STATE, re-read on every call; a line "N MODE" sets GPU N:
 *   lost  nvmlDeviceGetPowerUsage answers GPU_IS_LOST
 *   gone  nvmlDeviceGetHandleByUUID answers NOT_FOUND
 *   hang  nvmlDeviceGetPowerUsage blocks while the line is there
 * (at most 60 s).  No file, or no line for a GPU: healthy.  A line
 * "N xid K" makes nvmlEventSetWait_v2 deliver one critical-XID event K
 * for GPU N (each such line once, in file order).  Each GPU has 80 GiB
 * (nvmlDeviceGetMemoryInfo and _v2, which reports 1 MiB reserved).  A line "N proc PID SM" lists process PID
 * as a compute process of GPU N (nvmlDeviceGetComputeRunningProcesses_v3,
 * holding 1 MiB) with SM utilization SM % (nvmlDeviceGetProcessUtilization:
 * one sample per call, stamped now); a line "N procmem PID BYTES" lists a
 * compute process on GPU N holding BYTES (no utilization sample).  A
 * line "N util G M" makes nvmlDeviceGetUtilizationRates answer .gpu G,
 * .memory M for GPU N (no line: 0 0).
 * Types follow the NVML API (int-sized return codes, opaque pointers,
 * nvmlEventData_t, nvmlMemory_t, nvmlProcessInfo_t,
 * nvmlProcessUtilizationSample_t).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NGPUS 2

struct fake_dev {
	int index;
};

static struct fake_dev devs[NGPUS] = { { 0 }, { 1 } };

struct fake_event {		/* nvmlEventData_t */
	struct fake_dev *device;
	unsigned long long type;
	unsigned long long data;
	unsigned int gpu_instance, compute_instance;
};

static int fake_set;		/* the one event set */
static char delivered[32][64];	/* "N xid K" lines already delivered */
static int ndelivered;

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int r);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, struct fake_dev **d);
int nvmlDeviceGetHandleByUUID(const char *uuid, struct fake_dev **d);
int nvmlDeviceGetUUID(struct fake_dev *d, char *buf, unsigned int len);
int nvmlDeviceGetName(struct fake_dev *d, char *buf, unsigned int len);
int nvmlDeviceGetPowerUsage(struct fake_dev *d, unsigned int *mw);
int nvmlDeviceGetProcessUtilization(struct fake_dev *d, void *samples,
				    unsigned int *n, unsigned long long since);
int nvmlEventSetCreate(int **set);
int nvmlEventSetFree(int *set);
int nvmlDeviceRegisterEvents(struct fake_dev *d, unsigned long long types,
			     int *set);
int nvmlEventSetWait_v2(int *set, struct fake_event *ev, unsigned int ms);

struct fake_mem {		/* nvmlMemory_t */
	unsigned long long total, free, used;
};

int nvmlDeviceGetMemoryInfo(struct fake_dev *d, struct fake_mem *m);

struct fake_mem2 {		/* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

int nvmlDeviceGetMemoryInfo_v2(struct fake_dev *d, struct fake_mem2 *m);

int nvmlDeviceGetMemoryInfo_v2(struct fake_dev *d, struct fake_mem2 *m)
{
	(void)d;
	m->total = 80ull << 30;
	m->reserved = 1ull << 20;
	m->used = m->reserved;
	m->free = m->total - m->used;
	return 0;
}

int nvmlDeviceGetMemoryInfo(struct fake_dev *d, struct fake_mem *m)
{
	(void)d;
	m->total = 80ull << 30;
	m->used = 0;
	m->free = m->total;
	return 0;
}

/* Does the state file hold the line "<index> <mode>"? */
static int has_mode(int index, const char *mode)
{
	const char *path = getenv("FAKE_NVML_STATE");
	char line[128], want[64];
	FILE *f;
	int found = 0;

	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return 0;
	snprintf(want, sizeof(want), "%d %s", index, mode);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, want) == 0)
			found = 1;
	}
	fclose(f);
	return found;
}

/* The real library starts threads of its own in nvmlInit (this one is
 * linked -z nodelete, so a dlclose cannot pull the code from under its
 * thread); they inherit
 * the caller's signal mask, so a process that blocks signals only after
 * nvmlInit gets SIGHUP delivered to one of them and dies of it. */
static void *nvml_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int nvmlInit_v2(void)
{
	static int started;
	pthread_t t;

	if (!started && pthread_create(&t, NULL, nvml_thread, NULL) == 0) {
		pthread_detach(t);
		started = 1;
	}
	return 0;
}

int nvmlShutdown(void)
{
	return 0;
}

const char *nvmlErrorString(int r)
{
	switch (r) {
	case 0: return "Success";
	case 6: return "Not Found";
	case 15: return "GPU is lost";
	default: return "Unknown Error";
	}
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = NGPUS;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, struct fake_dev **d)
{
	if (i >= NGPUS)
		return 2;	/* INVALID_ARGUMENT */
	*d = &devs[i];
	return 0;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, struct fake_dev **d)
{
	int i;

	for (i = 0; i < NGPUS; i++) {
		char u[32];

		snprintf(u, sizeof(u), "GPU-fake-%d", i);
		if (strcmp(u, uuid) == 0) {
			if (has_mode(i, "gone"))
				return 6;
			*d = &devs[i];
			return 0;
		}
	}
	return 6;
}

int nvmlDeviceGetUUID(struct fake_dev *d, char *buf, unsigned int len)
{
	snprintf(buf, len, "GPU-fake-%d", d->index);
	return 0;
}

int nvmlDeviceGetName(struct fake_dev *d, char *buf, unsigned int len)
{
	snprintf(buf, len, "Fake GPU %d", d->index);
	return 0;
}

int nvmlDeviceGetPowerUsage(struct fake_dev *d, unsigned int *mw)
{
	struct timespec ts = { 0, 20 * 1000000L };
	int i;

	for (i = 0; i < 3000 && has_mode(d->index, "hang"); i++)
		nanosleep(&ts, NULL);
	if (has_mode(d->index, "lost"))
		return 15;
	*mw = 50000;
	return 0;
}

struct fake_proc_info {		/* nvmlProcessInfo_t */
	unsigned int pid;
	unsigned long long used_mem;
	unsigned int gpu_instance, compute_instance;
};

struct fake_util_sample {	/* nvmlProcessUtilizationSample_t */
	unsigned int pid;
	unsigned long long ts;
	unsigned int sm, mem, enc, dec;
};

int nvmlDeviceGetComputeRunningProcesses_v3(struct fake_dev *d,
					    unsigned int *n,
					    struct fake_proc_info *out);

/* The process lines of GPU index, at most max: pids[], sm[] and mem[]
 * ("N proc PID SM": 1 MiB; "N procmem PID BYTES": SM 0); with util_only,
 * the "proc" lines only (processes with utilization samples). */
static unsigned procs_of(int index, unsigned *pids, unsigned *sm,
			 unsigned long long *mem, unsigned max, int util_only)
{
	const char *path = getenv("FAKE_NVML_STATE");
	char line[128];
	unsigned n = 0, pid, u;
	unsigned long long bytes;
	int gpu;
	FILE *f;

	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return 0;
	while (n < max && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%d proc %u %u", &gpu, &pid, &u) == 3) {
			bytes = 1ull << 20;
		} else if (!util_only &&
			   sscanf(line, "%d procmem %u %llu", &gpu, &pid,
				  &bytes) == 3) {
			u = 0;
		} else {
			continue;
		}
		if (gpu != index)
			continue;
		pids[n] = pid;
		sm[n] = u;
		mem[n] = bytes;
		n++;
	}
	fclose(f);
	return n;
}

int nvmlDeviceGetComputeRunningProcesses_v3(struct fake_dev *d,
					    unsigned int *n,
					    struct fake_proc_info *out)
{
	unsigned pids[64], sm[64], k, cnt;
	unsigned long long mem[64];

	cnt = procs_of(d->index, pids, sm, mem, 64, 0);
	if (*n < cnt) {
		*n = cnt;
		return 7;	/* INSUFFICIENT_SIZE */
	}
	for (k = 0; k < cnt; k++) {
		memset(&out[k], 0, sizeof(out[k]));
		out[k].pid = pids[k];
		out[k].used_mem = mem[k];
	}
	*n = cnt;
	return 0;
}

struct fake_utilization {	/* nvmlUtilization_t */
	unsigned int gpu, memory;
};

int nvmlDeviceGetUtilizationRates(struct fake_dev *d,
				  struct fake_utilization *u);
int nvmlDeviceGetUtilizationRates(struct fake_dev *d,
				  struct fake_utilization *u)
{
	const char *path = getenv("FAKE_NVML_STATE");
	char line[128];
	unsigned g, m;
	int gpu;
	FILE *f;

	u->gpu = 0;
	u->memory = 0;
	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%d util %u %u", &gpu, &g, &m) == 3 &&
		    gpu == d->index) {
			u->gpu = g;
			u->memory = m;
		}
	fclose(f);
	return 0;
}

int nvmlDeviceGetProcessUtilization(struct fake_dev *d, void *samples,
				    unsigned int *n, unsigned long long since)
{
	struct fake_util_sample *s = samples;
	unsigned pids[64], sm[64], k, cnt;
	unsigned long long mem[64];
	struct timespec ts;
	unsigned long long now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (unsigned long long)ts.tv_sec * 1000000ull +
	      (unsigned long long)ts.tv_nsec / 1000u;
	cnt = procs_of(d->index, pids, sm, mem, 64, 1);
	if (cnt == 0 || now <= since) {
		*n = 0;
		return 6;	/* NOT_FOUND: no samples */
	}
	if (*n < cnt) {
		*n = cnt;
		return 7;
	}
	for (k = 0; k < cnt; k++) {
		memset(&s[k], 0, sizeof(s[k]));
		s[k].pid = pids[k];
		s[k].ts = now;
		s[k].sm = sm[k];
	}
	*n = cnt;
	return 0;
}

int nvmlEventSetCreate(int **set)
{
	*set = &fake_set;
	return 0;
}

int nvmlEventSetFree(int *set)
{
	(void)set;
	return 0;
}

int nvmlDeviceRegisterEvents(struct fake_dev *d, unsigned long long types,
			     int *set)
{
	(void)d;
	(void)set;
	return types == 0x8ull ? 0 : 3;	/* XID critical only */
}

/* The first "N xid K" line of the state file not delivered yet. */
static int next_xid(int *gpu, unsigned long long *xid)
{
	const char *path = getenv("FAKE_NVML_STATE");
	char line[64];
	FILE *f;
	int k, found = 0;

	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%d xid %llu", gpu, xid) != 2 || *gpu < 0 ||
		    *gpu >= NGPUS)
			continue;
		for (k = 0; k < ndelivered; k++)
			if (strcmp(delivered[k], line) == 0)
				break;
		if (k < ndelivered || ndelivered == 32)
			continue;
		snprintf(delivered[ndelivered++], sizeof(delivered[0]), "%s",
			 line);
		found = 1;
	}
	fclose(f);
	return found;
}

int nvmlEventSetWait_v2(int *set, struct fake_event *ev, unsigned int ms)
{
	struct timespec ts = { 0, 10 * 1000000L };
	unsigned long long xid;
	unsigned int waited;
	int gpu;

	(void)set;
	for (waited = 0;; waited += 10) {
		if (next_xid(&gpu, &xid)) {
			memset(ev, 0, sizeof(*ev));
			ev->device = &devs[gpu];
			ev->type = 0x8ull;
			ev->data = xid;
			return 0;
		}
		if (waited >= ms)
			return 10;	/* TIMEOUT */
		nanosleep(&ts, NULL);
	}
}
