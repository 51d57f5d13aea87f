/*
 * test_session.c — cmocka tests of the job-side host loop
 * (common/gs_session.c) against a scripted stand-in for the agent.
 *
 * The stand-in is a thread serving one connection on a temporary Unix
 * socket with the real frame codec (gs_proto.c): it answers ATTACH with
 * a memfd control page passed by SCM_RIGHTS (a good one, or one with a
 * bad magic / version / allocation / size), grants the token, sets
 * SUSPEND in the page, and records every TOKEN_WANT and TOKEN_RELEASE so
 * the tests can check what the session sent and what it wrote into the
 * page; it can drop the connection at the first TOKEN_WANT and then
 * serve a second one (a restarted agent, with or without the allocation).
 * Also: environment handling.  (That the library never prints or
 * exits is checked on its object file by session_noprint.sh.)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gs_proto.h"
#include "gs_session.h"

#define ALLOC_ID 42u
#define SLICE_NS 4000000ull

enum page_kind { PG_GOOD, PG_MAGIC, PG_VERSION, PG_ALLOC, PG_SMALL };

struct fake {
	char dir[64], path[108];
	int lfd;
	pthread_t thr;
	enum page_kind kind;
	int suspend_first;	/* set SUSPEND 20 ms into the first grant */
	int close_on_want;	/* drop the connection at the first WANT */
	int reattach;		/* after that drop, serve a second
				 * connection: 1 normally (new page),
				 * 2 answering ATTACH with ENOENT */
	volatile struct gs_ctlpage *page0;	/* first page, kept */
	int pfd0;
	/* recorded */
	int wants, releases, unwants;
	struct gs_release rel[8];
	uint64_t suspend_set;
	volatile struct gs_ctlpage *page;
	int pfd;
	uint64_t gen;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int
send_msg(int fd, const struct gs_msg *m, int pass_fd)
{
	struct gs_wbuf b;
	struct gs_error err;
	struct msghdr mh;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	ssize_t n;

	gs_wbuf_init(&b);
	if (gs_msg_encode(m, &b, &err) < 0)
		return -1;
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = b.data;
	iov.iov_len = b.len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	gs_wbuf_free(&b);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

static int
make_page(struct fake *f)
{
	volatile struct gs_ctlpage *p;
	int fd = memfd_create("gsctl-test", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, f->kind == PG_SMALL ? 100 : GS_CTL_SIZE) < 0)
		return -1;
	if (f->kind == PG_SMALL) {
		f->pfd = fd;
		return 0;
	}
	p = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (p == MAP_FAILED)
		return -1;
	p->magic = f->kind == PG_MAGIC ? 0xdeadbeefu : GS_CTL_MAGIC;
	p->version = f->kind == PG_VERSION ? 99u : GS_CTL_VERSION;
	p->alloc_id = f->kind == PG_ALLOC ? 7u : ALLOC_ID;
	p->page_size = GS_CTL_SIZE;
	p->suspend = GS_CTL_SUSPEND;
	f->page = p;
	f->pfd = fd;
	return 0;
}

static void
grant(struct fake *f, int cfd)
{
	struct gs_msg m;

	f->gen++;
	__atomic_store_n(&f->page->slice_deadline_ns, mono_ns() + SLICE_NS,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&f->page->grant_gen, f->gen, __ATOMIC_RELAXED);
	__atomic_store_n(&f->page->suspend, GS_CTL_RUN, __ATOMIC_RELEASE);
	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_TOKEN_GRANT;
	m.u.grant.gen = f->gen;
	m.u.grant.slice_ns = SLICE_NS;
	send_msg(cfd, &m, -1);
	if (f->gen == 1 && f->suspend_first) {
		sleep_ms(20);
		f->suspend_set = mono_ns();
		__atomic_store_n(&f->page->suspend_set_ns, f->suspend_set,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&f->page->suspend, GS_CTL_SUSPEND,
				 __ATOMIC_RELEASE);
	}
}

static void *
fake_main(void *arg)
{
	struct fake *f = arg;
	uint8_t buf[70000];
	size_t len;
	size_t used;
	struct gs_msg m, rep;
	struct gs_error err;
	int cfd, r, conn;
	ssize_t n;

	for (conn = 0; conn < (f->reattach ? 2 : 1); conn++) {
		cfd = accept(f->lfd, NULL, NULL);
		if (cfd < 0)
			return NULL;
		len = 0;
		for (;;) {
			n = read(cfd, buf + len, sizeof(buf) - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			while ((r = gs_frame_parse(buf, len, &m, &used,
						   &err)) == 1) {
				memmove(buf, buf + used, len - used);
				len -= used;
				memset(&rep, 0, sizeof(rep));
				switch (m.type) {
				case GS_MSG_ATTACH:
					if (conn == 1 && f->reattach == 2) {
						rep.type = GS_MSG_ERROR;
						rep.seq = m.seq;
						rep.u.error.code = GS_ENOENT;
						snprintf(rep.u.error.msg,
							 GS_ERRMSG_MAX,
							 "no allocation");
						send_msg(cfd, &rep, -1);
						break;
					}
					if (conn == 1) {
						f->page0 = f->page;
						f->pfd0 = f->pfd;
					}
					if (make_page(f) < 0)
						goto out;
					rep.type = GS_MSG_ATTACHED;
					rep.seq = m.seq;
					rep.u.info.id = m.u.id;
					send_msg(cfd, &rep, f->pfd);
					break;
				case GS_MSG_TOKEN_WANT:
					f->wants++;
					if (f->close_on_want) {
						f->close_on_want = 0;
						goto out;
					}
					grant(f, cfd);
					break;
				case GS_MSG_TOKEN_UNWANT:
					f->unwants++;
					rep.type = GS_MSG_OK;
					rep.seq = m.seq;
					send_msg(cfd, &rep, -1);
					break;
				case GS_MSG_TOKEN_RELEASE:
					if (f->releases < 8)
						f->rel[f->releases] =
							m.u.release;
					f->releases++;
					/* the agent keeps a suspended job
					 * waiting */
					if (m.u.release.reason ==
					    GS_REL_SUSPENDED)
						grant(f, cfd);
					break;
				default:
					break;
				}
				gs_msg_clear(&m);
			}
			if (r < 0)
				break;
		}
out:
		close(cfd);
	}
	return NULL;
}

static void
fake_start(struct fake *f, enum page_kind kind)
{
	struct sockaddr_un sa;

	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->pfd = -1;
	f->pfd0 = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/gssess.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/s.sock", f->dir);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
}

static void
fake_go(struct fake *f)
{
	assert_int_equal(pthread_create(&f->thr, NULL, fake_main, f), 0);
}

static void
fake_stop(struct fake *f)
{
	pthread_join(f->thr, NULL);
	close(f->lfd);
	if (f->pfd >= 0)
		close(f->pfd);
	if (f->page != NULL)
		munmap((void *)f->page, GS_CTL_SIZE);
	if (f->pfd0 >= 0)
		close(f->pfd0);
	if (f->page0 != NULL)
		munmap((void *)f->page0, GS_CTL_SIZE);
	unlink(f->path);
	rmdir(f->dir);
}

/* ---- executor used by the loop tests ---- */

struct exec {
	int runs;
	int fail_on;		/* run number that fails (0: none) */
	uint64_t task_ns;
	int tasks_last;		/* tasks in the run that finishes */
};

static int
ex_run(void *ctx, volatile struct gs_ctlpage *page, struct gs_run_result *res,
       struct gs_error *err)
{
	struct exec *e = ctx;
	uint64_t t0 = mono_ns();
	int i;

	e->runs++;
	if (e->runs == e->fail_on) {
		res->gpu_ns = 1000;
		return gs_error_set(err, GS_ECUDA, "simulated launch failure");
	}
	for (i = 0;; i++) {
		if (__atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
		    GS_CTL_SUSPEND) {
			res->reason = GS_REL_SUSPENDED;
			break;
		}
		if (e->runs > 1 && i == e->tasks_last) {
			res->done = 1;
			break;
		}
		sleep_ms(1);
		res->gpu_ns += e->task_ns;
		res->block_tasks++;
		if (i > 5000)
			break;	/* never: the fake suspends after 20 ms */
	}
	res->exit_ns = mono_ns();
	(void)t0;
	return 0;
}

/* An executor that gives the token back early, at the suspend, before
 * its "blocks" have left (GSHARE_RELEASE=early), then finds nothing
 * left (early_done) or goes on in a second run. */
struct early {
	struct gs_session *s;
	int runs, early_done;
	uint64_t evict_at_release;
};

static int
ex_early(void *ctx, volatile struct gs_ctlpage *page,
	 struct gs_run_result *res, struct gs_error *err)
{
	struct early *e = ctx;
	struct gs_run_result r;
	int i;

	if (++e->runs > 1) {
		res->done = 1;
		res->gpu_ns = 1000;
		res->exit_ns = mono_ns();
		return 0;
	}
	for (i = 0; i < 5000; i++) {
		if (__atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
		    GS_CTL_SUSPEND)
			break;
		sleep_ms(1);
	}
	memset(&r, 0, sizeof(r));
	r.reason = GS_REL_SUSPENDED;
	r.released = 1;		/* early: the "blocks" are still leaving */
	r.gpu_ns = 5000;
	r.exit_ns = mono_ns();
	if (gs_session_release(e->s, &r, err) < 0)
		return -1;
	/* not known yet: no eviction latency in the page */
	e->evict_at_release = page->last_evict_ns;
	/* the "tail": the last blocks leave after the release */
	sleep_ms(2);
	gs_session_evicted(e->s, mono_ns());
	res->released = 1;
	res->reason = GS_REL_SUSPENDED;
	res->done = e->early_done;
	res->gpu_ns = 6000;
	res->exit_ns = mono_ns();
	return 0;
}

/* The token given back early: one release per hold, never a second one
 * from gs_session_run; with nothing left after it, TOKEN_UNWANT, and the
 * grant the fake sent meanwhile (it grants a suspended job at once) is
 * dropped; with work left, the next hold runs on that grant. */
static void
test_early_release(void **state)
{
	int k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct fake f;
		struct early e = { .early_done = k == 0 };
		struct gs_executor ex = { .run = ex_early };
		struct gs_error err;
		volatile struct gs_ctlpage *pg;

		fake_start(&f, PG_GOOD);
		f.suspend_first = 1;
		fake_go(&f);
		assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &e.s,
						 &err), 0);
		assert_int_equal(gs_session_run(e.s, &ex, &e, &err), 0);
		assert_false(gs_session_holding(e.s));
		pg = gs_session_page(e.s);
		assert_int_equal(pg->suspensions, 1);
		assert_true(pg->last_evict_ns >= 2000000u);
		assert_int_equal(pg->evict_ns_sum, pg->last_evict_ns);
		/* nothing outstanding: a second UNWANT sends nothing */
		assert_int_equal(gs_session_unwant(e.s, &err), 0);
		assert_int_equal(gs_session_page(e.s)->state, GS_CTL_IDLE);
		gs_session_close(e.s);
		fake_stop(&f);
		if (k == 0) {
			assert_int_equal(e.runs, 1);
			assert_int_equal(f.releases, 1);
			assert_int_equal(f.unwants, 1);
		} else {
			assert_int_equal(e.runs, 2);
			assert_int_equal(f.releases, 2);
			assert_int_equal(f.unwants, 0);
			assert_int_equal(f.rel[1].gen, 2);
		}
		assert_int_equal(f.rel[0].reason, GS_REL_SUSPENDED);
		assert_int_equal(f.rel[0].gpu_ns, 5000);
		/* the eviction: counted once, after the tail (2 ms), not at
		 * the release; the message carries none */
		assert_int_equal(f.rel[0].evict_ns, 0);
		assert_int_equal(e.evict_at_release, 0);
	}
}

/* ---- tests ---- */

static void
test_env(void **state)
{
	struct gs_session *s = (void *)1;
	struct gs_error err;

	(void)state;
	unsetenv(GS_ENV_SOCKET);
	unsetenv(GS_ENV_ALLOC);
	assert_int_equal(gs_session_open_env(100, &s, &err), 0);
	assert_null(s);	/* standalone */
	setenv(GS_ENV_SOCKET, "/tmp/x.sock", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "GSHARE_ALLOC"));
	setenv(GS_ENV_ALLOC, "abc", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "abc"));
	setenv(GS_ENV_ALLOC, "0", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	setenv(GS_ENV_ALLOC, "12x", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	setenv(GS_ENV_ALLOC, "-3", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	setenv(GS_ENV_ALLOC, "99999999999999999999999", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	setenv(GS_ENV_ALLOC, "12", 1);
	setenv(GS_ENV_SOCKET, "/tmp/gshare-test-no-such.sock", 1);
	assert_int_equal(gs_session_open_env(100, &s, &err), -1);
	assert_int_equal(err.code, GS_ECONNREFUSED);
	assert_non_null(strstr(err.msg, "gshare-test-no-such"));
	assert_int_equal(gs_session_open(NULL, 0, 100, &s, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	unsetenv(GS_ENV_SOCKET);
	unsetenv(GS_ENV_ALLOC);
	gs_session_close(NULL);
}

static void
check_bad_page(enum page_kind kind, int code)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;

	fake_start(&f, kind);
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 -1);
	assert_null(s);
	assert_int_equal(err.code, code);
	fake_stop(&f);
}

static void
test_bad_pages(void **state)
{
	(void)state;
	check_bad_page(PG_MAGIC, GS_EPROTO);
	check_bad_page(PG_VERSION, GS_EVERSION);
	check_bad_page(PG_ALLOC, GS_EPROTO);
	check_bad_page(PG_SMALL, GS_EPROTO);
}

/* The whole loop: grant, suspend, release with eviction latency, grant
 * again without a new WANT, finish, release idle; page counters. */
static void
test_run_loop(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;
	struct exec e = { .task_ns = 1000000, .tasks_last = 5 };
	struct gs_executor ex = { .run = ex_run };
	volatile struct gs_ctlpage *pg;
	uint64_t ev;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.suspend_first = 1;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	assert_int_equal(gs_session_alloc_id(s), ALLOC_ID);
	pg = gs_session_page(s);
	assert_int_equal(pg->pid, (uint32_t)getpid());
	assert_int_equal(pg->state, GS_CTL_IDLE);
	assert_false(gs_session_holding(s));
	assert_int_equal(gs_session_run(s, &ex, &e, &err), 0);
	assert_false(gs_session_holding(s));
	assert_int_equal(gs_session_grant_gen(s), 2);
	assert_int_equal(gs_session_slice_ns(s), SLICE_NS);
	gs_session_close(s);	/* the fake sees EOF and ends */
	fake_stop(&f);

	assert_int_equal(e.runs, 2);
	/* no WANT after a SUSPENDED release */
	assert_int_equal(f.wants, 1);
	assert_int_equal(f.releases, 2);
	assert_int_equal(f.rel[0].gen, 1);
	assert_int_equal(f.rel[0].reason, GS_REL_SUSPENDED);
	ev = f.rel[0].evict_ns;
	assert_true(ev > 0 && ev < 500000000ull);
	assert_int_equal(f.rel[1].gen, 2);
	assert_int_equal(f.rel[1].reason, GS_REL_IDLE);
	assert_int_equal(f.rel[1].evict_ns, 0);
	assert_int_equal(f.rel[1].gpu_ns, 5 * 1000000ull);
}

/* ---- a token kept between runs (ex->keep) ---- */

struct kexec {
	int runs;
};

static int
kx_run(void *ctx, volatile struct gs_ctlpage *page, struct gs_run_result *res,
       struct gs_error *err)
{
	struct kexec *k = ctx;

	(void)page;
	(void)err;
	k->runs++;
	res->done = 1;
	res->gpu_ns = 1000;
	res->block_tasks = 1;
	res->exit_ns = mono_ns();
	return 0;
}

/* keep while the agent says nobody else wants the GPU, as libgshare */
static int
kx_keep(void *ctx, volatile struct gs_ctlpage *page)
{
	(void)ctx;
	return gs_ctl_alone(page);
}

static void
set_contenders(volatile struct gs_ctlpage *pg, uint32_t n)
{
	__atomic_store_n(&pg->contenders, n, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->contend_flags, GS_CTL_CONTEND_VALID,
			 __ATOMIC_RELEASE);
}

struct waker {
	volatile struct gs_ctlpage *pg;
	pthread_t th;
};

/* the agent's side: a contender comes, the page's waiters are woken */
static void *
waker_main(void *arg)
{
	struct waker *w = arg;

	sleep_ms(30);
	set_contenders(w->pg, 1);
	gs_ctl_wake(w->pg);
	return NULL;
}

static void
test_keep(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;
	struct kexec k = { 0 };
	struct gs_executor ex = { .run = kx_run, .keep = kx_keep };
	volatile struct gs_ctlpage *pg;
	struct waker w;
	uint64_t t0, el;

	(void)state;
	fake_start(&f, PG_GOOD);
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	pg = gs_session_page(s);
	/* nothing kept: giving back is a no-op */
	assert_false(gs_session_kept(s));
	assert_int_equal(gs_session_give_back(s, &err), 0);
	/* an agent that does not say who contends: never kept */
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_false(gs_session_kept(s));
	assert_false(gs_session_holding(s));
	assert_int_equal(pg->releases, 1);
	/* alone: kept after the run, and the next run asks for nothing */
	set_contenders(pg, 0);
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_true(gs_session_kept(s));
	assert_true(gs_session_holding(s));
	assert_int_equal(pg->state, GS_CTL_IDLE);
	assert_int_equal(pg->releases, 1);
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_true(gs_session_kept(s));
	assert_int_equal(k.runs, 3);
	/* progress publishes the kept hold's runs */
	assert_int_equal(gs_session_progress(s, 0, 0, &err), 0);
	assert_int_equal(pg->gpu_ns, 3000);
	assert_int_equal(pg->block_tasks, 3);
	/* given back: one release with both runs */
	assert_int_equal(gs_session_give_back(s, &err), 0);
	assert_false(gs_session_kept(s));
	assert_false(gs_session_holding(s));
	assert_int_equal(pg->gpu_ns, 3000);
	assert_int_equal(pg->block_tasks, 3);
	assert_int_equal(pg->releases, 2);
	assert_int_equal(pg->state, GS_CTL_IDLE);
	/* kept again; another allocation comes: the next run gives it
	 * back first and asks in line */
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_true(gs_session_kept(s));
	set_contenders(pg, 1);
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_false(gs_session_kept(s));
	assert_int_equal(pg->releases, 4);
	/* kept again; the agent suspends it: given back first as well */
	set_contenders(pg, 0);
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_true(gs_session_kept(s));
	__atomic_store_n(&pg->suspend, GS_CTL_SUSPEND, __ATOMIC_RELEASE);
	/* a waiter does not sleep on a suspended page */
	t0 = mono_ns();
	gs_ctl_wait(pg, 5000000000ull);
	assert_true(mono_ns() - t0 < 2000000000ull);
	assert_int_equal(gs_session_run(s, &ex, &k, &err), 0);
	assert_true(gs_session_kept(s));
	assert_int_equal(pg->releases, 5);
	/* nothing changes: the wait ends at its timeout */
	t0 = mono_ns();
	gs_ctl_wait(pg, 20000000ull);
	el = mono_ns() - t0;
	assert_true(el >= 15000000ull && el < 2000000000ull);
	/* the agent's wake-up ends it early */
	w.pg = pg;
	assert_int_equal(pthread_create(&w.th, NULL, waker_main, &w), 0);
	t0 = mono_ns();
	gs_ctl_wait(pg, 5000000000ull);
	el = mono_ns() - t0;
	pthread_join(w.th, NULL);
	assert_true(el < 2000000000ull);
	assert_false(gs_ctl_alone(pg));
	assert_int_equal(gs_session_give_back(s, &err), 0);
	assert_int_equal(pg->releases, 6);
	assert_int_equal(pg->gpu_ns, 7000);
	gs_session_close(s);
	fake_stop(&f);

	assert_int_equal(k.runs, 7);
	/* one WANT per hold: runs 1, 2-3, 4, 5, 6, 7 (4's and 6's kept
	 * tokens were given back before runs 5 and 7 asked again) */
	assert_int_equal(f.wants, 6);
	assert_int_equal(f.releases, 6);
	assert_int_equal(f.rel[1].gpu_ns, 2000);
	assert_int_equal(f.rel[1].reason, GS_REL_IDLE);
	assert_int_equal(f.rel[2].gpu_ns, 1000);
	assert_int_equal(f.rel[5].gpu_ns, 1000);
}

/* Counters written to the page: check them on the fake's side. */
static void
test_page_counters(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;
	struct gs_run_result r;
	volatile struct gs_ctlpage *pg;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.suspend_first = 1;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	memset(&r, 0, sizeof(r));
	assert_int_equal(gs_session_release(s, &r, &err), -1);
	assert_int_equal(err.code, GS_ESTATE);
	assert_int_equal(gs_session_progress(s, 1, 1, &err), -1);
	assert_int_equal(err.code, GS_ESTATE);
	assert_int_equal(gs_session_acquire(s, &err), 0);
	assert_true(gs_session_holding(s));
	pg = gs_session_page(s);
	assert_int_equal(pg->state, GS_CTL_RUNNING);
	assert_int_equal(gs_session_acquire(s, &err), -1);
	assert_int_equal(err.code, GS_ESTATE);
	/* progress is published at once, and not counted twice */
	assert_int_equal(gs_session_progress(s, 3000, 3, &err), 0);
	assert_int_equal(pg->gpu_ns, 3000);
	assert_int_equal(pg->block_tasks, 3);
	/* wait for the fake's SUSPEND, leave 1 ms later */
	while (__atomic_load_n(&pg->suspend, __ATOMIC_ACQUIRE) !=
	       GS_CTL_SUSPEND)
		sleep_ms(1);
	sleep_ms(1);
	r.reason = GS_REL_SUSPENDED;
	r.gpu_ns = 5000;
	r.block_tasks = 5;
	r.exit_ns = mono_ns();
	assert_int_equal(gs_session_release(s, &r, &err), 0);
	assert_int_equal(pg->gpu_ns, 5000);
	assert_int_equal(pg->block_tasks, 5);
	assert_int_equal(pg->suspensions, 1);
	assert_int_equal(pg->releases, 1);
	assert_int_equal(pg->last_evict_ns, r.exit_ns - pg->suspend_set_ns);
	assert_int_equal(pg->evict_ns_sum, pg->last_evict_ns);
	assert_int_equal(pg->evict_ns_max, pg->last_evict_ns);
	assert_true(pg->held_ns >= 20000000ull);
	assert_int_equal(pg->state, GS_CTL_WAITING);
	/* second grant (sent by the fake after the suspended release) */
	assert_int_equal(gs_session_acquire(s, &err), 0);
	memset(&r, 0, sizeof(r));
	r.done = 1;
	r.gpu_ns = 700;
	r.block_tasks = 1;
	r.exit_ns = mono_ns();
	assert_int_equal(gs_session_release(s, &r, &err), 0);
	assert_int_equal(pg->gpu_ns, 5700);
	assert_int_equal(pg->block_tasks, 6);
	assert_int_equal(pg->suspensions, 1);
	assert_int_equal(pg->releases, 2);
	assert_int_equal(pg->state, GS_CTL_IDLE);
	assert_true(pg->heartbeat_ns > 0);
	/* a bad reason is refused before anything is sent */
	assert_int_equal(gs_session_acquire(s, &err), 0);
	memset(&r, 0, sizeof(r));
	r.reason = 77;
	assert_int_equal(gs_session_release(s, &r, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	gs_session_close(s);
	fake_stop(&f);
	assert_int_equal(f.wants, 2);
	assert_int_equal(f.releases, 2);
	assert_true(f.rel[0].evict_ns >= 1000000ull);
	assert_int_equal(f.rel[0].gpu_ns, 5000);
}

/* An executor error gives the token back (EXIT) and is returned. */
static void
test_executor_error(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;
	struct exec e = { .task_ns = 1000000, .fail_on = 1 };
	struct gs_executor ex = { .run = ex_run };

	(void)state;
	fake_start(&f, PG_GOOD);
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	assert_int_equal(gs_session_run(s, &ex, &e, &err), -1);
	assert_int_equal(err.code, GS_ECUDA);
	assert_string_equal(err.msg, "simulated launch failure");
	assert_false(gs_session_holding(s));
	assert_int_equal(gs_session_run(s, NULL, &e, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	gs_session_close(s);
	fake_stop(&f);
	assert_int_equal(f.releases, 1);
	assert_int_equal(f.rel[0].reason, GS_REL_EXIT);
	assert_int_equal(f.rel[0].gpu_ns, 1000);
}

/* One standalone hold: acquire without an agent, run, release. */
static void
solo_hold(struct gs_session *s, uint64_t gpu_ns, uint64_t tasks)
{
	struct gs_run_result res;
	struct gs_error err;

	assert_int_equal(gs_session_acquire(s, &err), 0);
	assert_true(gs_session_holding(s));
	assert_int_equal(gs_session_page(s)->suspend, GS_CTL_RUN);
	memset(&res, 0, sizeof(res));
	res.reason = GS_REL_SUSPENDED;	/* a standalone slice ended */
	res.gpu_ns = gpu_ns;
	res.block_tasks = tasks;
	res.exit_ns = mono_ns();
	assert_int_equal(gs_session_release(s, &res, &err), 0);
	assert_false(gs_session_holding(s));
}

/* The agent goes away while the job waits for the token: the job gets a
 * standalone hold and keeps running; with no agent to come back, it stays
 * RECONNECTING and its usage keeps counting on the page. */
static void
test_agent_gone(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.close_on_want = 1;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	assert_int_equal(gs_session_link(s), GS_SESSION_ATTACHED);
	solo_hold(s, 3000, 3);
	assert_int_equal(gs_session_link(s), GS_SESSION_RECONNECTING);
	fake_stop(&f);		/* socket gone: re-attaching fails */
	solo_hold(s, 2000, 2);
	assert_int_equal(gs_session_link(s), GS_SESSION_RECONNECTING);
	assert_int_equal(gs_session_page(s)->gpu_ns, 5000);
	assert_int_equal(gs_session_page(s)->block_tasks, 5);
	/* self-made suspends are no evictions */
	assert_int_equal(gs_session_page(s)->suspensions, 0);
	assert_int_equal(gs_session_reattaches(s), 0);
	assert_int_equal(gs_session_page_epoch(s), 0);
	gs_session_close(s);
}

/* The agent comes back with the allocation: the session re-attaches,
 * marks the new page resumed with the old counters, and speaks the token
 * protocol again. */
static void
test_reattach(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_run_result res;
	struct gs_error err;
	volatile struct gs_ctlpage *p, *p0;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.close_on_want = 1;
	f.reattach = 1;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	p0 = gs_session_page(s);
	gs_session_set_kind(s, GS_CTL_JOB_GATE);
	assert_int_equal(p0->job_kind, GS_CTL_JOB_GATE);
	solo_hold(s, 7000, 7);
	assert_int_equal(gs_session_link(s), GS_SESSION_RECONNECTING);
	/* the next scheduling point re-attaches and waits for a grant */
	assert_int_equal(gs_session_acquire(s, &err), 0);
	assert_int_equal(gs_session_link(s), GS_SESSION_ATTACHED);
	assert_int_equal(gs_session_reattaches(s), 1);
	assert_int_equal(gs_session_page_epoch(s), 1);
	p = gs_session_page(s);
	assert_true(p != p0);
	assert_int_equal(p0->gpu_ns, 7000);	/* still mapped */
	assert_int_equal(p->resumed, 1);
	assert_int_equal(f.page->resumed, 1);	/* the agent's view */
	assert_int_equal(f.page0->resumed, 0);
	assert_int_equal(p->gpu_ns, 7000);
	assert_int_equal(p->block_tasks, 7);
	assert_int_equal(p->pid, (uint32_t)getpid());
	/* what runs the job is said on the new page too */
	assert_int_equal(f.page->job_kind, GS_CTL_JOB_GATE);
	assert_int_equal(gs_session_grant_gen(s), 1);
	memset(&res, 0, sizeof(res));
	res.done = 1;
	res.gpu_ns = 1000;
	res.block_tasks = 1;
	res.exit_ns = mono_ns();
	assert_int_equal(gs_session_release(s, &res, &err), 0);
	assert_int_equal(p->gpu_ns, 8000);
	gs_session_close(s);
	fake_stop(&f);
	assert_int_equal(f.wants, 2);
	assert_int_equal(f.releases, 1);
	assert_int_equal(f.rel[0].gen, 1);
	assert_int_equal(f.rel[0].gpu_ns, 1000);
}

/* The job ends while the agent is away; the agent is back by then: close
 * re-attaches once and leaves the outage's counters on a resumed page. */
static void
test_close_reattach(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.close_on_want = 1;
	f.reattach = 1;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	solo_hold(s, 9000, 9);
	assert_int_equal(gs_session_link(s), GS_SESSION_RECONNECTING);
	gs_session_close(s);
	assert_non_null(f.page0);	/* a second page was made */
	assert_int_equal(f.page->resumed, 1);
	assert_int_equal(f.page->gpu_ns, 9000);
	assert_int_equal(f.page->block_tasks, 9);
	assert_int_equal(f.page->state, GS_CTL_IDLE);
	fake_stop(&f);
}

/* The agent comes back without the allocation: unmanaged for good, the
 * job runs on. */
static void
test_unmanaged(void **state)
{
	struct fake f;
	struct gs_session *s = NULL;
	struct gs_error err;

	(void)state;
	fake_start(&f, PG_GOOD);
	f.close_on_want = 1;
	f.reattach = 2;
	fake_go(&f);
	assert_int_equal(gs_session_open(f.path, ALLOC_ID, 2000, &s, &err),
			 0);
	solo_hold(s, 1000, 1);
	/* this one's acquire gets ENOENT */
	solo_hold(s, 1000, 1);
	assert_int_equal(gs_session_link(s), GS_SESSION_UNMANAGED);
	fake_stop(&f);
	solo_hold(s, 1000, 1);
	assert_int_equal(gs_session_link(s), GS_SESSION_UNMANAGED);
	assert_int_equal(gs_session_page(s)->gpu_ns, 3000);
	assert_int_equal(gs_session_reattaches(s), 0);
	gs_session_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_bad_pages),
		cmocka_unit_test(test_run_loop),
		cmocka_unit_test(test_early_release),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_page_counters),
		cmocka_unit_test(test_executor_error),
		cmocka_unit_test(test_agent_gone),
		cmocka_unit_test(test_reattach),
		cmocka_unit_test(test_close_reattach),
		cmocka_unit_test(test_unmanaged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
