/*
 * slurm_query.c — the plugin's only libslurm calls: ask slurmctld for a
 * step's TRES per node.
 *
 * No environment variable tells a SPANK plugin about a custom gres, so
 * the remote context asks slurmctld.  A step's record carries
 * tres_per_node (e.g. "gres:gshare:30"; a step without --gres inherits
 * the job's, --gres=none leaves it empty); the batch step has no step
 * record fields, so it takes the job's.  The symbols resolve from the
 * libslurmfull already loaded in the calling process (no -lslurm).
 */
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gs_spank.h"

static int dup_tres(const char *s, char **out, struct gs_error *err)
{
	char *d = strdup(s ? s : "");

	if (d == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	*out = d;
	return 0;
}

static int job_tres(uint32_t job, char **out, struct gs_error *err)
{
	job_info_msg_t *resp = NULL;
	uint32_t i;
	int rv = -1;

	if (slurm_load_job(&resp, job, SHOW_ALL) != SLURM_SUCCESS)
		return gs_error_set(err, GS_EIO,
				    "cannot load job %u from slurmctld: %s",
				    job, slurm_strerror(slurm_get_errno()));
	for (i = 0; i < resp->record_count; i++) {
		if (resp->job_array[i].job_id == job) {
			rv = dup_tres(resp->job_array[i].tres_per_node, out,
				      err);
			goto out_free;
		}
	}
	gs_error_set(err, GS_ENOENT, "slurmctld does not know job %u", job);
out_free:
	slurm_free_job_info_msg(resp);
	return rv;
}

/* The index of this node's gres detail: the node's place in the job's
 * node list (slurmctld keeps one detail string per node, in that order). */
static int node_index(const char *nodes, const char *node)
{
	hostlist_t hl;
	int i;

	if (nodes == NULL || node == NULL)
		return -1;
	hl = slurm_hostlist_create(nodes);
	if (hl == NULL)
		return -1;
	i = slurm_hostlist_find(hl, node);
	slurm_hostlist_destroy(hl);
	return i;
}

int gs__slurm_job_gres(uint32_t job, const char *node, const char *gres,
		       char **tres, int *gpu, struct gs_error *err)
{
	job_info_msg_t *resp = NULL;
	slurm_job_info_t *j;
	uint32_t i;
	int k, rv = -1;

	*gpu = -1;
	if (slurm_load_job(&resp, job, SHOW_ALL | SHOW_DETAIL) !=
	    SLURM_SUCCESS)
		return gs_error_set(err, GS_EIO,
				    "cannot load job %u from slurmctld: %s",
				    job, slurm_strerror(slurm_get_errno()));
	for (i = 0; i < resp->record_count; i++) {
		j = &resp->job_array[i];
		if (j->job_id != job)
			continue;
		k = node_index(j->nodes, node);
		if (k >= 0 && (uint32_t)k < j->gres_detail_cnt &&
		    gs_gres_detail_gpu(j->gres_detail_str[k], gres, gpu,
				       err) < 0)
			goto out_free;
		rv = dup_tres(j->tres_per_node, tres, err);
		goto out_free;
	}
	gs_error_set(err, GS_ENOENT, "slurmctld does not know job %u", job);
out_free:
	slurm_free_job_info_msg(resp);
	return rv;
}

/* How Slurm ended a job, GS_END_DEFAULT while it has not. */
static uint32_t end_of(uint32_t job_state)
{
	switch (job_state & JOB_STATE_BASE) {
	case JOB_COMPLETE: return GS_END_COMPLETED;
	case JOB_CANCELLED: return GS_END_CANCELLED;
	case JOB_TIMEOUT:
	case JOB_DEADLINE: return GS_END_TIMEOUT;
	case JOB_NODE_FAIL: return GS_END_NODE_FAIL;
	case JOB_FAILED:
	case JOB_BOOT_FAIL:
	case JOB_OOM: return GS_END_FAILED;
	default: return GS_END_DEFAULT;	/* running, pending...: agent's */
	}
}

uint32_t gs__slurm_job_end_state(uint32_t job)
{
	job_info_msg_t *resp = NULL;
	uint32_t i, st = GS_END_DEFAULT;

	if (slurm_load_job(&resp, job, SHOW_ALL) != SLURM_SUCCESS)
		return GS_END_DEFAULT;
	for (i = 0; i < resp->record_count; i++) {
		if (resp->job_array[i].job_id != job)
			continue;
		st = end_of(resp->job_array[i].job_state);
		break;
	}
	slurm_free_job_info_msg(resp);
	return st;
}

int gs__slurm_job_over(uint32_t job, uint64_t older_s, uint32_t *end_state,
		       int *one_node, struct gs_error *err)
{
	job_info_msg_t *resp = NULL;
	uint32_t i;
	int rv = 1;

	*end_state = GS_END_DEFAULT;
	*one_node = 0;
	if (slurm_load_job(&resp, job, SHOW_ALL) != SLURM_SUCCESS) {
		int e = slurm_get_errno();

		if (e == ESLURM_INVALID_JOB_ID)
			return 1;	/* purged: over long ago */
		return gs_error_set(err, GS_EIO,
				    "cannot load job %u from slurmctld: %s",
				    job, slurm_strerror(e));
	}
	for (i = 0; i < resp->record_count; i++) {
		const slurm_job_info_t *j = &resp->job_array[i];
		time_t now = time(NULL);

		if (j->job_id != job)
			continue;
		*end_state = end_of(j->job_state);
		if ((j->job_state & JOB_STATE_BASE) == JOB_PREEMPTED)
			*end_state = GS_END_CANCELLED;
		*one_node = j->num_nodes == 1;
		if (*end_state == GS_END_DEFAULT ||
		    (j->job_state & JOB_COMPLETING) || j->end_time == 0 ||
		    (uint64_t)(now > j->end_time ? now - j->end_time : 0) <
		    older_s)
			rv = 0;
		break;
	}
	slurm_free_job_info_msg(resp);
	return rv;
}

int gs__slurm_step_tres(uint32_t job, uint32_t step, char **out,
			struct gs_error *err)
{
	job_step_info_response_msg_t *resp = NULL;
	uint32_t i;
	int rv = -1;

	if (step == SLURM_BATCH_SCRIPT)
		return job_tres(job, out, err);
	if (slurm_get_job_steps(0, job, step, &resp, SHOW_ALL) !=
	    SLURM_SUCCESS)
		return gs_error_set(err, GS_EIO,
				    "cannot load step %u.%u from slurmctld: "
				    "%s",
				    job, step,
				    slurm_strerror(slurm_get_errno()));
	for (i = 0; i < resp->job_step_count; i++) {
		job_step_info_t *s = &resp->job_steps[i];

		if (s->step_id.job_id == job && s->step_id.step_id == step) {
			rv = dup_tres(s->tres_per_node, out, err);
			goto out_free;
		}
	}
	gs_error_set(err, GS_ENOENT, "slurmctld does not know step %u.%u", job,
		     step);
out_free:
	slurm_free_job_step_info_response_msg(resp);
	return rv;
}
