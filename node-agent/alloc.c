/*
 * alloc.c — allocation table (see alloc.h) and control pages.
 *
 * Records live in an array of pointers sorted by id; ids only grow, so
 * adding appends and lookups are a binary search.  Pointers to records
 * stay valid until the record is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc.h"

#define MAX_OBS 4

struct gs_alloc_table {
	struct gs_alloc **v;
	unsigned n, cap;
	uint64_t next_id;
	struct {
		gs_alloc_observer_fn fn;
		void *ctx;
	} obs[MAX_OBS];
	unsigned nobs;
};

struct gs_alloc_table *gs_alloc_table_new(void)
{
	struct gs_alloc_table *t = calloc(1, sizeof(*t));

	if (t != NULL)
		t->next_id = 1;
	return t;
}

static void alloc_free(struct gs_alloc *a)
{
	unsigned i;

	for (i = 0; i < a->natt; i++) {
		if (a->att[i].page != NULL)
			munmap(a->att[i].page, GS_CTL_SIZE);
		if (a->att[i].ctl_fd >= 0)
			close(a->att[i].ctl_fd);
	}
	free(a->att);
	if (a->mem != NULL)
		munmap(a->mem, GS_MEM_SIZE);
	if (a->mem_fd >= 0)
		close(a->mem_fd);
	free(a);
}

void gs_alloc_table_free(struct gs_alloc_table *t)
{
	unsigned i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++)
		alloc_free(t->v[i]);
	free(t->v);
	free(t);
}

int gs_alloc_observe(struct gs_alloc_table *t, gs_alloc_observer_fn fn,
		     void *ctx)
{
	if (t->nobs == MAX_OBS)
		return -1;
	t->obs[t->nobs].fn = fn;
	t->obs[t->nobs].ctx = ctx;
	t->nobs++;
	return 0;
}

void gs_alloc_unobserve(struct gs_alloc_table *t, gs_alloc_observer_fn fn,
			void *ctx)
{
	unsigned i;

	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].fn != fn || t->obs[i].ctx != ctx)
			continue;
		memmove(&t->obs[i], &t->obs[i + 1],
			(t->nobs - i - 1) * sizeof(t->obs[0]));
		t->nobs--;
		return;
	}
}

void gs_alloc_notify(struct gs_alloc_table *t, int event,
		     const struct gs_alloc *a)
{
	unsigned i;

	for (i = 0; i < t->nobs; i++)
		t->obs[i].fn(t->obs[i].ctx, event, a);
}

static struct gs_alloc *alloc_put(struct gs_alloc_table *t, uint64_t id,
				  const struct gs_alloc_req *req,
				  uint64_t now_unix_ns)
{
	struct gs_alloc *a;

	if (t->n == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 16;
		struct gs_alloc **v = realloc(t->v, cap * sizeof(*v));

		if (v == NULL)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return NULL;
	a->id = id;
	a->gpu = req->gpu;
	a->shares = req->shares;
	a->weight = req->weight;
	a->priority = req->priority;
	a->mode = req->mode;
	a->uid = req->uid;
	a->flags = req->flags;
	a->mem_limit = req->mem_limit;
	a->labels = req->labels;
	a->created_unix_ns = now_unix_ns;
	a->state = GS_ASTATE_CREATED;
	a->ctl_fd = -1;
	a->mem_fd = -1;
	t->v[t->n++] = a;
	if (id >= t->next_id)
		t->next_id = id + 1;
	return a;
}

struct gs_alloc *gs_alloc_add(struct gs_alloc_table *t,
			      const struct gs_alloc_req *req,
			      uint64_t now_unix_ns)
{
	struct gs_alloc *a = alloc_put(t, t->next_id, req, now_unix_ns);

	if (a != NULL)
		gs_alloc_notify(t, GS_AEV_CREATED, a);
	return a;
}

struct gs_alloc *gs_alloc_restore(struct gs_alloc_table *t, uint64_t id,
				  const struct gs_alloc_req *req,
				  uint64_t created_unix_ns)
{
	struct gs_alloc *a;

	if (id == 0 || id == UINT64_MAX ||
	    (t->n > 0 && t->v[t->n - 1]->id >= id))
		return NULL;
	a = alloc_put(t, id, req, created_unix_ns);
	if (a != NULL) {
		a->restored = 1;
	}
	return a;
}

uint64_t gs_alloc_next_id(const struct gs_alloc_table *t)
{
	return t->next_id;
}

void gs_alloc_set_next_id(struct gs_alloc_table *t, uint64_t id)
{
	if (id > t->next_id)
		t->next_id = id;
}

static int find_idx(const struct gs_alloc_table *t, uint64_t id)
{
	unsigned lo = 0, hi = t->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (t->v[mid]->id == id)
			return (int)mid;
		if (t->v[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

struct gs_alloc *gs_alloc_get(struct gs_alloc_table *t, uint64_t id)
{
	int i = find_idx(t, id);

	return i < 0 ? NULL : t->v[i];
}

void gs_alloc_remove(struct gs_alloc_table *t, uint64_t id)
{
	int i = find_idx(t, id);
	struct gs_alloc *a;

	if (i < 0)
		return;
	a = t->v[i];
	a->state = GS_ASTATE_CLOSED;
	gs_alloc_notify(t, GS_AEV_CLOSED, a);
	memmove(&t->v[i], &t->v[i + 1], (t->n - (unsigned)i - 1) *
		sizeof(t->v[0]));
	t->n--;
	alloc_free(a);
}

struct gs_alloc *gs_alloc_first(struct gs_alloc_table *t)
{
	return t->n ? t->v[0] : NULL;
}

struct gs_alloc *gs_alloc_after(struct gs_alloc_table *t, uint64_t id)
{
	unsigned lo = 0, hi = t->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (t->v[mid]->id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->n ? t->v[lo] : NULL;
}

struct gs_alloc *gs_alloc_next(struct gs_alloc_table *t,
			       const struct gs_alloc *a)
{
	int i = find_idx(t, a->id);

	if (i < 0 || (unsigned)i + 1 >= t->n)
		return NULL;
	return t->v[i + 1];
}

unsigned gs_alloc_count(const struct gs_alloc_table *t)
{
	return t->n;
}

static int make_page(struct gs_alloc *a, uint32_t gpu_index,
		     uint64_t now_ns, int *fdp, struct gs_ctlpage **pp,
		     struct gs_error *err)
{
	struct gs_ctlpage *p;
	int fd;

	fd = memfd_create("gshare-ctl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "memfd_create");
	if (ftruncate(fd, GS_CTL_SIZE) < 0) {
		gs_error_errno(err, GS_EIO, "ftruncate(control page)");
		goto out_close;
	}
	p = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (p == MAP_FAILED) {
		gs_error_errno(err, GS_EIO, "mmap(control page)");
		goto out_close;
	}
	memset(p, 0, GS_CTL_SIZE);
	p->alloc_id = a->id;
	p->page_size = GS_CTL_SIZE;
	p->gpu_index = gpu_index;
	p->created_ns = now_ns;
	p->mem_limit = a->mem_limit;
	p->version = GS_CTL_VERSION;
	__atomic_store_n(&p->magic, GS_CTL_MAGIC, __ATOMIC_RELEASE);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_SEAL) < 0) {
		gs_error_errno(err, GS_EIO, "F_ADD_SEALS(control page)");
		munmap(p, GS_CTL_SIZE);
		goto out_close;
	}
	*fdp = fd;
	*pp = p;
	return 0;

out_close:
	close(fd);
	return -1;
}

/* The allocation's memory page (gs_mempage.h): memfd, header written,
 * sealed against resizing. */
static int make_mem(struct gs_alloc *a, struct gs_error *err)
{
	struct gs_mempage *m;
	int fd;

	fd = memfd_create("gshare-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "memfd_create");
	if (ftruncate(fd, GS_MEM_SIZE) < 0) {
		gs_error_errno(err, GS_EIO, "ftruncate(memory page)");
		goto out_close;
	}
	m = mmap(NULL, GS_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (m == MAP_FAILED) {
		gs_error_errno(err, GS_EIO, "mmap(memory page)");
		goto out_close;
	}
	memset(m, 0, GS_MEM_SIZE);
	m->alloc_id = a->id;
	m->limit = a->mem_limit;
	m->version = GS_MEM_VERSION;
	__atomic_store_n(&m->magic, GS_MEM_MAGIC, __ATOMIC_RELEASE);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_SEAL) < 0) {
		gs_error_errno(err, GS_EIO, "F_ADD_SEALS(memory page)");
		munmap(m, GS_MEM_SIZE);
		goto out_close;
	}
	a->mem_fd = fd;
	a->mem = m;
	return 0;

out_close:
	close(fd);
	return -1;
}

uint64_t gs_alloc_mem_gone(struct gs_alloc *a, unsigned k)
{
	uint64_t u, c, nc, taken;

	if (k >= a->natt || a->att[k].page == NULL)
		return 0;
	u = __atomic_exchange_n(&a->att[k].page->mem_used, 0,
				__ATOMIC_ACQ_REL);
	if (a->mem == NULL || u == 0)
		return 0;
	c = __atomic_load_n(&a->mem->used, __ATOMIC_RELAXED);
	do {
		nc = u > c ? 0 : c - u;
	} while (!__atomic_compare_exchange_n(&a->mem->used, &c, nc, 1,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	taken = c - nc;
	return taken;
}

int gs_alloc_attach_slot(struct gs_alloc *a, uint32_t gpu_index,
			 uint64_t now_ns, struct gs_error *err)
{
	struct gs_attach *v, *t;
	unsigned i;

	if (a->mem == NULL && make_mem(a, err) < 0)
		return -1;

	for (i = 0; i < a->natt; i++)
		if (a->att[i].conn == NULL) {
			/* a new process: it says again what it runs */
			a->att[i].kind = GS_CTL_JOB_UNKNOWN;
			if (a->att[i].page != NULL)
				__atomic_store_n(&a->att[i].page->job_kind,
						 (uint32_t)GS_CTL_JOB_UNKNOWN,
						 __ATOMIC_RELEASE);
			return (int)i;
		}
	if (a->natt >= GS_ALLOC_MAX_ATTACH)
		return gs_error_set(err, GS_EBUSY, "allocation %llu already "
				    "has %u attached processes (the most)",
				    (unsigned long long)a->id,
				    GS_ALLOC_MAX_ATTACH);
	v = realloc(a->att, (a->natt + 1) * sizeof(*v));
	if (v == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	a->att = v;
	t = &v[a->natt];
	memset(t, 0, sizeof(*t));
	t->ctl_fd = -1;
	if (make_page(a, gpu_index, now_ns, &t->ctl_fd, &t->page, err) < 0)
		return -1;
	if (a->natt == 0) {
		a->ctl_fd = t->ctl_fd;
		a->page = t->page;
	}
	return (int)a->natt++;
}

int gs_alloc_make_page(struct gs_alloc *a, uint32_t gpu_index,
		       uint64_t now_ns, struct gs_error *err)
{
	if (a->natt > 0)
		return 0;
	return gs_alloc_attach_slot(a, gpu_index, now_ns, err) < 0 ? -1 : 0;
}

uint64_t gs_alloc_mem_used(const struct gs_alloc *a)
{
	uint64_t sum = 0, u;

	for (unsigned i = 0; i < a->natt; i++) {
		u = __atomic_load_n(&a->att[i].page->mem_used,
				    __ATOMIC_ACQUIRE);
		sum = u > UINT64_MAX - sum ? UINT64_MAX : sum + u;
	}
	return sum;
}

/* The job's word.  With one process its page's peak; with several the
 * pages' peaks do not add up to the allocation's (they need not fall at
 * the same time), so the allocation's peak is the largest of: what the
 * agent saw before, the sum held now, any one page's peak. */
static uint64_t peak_of(const struct gs_alloc *a)
{
	uint64_t p = a->mem_peak, q;

	q = gs_alloc_mem_used(a);
	if (q > p)
		p = q;
	for (unsigned i = 0; i < a->natt; i++) {
		q = __atomic_load_n(&a->att[i].page->mem_peak,
				    __ATOMIC_ACQUIRE);
		if (q > p)
			p = q;
	}
	return p;
}

uint64_t gs_alloc_mem_peak(struct gs_alloc *a)
{
	a->mem_peak = peak_of(a);
	return a->mem_peak;
}

void gs_alloc_to_info(const struct gs_alloc *a, struct gs_alloc_info *out)
{
	memset(out, 0, sizeof(*out));
	out->id = a->id;
	out->gpu = a->gpu;
	out->shares = a->shares;
	out->weight = a->weight;
	out->priority = a->priority;
	out->mode = a->mode;
	out->uid = a->uid;
	out->flags = a->flags;
	out->state = a->state;
	out->pid = (uint32_t)a->pid;
	out->nattached = a->nattached;
	out->labels = a->labels;
	out->created_unix_ns = a->created_unix_ns;
	out->gpu_ns = a->gpu_ns;
	out->held_ns = a->held_ns;
	out->suspensions = a->suspensions;
	out->unmanaged = a->unmanaged;
	out->unmanaged_held = a->unmanaged_held;
	out->mem_limit = a->mem_limit;
	out->mem_used = gs_alloc_mem_used(a);
	out->mem_peak = peak_of(a);
	for (unsigned i = 0; i < a->natt; i++)
		out->block_tasks += __atomic_load_n(
			&a->att[i].page->block_tasks, __ATOMIC_ACQUIRE);
}
