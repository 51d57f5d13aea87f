/*
 * loop.c — epoll + timerfd event loop (see loop.h).
 *
 * Registrations are heap records pointed to by epoll's data.ptr and kept
 * in a list; deleting one marks it dead (it is skipped if it still shows
 * up in the current batch) and frees it after the batch.  The timerfd is
 * re-armed, absolute, to the earliest of the ticks and the wakeup before
 * every epoll_wait.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"

#define MAX_EVENTS 64

struct reg {
	int fd;
	int dead;
	gs_loop_fd_fn fn;
	void *arg;
	struct reg *next;
};

struct tick {
	uint64_t period, next;
	gs_loop_time_fn fn;
	void *arg;
};

struct gs_loop {
	int epfd, tfd;
	int stop;
	struct reg *regs;
	struct tick *ticks;
	unsigned nticks;
	uint64_t wake_at;
	gs_loop_time_fn wake_fn;
	void *wake_arg;
	uint64_t armed;		/* deadline the timerfd holds */
	uint64_t spin_until;	/* poll without sleeping until then */
};

uint64_t gs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct gs_loop *gs_loop_new(struct gs_error *err)
{
	struct gs_loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev;

	if (l == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return NULL;
	}
	l->wake_at = UINT64_MAX;
	l->armed = UINT64_MAX;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		gs_error_errno(err, GS_EIO, "epoll_create1");
		goto out_free;
	}
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->tfd < 0) {
		gs_error_errno(err, GS_EIO, "timerfd_create");
		goto out_epoll;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = NULL; /* NULL marks the timerfd */
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		gs_error_errno(err, GS_EIO, "epoll_ctl(timerfd)");
		goto out_timer;
	}
	return l;

out_timer:
	close(l->tfd);
out_epoll:
	close(l->epfd);
out_free:
	free(l);
	return NULL;
}

void gs_loop_free(struct gs_loop *l)
{
	struct reg *r, *n;

	if (l == NULL)
		return;
	for (r = l->regs; r != NULL; r = n) {
		n = r->next;
		free(r);
	}
	free(l->ticks);
	close(l->tfd);
	close(l->epfd);
	free(l);
}

static struct reg *find_reg(struct gs_loop *l, int fd)
{
	struct reg *r;

	for (r = l->regs; r != NULL; r = r->next)
		if (r->fd == fd && !r->dead)
			return r;
	return NULL;
}

int gs_loop_add_fd(struct gs_loop *l, int fd, uint32_t events,
		   gs_loop_fd_fn fn, void *arg, struct gs_error *err)
{
	struct epoll_event ev;
	struct reg *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	r->fd = fd;
	r->fn = fn;
	r->arg = arg;
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = r;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(r);
		return gs_error_errno(err, GS_EIO, "epoll_ctl(add %d)", fd);
	}
	r->next = l->regs;
	l->regs = r;
	return 0;
}

int gs_loop_mod_fd(struct gs_loop *l, int fd, uint32_t events,
		   struct gs_error *err)
{
	struct epoll_event ev;
	struct reg *r = find_reg(l, fd);

	if (r == NULL)
		return gs_error_set(err, GS_ENOENT, "fd %d not registered",
				    fd);
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = r;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return gs_error_errno(err, GS_EIO, "epoll_ctl(mod %d)", fd);
	return 0;
}

void gs_loop_del_fd(struct gs_loop *l, int fd)
{
	struct reg *r = find_reg(l, fd);

	if (r == NULL)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	r->dead = 1;
}

static void reap(struct gs_loop *l)
{
	struct reg **pp = &l->regs, *r;

	while ((r = *pp) != NULL) {
		if (r->dead) {
			*pp = r->next;
			free(r);
		} else {
			pp = &r->next;
		}
	}
}

int gs_loop_add_tick(struct gs_loop *l, uint64_t period_ns,
		     gs_loop_time_fn fn, void *arg, struct gs_error *err)
{
	struct tick *t;

	if (period_ns == 0)
		return gs_error_set(err, GS_EINVAL, "tick period 0");
	t = realloc(l->ticks, (l->nticks + 1) * sizeof(*t));
	if (t == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	l->ticks = t;
	t[l->nticks].period = period_ns;
	t[l->nticks].next = gs_now_ns() + period_ns;
	t[l->nticks].fn = fn;
	t[l->nticks].arg = arg;
	l->nticks++;
	return 0;
}

void gs_loop_set_tick_period(struct gs_loop *l, gs_loop_time_fn fn,
			     void *arg, uint64_t period_ns)
{
	unsigned i;

	if (period_ns == 0)
		return;
	for (i = 0; i < l->nticks; i++) {
		if (l->ticks[i].fn == fn && l->ticks[i].arg == arg) {
			l->ticks[i].period = period_ns;
			l->ticks[i].next = gs_now_ns() + period_ns;
		}
	}
}

void gs_loop_set_wakeup(struct gs_loop *l, uint64_t at_ns,
			gs_loop_time_fn fn, void *arg)
{
	l->wake_at = at_ns;
	l->wake_fn = fn;
	l->wake_arg = arg;
}

void gs_loop_stop(struct gs_loop *l)
{
	l->stop = 1;
}

static void arm(struct gs_loop *l)
{
	struct itimerspec its;
	uint64_t at = l->wake_at;
	unsigned i;

	for (i = 0; i < l->nticks; i++)
		if (l->ticks[i].next < at)
			at = l->ticks[i].next;
	if (at == l->armed)
		return;
	memset(&its, 0, sizeof(its));
	if (at != UINT64_MAX) {
		if (at == 0)
			at = 1; /* 0 would disarm */
		its.it_value.tv_sec = (time_t)(at / 1000000000ull);
		its.it_value.tv_nsec = (long)(at % 1000000000ull);
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		l->armed = at;
}

static void run_timers(struct gs_loop *l)
{
	uint64_t now = gs_now_ns(), junk;
	unsigned i;

	/* drain the expiration count; EAGAIN is fine */
	if (read(l->tfd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
		return;
	l->armed = UINT64_MAX;
	if (l->wake_at <= now && l->wake_fn != NULL) {
		gs_loop_time_fn fn = l->wake_fn;

		l->wake_at = UINT64_MAX;
		fn(l, now, l->wake_arg);
	}
	for (i = 0; i < l->nticks; i++) {
		if (l->ticks[i].next <= now) {
			l->ticks[i].next += l->ticks[i].period;
			if (l->ticks[i].next <= now) /* fell behind: skip */
				l->ticks[i].next = now + l->ticks[i].period;
			l->ticks[i].fn(l, now, l->ticks[i].arg);
		}
	}
}

void gs_loop_set_spin(struct gs_loop *l, uint64_t until_ns)
{
	l->spin_until = until_ns;
}

int gs_loop_run(struct gs_loop *l, struct gs_error *err)
{
	struct epoll_event evs[MAX_EVENTS];
	int n, i, spin;

	l->stop = 0;
	while (!l->stop) {
		arm(l);
		spin = l->spin_until > gs_now_ns();
		n = epoll_wait(l->epfd, evs, MAX_EVENTS, spin ? 0 : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return gs_error_errno(err, GS_EIO, "epoll_wait");
		}
		/* polling: a runnable thread (a job, on a node with fewer
		 * cores than threads) goes first */
		if (n == 0 && spin)
			sched_yield();
		for (i = 0; i < n; i++) {
			struct reg *r = evs[i].data.ptr;

			if (r == NULL) {
				run_timers(l);
				continue;
			}
			if (r->dead)
				continue;
			r->fn(l, r->fd, evs[i].events, r->arg);
		}
		/* deadlines can pass while handling fds without the timerfd
		 * showing up in this batch */
		if (l->wake_at <= gs_now_ns())
			run_timers(l);
		reap(l);
	}
	return 0;
}
