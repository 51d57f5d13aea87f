/*
 * health.c — the NVML health worker (see health.h).
 *
 * Threading: the worker owns the NVML handle (struct gs_gpu_health) and
 * writes only res[], xid[] and `fresh` under mu; the loop thread reads
 * them under mu when the eventfd fires and then calls
 * gs_agent_gpu_health.  Between checks the worker waits for critical XID
 * events in slices of at most XID_SLICE_MS, looking at the stop eventfd
 * after each; without XID events it sleeps in poll() on the stop eventfd.
 * Either way stopping does not wait for a full period.  A critical XID
 * makes its GPU unhealthy until root clears it (gsharectl gpu-ok): the
 * checks cannot tell when a GPU that reported one is trustworthy again.
 * Only an NVML call that never returns can hold the worker;
 * gs_health_free then gives up after 2 s and leaves the thread (and the
 * handle) behind: the process is exiting.
 *
 * Why not the usage store's writer thread (store.c): an NVML call that
 * hangs would then hold up the usage writes too; keeping NVML on its own
 * thread bounds the damage of a wedged driver to health checks.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "gs_log.h"
#include "health.h"

#define XID_SLICE_MS 100

struct health_res {
	int ok;
	char why[GS_LABEL_MAX];
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct gs_health {
	struct gs_agent *ag;
	struct gs_gpu_health *nv;
	pthread_t thr;
	int started;
	int done;		/* worker has returned (under mu) */
	int ready_fd;		/* worker → loop: results in res[] */
	int stop_fd;		/* loop → worker: stop */
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* signalled when done is set */
	struct health_res res[GS_MAX_GPUS];
	uint64_t xid[GS_MAX_GPUS];	/* critical XID not yet applied, 0 */
	int fresh;		/* res[] not yet applied */
};

/* Between two checks: wait for critical XIDs (or just for stop) until
 * the next check is due.  Returns -1 when the worker must stop. */
static int worker_wait(struct gs_health *h, int *xids)
{
	struct pollfd pf = { .fd = h->stop_fd, .events = POLLIN };
	uint64_t end = mono_ms() + GS_HEALTH_PERIOD_MS, now, x;
	uint64_t one = 1;
	uint32_t i;
	int rc;

	while ((now = mono_ms()) < end) {
		if (!*xids) {
			rc = poll(&pf, 1, (int)(end - now));
			if (rc > 0 || (rc < 0 && errno != EINTR))
				return -1;
			continue;
		}
		rc = gs_gpu_health_xid_wait(h->nv, (unsigned)(end - now <
							      XID_SLICE_MS ?
							      end - now :
							      XID_SLICE_MS),
					    &i, &x);
		if (rc < 0)
			*xids = 0;	/* the wait failed: checks only */
		if (rc == 1 && gs_gpu_health_xid_critical(x) && x != 0) {
			pthread_mutex_lock(&h->mu);
			h->xid[i] = x;
			h->fresh = 1;
			pthread_mutex_unlock(&h->mu);
			if (write(h->ready_fd, &one, sizeof(one)) < 0 &&
			    errno != EAGAIN)
				return -1;
		}
		if (poll(&pf, 1, 0) > 0)
			return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct gs_health *h = arg;
	struct health_res r[GS_MAX_GPUS];
	uint32_t i, n = gs_gpu_health_count(h->nv);
	uint64_t one = 1;
	int xids = gs_gpu_health_xids(h->nv);

	for (;;) {
		for (i = 0; i < n; i++)
			r[i].ok = gs_gpu_health_check(h->nv, i, r[i].why,
						      sizeof(r[i].why));
		pthread_mutex_lock(&h->mu);
		memcpy(h->res, r, n * sizeof(r[0]));
		h->fresh = 1;
		pthread_mutex_unlock(&h->mu);
		if (write(h->ready_fd, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			break;
		if (worker_wait(h, &xids) < 0)
			break;	/* stop requested (or a wait failed) */
	}
	pthread_mutex_lock(&h->mu);
	h->done = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* Loop thread: apply the worker's latest answers. */
static void on_ready(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_health *h = arg;
	struct health_res r[GS_MAX_GPUS];
	uint64_t xid[GS_MAX_GPUS];
	uint32_t i, j, n = gs_gpu_health_count(h->nv);
	uint64_t v;
	char why[GS_LABEL_MAX];
	int fresh;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) < 0)
		return;
	pthread_mutex_lock(&h->mu);
	fresh = h->fresh;
	memcpy(r, h->res, n * sizeof(r[0]));
	memcpy(xid, h->xid, n * sizeof(xid[0]));
	memset(h->xid, 0, sizeof(h->xid));
	h->fresh = 0;
	pthread_mutex_unlock(&h->mu);
	if (!fresh)
		return;
	for (i = 0; i < n; i++) {
		int32_t idx = gs_gpu_health_index(h->nv, i);

		for (j = 0; j < gs_agent_ngpus(h->ag); j++) {
			if (gs_agent_gpu(h->ag, j)->d.index != idx)
				continue;
			gs_agent_gpu_health(h->ag, j, GS_HEALTH_NVML, r[i].ok,
					    r[i].why);
			if (xid[i] == 0)
				continue;
			snprintf(why, sizeof(why), "critical XID %llu",
				 (unsigned long long)xid[i]);
			gs_agent_gpu_health(h->ag, j, GS_HEALTH_XID, 0, why);
		}
	}
}

int gs_health_new(struct gs_agent *ag, struct gs_health **out,
		  struct gs_error *err)
{
	struct gs_gpu_desc d[GS_MAX_GPUS];
	struct gs_health *h;
	struct gs_error nerr;
	uint32_t i, n = gs_agent_ngpus(ag);
	int rc;

	*out = NULL;
	for (i = 0; i < n && i < GS_MAX_GPUS; i++)
		d[i] = gs_agent_gpu(ag, i)->d;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	h->ag = ag;
	h->ready_fd = h->stop_fd = -1;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if (gs_gpu_health_open(d, i, &h->nv, &nerr) < 0) {
		if (nerr.code != GS_EUNSUPP)
			log_warnx("GPU health is not monitored: %s", nerr.msg);
		gs_health_free(h);
		return 0;
	}
	h->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	h->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (h->ready_fd < 0 || h->stop_fd < 0) {
		gs_error_errno(err, GS_EIO, "eventfd");
		goto out_free;
	}
	if (gs_loop_add_fd(gs_agent_loop(ag), h->ready_fd, EPOLLIN, on_ready,
			   h, err) < 0)
		goto out_free;
	rc = pthread_create(&h->thr, NULL, worker, h);
	if (rc != 0) {
		gs_loop_del_fd(gs_agent_loop(ag), h->ready_fd);
		gs_error_set(err, GS_EIO, "health worker: %s", strerror(rc));
		goto out_free;
	}
	h->started = 1;
	log_info("GPU health: checking %u GPUs through NVML every %d ms, "
		 "critical XIDs %s", gs_gpu_health_count(h->nv),
		 GS_HEALTH_PERIOD_MS, gs_gpu_health_xids(h->nv) ?
		 "watched" : "not watched (the driver gives no events)");
	*out = h;
	return 0;

out_free:
	gs_health_free(h);
	return -1;
}

void gs_health_free(struct gs_health *h)
{
	struct timespec until;
	uint64_t one = 1;
	int done = 1;

	if (h == NULL)
		return;
	if (h->started) {
		gs_loop_del_fd(gs_agent_loop(h->ag), h->ready_fd);
		if (write(h->stop_fd, &one, sizeof(one)) < 0)
			log_warn("health worker: stop");
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 2;
		pthread_mutex_lock(&h->mu);
		while (!h->done &&
		       pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0)
			;
		done = h->done;
		pthread_mutex_unlock(&h->mu);
		if (!done) {
			/* stuck in NVML: the worker still uses h */
			log_warnx("health worker stuck in NVML; not waiting");
			pthread_detach(h->thr);
			return;
		}
		pthread_join(h->thr, NULL);
	}
	gs_gpu_health_close(h->nv);
	if (h->ready_fd >= 0)
		close(h->ready_fd);
	if (h->stop_fd >= 0)
		close(h->stop_fd);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	free(h);
}
