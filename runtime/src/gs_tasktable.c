/*
 * gs_tasktable.c — the host half of a task pool's TaskTable; see
 * gs_tasktable.h.
 */
#include <stdlib.h>

#include "gs_tasktable.h"

int
gs__tt_init(struct gs__ttab *t, uint32_t cap, uint32_t ngroups,
	    struct gs_error *err)
{
	uint32_t c = 1024;

	if (cap == 0)
		cap = 65536;
	if (cap > (1u << 22)) {
		gs_error_set(err, GS_EINVAL, "task table capacity %u is over "
			     "%u", cap, 1u << 22);
		return -1;
	}
	while (c < cap)
		c <<= 1;
	t->cap = c;
	t->mask = c - 1;
	t->next = 0;
	t->retired = 0;
	t->ngroups = ngroups;
	t->group = calloc(c, sizeof(*t->group));
	t->gpend = calloc(ngroups ? ngroups : 1, sizeof(*t->gpend));
	if (t->group == NULL || t->gpend == NULL) {
		free(t->group);
		free(t->gpend);
		t->group = NULL;
		t->gpend = NULL;
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return -1;
	}
	return 0;
}

void
gs__tt_fini(struct gs__ttab *t)
{
	free(t->group);
	free(t->gpend);
	t->group = NULL;
	t->gpend = NULL;
}

int
gs__tt_reserve(struct gs__ttab *t, uint32_t group, uint64_t *ticket)
{
	if (t->next - t->retired >= t->cap || group >= t->ngroups)
		return -1;
	t->group[t->next & t->mask] = group;
	t->gpend[group]++;
	*ticket = t->next++;
	return 0;
}

uint64_t
gs__tt_retire(struct gs__ttab *t, const volatile uint32_t *done)
{
	uint64_t n = 0;

	while (t->retired < t->next) {
		uint32_t s = (uint32_t)(t->retired & t->mask);

		if (done[s] != gs__tt_seq(t->retired))
			break;
		t->gpend[t->group[s]]--;
		t->retired++;
		n++;
	}
	return n;
}

int
gs__tt_is_done(const struct gs__ttab *t, const volatile uint32_t *done,
	       uint64_t ticket)
{
	if (ticket < t->retired)
		return 1;
	if (ticket >= t->next)
		return 0;
	return done[ticket & t->mask] == gs__tt_seq(ticket);
}

int
gs__tt_check_spawn(unsigned int threads, size_t shmem, size_t args_size,
		   uint32_t task_args, unsigned int group,
		   unsigned int max_threads, size_t pool_bytes,
		   size_t max_args, uint32_t ngroups, struct gs_error *err)
{
	if (threads == 0 || threads % 32u != 0 || threads > max_threads) {
		gs_error_set(err, GS_EINVAL, "task of %u threads: must be a "
			     "multiple of 32 from 32 to %u", threads,
			     max_threads);
		return -1;
	}
	if (shmem > pool_bytes) {
		gs_error_set(err, GS_EINVAL, "task asks for %zu bytes of "
			     "shared memory, the pool has %zu", shmem,
			     pool_bytes);
		return -1;
	}
	if (args_size > max_args || args_size != task_args) {
		gs_error_set(err, GS_EINVAL, "task arguments of %zu bytes: "
			     "the task takes %u (at most %zu)", args_size,
			     task_args, max_args);
		return -1;
	}
	if (group >= ngroups) {
		gs_error_set(err, GS_EINVAL, "task group %u out of range "
			     "(0..%u)", group, ngroups - 1);
		return -1;
	}
	return 0;
}
