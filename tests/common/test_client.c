/*
 * test_client.c — unit tests of the agent client (common/gs_client.c)
 * against scripted fake agents running in a thread on a temporary
 * socket: connection refused naming the path, request and grant-wait
 * timeouts bounded by their deadline, events and stale replies routed
 * around the awaited reply, SCM_RIGHTS fd passing on ATTACH, ERROR
 * replies and a peer that closes.
 */
#include <errno.h>
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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gs_client.h"

static char tmpdir[64];
static char sock_path[100];

struct fake {
	int lfd;
	void (*script)(int fd);
	pthread_t th;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_frame(int fd, struct gs_msg *m, int pass_fd)
{
	struct gs_wbuf b;
	struct gs_error err;
	struct msghdr mh;
	struct iovec iov;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;

	gs_wbuf_init(&b);
	assert_int_equal(gs_msg_encode(m, &b, &err), 0);
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = b.data;
	iov.iov_len = b.len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		struct cmsghdr *ch;

		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(ch), &pass_fd, sizeof(int));
	}
	assert_int_equal(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)b.len);
	gs_wbuf_free(&b);
}

/* Read one frame (blocking). Returns 0 or -1 on EOF. */
static int read_frame(int fd, struct gs_msg *m)
{
	uint8_t buf[GS_FRAME_HDR_SIZE + 4096];
	struct gs_frame_hdr h;
	struct gs_error err;
	size_t have = 0, need = GS_FRAME_HDR_SIZE;
	ssize_t n;

	while (have < need) {
		n = read(fd, buf + have, need - have);
		if (n <= 0)
			return -1;
		have += (size_t)n;
		if (have == GS_FRAME_HDR_SIZE) {
			if (gs_frame_hdr_decode(buf, have, &h, &err) < 0)
				return -1;
			need += h.length;
		}
	}
	return gs_msg_decode(&h, buf + GS_FRAME_HDR_SIZE, m, &err);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd >= 0) {
		f->script(fd);
		close(fd);
	}
	return NULL;
}

static void fake_start(struct fake *f, void (*script)(int))
{
	struct sockaddr_un sa;

	f->script = script;
	f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	unlink(sock_path);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
	unlink(sock_path);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gsclient.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(sock_path);
	rmdir(tmpdir);
	return 0;
}

static void test_refused(void **state)
{
	struct gs_client *c = NULL;
	struct gs_error err;
	struct sockaddr_un sa;
	int fd;

	(void)state;
	/* no socket file */
	assert_int_equal(gs_client_connect(sock_path, 1000, &c, &err), -1);
	assert_int_equal(err.code, GS_ECONNREFUSED);
	assert_non_null(strstr(err.msg, sock_path));
	assert_non_null(strstr(err.msg, "is the agent running?"));
	/* a stale socket file nobody listens on */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(gs_client_connect(sock_path, 1000, &c, &err), -1);
	assert_int_equal(err.code, GS_ECONNREFUSED);
	unlink(sock_path);
	/* path too long */
	char longp[200];

	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(gs_client_connect(longp, 1000, &c, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
}

static void script_silent(int fd)
{
	struct gs_msg m;

	/* read the request, never answer; wait for the client to go */
	if (read_frame(fd, &m) == 0)
		read_frame(fd, &m);
}

static void test_request_timeout(void **state)
{
	struct fake f;
	struct gs_client *c;
	struct gs_error err;
	int64_t t0, dt;

	(void)state;
	fake_start(&f, script_silent);
	assert_int_equal(gs_client_connect(sock_path, 300, &c, &err), 0);
	t0 = mono_ms();
	assert_int_equal(gs_client_ping(c, &err), -1);
	dt = mono_ms() - t0;
	assert_int_equal(err.code, GS_ETIMEDOUT);
	assert_true(dt >= 290);
	assert_true(dt < 3000); /* generous: loaded CI machine */
	gs_client_free(c);
	fake_stop(&f);
}

static void script_events(int fd)
{
	struct gs_msg m, r;

	assert_int_equal(read_frame(fd, &m), 0);
	assert_int_equal(m.type, GS_MSG_PING);
	memset(&r, 0, sizeof(r));
	/* an event, a stale reply and an async error come first */
	r.type = GS_MSG_TOKEN_GRANT;
	r.seq = 0;
	r.u.grant.gen = 5;
	r.u.grant.slice_ns = 4000000;
	send_frame(fd, &r, -1);
	r.type = GS_MSG_OK;
	r.seq = m.seq + 100;
	send_frame(fd, &r, -1);
	r.type = 999;		/* unknown type from a newer agent: skipped */
	{
		uint8_t h[GS_FRAME_HDR_SIZE];
		struct gs_frame_hdr fh = { GS_PROTO_MAGIC, GS_PROTO_MAJOR, 9,
					   999, 0, 0 };

		gs_frame_hdr_encode(&fh, h);
		assert_int_equal(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
	}
	r.type = GS_MSG_OK;
	r.seq = m.seq;
	send_frame(fd, &r, -1);
	/* then a TOKEN_WANT from the client gets an ERROR */
	assert_int_equal(read_frame(fd, &m), 0);
	assert_int_equal(m.type, GS_MSG_TOKEN_WANT);
	r.type = GS_MSG_ERROR;
	r.seq = m.seq;
	r.u.error.code = GS_ESTATE;
	snprintf(r.u.error.msg, sizeof(r.u.error.msg), "not attached");
	send_frame(fd, &r, -1);
	read_frame(fd, &m); /* wait for close */
}

static void test_events_and_stale(void **state)
{
	struct fake f;
	struct gs_client *c;
	struct gs_error err;
	uint64_t gen = 0, slice = 0;
	int64_t t0;

	(void)state;
	fake_start(&f, script_events);
	assert_int_equal(gs_client_connect(sock_path, 2000, &c, &err), 0);
	assert_int_equal(gs_client_ping(c, &err), 0);
	/* the grant that arrived during the ping is queued */
	assert_int_equal(gs_client_wait_grant(c, 0, &gen, &slice, &err), 1);
	assert_int_equal(gen, 5);
	assert_int_equal(slice, 4000000);
	/* nothing more: a bounded wait returns 0 */
	t0 = mono_ms();
	assert_int_equal(gs_client_wait_grant(c, 100, &gen, &slice, &err), 0);
	assert_true(mono_ms() - t0 >= 95);
	/* an ERROR for a fire-and-forget request surfaces in wait_grant */
	assert_int_equal(gs_client_token_want(c, &err), 0);
	assert_int_equal(gs_client_wait_grant(c, 2000, &gen, &slice, &err),
			 -1);
	assert_int_equal(err.code, GS_ESTATE);
	assert_string_equal(err.msg, "not attached");
	gs_client_free(c);
	fake_stop(&f);
}

/* TOKEN_SOON (8 ms), then the grant 100 ms later; then a hint far longer than
 * the client's cap and no grant; then nothing (the client closes). */
static void script_soon(int fd)
{
	struct gs_msg m, r;
	int64_t t0;

	assert_int_equal(read_frame(fd, &m), 0);
	assert_int_equal(m.type, GS_MSG_TOKEN_WANT);
	memset(&r, 0, sizeof(r));
	r.type = GS_MSG_TOKEN_SOON;
	r.u.soon_ns = 8000000;	/* 8 ms */
	send_frame(fd, &r, -1);
	t0 = mono_ms();
	while (mono_ms() - t0 < 100)
		usleep(1000);
	memset(&r, 0, sizeof(r));
	r.type = GS_MSG_TOKEN_GRANT;
	r.u.grant.gen = 7;
	r.u.grant.slice_ns = 4000000;
	send_frame(fd, &r, -1);
	assert_int_equal(read_frame(fd, &m), 0);
	assert_int_equal(m.type, GS_MSG_TOKEN_WANT);
	memset(&r, 0, sizeof(r));
	r.type = GS_MSG_TOKEN_SOON;
	r.u.soon_ns = 5000000000ull;	/* 5 s: capped */
	send_frame(fd, &r, -1);
	read_frame(fd, &m); /* wait for close */
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* After TOKEN_SOON the wait for the grant polls (uses CPU time) instead of
 * sleeping, for the hint's time at most GS_CLIENT_SPIN_MAX_NS; a grant
 * ends it. */
static void test_soon_spins(void **state)
{
	struct fake f;
	struct gs_client *c;
	struct gs_error err;
	uint64_t gen = 0, slice = 0, cpu;
	int64_t t0;

	(void)state;
	fake_start(&f, script_soon);
	assert_int_equal(gs_client_connect(sock_path, 2000, &c, &err), 0);
	assert_int_equal(gs_client_soon_until(c), 0);
	assert_int_equal(gs_client_token_want(c, &err), 0);
	cpu = thread_cpu_ns();
	assert_int_equal(gs_client_wait_grant(c, 3000, &gen, &slice, &err),
			 1);
	cpu = thread_cpu_ns() - cpu;
	assert_int_equal(gen, 7);
	/* ~100 ms of polling; a loaded machine may preempt it for part */
	/* ~8 ms of polling (a loaded machine may preempt part of it), then
	 * asleep for the rest of the 100 ms */
	assert_true(cpu >= 3000000ull);
	assert_true(cpu < 60000000ull);
	assert_int_equal(gs_client_soon_until(c), 0);	/* the grant ended it */
	/* a hint beyond the cap: polls 10 ms, then sleeps */
	assert_int_equal(gs_client_token_want(c, &err), 0);
	t0 = mono_ms();
	cpu = thread_cpu_ns();
	assert_int_equal(gs_client_wait_grant(c, 300, &gen, &slice, &err), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_true(mono_ms() - t0 >= 295);
	assert_true(gs_client_soon_until(c) != 0);
	assert_true(cpu >= 3000000ull);
	assert_true(cpu < 60000000ull);
	/* no hint since: a wait sleeps */
	cpu = thread_cpu_ns();
	assert_int_equal(gs_client_wait_grant(c, 200, &gen, &slice, &err), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_true(cpu < 3000000ull);
	gs_client_free(c);
	fake_stop(&f);
}

/* A job that wanted the token while nobody else held or wanted it
 * expects the grant at once: the wait polls (CPU time) for the time it
 * said, capped at GS_CLIENT_SPIN_MAX_NS, then sleeps. */
static void test_expect_spins(void **state)
{
	struct fake f;
	struct gs_client *c;
	struct gs_error err;
	uint64_t gen = 0, slice = 0, cpu, until;
	int64_t t0;

	(void)state;
	fake_start(&f, script_silent);
	assert_int_equal(gs_client_connect(sock_path, 2000, &c, &err), 0);
	assert_int_equal(gs_client_token_want(c, &err), 0);
	t0 = mono_ms();
	gs_client_expect_grant(c, 8000000);
	until = gs_client_soon_until(c);
	assert_true(until / 1000000 >= (uint64_t)t0 + 7);
	assert_true(until / 1000000 <= (uint64_t)t0 + 9);
	cpu = thread_cpu_ns();
	assert_int_equal(gs_client_wait_grant(c, 100, &gen, &slice, &err), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_true(mono_ms() - t0 >= 95);
	/* ~8 ms of polling, asleep for the rest of the 100 ms */
	assert_true(cpu >= 3000000ull);
	assert_true(cpu < 60000000ull);
	/* capped */
	t0 = mono_ms();
	gs_client_expect_grant(c, UINT64_MAX / 2);
	until = gs_client_soon_until(c);
	assert_true(until / 1000000 <= (uint64_t)t0 + 11);
	gs_client_free(c);
	fake_stop(&f);
}

static void script_attach(int fd)
{
	struct gs_msg m, r;
	int mfd;

	assert_int_equal(read_frame(fd, &m), 0);
	assert_int_equal(m.type, GS_MSG_ATTACH);
	mfd = memfd_create("test", MFD_CLOEXEC);
	assert_int_equal(write(mfd, "page", 4), 4);
	memset(&r, 0, sizeof(r));
	r.type = GS_MSG_ATTACHED;
	r.seq = m.seq;
	r.u.info.id = m.u.id;
	r.u.info.shares = 40;
	send_frame(fd, &r, mfd);
	close(mfd);
	/* second request: ERROR reply */
	assert_int_equal(read_frame(fd, &m), 0);
	r.type = GS_MSG_ERROR;
	r.seq = m.seq;
	r.u.error.code = GS_EPERM;
	snprintf(r.u.error.msg, sizeof(r.u.error.msg),
		 "allocation 9 belongs to uid 1000");
	send_frame(fd, &r, -1);
	/* third: close without answering */
	read_frame(fd, &m);
}

static void test_attach_fd(void **state)
{
	struct fake f;
	struct gs_client *c;
	struct gs_error err;
	struct gs_alloc_info info;
	char buf[8] = { 0 };
	int cfd = -1;

	(void)state;
	fake_start(&f, script_attach);
	assert_int_equal(gs_client_connect(sock_path, 2000, &c, &err), 0);
	assert_int_equal(gs_client_attach(c, 9, &cfd, &info, &err), 0);
	assert_true(cfd >= 0);
	assert_int_equal(info.id, 9);
	assert_int_equal(info.shares, 40);
	assert_int_equal(pread(cfd, buf, 4, 0), 4);
	assert_string_equal(buf, "page");
	close(cfd);
	assert_int_equal(gs_client_set_weight(c, 9, 5, &err), -1);
	assert_int_equal(err.code, GS_EPERM);
	assert_string_equal(err.msg, "allocation 9 belongs to uid 1000");
	assert_int_equal(gs_client_drain(c, 0, 1, &err), -1);
	assert_int_equal(err.code, GS_ECLOSED);
	/* once closed, further calls fail fast */
	assert_int_equal(gs_client_ping(c, &err), -1);
	assert_int_equal(err.code, GS_ECLOSED);
	gs_client_free(c);
	fake_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_expect_spins),
		cmocka_unit_test(test_request_timeout),
		cmocka_unit_test(test_events_and_stale),
		cmocka_unit_test(test_soon_spins),
		cmocka_unit_test(test_attach_fd),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
