/*
 * dp_main.c — gshare-device-plugin: options, the agent side, and the
 * handlers the gRPC loop (dp_grpc.c) calls.
 *
 * One thread.  Each tick the plugin polls the agent (STATUS: GPUs, their
 * health, and the allocations it made), turns that into the device list
 * (100 devices per GPU; all Unhealthy while the agent is unreachable, a
 * GPU's Unhealthy while it is lost or drained) and, every
 * podresources_poll, asks the kubelet's
 * PodResources which pod holds which devices, to label allocations and
 * close those of pods that are gone.  Agent calls block the loop for at
 * most agent_timeout; they are local round trips of well under a
 * millisecond normally.
 *
 * Restart safety: the plugin keeps no state of its own on disk.  After a
 * restart it adopts from the agent's status the allocations it made
 * (labels cluster and node as configured, no Slurm job) and finds their
 * pods again through PodResources; after an agent restart it reconnects
 * and re-adopts what the agent reports.  Kubelet restarts are handled in
 * dp_grpc.c (new socket, new registration).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp_grpc.h"
#include "dp_install.h"
#include "dp_logic.h"
#include "dp_state.h"
#include "gs_client.h"
#include "gs_config.h"
#include "gs_log.h"
#include "gs_paths.h"
#include "gs_proto.h"

#define PROG "gshare-device-plugin"

struct dp_cfg {
	char agent_socket[GS_DP_PATH_MAX];
	char plugin_dir[GS_DP_PATH_MAX];
	char kubelet_socket[GS_DP_PATH_MAX];
	char podresources_socket[GS_DP_PATH_MAX];
	char resource[128];
	char memory_resource[128];
	char container_socket_dir[GS_DP_PATH_MAX];
	char preload[GS_DP_PATH_MAX];
	char preload_source[GS_DP_PATH_MAX];
	char cluster[GS_LABEL_MAX];
	char node_name[GS_LABEL_MAX];
	int allow_span;
	char owner[16];		/* owner_uid as given: a uid or "any" */
	uint32_t owner_uid;	/* from owner (finish_cfg) */
	int owner_any;		/* owner is "any": GS_ALLOC_ANY_UID */
	uint32_t priority;
	uint32_t mode;
	uint64_t tick;
	uint64_t agent_poll;
	uint64_t agent_timeout;
	uint64_t podresources_poll;
	uint64_t pod_grace;
	uint64_t reuse_window;
};

static const char *const prio_names[] = { "low", "normal", "high", NULL };
static const char *const mode_names[] = { "time", "space", NULL };

#define MS GS_NS_PER_MS
static const struct gs_cfg_key cfg_keys[] = {
	GS_CFG_KEY_STRING("agent_socket", struct dp_cfg, agent_socket, 2,
	    GS_DEFAULT_SOCKET, "the agent's socket (host path)"),
	GS_CFG_KEY_STRING("plugin_dir", struct dp_cfg, plugin_dir, 1,
	    "/var/lib/kubelet/device-plugins",
	    "kubelet device-plugin directory"),
	GS_CFG_KEY_STRING("kubelet_socket", struct dp_cfg, kubelet_socket, 0,
	    "", "kubelet registration socket (empty: plugin_dir/kubelet.sock)"),
	GS_CFG_KEY_STRING("podresources_socket", struct dp_cfg,
	    podresources_socket, 0,
	    "/var/lib/kubelet/pod-resources/kubelet.sock",
	    "kubelet PodResources socket (empty: no pod labels or cleanup)"),
	GS_CFG_KEY_STRING("resource", struct dp_cfg, resource, 3,
	    GS_DP_RESOURCE, "extended resource name advertised"),
	GS_CFG_KEY_STRING("memory_resource", struct dp_cfg, memory_resource,
	    0, "gshare.io/gpu-mem",
	    "extended resource of a container's GPU memory limit, in GiB "
	    "(empty: none)"),
	GS_CFG_KEY_STRING("container_socket_dir", struct dp_cfg,
	    container_socket_dir, 0, "",
	    "where containers see the agent socket directory (empty: same)"),
	GS_CFG_KEY_STRING("preload", struct dp_cfg, preload, 1,
	    "libgshare-gate.so",
	    "launch gate preloaded into containers: a file in the agent "
	    "socket directory, or no"),
	GS_CFG_KEY_STRING("preload_source", struct dp_cfg, preload_source, 0,
	    gs_gate_lib,
	    "launch gate the plugin copies there as preload (empty: none)"),
	GS_CFG_KEY_STRING("cluster", struct dp_cfg, cluster, 1, "kubernetes",
	    "cluster label of allocations this plugin makes"),
	GS_CFG_KEY_STRING("node_name", struct dp_cfg, node_name, 0, "",
	    "node label (empty: $NODE_NAME, else the host name)"),
	GS_CFG_KEY_BOOL("allow_span", struct dp_cfg, allow_span, "false",
	    "let one container take shares of several GPUs"),
	GS_CFG_KEY_STRING("owner_uid", struct dp_cfg, owner, 1, "0",
	    "uid that may attach to container allocations, or any"),
	GS_CFG_KEY_ENUM("priority", struct dp_cfg, priority, prio_names,
	    "normal", "priority of container allocations"),
	GS_CFG_KEY_ENUM("mode", struct dp_cfg, mode, mode_names, "time",
	    "sharing mode of container allocations"),
	GS_CFG_KEY_DURATION("tick", struct dp_cfg, tick, 10 * MS, 1000 * MS,
	    "100ms", "loop tick (socket checks, retries)"),
	GS_CFG_KEY_DURATION("agent_poll", struct dp_cfg, agent_poll, 10 * MS,
	    60000 * MS, "500ms", "agent status (health) poll interval"),
	GS_CFG_KEY_DURATION("agent_timeout", struct dp_cfg, agent_timeout,
	    10 * MS, 60000 * MS, "2s", "timeout of one agent request"),
	GS_CFG_KEY_DURATION("podresources_poll", struct dp_cfg,
	    podresources_poll, 10 * MS, 3600000 * MS, "5s",
	    "PodResources List interval"),
	GS_CFG_KEY_DURATION("pod_grace", struct dp_cfg, pod_grace, 0, 0,
	    "30s", "close an allocation no pod has held for this long"),
	GS_CFG_KEY_DURATION("reuse_window", struct dp_cfg, reuse_window, 0,
	    3600000 * MS, "10s",
	    "device IDs handed out again within this: same pod (init)"),
	GS_CFG_KEY_END,
};

struct plugin {
	struct dp_cfg cfg;
	struct gs_dp_grpc *grpc;
	struct gs_dp_grpc *mgrpc;	/* memory_resource, NULL: none */
	uint32_t *mem_gib;		/* per GPU: whole GiB, 0: unknown */
	struct gs_client *agent;
	int agent_up;
	int agent_down_logged;
	int label_unsupported;
	struct gs_dp_gpu *gpus;
	size_t ngpus;
	struct gs_dp_state st;
	uint64_t next_poll_ms, next_pods_ms;
	int gate_failed;	/* the last install failed (logged) */
	/* The last GetPreferredAllocation's free IDs (available, not
	 * must-include), for the Allocate that follows it. */
	char (*freed)[GS_DP_ID_MAX];
	size_t nfreed;
};

static volatile sig_atomic_t stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static unsigned
to_ms(uint64_t ns)
{
	return (unsigned)(ns / GS_NS_PER_MS);
}

/* ---- agent ---- */

static void
agent_lost(struct plugin *p, const struct gs_error *err)
{
	if (p->agent != NULL) {
		gs_client_free(p->agent);
		p->agent = NULL;
	}
	if (p->agent_up || !p->agent_down_logged)
		log_warnx("agent unreachable: %s; devices are Unhealthy",
		    err->msg);
	p->agent_up = 0;
	p->agent_down_logged = 1;
}

/* Errors that mean the connection is gone, not that a request was bad. */
static int
conn_error(int code)
{
	return code == GS_ECLOSED || code == GS_EIO || code == GS_ETIMEDOUT ||
	    code == GS_ECONNREFUSED || code == GS_EPROTO;
}

static int
agent_connect(struct plugin *p, struct gs_error *err)
{
	if (p->agent != NULL)
		return 0;
	return gs_client_connect(p->cfg.agent_socket,
	    (int)to_ms(p->cfg.agent_timeout), &p->agent, err);
}

static int
ours(const struct plugin *p, const struct gs_alloc_info *a)
{
	return a->state != GS_ASTATE_CLOSED &&
	    strcmp(a->labels.cluster, p->cfg.cluster) == 0 &&
	    strcmp(a->labels.node, p->cfg.node_name) == 0 &&
	    a->labels.job[0] == '\0';
}

/* Space mode: remember the allocation's MPS server (pipe directory,
 * thread percentage) for the containers it is handed to. */
static void
mps_keep(struct gs_dp_alloc *sa, const struct gs_alloc_info *info)
{
	if (sa == NULL)
		return;
	snprintf(sa->mps_pipe, sizeof(sa->mps_pipe), "%s", info->mps_pipe);
	sa->mps_pct = info->mps_pct;
}

/* Bring GPUs and tracked allocations in line with the agent's status. */
static void
agent_sync(struct plugin *p, const struct gs_status *st, uint64_t now)
{
	struct gs_dp_gpu *gpus = NULL;
	struct gs_error err;
	size_t i, j;

	if (st->ngpus > 0) {
		gpus = calloc(st->ngpus, sizeof(*gpus));
		if (gpus == NULL) {
			log_warnx("agent status: out of memory");
			return;
		}
	}
	for (i = 0; i < st->ngpus; i++) {
		gpus[i].index = st->gpus[i].index;
		snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "%s",
		    st->gpus[i].uuid);
		/* A drained GPU takes no new allocations: the kubelet
		 * should not offer its devices either. */
		gpus[i].healthy = st->gpus[i].healthy != 0 &&
		    st->gpus[i].drained == 0;
	}
	free(p->gpus);
	p->gpus = gpus;
	p->ngpus = st->ngpus;
	free(p->mem_gib);
	p->mem_gib = calloc(st->ngpus + 1, sizeof(*p->mem_gib));
	for (i = 0; p->mem_gib != NULL && i < st->ngpus; i++)
		p->mem_gib[i] = (uint32_t)(st->gpus[i].mem_total >> 30);

	/* Allocations the agent no longer has.  A restarted agent restores
	 * its table with the same ids and never reuses one; still, an id
	 * only counts as the same allocation when it is ours, on the same
	 * GPU, with the same shares (a lost table file starts afresh). */
	for (i = 0; i < p->st.n;) {
		for (j = 0; j < st->nallocs; j++)
			if (st->allocs[j].id == p->st.a[i].id &&
			    ours(p, &st->allocs[j]) &&
			    st->allocs[j].shares == p->st.a[i].shares &&
			    strcmp(st->allocs[j].gpu_uuid,
			    p->st.a[i].uuid) == 0)
				break;
		if (j < st->nallocs) {
			i++;
			continue;
		}
		log_warnx("allocation %llu is gone from the agent",
		    (unsigned long long)p->st.a[i].id);
		gs_dp_state_remove(&p->st, p->st.a[i].id);
	}
	/* Ours the agent has and we do not track: adopt. */
	for (j = 0; j < st->nallocs; j++) {
		const struct gs_alloc_info *a = &st->allocs[j];

		if (!ours(p, a) || gs_dp_state_find(&p->st, a->id) != NULL)
			continue;
		if (gs_dp_state_add(&p->st, a->id, a->gpu_uuid, a->shares,
		    NULL, 0, now, &err) == -1) {
			log_warnx("adopting allocation %llu: %s",
			    (unsigned long long)a->id, err.msg);
			continue;
		}
		if (a->labels.pod[0] != '\0')
			gs_dp_state_set_labels(gs_dp_state_find(&p->st, a->id),
			    a->labels.ns, a->labels.pod, a->labels.container,
			    0);
		mps_keep(gs_dp_state_find(&p->st, a->id), a);
		log_info("adopted allocation %llu (GPU %s, %u shares%s%s)",
		    (unsigned long long)a->id, a->gpu_uuid, a->shares,
		    a->labels.pod[0] ? ", pod " : "", a->labels.pod);
	}
}

/* ---- memory_resource (gshare.io/gpu-mem) ----
 *
 * One device per whole GiB of each GPU, "<GPU-UUID>::mem<n>", healthy
 * as the GPU's shares are.  Allocate only counts them (GSHARE_MEM_GIB);
 * PreStartContainer, once the kubelet has called Allocate for every
 * resource of the container, finds the container's share allocation
 * through PodResources and has the agent settle its limit
 * (ALLOC_SET_MEM) before the container starts.  docs/kubernetes.md,
 * "GPU memory", says why it cannot be done at Allocate. */

#define MEM_SEP "::mem"

static void
publish_mem_devices(struct plugin *p)
{
	struct gs_dp_device *d = NULL;
	struct gs_error err;
	size_t i, n = 0, total = 0;
	uint32_t k;

	for (i = 0; i < p->ngpus && p->mem_gib != NULL; i++)
		total += p->mem_gib[i];
	if (total > 0 && (d = calloc(total, sizeof(*d))) == NULL) {
		log_warnx("memory device list: out of memory");
		return;
	}
	for (i = 0; i < p->ngpus && p->mem_gib != NULL; i++)
		for (k = 0; k < p->mem_gib[i]; k++, n++) {
			if (snprintf(d[n].id, sizeof(d[n].id), "%s" MEM_SEP
			    "%u", p->gpus[i].uuid, k) >= (int)sizeof(d[n].id))
				break;	/* no such UUIDs: IDs fit 63 */
			d[n].healthy = p->agent_up && p->gpus[i].healthy;
			d[n].gpu = i;
		}
	if (gs_dp_grpc_set_devices(p->mgrpc, d, n, &err) == -1)
		log_warnx("memory device list: %s", err.msg);
	free(d);
}

/* 1 when id is one of the memory devices advertised now. */
static int
mem_id_known(const struct plugin *p, const char *id)
{
	const char *sep = strstr(id, MEM_SEP);
	char *end;
	unsigned long k;
	size_t i, ul;

	if (sep == NULL || p->mem_gib == NULL)
		return 0;
	ul = (size_t)(sep - id);
	if (sep[strlen(MEM_SEP)] < '0' || sep[strlen(MEM_SEP)] > '9')
		return 0;
	k = strtoul(sep + strlen(MEM_SEP), &end, 10);
	if (*end != '\0')
		return 0;
	for (i = 0; i < p->ngpus; i++)
		if (strlen(p->gpus[i].uuid) == ul &&
		    strncmp(p->gpus[i].uuid, id, ul) == 0)
			return k < p->mem_gib[i];
	return 0;
}

static int
h_mem_preferred(void *ctx, const char *const *avail, size_t navail,
		const char *const *must, size_t nmust, size_t size,
		const char **out, struct gs_error *err)
{
	size_t i;

	(void)ctx;
	(void)must;
	(void)nmust;
	if (size > navail)
		return gs_error_set(err, GS_EINVAL, "%zu memory devices "
		    "asked of %zu", size, navail);
	for (i = 0; i < size; i++)
		out[i] = avail[i];
	return 0;
}

static int
h_mem_allocate(void *ctx, const char *const *ids, size_t nids,
	       struct gs_dp_container *out, struct gs_error *err)
{
	struct plugin *p = ctx;
	size_t i, j;

	if (nids == 0)
		return gs_error_set(err, GS_EINVAL, "Allocate %s: no device "
		    "IDs", p->cfg.memory_resource);
	for (i = 0; i < nids; i++) {
		if (!mem_id_known(p, ids[i]))
			return gs_error_set(err, GS_EINVAL, "Allocate %s: "
			    "unknown device ID \"%.80s\"",
			    p->cfg.memory_resource, ids[i]);
		for (j = 0; j < i; j++)
			if (strcmp(ids[i], ids[j]) == 0)
				return gs_error_set(err, GS_EINVAL,
				    "Allocate %s: device ID \"%s\" twice",
				    p->cfg.memory_resource, ids[i]);
	}
	memset(out, 0, sizeof(*out));
	out->nenv = 1;
	snprintf(out->env[0].key, sizeof(out->env[0].key), "GSHARE_MEM_GIB");
	snprintf(out->env[0].value, sizeof(out->env[0].value), "%zu", nids);
	return 0;
}

/* What PreStartContainer looks for in PodResources. */
struct mem_match {
	const struct plugin *p;
	const char *const *ids;		/* the gpu-mem IDs */
	size_t nids;
	int found;			/* containers holding ids[0] */
	size_t nheld;			/* of ids, held by that container */
	size_t nctr;			/* memory IDs that container holds */
	char ns[GS_LABEL_MAX], pod[GS_LABEL_MAX * 2], ctr[GS_LABEL_MAX];
	uint64_t alloc;			/* its share allocation, 0: none */
	int nallocs;			/* share allocations it holds */
	int shares_seen;		/* it has gpu-share devices */
};

static int
ids_has(const char *const *ids, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return 1;
	return 0;
}

static void
mem_match_pods(void *arg, const struct gs_dp_podctr *pcs, size_t n)
{
	struct mem_match *m = arg;
	const struct plugin *p = m->p;
	size_t i, j, k;

	for (i = 0; i < n; i++) {
		if (strcmp(pcs[i].resource, p->cfg.memory_resource) != 0 ||
		    !ids_has(pcs[i].ids, pcs[i].nids, m->ids[0]))
			continue;
		if (m->found++ > 0)
			continue;
		snprintf(m->ns, sizeof(m->ns), "%s", pcs[i].ns);
		snprintf(m->pod, sizeof(m->pod), "%s", pcs[i].pod);
		snprintf(m->ctr, sizeof(m->ctr), "%s", pcs[i].container);
		m->nctr = pcs[i].nids;
		for (j = 0; j < m->nids; j++)
			m->nheld += ids_has(pcs[i].ids, pcs[i].nids,
			    m->ids[j]);
	}
	if (m->found != 1)
		return;
	/* the same container's shares, and the allocations made of them */
	for (i = 0; i < n; i++) {
		const struct gs_dp_alloc *a;

		if (strcmp(pcs[i].resource, p->cfg.resource) != 0 ||
		    strcmp(pcs[i].ns, m->ns) != 0 ||
		    strcmp(pcs[i].pod, m->pod) != 0 ||
		    strcmp(pcs[i].container, m->ctr) != 0)
			continue;
		m->shares_seen = 1;
		for (k = 0; k < p->st.n; k++) {
			a = &p->st.a[k];
			if (a->ids == NULL || a->nids == 0)
				continue;
			for (j = 0; j < a->nids; j++)
				if (!ids_has(pcs[i].ids, pcs[i].nids,
				    a->ids[j]))
					break;
			if (j < a->nids || a->id == m->alloc)
				continue;
			m->alloc = a->id;
			m->nallocs++;
		}
	}
}

static int
h_mem_prestart(void *ctx, const char *const *ids, size_t nids,
	       struct gs_error *err)
{
	struct plugin *p = ctx;
	struct mem_match m;
	struct gs_alloc_info info;
	struct gs_status *st = NULL;
	struct gs_error e1, e2;
	uint64_t want = (uint64_t)nids << 30;
	size_t i;
	int same = 0;

	if (nids == 0)
		return gs_error_set(err, GS_EINVAL, "PreStartContainer %s: "
		    "no device IDs", p->cfg.memory_resource);
	memset(&m, 0, sizeof(m));
	m.p = p;
	m.ids = ids;
	m.nids = nids;
	if (gs_dp_grpc_pods_now(p->grpc, mem_match_pods, &m, &e2) == -1)
		return gs_error_set(err, GS_EIO, "PreStartContainer %s: "
		    "cannot tell the container's allocation: %s",
		    p->cfg.memory_resource, e2.msg);
	/* exactly its set: an init container's IDs handed on to an app
	 * container (PodResources lists app containers only) are refused
	 * rather than taken for the app container's */
	if (m.found == 0)
		return gs_error_set(err, GS_EINVAL, "PreStartContainer %s: "
		    "the kubelet's PodResources shows no container holding "
		    "these %zu device IDs", p->cfg.memory_resource, nids);
	if (m.found != 1 || m.nheld != nids || m.nctr != nids)
		return gs_error_set(err, GS_EINVAL, "PreStartContainer %s: "
		    "the kubelet's PodResources shows no container holding "
		    "exactly these %zu device IDs (%s/%s container %s holds "
		    "%zu; init containers cannot ask for %s)",
		    p->cfg.memory_resource, nids, m.ns, m.pod, m.ctr, m.nctr,
		    p->cfg.memory_resource);
	if (!m.shares_seen)
		return gs_error_set(err, GS_EINVAL, "%s/%s container %s asks "
		    "%zu GiB of %s without %s: a GPU memory limit needs GPU "
		    "shares", m.ns, m.pod, m.ctr, nids,
		    p->cfg.memory_resource, p->cfg.resource);
	if (m.nallocs != 1)
		return gs_error_set(err, GS_EINVAL, "%s/%s container %s: %s "
		    "(%s is one limit for one allocation)", m.ns, m.pod,
		    m.ctr, m.nallocs == 0 ? "no allocation of this plugin "
		    "holds its shares" : "its shares are held by several "
		    "allocations (several GPUs, or an init container's)",
		    p->cfg.memory_resource);
	if (!p->agent_up || agent_connect(p, err) == -1)
		return gs_error_set(err, GS_ECONNREFUSED, "PreStartContainer "
		    "%s: the gshare agent at %s is unavailable",
		    p->cfg.memory_resource, p->cfg.agent_socket);
	if (gs_client_alloc_set_mem(p->agent, m.alloc, want, &info,
	    &e1) == 0) {
		log_info("allocation %llu of %s/%s container %s: memory "
		    "limit %zu GiB", (unsigned long long)m.alloc, m.ns, m.pod,
		    m.ctr, nids);
		return 0;
	}
	if (conn_error(e1.code)) {
		agent_lost(p, &e1);
		return gs_error_set(err, GS_ECONNREFUSED, "PreStartContainer "
		    "%s: the gshare agent at %s is unavailable",
		    p->cfg.memory_resource, p->cfg.agent_socket);
	}
	/* a restarted container: the limit is set already */
	if (e1.code == GS_ESTATE &&
	    gs_client_status(p->agent, &st, &e2) == 0) {
		for (i = 0; i < st->nallocs; i++)
			if (st->allocs[i].id == m.alloc &&
			    st->allocs[i].mem_limit == want)
				same = 1;
		gs_status_free(st);
		if (same)
			return 0;
	}
	return gs_error_set(err, e1.code == GS_EBUSY ? GS_EBUSY :
	    GS_EINVAL, "%s/%s container %s: %zu GiB of GPU memory "
	    "refused: %s", m.ns, m.pod, m.ctr, nids, e1.msg);
}

static void
publish_devices(struct plugin *p)
{
	struct gs_dp_device *d = NULL;
	struct gs_error err;
	size_t n = 0;

	if (gs_dp_devices_build(p->gpus, p->ngpus, p->agent_up, &d, &n,
	    &err) == -1) {
		log_warnx("device list: %s", err.msg);
		return;
	}
	if (gs_dp_grpc_set_devices(p->grpc, d, n, &err) == -1)
		log_warnx("device list: %s", err.msg);
	free(d);
	if (p->mgrpc != NULL)
		publish_mem_devices(p);
}

static void
agent_poll(struct plugin *p, uint64_t now)
{
	struct gs_status *st = NULL;
	struct gs_error err;
	int was_up = p->agent_up;

	if (agent_connect(p, &err) == -1 ||
	    gs_client_status(p->agent, &st, &err) == -1) {
		agent_lost(p, &err);
	} else {
		if (!was_up)
			log_info("agent at %s is up: %u GPU(s)",
			    p->cfg.agent_socket, st->ngpus);
		p->agent_up = 1;
		p->agent_down_logged = 0;
		agent_sync(p, st, now);
		gs_status_free(st);
	}
	publish_devices(p);
}

static void
close_alloc(struct plugin *p, uint64_t id, const char *why)
{
	struct gs_error err;

	if (p->agent == NULL) {
		return;
	}
	if (gs_client_alloc_close(p->agent, id, NULL, &err) == -1 &&
	    err.code != GS_ENOENT) {
		log_warnx("closing allocation %llu: %s",
		    (unsigned long long)id, err.msg);
		if (conn_error(err.code))
			agent_lost(p, &err);
		return;
	}
	log_info("closed allocation %llu (%s)", (unsigned long long)id, why);
	gs_dp_state_remove(&p->st, id);
}

/* ---- handlers ---- */

static void
h_tick(void *ctx, uint64_t now)
{
	struct plugin *p = ctx;

	if (now >= p->next_poll_ms) {
		agent_poll(p, now);
		p->next_poll_ms = now + to_ms(p->cfg.agent_poll);
	}
	if (now >= p->next_pods_ms) {
		gs_dp_grpc_list_pods(p->grpc);
		p->next_pods_ms = now + to_ms(p->cfg.podresources_poll);
	}
}

static void
label_alloc(struct plugin *p, struct gs_dp_alloc *a)
{
	struct gs_labels l;
	struct gs_error err;

	memset(&l, 0, sizeof(l));
	snprintf(l.cluster, sizeof(l.cluster), "%s", p->cfg.cluster);
	snprintf(l.node, sizeof(l.node), "%s", p->cfg.node_name);
	snprintf(l.ns, sizeof(l.ns), "%s", a->ns);
	snprintf(l.pod, sizeof(l.pod), "%s", a->pod);
	snprintf(l.container, sizeof(l.container), "%s", a->container);
	if (gs_client_alloc_label(p->agent, a->id, &l, NULL, &err) == -1) {
		if (err.code == GS_EUNSUPP) {
			if (!p->label_unsupported)
				log_warnx("the agent cannot relabel "
				    "allocations (%s); pod names stay in the "
				    "plugin only", err.msg);
			p->label_unsupported = 1;
			a->label_pending = 0;
		} else {
			log_warnx("labelling allocation %llu: %s",
			    (unsigned long long)a->id, err.msg);
			if (conn_error(err.code))
				agent_lost(p, &err);
		}
		return;
	}
	a->label_pending = 0;
	log_info("allocation %llu is %s/%s/%s", (unsigned long long)a->id,
	    a->ns, a->pod, a->container);
}

static void
h_pods(void *ctx, int ok, const struct gs_dp_podctr *pcs, size_t n,
       uint64_t now)
{
	struct plugin *p = ctx;
	struct gs_dp_action *acts;
	struct gs_error err;
	int nacts, i;

	/* Without a fresh list nothing is closed: a kubelet that is
	 * restarting must not make running pods lose their shares. */
	if (!ok || !p->agent_up || p->st.n == 0)
		return;
	acts = calloc(p->st.n, sizeof(*acts));
	if (acts == NULL)
		return;
	nacts = gs_dp_reconcile(&p->st, pcs, n, now,
	    p->cfg.pod_grace / GS_NS_PER_MS, acts, &err);
	if (nacts == -1)
		log_warnx("PodResources: %s", err.msg);
	for (i = 0; i < nacts && p->agent != NULL; i++) {
		struct gs_dp_alloc *a = gs_dp_state_find(&p->st, acts[i].id);

		if (a == NULL)
			continue;
		if (acts[i].kind == GS_DP_ACT_LABEL)
			label_alloc(p, a);
		else
			close_alloc(p, acts[i].id, "no pod holds its devices");
	}
	free(acts);
}

static void
freed_clear(struct plugin *p)
{
	free(p->freed);
	p->freed = NULL;
	p->nfreed = 0;
}

static int
h_preferred(void *ctx, const char *const *avail, size_t navail,
	    const char *const *must, size_t nmust, size_t size,
	    const char **out, struct gs_error *err)
{
	struct plugin *p = ctx;
	size_t i, j;

	/* What the kubelet offers as free is no pod's any more: remember it
	 * for the Allocate that follows (gs_dp_state_overlap). */
	freed_clear(p);
	if (navail > 0 && (p->freed = calloc(navail, sizeof(*p->freed))) ==
	    NULL)
		return gs_error_set(err, GS_ENOMEM, "GetPreferredAllocation: "
		    "out of memory");
	for (i = 0; i < navail; i++) {
		for (j = 0; j < nmust; j++)
			if (strcmp(avail[i], must[j]) == 0)
				break;
		if (j < nmust || strlen(avail[i]) >= GS_DP_ID_MAX)
			continue;
		strcpy(p->freed[p->nfreed++], avail[i]);
	}
	return gs_dp_preferred(avail, navail, must, nmust, size, out, err);
}

/* ALLOC_CREATE; a connection the agent closed since the last poll (it
 * restarted) is replaced once.  Not after a timeout: that request may
 * have been carried out. */
static int
alloc_create(struct plugin *p, const struct gs_alloc_req *rq,
	     struct gs_alloc_info *info, struct gs_error *err)
{
	if (gs_client_alloc_create(p->agent, rq, info, err) == 0)
		return 0;
	if (err->code != GS_ECLOSED && err->code != GS_EIO)
		return -1;
	gs_client_free(p->agent);
	p->agent = NULL;
	if (agent_connect(p, err) == -1)
		return -1;
	return gs_client_alloc_create(p->agent, rq, info, err);
}

/* Copy preload_source into the agent socket directory as preload (at
 * start, and at Allocate while it is missing there).  A failure is
 * logged once until an install succeeds; the plugin goes on. */
static void
preload_install(struct plugin *p)
{
	char dir[GS_DP_PATH_MAX];
	const char *slash = strrchr(p->cfg.agent_socket, '/');
	struct gs_error err;
	size_t n;
	int rv;

	if (strcmp(p->cfg.preload, "no") == 0 ||
	    p->cfg.preload_source[0] == '\0' || slash == NULL)
		return;
	n = (size_t)(slash - p->cfg.agent_socket);
	if (n == 0)
		n = 1;		/* the socket in "/" */
	snprintf(dir, sizeof(dir), "%.*s", (int)n, p->cfg.agent_socket);
	rv = gs_dp_install_file(p->cfg.preload_source, dir, p->cfg.preload,
	    &err);
	if (rv == -1) {
		if (!p->gate_failed)
			log_warnx("launch gate not installed: %s (from "
			    "preload_source %s): containers run without it "
			    "until it is", err.msg, p->cfg.preload_source);
		p->gate_failed = 1;
		return;
	}
	if (rv == 1 || p->gate_failed)
		log_info("launch gate %s installed as %s/%s",
		    p->cfg.preload_source, dir, p->cfg.preload);
	p->gate_failed = 0;
}

/* The gate installed in the agent socket directory on the host?  Not
 * there: installed now if preload_source says from where; still not:
 * containers run without it (said once, in the log). */
static int
preload_present(struct plugin *p, const char *host_dir, const char *file)
{
	static int warned;
	char path[2 * GS_DP_PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", host_dir, file);
	if (access(path, R_OK) == 0)
		return 1;
	preload_install(p);
	if (access(path, R_OK) == 0)
		return 1;
	if (!warned)
		log_info("launch gate %s not readable: containers run "
		    "without it", path);
	warned = 1;
	return 0;
}

static int
h_allocate(void *ctx, const char *const *ids, size_t nids,
	   struct gs_dp_container *out, struct gs_error *err)
{
	struct plugin *p = ctx;
	struct gs_dp_group *groups = NULL;
	uint64_t *made = NULL, *stale = NULL;
	const char **uuids = NULL, **gids = NULL;
	unsigned char *fresh = NULL;
	const char **freed = NULL;
	struct gs_error cerr;
	size_t i, k, nstale;
	int ng = 0, rv = -1;

	if (!p->agent_up || agent_connect(p, err) == -1) {
		freed_clear(p);
		return gs_error_set(err, GS_ECONNREFUSED, "Allocate: the "
		    "gshare agent at %s is unavailable (not reachable)",
		    p->cfg.agent_socket);
	}
	groups = calloc(p->ngpus + 1, sizeof(*groups));
	made = calloc(p->ngpus + 1, sizeof(*made));
	uuids = calloc(p->ngpus + 1, sizeof(*uuids));
	stale = calloc(p->st.n + 1, sizeof(*stale));
	gids = calloc(nids + 1, sizeof(*gids));
	fresh = calloc(p->ngpus + 1, 1);
	freed = calloc(p->nfreed + 1, sizeof(*freed));
	if (groups == NULL || made == NULL || uuids == NULL ||
	    stale == NULL || gids == NULL || fresh == NULL || freed == NULL) {
		gs_error_set(err, GS_ENOMEM, "Allocate: out of memory");
		goto out;
	}
	for (i = 0; i < p->nfreed; i++)
		freed[i] = p->freed[i];
	ng = gs_dp_allocate_check(p->gpus, p->ngpus, ids, nids,
	    p->cfg.allow_span, groups, err);
	if (ng == -1)
		goto out;
	for (i = 0; i < (size_t)ng; i++) {
		if (!p->gpus[groups[i].gpu].healthy) {
			gs_error_set(err, GS_EINVAL, "Allocate: GPU %s is "
			    "unhealthy", p->gpus[groups[i].gpu].uuid);
			goto out;
		}
	}
	for (i = 0; i < (size_t)ng; i++) {
		const struct gs_dp_gpu *gpu = &p->gpus[groups[i].gpu];
		struct gs_alloc_req rq;
		struct gs_alloc_info info;
		struct gs_dp_alloc *sa;
		size_t ulen = strlen(gpu->uuid), n = 0;
		uint64_t same, now = gs_dp_now_ms();
		int rc;

		for (k = 0; k < nids; k++)
			if (strncmp(ids[k], gpu->uuid, ulen) == 0 &&
			    ids[k][ulen] == ':')
				gids[n++] = ids[k];
		/* Device IDs handed out again: a stale holder is closed; an
		 * init container's allocation of the same pod is kept, and
		 * shared when the IDs are the same (dp_state.h). */
		nstale = gs_dp_state_overlap(&p->st, gids, n, freed,
		    p->nfreed, now, p->cfg.reuse_window / GS_NS_PER_MS,
		    stale, &same);
		for (k = 0; k < nstale; k++)
			close_alloc(p, stale[k],
			    "its devices were handed out again");
		uuids[i] = gpu->uuid;
		if (same != 0 && (sa = gs_dp_state_find(&p->st, same)) !=
		    NULL) {
			sa->handed_ms = now;
			made[i] = same;
			log_info("allocation %llu: handed on to the pod's next "
			    "container (%u shares of GPU %s)",
			    (unsigned long long)same, sa->shares, gpu->uuid);
			continue;
		}
		memset(&rq, 0, sizeof(rq));
		rq.gpu = gpu->index;
		rq.shares = groups[i].count;
		rq.priority = p->cfg.priority;
		rq.mode = p->cfg.mode;
		rq.uid = p->cfg.owner_uid;
		if (p->cfg.owner_any)
			rq.flags = GS_ALLOC_ANY_UID;
		snprintf(rq.labels.cluster, sizeof(rq.labels.cluster), "%s",
		    p->cfg.cluster);
		snprintf(rq.labels.node, sizeof(rq.labels.node), "%s",
		    p->cfg.node_name);
		rc = alloc_create(p, &rq, &info, &cerr);
		if (rc == -1 && cerr.code == GS_EBUSY &&
		    (nstale = gs_dp_state_seen_holders(&p->st, gids, n,
		    stale)) > 0) {
			/* No room: the kept holders seen in a pod are a pod
			 * deleted since the last poll, not an init
			 * container; their shares are this container's. */
			for (k = 0; k < nstale; k++)
				close_alloc(p, stale[k], "its devices were "
				    "handed out again and the agent needs its "
				    "shares");
			rc = alloc_create(p, &rq, &info, &cerr);
		}
		if (rc == -1) {
			if (conn_error(cerr.code)) {
				gs_error_set(err, GS_ECONNREFUSED, "Allocate: "
				    "the gshare agent at %s is unavailable "
				    "(%s); %u shares of GPU %s not allocated",
				    p->cfg.agent_socket, cerr.msg, rq.shares,
				    gpu->uuid);
				agent_lost(p, &cerr);
			} else {
				gs_error_set(err, cerr.code, "Allocate: the "
				    "gshare agent refused %u shares of GPU "
				    "%s: %s", rq.shares, gpu->uuid, cerr.msg);
			}
			goto out_undo;
		}
		made[i] = info.id;
		fresh[i] = 1;
		if (p->cfg.owner_any && !(info.flags & GS_ALLOC_ANY_UID)) {
			/* an agent older than protocol 1.1 ignored the flag */
			gs_error_set(err, GS_EUNSUPP, "Allocate: the gshare "
			    "agent does not support owner_uid: any (protocol "
			    "1.1); upgrade it or set owner_uid to a uid");
			goto out_undo;
		}
		if (gs_dp_state_add(&p->st, info.id, gpu->uuid, rq.shares,
		    gids, n, now, err) == -1)
			goto out_undo;
		mps_keep(gs_dp_state_find(&p->st, info.id), &info);
		log_info("allocation %llu: %u shares of GPU %s",
		    (unsigned long long)info.id, rq.shares, gpu->uuid);
	}
	if (gs_dp_container_build(p->cfg.agent_socket,
	    p->cfg.container_socket_dir, made, uuids, (size_t)ng, out,
	    err) == -1)
		goto out_undo;
	if (strcmp(p->cfg.preload, "no") != 0 &&
	    preload_present(p, out->mount_host, p->cfg.preload) &&
	    gs_dp_container_preload(out, p->cfg.preload, err) == -1)
		goto out_undo;
	/* space mode, or time mode with the agent's time_mps: a client of
	 * its allocation's MPS server (one GPU: a process has one
	 * CUDA_MPS_PIPE_DIRECTORY) */
	{
		const struct gs_dp_alloc *sa = gs_dp_state_find(&p->st,
								made[0]);

		if (ng == 1 && sa != NULL && sa->mps_pipe[0] != '\0' &&
		    gs_dp_container_mps(out, sa->mps_pipe, sa->mps_pct,
		    err) == -1)
			goto out_undo;
	}
	rv = 0;
	goto out;

out_undo:
	/* Close what this call created, not what it shared. */
	for (i = 0; i < (size_t)ng; i++)
		if (fresh[i])
			close_alloc(p, made[i], "Allocate failed");
out:
	free(freed);
	freed_clear(p);		/* it was this container's */
	free(fresh);
	free(gids);
	free(stale);
	free(uuids);
	free(made);
	free(groups);
	return rv;
}

static void
h_registered(void *ctx, const char *endpoint)
{
	struct plugin *p = ctx;

	(void)endpoint;
	/* A new kubelet: look at its pods soon. */
	p->next_pods_ms = 0;
}

/* ---- options ---- */

static void
usage(void)
{
	const struct gs_cfg_key *k;

	fprintf(stderr, "usage: " PROG " [-dhnv] [-f file] [key=value ...]\n"
	    "  -f file  YAML mapping of the keys below\n"
	    "  -n       print the normalized configuration and exit\n"
	    "  -v       verbose (debug) logging\n"
	    "keys:\n");
	for (k = cfg_keys; k->name != NULL; k++)
		fprintf(stderr, "  %-22s %s\n", k->name, k->help);
}

static int
load_file(struct dp_cfg *cfg, const char *path, struct gs_error *err)
{
	struct gs_ynode *root = NULL;
	int rv;

	if (gs_yaml_load_file(path, &root, err) == -1)
		return -1;
	rv = gs_cfg_apply_yaml(cfg_keys, cfg, root, path, NULL, NULL, err);
	gs_ynode_free(root);
	return rv;
}

static int
finish_cfg(struct dp_cfg *cfg, struct gs_error *err)
{
	const char *nn;
	uint64_t uid;

	if (gs_dp_resource_check(cfg->resource, err) == -1)
		return -1;
	if (cfg->agent_socket[0] != '/')
		return gs_error_set(err, GS_ECONFIG, "agent_socket: must be "
		    "an absolute path");
	if (cfg->preload_source[0] != '\0' && cfg->preload_source[0] != '/')
		return gs_error_set(err, GS_ECONFIG, "preload_source: must be "
		    "an absolute path (or empty)");
	if (cfg->kubelet_socket[0] == '\0' &&
	    (size_t)snprintf(cfg->kubelet_socket, sizeof(cfg->kubelet_socket),
	    "%s/kubelet.sock", cfg->plugin_dir) >= sizeof(cfg->kubelet_socket))
		return gs_error_set(err, GS_ECONFIG, "plugin_dir: too long");
	if (strcmp(cfg->owner, "any") == 0) {
		cfg->owner_any = 1;
		cfg->owner_uid = 0;
	} else if (gs_cfg_parse_uint(cfg->owner, &uid) == -1 ||
	    uid >= UINT32_MAX) {
		return gs_error_set(err, GS_ECONFIG, "owner_uid: '%s' is not "
		    "a uid (0..%u) or any", cfg->owner, UINT32_MAX - 1);
	} else {
		cfg->owner_uid = (uint32_t)uid;
		snprintf(cfg->owner, sizeof(cfg->owner), "%u",
		    cfg->owner_uid);
	}
	if (cfg->node_name[0] == '\0') {
		nn = getenv("NODE_NAME");
		if (nn != NULL && *nn != '\0')
			snprintf(cfg->node_name, sizeof(cfg->node_name), "%s",
			    nn);
		else if (gethostname(cfg->node_name,
		    sizeof(cfg->node_name) - 1) == -1)
			return gs_error_errno(err, GS_ECONFIG, "gethostname");
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct plugin p;
	struct gs_dp_grpc_opts go;
	struct gs_dp_handlers h;
	struct gs_error err;
	struct sigaction sa;
	const char *file = NULL;
	int ch, print = 0, verbose = 0, rv = 1;

	memset(&p, 0, sizeof(p));
	gs_dp_state_init(&p.st);
	log_init(PROG, GS_LOG_STDERR, NULL, 0);
	if (gs_cfg_defaults(cfg_keys, &p.cfg, &err) == -1)
		fatalx("defaults: %s", err.msg);
	while ((ch = getopt(argc, argv, "df:hnv")) != -1) {
		switch (ch) {
		case 'd':	/* foreground: the plugin always is */
			break;
		case 'f':
			file = optarg;
			break;
		case 'n':
			print = 1;
			break;
		case 'v':
			verbose++;
			break;
		default:
			usage();
			return ch == 'h' ? 0 : 2;
		}
	}
	if (file != NULL && load_file(&p.cfg, file, &err) == -1) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return 2;
	}
	if (gs_cfg_parse_args(cfg_keys, &p.cfg, argc - optind, argv + optind,
	    &err) == -1 || finish_cfg(&p.cfg, &err) == -1) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return 2;
	}
	if (print) {
		gs_cfg_print(cfg_keys, &p.cfg, GS_CFG_YAML, NULL, stdout);
		return 0;
	}
	log_setverbose(verbose);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	memset(&go, 0, sizeof(go));
	go.plugin_dir = p.cfg.plugin_dir;
	go.kubelet_socket = p.cfg.kubelet_socket;
	go.podres_socket = p.cfg.podresources_socket;
	go.resource = p.cfg.resource;
	go.endpoint_prefix = "gshare";
	go.tick_ms = to_ms(p.cfg.tick);
	go.call_timeout_ms = 5000;
	go.retry_ms = 500;
	memset(&h, 0, sizeof(h));
	h.ctx = &p;
	h.preferred = h_preferred;
	h.allocate = h_allocate;
	h.tick = h_tick;
	h.pods = h_pods;
	h.registered = h_registered;
	if (gs_dp_grpc_new(&go, &h, &p.grpc, &err) == -1) {
		log_warnx("%s", err.msg);
		goto out;
	}
	if (p.cfg.memory_resource[0] != '\0') {
		go.resource = p.cfg.memory_resource;
		go.endpoint_prefix = "gshare-mem";
		go.prestart_required = 1;
		go.no_preferred = 1;
		memset(&h, 0, sizeof(h));
		h.ctx = &p;
		h.preferred = h_mem_preferred;
		h.allocate = h_mem_allocate;
		h.prestart = h_mem_prestart;
		if (gs_dp_grpc_new(&go, &h, &p.mgrpc, &err) == -1) {
			log_warnx("%s", err.msg);
			goto out;
		}
	}
	log_info("resource %s%s%s, agent %s, node %s", p.cfg.resource,
	    p.mgrpc != NULL ? " and " : "", p.cfg.memory_resource,
	    p.cfg.agent_socket, p.cfg.node_name);
	preload_install(&p);
	if (p.mgrpc == NULL) {
		if (gs_dp_grpc_run(p.grpc, &stop_flag, &err) == -1)
			log_warnx("%s", err.msg);
		else
			rv = 0;
	} else {
		/* both on this thread: the loop waits on the shares'
		 * queue (their Allocate is answered at once) and takes
		 * what is ready on the memory side's between waits, at
		 * most half a tick late (one gpu-mem call per container) */
		while (!stop_flag)
			if (gs_dp_grpc_step(p.grpc, (unsigned)to_ms(
			    p.cfg.tick) / 2 + 1, &err) == -1 ||
			    gs_dp_grpc_step(p.mgrpc, 0, &err) == -1)
				break;
		if (stop_flag)
			rv = 0;
		else
			log_warnx("%s", err.msg);
	}
	log_info("shutting down");
out:
	gs_dp_grpc_free(p.mgrpc);
	gs_dp_grpc_free(p.grpc);
	free(p.mem_gib);
	gs_client_free(p.agent);
	gs_dp_state_clear(&p.st);
	freed_clear(&p);
	free(p.gpus);
	log_close();
	return rv;
}
