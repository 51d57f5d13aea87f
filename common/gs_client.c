/*
 * gs_client.c — blocking agent client with timeouts (see gs_client.h).
 *
 * The socket is non-blocking; every wait is a poll() against a deadline
 * computed once per call from the connection's timeout, so a call never
 * takes longer than its timeout however the agent trickles bytes.
 * Frames are read with recvmsg so that an fd passed with SCM_RIGHTS
 * (ATTACHED) is picked up with the bytes it travels with; an fd that
 * arrives with anything but ATTACHED is closed.  Replies are matched by
 * seq; TOKEN_GRANT events that arrive meanwhile are queued, and ERROR
 * frames for fire-and-forget requests (TOKEN_WANT/RELEASE) are kept and
 * reported by the next gs_client_wait_grant.  Replies to an earlier
 * request that timed out are dropped.  A TOKEN_SOON event makes the next
 * wait for a grant poll without sleeping until the hint's time is up.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "gs_client.h"

#define GRANTQ_MAX 64
#define RBUF_SIZE (GS_FRAME_HDR_SIZE + GS_FRAME_MAX_PAYLOAD)

struct grant_ev {
	uint64_t gen, slice_ns;
};

struct gs_client {
	int fd;
	int timeout_ms;
	uint32_t seq;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint8_t *rbuf;
	size_t rlen;
	int passed_fd;		/* fd received with SCM_RIGHTS, -1 none */
	int passed_fd0;		/* the fd before it in the same message
				 * (ATTACHED: the memory page), -1 none */
	struct grant_ev grants[GRANTQ_MAX];
	unsigned gq_head, gq_len;
	uint64_t soon_until;	/* TOKEN_SOON: spin until (monotonic ns) */
	int async_err;		/* an ERROR for WANT/RELEASE is pending */
	struct gs_error async;
	int broken;		/* framing lost: only free is valid */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline (-1: no deadline → -1). */
static int left_ms(int64_t deadline)
{
	int64_t d;

	if (deadline < 0)
		return -1;
	d = deadline - now_ms();
	if (d < 0)
		return 0;
	return d > 1000000000 ? 1000000000 : (int)d;
}

static int64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

static int wait_fd(int fd, short ev, int64_t deadline, const char *what,
		   struct gs_error *err)
{
	struct pollfd p = { fd, ev, 0 };
	int rv;

	for (;;) {
		rv = poll(&p, 1, left_ms(deadline));
		if (rv > 0)
			return 0;
		if (rv == 0)
			return gs_error_set(err, GS_ETIMEDOUT,
					    "timed out waiting for the agent "
					    "(%s)", what);
		if (errno != EINTR)
			return gs_error_errno(err, GS_EIO, "poll");
	}
}

int gs_client_connect(const char *path, int timeout_ms,
		      struct gs_client **out, struct gs_error *err)
{
	struct sockaddr_un sa;
	struct gs_client *c = NULL;
	int64_t deadline;
	int fd = -1, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (path == NULL || *path == '\0')
		path = GS_DEFAULT_SOCKET;
	if (strlen(path) >= sizeof(sa.sun_path))
		return gs_error_set(err, GS_EINVAL,
				    "socket path too long: %s", path);
	if (timeout_ms == 0)
		timeout_ms = 5000;
	deadline = deadline_of(timeout_ms);

	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	c->rbuf = malloc(RBUF_SIZE);
	if (c->rbuf == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		goto out_free;
	}
	c->passed_fd = -1;
	c->passed_fd0 = -1;
	c->timeout_ms = timeout_ms;
	snprintf(c->path, sizeof(c->path), "%s", path);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		gs_error_errno(err, GS_EIO, "socket");
		goto out_free;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EINPROGRESS) {
			/* listen backlog full: wait for room */
			if (wait_fd(fd, POLLOUT, deadline, "connect", err) < 0)
				goto out_close;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
				       &sl) < 0) {
				gs_error_errno(err, GS_EIO, "getsockopt");
				goto out_close;
			}
			if (soerr == 0)
				break;
			errno = soerr;
		}
		if (errno == ENOENT || errno == ECONNREFUSED) {
			gs_error_errno(err, GS_ECONNREFUSED,
				       "cannot connect to gshared at %s (is "
				       "the agent running?)", path);
		} else if (errno == EACCES || errno == EPERM) {
			gs_error_errno(err, GS_EPERM,
				       "cannot connect to gshared at %s",
				       path);
		} else {
			gs_error_errno(err, GS_EIO,
				       "cannot connect to gshared at %s",
				       path);
		}
		goto out_close;
	}
	c->fd = fd;
	*out = c;
	return 0;

out_close:
	close(fd);
out_free:
	if (c != NULL)
		free(c->rbuf);
	free(c);
	return -1;
}

void gs_client_free(struct gs_client *c)
{
	if (c == NULL)
		return;
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	if (c->passed_fd0 >= 0)
		close(c->passed_fd0);
	close(c->fd);
	free(c->rbuf);
	free(c);
}

int gs_client_fd(const struct gs_client *c)
{
	return c->fd;
}

void gs_client_set_timeout(struct gs_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

/* A send found the connection closed: the agent may have said why
 * first (an ERROR refusing the connection, seq 0); report that. */
static void closed_on_send(struct gs_client *c, struct gs_error *err)
{
	struct gs_msg m;
	struct gs_error e;
	size_t used;
	ssize_t n;

	if (!c->async_err && c->rlen == 0) {
		n = recv(c->fd, c->rbuf, RBUF_SIZE, MSG_DONTWAIT);
		if (n > 0 && gs_frame_parse(c->rbuf, (size_t)n, &m, &used,
					    &e) == 1) {
			if (m.type == GS_MSG_ERROR && m.seq == 0) {
				c->async_err = 1;
				c->async = m.u.error;
			}
			gs_msg_clear(&m);
		}
	}
	if (c->async_err)
		gs_error_set(err, c->async.code, "the agent closed the "
			     "connection: %s", c->async.msg);
	else
		gs_error_set(err, GS_ECLOSED,
			     "the agent closed the connection");
}

static int send_all(struct gs_client *c, const uint8_t *p, size_t n,
		    int64_t deadline, struct gs_error *err)
{
	ssize_t w;

	while (n > 0) {
		w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(c->fd, POLLOUT, deadline, "send", err) < 0)
				goto out_broken;
			continue;
		}
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			closed_on_send(c, err);
			goto out_broken;
		}
		gs_error_errno(err, GS_EIO, "send to %s", c->path);
		goto out_broken;
	}
	return 0;

out_broken:
	/* a partial frame may be on the wire: the stream is unusable */
	c->broken = 1;
	return -1;
}

static int send_msg(struct gs_client *c, struct gs_msg *m, int64_t deadline,
		    struct gs_error *err)
{
	struct gs_wbuf b;
	int rv;

	if (c->broken)
		return gs_error_set(err, GS_ECLOSED,
				    "connection to the agent is broken");
	if (m->type != GS_MSG_TOKEN_GRANT) {
		if (++c->seq == 0)
			c->seq = 1;
		m->seq = c->seq;
	}
	gs_wbuf_init(&b);
	if (gs_msg_encode(m, &b, err) < 0)
		return -1;
	rv = send_all(c, b.data, b.len, deadline, err);
	gs_wbuf_free(&b);
	return rv;
}

/* The agent closed the connection after an ERROR that answered no
 * request (it refused the connection, say): report that ERROR. */
static int closed_why(struct gs_client *c, struct gs_error *err)
{
	closed_on_send(c, err);
	return -1;
}

/* Read more bytes into rbuf, waiting until deadline.  Keeps an fd passed
 * with SCM_RIGHTS in c->passed_fd. */
static int fill(struct gs_client *c, int64_t deadline, struct gs_error *err)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *ch;
	ssize_t n;

	for (;;) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = c->rbuf + c->rlen;
		iov.iov_len = RBUF_SIZE - c->rlen;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(c->fd, POLLIN, deadline, "reply", err) < 0)
				return -1;
			continue;
		}
		if (n < 0) {
			c->broken = 1;
			if (c->async_err)	/* what the agent said first */
				return closed_why(c, err);
			return gs_error_errno(err, GS_EIO, "recv from %s",
					      c->path);
		}
		break;
	}
	for (ch = CMSG_FIRSTHDR(&mh); ch != NULL; ch = CMSG_NXTHDR(&mh, ch)) {
		int *fds, i, nfd;

		if (ch->cmsg_level != SOL_SOCKET ||
		    ch->cmsg_type != SCM_RIGHTS)
			continue;
		fds = (int *)(void *)CMSG_DATA(ch);
		nfd = (int)((ch->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < nfd; i++) {
			/* the last fd of a message is the control page; the
			 * one before it, if any, the memory page */
			int *keep = i == nfd - 1 ? &c->passed_fd :
				    i == nfd - 2 ? &c->passed_fd0 : NULL;

			if (keep == NULL) {
				close(fds[i]);
				continue;
			}
			if (*keep >= 0)
				close(*keep);
			*keep = fds[i];
		}
	}
	if (n == 0) {
		c->broken = 1;
		if (c->async_err)
			return closed_why(c, err);
		return gs_error_set(err, GS_ECLOSED,
				    "the agent closed the connection");
	}
	c->rlen += (size_t)n;
	return 0;
}

/* Next whole frame, waiting until deadline.  Returns 1 with *m (caller
 * clears), or -1.  A frame of unknown type is skipped. */
static int next_msg(struct gs_client *c, struct gs_msg *m, int64_t deadline,
		    struct gs_error *err)
{
	struct gs_error e;
	size_t used = 0;
	int rv;

	for (;;) {
		rv = gs_frame_parse(c->rbuf, c->rlen, m, &used, &e);
		if (rv == 1) {
			memmove(c->rbuf, c->rbuf + used, c->rlen - used);
			c->rlen -= used;
			return 1;
		}
		if (rv < 0) {
			if (e.code == GS_EUNSUPP) {
				/* newer agent event we do not know: skip */
				memmove(c->rbuf, c->rbuf + used,
					c->rlen - used);
				c->rlen -= used;
				continue;
			}
			c->broken = 1;
			if (err != NULL)
				*err = e;
			return -1;
		}
		if (fill(c, deadline, err) < 0)
			return -1;
	}
}

/* Route frames that are not the reply we wait for. Returns 1 if m was
 * consumed (event / stale / async error). */
static int route_other(struct gs_client *c, struct gs_msg *m,
		       uint32_t want_seq)
{
	if (m->type == GS_MSG_TOKEN_GRANT && m->seq == 0) {
		if (c->gq_len < GRANTQ_MAX) {
			unsigned i = (c->gq_head + c->gq_len) % GRANTQ_MAX;

			c->grants[i].gen = m->u.grant.gen;
			c->grants[i].slice_ns = m->u.grant.slice_ns;
			c->gq_len++;
		} else {
			/* keep the newest grant: older ones are stale */
			unsigned i = (c->gq_head + GRANTQ_MAX - 1) % GRANTQ_MAX;

			c->grants[i].gen = m->u.grant.gen;
			c->grants[i].slice_ns = m->u.grant.slice_ns;
		}
		c->soon_until = 0;
		return 1;
	}
	if (m->type == GS_MSG_TOKEN_SOON && m->seq == 0) {
		uint64_t d = m->u.soon_ns;

		if (d > GS_CLIENT_SPIN_MAX_NS)
			d = GS_CLIENT_SPIN_MAX_NS;
		c->soon_until = now_ns() + d;
		return 1;
	}
	if (want_seq != 0 && m->seq == want_seq)
		return 0;
	if (m->type == GS_MSG_ERROR && !c->async_err) {
		c->async_err = 1;
		c->async = m->u.error;
	}
	gs_msg_clear(m);
	return 1;
}

/* Send req and wait for the reply with its seq into *rep.  ERROR replies
 * become -1 with the agent's code and message. */
static int request(struct gs_client *c, struct gs_msg *req,
		   struct gs_msg *rep, struct gs_error *err)
{
	int64_t deadline = deadline_of(c->timeout_ms);

	if (send_msg(c, req, deadline, err) < 0)
		return -1;
	for (;;) {
		if (next_msg(c, rep, deadline, err) < 0)
			return -1;
		if (route_other(c, rep, req->seq))
			continue;
		if (rep->type == GS_MSG_ERROR) {
			gs_error_set(err, rep->u.error.code, "%s",
				     rep->u.error.msg);
			return -1;
		}
		return 0;
	}
}

static int expect(struct gs_msg *rep, uint16_t type, struct gs_error *err)
{
	if (rep->type == type)
		return 0;
	gs_error_set(err, GS_EPROTO, "unexpected %s reply (wanted %s)",
		     gs_msg_type_name(rep->type), gs_msg_type_name(type));
	gs_msg_clear(rep);
	return -1;
}

int gs_client_ping(struct gs_client *c, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_PING }, rep;

	if (request(c, &req, &rep, err) < 0)
		return -1;
	return expect(&rep, GS_MSG_OK, err);
}

/* A request the agent answers with ALLOC_INFO; *out (may be NULL). */
static int info_request(struct gs_client *c, struct gs_msg *req,
			struct gs_alloc_info *out, struct gs_error *err)
{
	struct gs_msg rep;

	if (request(c, req, &rep, err) < 0)
		return -1;
	if (expect(&rep, GS_MSG_ALLOC_INFO, err) < 0)
		return -1;
	if (out != NULL)
		*out = rep.u.info;
	return 0;
}

int gs_client_alloc_create(struct gs_client *c, const struct gs_alloc_req *r,
			   struct gs_alloc_info *out, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_ALLOC_CREATE };

	req.u.req = *r;
	return info_request(c, &req, out, err);
}

int gs_client_alloc_close(struct gs_client *c, uint64_t id,
			  struct gs_alloc_info *final, struct gs_error *err)
{
	return gs_client_alloc_close_as(c, id, GS_END_DEFAULT, final, err);
}

int gs_client_alloc_close_as(struct gs_client *c, uint64_t id,
			     uint32_t end_state, struct gs_alloc_info *final,
			     struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_ALLOC_CLOSE };

	req.u.close.id = id;
	req.u.close.end_state = end_state;
	return info_request(c, &req, final, err);
}

int gs_client_alloc_label(struct gs_client *c, uint64_t id,
			  const struct gs_labels *labels,
			  struct gs_alloc_info *out, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_ALLOC_LABEL };

	req.u.label.id = id;
	req.u.label.labels = *labels;
	return info_request(c, &req, out, err);
}

int gs_client_alloc_set_mem(struct gs_client *c, uint64_t id,
			    uint64_t mem_limit, struct gs_alloc_info *out,
			    struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_ALLOC_SET_MEM };

	req.u.setmem.id = id;
	req.u.setmem.mem_limit = mem_limit;
	return info_request(c, &req, out, err);
}

int gs_client_attach(struct gs_client *c, uint64_t id, int *ctl_fd,
		     struct gs_alloc_info *info, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_ATTACH }, rep;

	req.u.id = id;
	if (c->passed_fd >= 0) {
		close(c->passed_fd);
		c->passed_fd = -1;
	}
	if (c->passed_fd0 >= 0) {
		close(c->passed_fd0);
		c->passed_fd0 = -1;
	}
	if (request(c, &req, &rep, err) < 0)
		return -1;
	if (expect(&rep, GS_MSG_ATTACHED, err) < 0)
		return -1;
	if (c->passed_fd < 0)
		return gs_error_set(err, GS_EPROTO,
				    "ATTACHED reply without a control page "
				    "fd");
	*ctl_fd = c->passed_fd;
	c->passed_fd = -1;
	if (info != NULL)
		*info = rep.u.info;
	return 0;
}

int gs_client_take_mem_fd(struct gs_client *c)
{
	int fd = c->passed_fd0;

	c->passed_fd0 = -1;
	return fd;
}

/* Append page's allocations to st (ids must keep ascending).  Returns
 * 1 when appended, 0 when the page made no progress, -1 out of memory. */
static int status_append(struct gs_status *st, const struct gs_status *page)
{
	struct gs_alloc_info *v;
	uint64_t last = st->allocs[st->nallocs - 1].id;

	if (page->nallocs == 0 || page->allocs[0].id <= last)
		return 0;
	v = realloc(st->allocs, (st->nallocs + page->nallocs) * sizeof(*v));
	if (v == NULL)
		return -1;
	memcpy(v + st->nallocs, page->allocs, page->nallocs * sizeof(*v));
	st->allocs = v;
	st->nallocs += page->nallocs;
	return 1;
}

int gs_client_status(struct gs_client *c, struct gs_status **out,
		     struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_STATUS }, rep;
	struct gs_status *st;
	int rv;

	if (request(c, &req, &rep, err) < 0)
		return -1;
	if (expect(&rep, GS_MSG_STATUS_REPLY, err) < 0)
		return -1;
	st = malloc(sizeof(*st));
	if (st == NULL) {
		gs_msg_clear(&rep);
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	}
	*st = rep.u.status; /* takes the arrays */
	/* Later pages: the allocations after the last one listed.  GPU
	 * records and the policy come from the first page.  An allocation
	 * created or closed between pages may be missed or listed; every
	 * other one is listed once.  A page that does not move forward
	 * (an agent that ignores after_id) ends the walk. */
	while (st->more && st->nallocs > 0) {
		req.type = GS_MSG_STATUS;
		req.u.after_id = st->allocs[st->nallocs - 1].id;
		if (request(c, &req, &rep, err) < 0 ||
		    expect(&rep, GS_MSG_STATUS_REPLY, err) < 0) {
			gs_status_free(st);
			return -1;
		}
		rv = status_append(st, &rep.u.status);
		st->more = rv > 0 ? rep.u.status.more : 0;
		if (rep.u.status.nallocs_total > st->nallocs_total)
			st->nallocs_total = rep.u.status.nallocs_total;
		gs_msg_clear(&rep);
		if (rv < 0) {
			gs_status_free(st);
			return gs_error_set(err, GS_ENOMEM, "out of memory");
		}
	}
	if (st->nallocs_total < st->nallocs)
		st->nallocs_total = st->nallocs;
	st->more = 0;
	*out = st;
	return 0;
}

static int set_value(struct gs_client *c, uint16_t type, uint64_t id,
		     uint32_t v, struct gs_error *err)
{
	struct gs_msg req = { .type = type }, rep;

	req.u.set.id = id;
	req.u.set.value = v;
	if (request(c, &req, &rep, err) < 0)
		return -1;
	return expect(&rep, GS_MSG_OK, err);
}

int gs_client_set_weight(struct gs_client *c, uint64_t id, uint32_t weight,
			 struct gs_error *err)
{
	return set_value(c, GS_MSG_SET_WEIGHT, id, weight, err);
}

int gs_client_set_priority(struct gs_client *c, uint64_t id, uint32_t prio,
			   struct gs_error *err)
{
	return set_value(c, GS_MSG_SET_PRIORITY, id, prio, err);
}

int gs_client_drain(struct gs_client *c, int32_t gpu, int on,
		    struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_DRAIN }, rep;

	req.u.drain.gpu = gpu;
	req.u.drain.on = on ? 1 : 0;
	if (request(c, &req, &rep, err) < 0)
		return -1;
	return expect(&rep, GS_MSG_OK, err);
}

int gs_client_gpu_fault(struct gs_client *c, int32_t gpu, int fail,
			struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_GPU_FAULT }, rep;

	req.u.drain.gpu = gpu;
	req.u.drain.on = fail ? 1 : 0;
	if (request(c, &req, &rep, err) < 0)
		return -1;
	return expect(&rep, GS_MSG_OK, err);
}

int gs_client_token_want(struct gs_client *c, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_TOKEN_WANT };

	return send_msg(c, &req, deadline_of(c->timeout_ms), err);
}

int gs_client_token_release(struct gs_client *c, uint64_t gen,
			    uint64_t gpu_ns, uint64_t evict_ns,
			    uint32_t reason, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_TOKEN_RELEASE };

	req.u.release.gen = gen;
	req.u.release.gpu_ns = gpu_ns;
	req.u.release.evict_ns = evict_ns;
	req.u.release.reason = reason;
	return send_msg(c, &req, deadline_of(c->timeout_ms), err);
}

int gs_client_token_unwant(struct gs_client *c, struct gs_error *err)
{
	struct gs_msg req = { .type = GS_MSG_TOKEN_UNWANT }, rep;

	if (request(c, &req, &rep, err) < 0)
		return -1;
	if (expect(&rep, GS_MSG_OK, err) < 0)
		return -1;
	/* the agent answers in order: every grant before its OK is void */
	c->gq_len = 0;
	c->gq_head = 0;
	c->soon_until = 0;
	return 0;
}

uint64_t gs_client_soon_until(const struct gs_client *c)
{
	return c->soon_until;
}

void gs_client_expect_grant(struct gs_client *c, uint64_t ns)
{
	if (ns > GS_CLIENT_SPIN_MAX_NS)
		ns = GS_CLIENT_SPIN_MAX_NS;
	c->soon_until = now_ns() + ns;
}

int gs_client_wait_grant(struct gs_client *c, int timeout_ms, uint64_t *gen,
			 uint64_t *slice_ns, struct gs_error *err)
{
	int64_t deadline = deadline_of(timeout_ms);
	struct gs_error e;
	struct gs_msg m;

	for (;;) {
		int spin;

		if (c->async_err) {
			c->async_err = 0;
			return gs_error_set(err, c->async.code, "%s",
					    c->async.msg);
		}
		if (c->gq_len > 0) {
			*gen = c->grants[c->gq_head].gen;
			*slice_ns = c->grants[c->gq_head].slice_ns;
			c->gq_head = (c->gq_head + 1) % GRANTQ_MAX;
			c->gq_len--;
			return 1;
		}
		/* a grant is near: look without sleeping (poll timeout 0) */
		spin = c->soon_until != 0 && now_ns() < c->soon_until;
		if (next_msg(c, &m, spin ? now_ms() : deadline, &e) < 0) {
			if (e.code == GS_ETIMEDOUT && !c->broken) {
				if (spin && (deadline < 0 ||
					     now_ms() < deadline)) {
					/* polling: let a runnable thread
					 * go first where cores are short */
					sched_yield();
					continue;
				}
				return 0;
			}
			if (err != NULL)
				*err = e;
			return -1;
		}
		route_other(c, &m, 0);
	}
}
