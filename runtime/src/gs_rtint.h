/*
 * gs_rtint.h — what gshare.c lends to the task pools (gs_task.c): error
 * recording, the mode, and the hold driver.  Internal to libgshare.
 *
 * gs__rt_drive runs "foreign" holds through the same machinery as the
 * kernel queues: standalone with forced suspensions it plays the agent on
 * a private control page; attached it goes through gs_session_run (token
 * requests, releases with GPU time and eviction latency, re-attach).  Each
 * hold gets a fresh generation, a watcher that raises *d_flag to it when
 * the page says SUSPEND, and (forced mode) the time at which to write the
 * suspend.
 */
#ifndef GS_RTINT_H
#define GS_RTINT_H

#include <stdint.h>

#include "gs_ctlpage.h"
#include "gs_session.h"

int gs__fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The negated code of the calling thread's last recorded failure: what a
 * public function returns after an internal -1. */
int gs__last_rc(void);
/* e: a cudaError_t */
int gs__cufail(int e, const char *what);
/* 0 when gs_init has run, else GS_ESTATE (recorded). */
int gs__rt_ready(void);
/* 1: tasks run inside holds (attached, or forced suspensions). */
int gs__rt_queued(void);
int gs__rt_sms(void);
uint64_t gs__now_ns(void);

struct gs__hold {
	unsigned int gen;
	const unsigned int *d_flag;
	volatile struct gs_ctlpage *page;
	uint64_t force_at_ns;	/* forced mode: suspend then (0: never) */
	/* %globaltimer when the watcher raised the flag (0: not yet) */
	const volatile unsigned long long *wtime;
};

/* One hold: run until done or suspended; fill res (done, gpu_ns,
 * block_tasks, exit_ns).  0 or -1 (error recorded). */
typedef int (*gs__hold_fn)(void *ctx, const struct gs__hold *h,
			   struct gs_run_result *res);

/* Forced mode: write the suspend into the page if h->force_at_ns is due. */
void gs__hold_force(const struct gs__hold *h, uint64_t now);
/* 1 when the page says SUSPEND. */
int gs__hold_suspended(const struct gs__hold *h);

/* Run holds until one reports res->done. */
int gs__rt_drive(gs__hold_fn fn, void *ctx);

#endif /* GS_RTINT_H */
