/*
 * durable.c — the allocation table's writer thread (see durable.h).
 *
 * One thread, started with the agent, waits on a condition variable for
 * a table to write, writes it with gs_state_save and posts the result
 * back: the eventfd becomes readable, the loop reads the result under the
 * mutex and calls the callback.  The table handed over belongs to the
 * worker until the result is posted, so nothing else is shared.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "durable.h"

struct gs_durable {
	struct gs_loop *loop;
	int efd;
	pthread_t thr;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stopping;
	/* the write: set by gs_durable_save, done by the worker */
	int busy;		/* handed over, callback not yet called */
	int queued;		/* waiting for the worker */
	int done;		/* written or failed; result below */
	char path[512];
	struct gs_state st;
	int ok;
	struct gs_error err;
	gs_durable_fn fn;
	void *arg;
};

static void *worker(void *arg)
{
	struct gs_durable *d = arg;
	struct gs_error err;
	uint64_t one = 1;
	int ok;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!d->queued && !d->stopping)
			pthread_cond_wait(&d->cv, &d->mu);
		if (!d->queued)
			break;
		d->queued = 0;
		pthread_mutex_unlock(&d->mu);
		gs_error_clear(&err);
		ok = gs_state_save(d->path, &d->st, &err) == 0;
		gs_state_clear(&d->st);
		pthread_mutex_lock(&d->mu);
		d->ok = ok;
		d->err = err;
		d->done = 1;
		if (write(d->efd, &one, sizeof(one)) < 0) {
			/* cannot overflow: one write in flight */
		}
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static void on_event(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_durable *d = arg;
	struct gs_error err;
	gs_durable_fn fn;
	uint64_t cnt;
	void *farg;
	int ok;

	(void)l;
	(void)events;
	if (read(fd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: spurious */
	}
	pthread_mutex_lock(&d->mu);
	if (!d->done) {
		pthread_mutex_unlock(&d->mu);
		return;
	}
	d->done = 0;
	d->busy = 0;
	ok = d->ok;
	err = d->err;
	fn = d->fn;
	farg = d->arg;
	pthread_mutex_unlock(&d->mu);
	fn(farg, ok ? NULL : &err);
}

int gs_durable_new(struct gs_loop *l, struct gs_durable **out,
		   struct gs_error *err)
{
	struct gs_durable *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	d->loop = l;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0) {
		gs_error_errno(err, GS_EIO, "state writer: eventfd");
		goto out_free;
	}
	if (gs_loop_add_fd(l, d->efd, EPOLLIN, on_event, d, err) < 0)
		goto out_free;
	if (pthread_create(&d->thr, NULL, worker, d) != 0) {
		gs_error_set(err, GS_EIO, "state writer: cannot start its "
			     "thread");
		gs_loop_del_fd(l, d->efd);
		goto out_free;
	}
	d->started = 1;
	*out = d;
	return 0;
out_free:
	gs_durable_free(d);
	return -1;
}

void gs_durable_free(struct gs_durable *d)
{
	if (d == NULL)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->stopping = 1;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thr, NULL);
		gs_loop_del_fd(d->loop, d->efd);
	}
	gs_state_clear(&d->st);
	if (d->efd >= 0)
		close(d->efd);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

int gs_durable_save(struct gs_durable *d, const char *path,
		    struct gs_state *st, gs_durable_fn fn, void *arg,
		    struct gs_error *err)
{
	size_t n = strlen(path);

	if (d->busy)
		return gs_error_set(err, GS_EBUSY, "state writer: a write is "
				    "in flight");
	if (n >= sizeof(d->path))
		return gs_error_set(err, GS_EINVAL, "state file path too "
				    "long: %s", path);
	pthread_mutex_lock(&d->mu);
	memcpy(d->path, path, n + 1);
	d->st = *st;
	memset(st, 0, sizeof(*st));
	d->fn = fn;
	d->arg = arg;
	d->busy = 1;
	d->queued = 1;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

int gs_durable_busy(const struct gs_durable *d)
{
	return d->busy;
}
