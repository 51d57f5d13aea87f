/*
 * loop.h — gshared's one event loop: epoll over registered fds, one
 * timerfd for all deadlines, periodic ticks.
 *
 * Components plug in with a callback per fd (listening socket, clients,
 * signalfd, later the metrics listener and a worker's eventfd), periodic
 * tick callbacks (accounting, housekeeping) and one "wakeup" deadline the
 * agent moves as the schedulers ask (gs_sched_step's next_ns).
 * Callbacks may add and delete fds, including their own, at any time: a
 * deleted registration is never called again and is freed after the
 * current batch of events.  Single-threaded.
 */
#ifndef GS_AGENT_LOOP_H
#define GS_AGENT_LOOP_H

#include <stdint.h>

#include "gs_error.h"

struct gs_loop;

/* events: EPOLLIN/EPOLLOUT/... as returned by epoll. */
typedef void (*gs_loop_fd_fn)(struct gs_loop *l, int fd, uint32_t events,
			      void *arg);
/* now: CLOCK_MONOTONIC ns. */
typedef void (*gs_loop_time_fn)(struct gs_loop *l, uint64_t now, void *arg);

struct gs_loop *gs_loop_new(struct gs_error *err);
/* Does not close registered fds. */
void gs_loop_free(struct gs_loop *l);

int gs_loop_add_fd(struct gs_loop *l, int fd, uint32_t events,
		   gs_loop_fd_fn fn, void *arg, struct gs_error *err);
int gs_loop_mod_fd(struct gs_loop *l, int fd, uint32_t events,
		   struct gs_error *err);
/* Unregister (the caller closes the fd afterwards). */
void gs_loop_del_fd(struct gs_loop *l, int fd);

/* Call fn every period_ns (first call one period from now). */
int gs_loop_add_tick(struct gs_loop *l, uint64_t period_ns,
		     gs_loop_time_fn fn, void *arg, struct gs_error *err);
/* Change the period of every tick registered with fn/arg. */
void gs_loop_set_tick_period(struct gs_loop *l, gs_loop_time_fn fn,
			     void *arg, uint64_t period_ns);

/* The single one-shot wakeup: fn is called once when CLOCK_MONOTONIC
 * reaches at_ns (UINT64_MAX: disarmed).  Setting it replaces the
 * previous deadline. */
void gs_loop_set_wakeup(struct gs_loop *l, uint64_t at_ns,
			gs_loop_time_fn fn, void *arg);

/* Until CLOCK_MONOTONIC reaches until_ns, look for events without
 * sleeping (epoll_wait with no timeout): a hand-over of the token is under
 * way and its next message must not wait for the loop's wake-up.  0:
 * sleep as usual.  Replaces the previous value. */
void gs_loop_set_spin(struct gs_loop *l, uint64_t until_ns);

/* Run until gs_loop_stop.  Returns 0, or -1 when epoll fails. */
int gs_loop_run(struct gs_loop *l, struct gs_error *err);
void gs_loop_stop(struct gs_loop *l);

uint64_t gs_now_ns(void);

#endif /* GS_AGENT_LOOP_H */
