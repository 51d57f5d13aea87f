/*
 * dp_logic.c — device IDs, device list, preferred allocation, Allocate
 * checks and the container environment (see dp_logic.h).
 *
 * Pure functions over caller data; the only allocation is the device
 * list.  Request sizes are bounded by the kubelet (at most the number of
 * advertised devices), so the quadratic loops below stay small: 100 IDs
 * per GPU.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_logic.h"

#define ID_SEP "::"

static int
dns_label_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Lowercase DNS subdomain: labels of [a-z0-9-], alphanumeric at both ends,
 * joined by dots, <= 253 chars. */
static int
dns_subdomain_ok(const char *s, size_t len)
{
	size_t i, lab = 0;

	if (len == 0 || len > 253)
		return 0;
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '.') {
			if (lab == 0 || s[i - 1] == '-')
				return 0;
			lab = 0;
			continue;
		}
		if (!dns_label_char(c))
			return 0;
		if (lab == 0 && c == '-')
			return 0;
		if (++lab > 63)
			return 0;
	}
	return lab != 0 && s[len - 1] != '-';
}

int
gs_dp_resource_check(const char *name, struct gs_error *err)
{
	const char *slash;
	size_t dlen, nlen, i;

	if (name == NULL || *name == '\0')
		return gs_error_set(err, GS_EINVAL, "empty resource name");
	slash = strchr(name, '/');
	if (slash == NULL || strchr(slash + 1, '/') != NULL)
		return gs_error_set(err, GS_EINVAL,
		    "resource name \"%s\" is not of the form domain/name",
		    name);
	dlen = (size_t)(slash - name);
	nlen = strlen(slash + 1);
	if (!dns_subdomain_ok(name, dlen))
		return gs_error_set(err, GS_EINVAL,
		    "resource name \"%s\": domain is not a lowercase DNS "
		    "subdomain", name);
	if ((dlen == 13 && strncmp(name, "kubernetes.io", 13) == 0) ||
	    (dlen > 14 &&
	     strncmp(name + dlen - 14, ".kubernetes.io", 14) == 0))
		return gs_error_set(err, GS_EINVAL,
		    "resource name \"%s\": the kubernetes.io domain is "
		    "reserved", name);
	if (nlen == 0 || nlen > 63)
		return gs_error_set(err, GS_EINVAL,
		    "resource name \"%s\": name part must be 1..63 chars",
		    name);
	for (i = 0; i < nlen; i++) {
		int c = (unsigned char)slash[1 + i];
		int alnum = isalnum(c);

		if (!alnum && c != '-' && c != '_' && c != '.')
			return gs_error_set(err, GS_EINVAL,
			    "resource name \"%s\": invalid character '%c'",
			    name, c);
		if ((i == 0 || i == nlen - 1) && !alnum)
			return gs_error_set(err, GS_EINVAL,
			    "resource name \"%s\": name must start and end "
			    "with a letter or digit", name);
	}
	return 0;
}

int
gs_dp_device_id(char *buf, size_t len, const char *uuid, unsigned n,
		struct gs_error *err)
{
	int w;

	if (uuid == NULL || *uuid == '\0')
		return gs_error_set(err, GS_EINVAL, "GPU without a UUID");
	w = snprintf(buf, len, "%s" ID_SEP "%u", uuid, n);
	if (w < 0 || (size_t)w >= len || w > GS_DP_ID_MAX - 1)
		return gs_error_set(err, GS_EINVAL,
		    "device ID for GPU %s would exceed %d characters", uuid,
		    GS_DP_ID_MAX - 1);
	return 0;
}

int
gs_dp_device_id_parse(const char *id, char uuid[GS_UUID_MAX], unsigned *n,
		      struct gs_error *err)
{
	const char *sep, *p;
	unsigned long v = 0;
	size_t ulen;

	if (id == NULL || *id == '\0')
		return gs_error_set(err, GS_EINVAL, "empty device ID");
	if (strlen(id) > GS_DP_ID_MAX - 1)
		return gs_error_set(err, GS_EINVAL,
		    "device ID longer than %d characters", GS_DP_ID_MAX - 1);
	sep = strstr(id, ID_SEP);
	if (sep == NULL)
		return gs_error_set(err, GS_EINVAL,
		    "device ID \"%s\" is not <GPU-UUID>::<n>", id);
	ulen = (size_t)(sep - id);
	if (ulen == 0 || ulen >= GS_UUID_MAX)
		return gs_error_set(err, GS_EINVAL,
		    "device ID \"%s\": bad GPU UUID part", id);
	p = sep + strlen(ID_SEP);
	if (*p == '\0')
		return gs_error_set(err, GS_EINVAL,
		    "device ID \"%s\": missing share number", id);
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return gs_error_set(err, GS_EINVAL,
			    "device ID \"%s\": share number is not a number",
			    id);
		v = v * 10 + (unsigned long)(*p - '0');
		if (v >= GS_SHARES_PER_GPU)
			return gs_error_set(err, GS_EINVAL,
			    "device ID \"%s\": share number out of range "
			    "0..%d", id, GS_SHARES_PER_GPU - 1);
	}
	memcpy(uuid, id, ulen);
	uuid[ulen] = '\0';
	*n = (unsigned)v;
	return 0;
}

int
gs_dp_devices_build(const struct gs_dp_gpu *gpus, size_t ngpus, int agent_up,
		    struct gs_dp_device **out, size_t *n, struct gs_error *err)
{
	struct gs_dp_device *d = NULL;
	size_t i, k = 0;
	unsigned s;

	if (ngpus == 0) {
		*out = NULL;
		*n = 0;
		return 0;
	}
	d = calloc(ngpus * GS_SHARES_PER_GPU, sizeof(*d));
	if (d == NULL)
		return gs_error_set(err, GS_ENOMEM,
		    "device list: out of memory");
	for (i = 0; i < ngpus; i++) {
		for (s = 0; s < GS_SHARES_PER_GPU; s++, k++) {
			if (gs_dp_device_id(d[k].id, sizeof(d[k].id),
			    gpus[i].uuid, s, err) == -1)
				goto out_free;
			d[k].healthy = agent_up && gpus[i].healthy;
			d[k].gpu = i;
		}
	}
	*out = d;
	*n = k;
	return 0;

out_free:
	free(d);
	return -1;
}

/* A parsed candidate for the preferred allocation. */
struct cand {
	const char *id;
	char uuid[GS_UUID_MAX];
	unsigned n;
	int must;
	int taken;
};

/* Distinct GPUs of the candidates, with how many candidates each has. */
struct gpu_count {
	const char *uuid;
	size_t avail;
	size_t must;
};

static size_t
gpu_slot(struct gpu_count *g, size_t *ng, const char *uuid)
{
	size_t i;

	for (i = 0; i < *ng; i++)
		if (strcmp(g[i].uuid, uuid) == 0)
			return i;
	g[*ng].uuid = uuid;
	g[*ng].avail = 0;
	g[*ng].must = 0;
	return (*ng)++;
}

/* Take up to want not-yet-taken candidates on uuid (NULL: any GPU) in
 * ascending share number; returns how many were taken. */
static size_t
take_from(struct cand *c, size_t nc, const char *uuid, size_t want,
	  const char **out, size_t *nout)
{
	size_t got = 0;

	while (got < want) {
		size_t i, best = nc;

		for (i = 0; i < nc; i++) {
			if (c[i].taken)
				continue;
			if (uuid != NULL && strcmp(c[i].uuid, uuid) != 0)
				continue;
			if (best == nc || c[i].n < c[best].n)
				best = i;
		}
		if (best == nc)
			break;
		c[best].taken = 1;
		out[(*nout)++] = c[best].id;
		got++;
	}
	return got;
}

int
gs_dp_preferred(const char *const *avail, size_t navail,
		const char *const *must, size_t nmust, size_t size,
		const char **out, struct gs_error *err)
{
	struct cand *c = NULL;
	struct gpu_count *g = NULL;
	size_t nc = 0, ng = 0, nout = 0, i, j, slot;
	const char *target = NULL;
	int rv = -1;

	if (size == 0)
		return gs_error_set(err, GS_EINVAL,
		    "preferred allocation of size 0");
	if (nmust > size)
		return gs_error_set(err, GS_EINVAL,
		    "preferred allocation: %zu must-include IDs exceed size "
		    "%zu", nmust, size);
	c = calloc(navail + nmust + 1, sizeof(*c));
	g = calloc(navail + nmust + 1, sizeof(*g));
	if (c == NULL || g == NULL) {
		gs_error_set(err, GS_ENOMEM, "preferred allocation: out of "
		    "memory");
		goto out;
	}
	/* must IDs first, then available IDs not already listed. */
	for (i = 0; i < nmust + navail; i++) {
		const char *id = i < nmust ? must[i] : avail[i - nmust];
		int dup = 0;

		for (j = 0; j < nc; j++)
			if (strcmp(c[j].id, id) == 0)
				dup = 1;
		if (dup)
			continue;
		if (gs_dp_device_id_parse(id, c[nc].uuid, &c[nc].n, err) == -1)
			goto out;
		c[nc].id = id;
		c[nc].must = i < nmust;
		slot = gpu_slot(g, &ng, c[nc].uuid);
		g[slot].avail++;
		if (c[nc].must)
			g[slot].must++;
		nc++;
	}
	if (nc < size) {
		gs_error_set(err, GS_EINVAL, "preferred allocation: %zu IDs "
		    "asked, only %zu available", size, nc);
		goto out;
	}
	/* The must IDs go in first, whatever GPU they are on. */
	for (i = 0; i < nc; i++) {
		if (c[i].must) {
			c[i].taken = 1;
			out[nout++] = c[i].id;
		}
	}
	/* Pick one GPU: the must IDs' GPU if they name exactly one and it
	 * fits, else the tightest GPU that fits. */
	for (i = 0; i < ng; i++) {
		if (g[i].must == 0)
			continue;
		if (target != NULL) {	/* must IDs span GPUs */
			target = NULL;
			goto fill_any;
		}
		target = g[i].avail >= size ? g[i].uuid : NULL;
		if (target == NULL)
			goto fill_any;
	}
	if (target == NULL) {
		size_t best = ng;

		for (i = 0; i < ng; i++)
			if (g[i].avail >= size &&
			    (best == ng || g[i].avail < g[best].avail))
				best = i;
		if (best != ng)
			target = g[best].uuid;
	}
	if (target != NULL) {
		take_from(c, nc, target, size - nout, out, &nout);
		rv = 0;
		goto out;
	}

fill_any:
	/* No single GPU holds it: GPUs with the most room first. */
	while (nout < size) {
		size_t best = ng, left;

		for (i = 0; i < ng; i++) {
			size_t free_here = 0;

			for (j = 0; j < nc; j++)
				if (!c[j].taken &&
				    strcmp(c[j].uuid, g[i].uuid) == 0)
					free_here++;
			g[i].avail = free_here;
			if (free_here > 0 &&
			    (best == ng || free_here > g[best].avail))
				best = i;
		}
		if (best == ng)
			break;
		left = size - nout;
		take_from(c, nc, g[best].uuid, left, out, &nout);
	}
	rv = 0;

out:
	free(c);
	free(g);
	return rv;
}

static int
cmp_group(const void *a, const void *b)
{
	const struct gs_dp_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->gpu < y->gpu ? -1 : x->gpu > y->gpu;
}

int
gs_dp_allocate_check(const struct gs_dp_gpu *gpus, size_t ngpus,
		     const char *const *ids, size_t nids, int allow_span,
		     struct gs_dp_group *groups, struct gs_error *err)
{
	size_t i, j, ng = 0;
	char uuid[GS_UUID_MAX];
	unsigned n;

	if (nids == 0)
		return gs_error_set(err, GS_EINVAL,
		    "Allocate: the container request names no device IDs");
	if (nids > ngpus * GS_SHARES_PER_GPU)
		return gs_error_set(err, GS_EINVAL,
		    "Allocate: %zu device IDs, more than the %zu advertised",
		    nids, ngpus * GS_SHARES_PER_GPU);
	for (i = 0; i < nids; i++) {
		size_t gpu;

		if (gs_dp_device_id_parse(ids[i], uuid, &n, err) == -1)
			return -1;
		for (gpu = 0; gpu < ngpus; gpu++)
			if (strcmp(gpus[gpu].uuid, uuid) == 0)
				break;
		if (gpu == ngpus)
			return gs_error_set(err, GS_ENOENT,
			    "Allocate: device ID \"%s\" names GPU %s, which "
			    "this node does not have", ids[i], uuid);
		for (j = 0; j < i; j++)
			if (strcmp(ids[j], ids[i]) == 0)
				return gs_error_set(err, GS_EINVAL,
				    "Allocate: device ID \"%s\" named twice",
				    ids[i]);
		for (j = 0; j < ng; j++)
			if (groups[j].gpu == gpu)
				break;
		if (j == ng) {
			groups[ng].gpu = gpu;
			groups[ng].count = 0;
			ng++;
		}
		groups[j].count++;
	}
	if (ng > 1 && !allow_span)
		return gs_error_set(err, GS_EINVAL,
		    "Allocate: the request spans %zu GPUs (%s and %s): no "
		    "single GPU of this node had %zu free shares, and one "
		    "container's shares must come from one GPU (set "
		    "allow_span to permit spanning; docs/kubernetes.md, When a "
		    "request does not fit on one GPU)", ng,
		    gpus[groups[0].gpu].uuid, gpus[groups[1].gpu].uuid, nids);
	qsort(groups, ng, sizeof(*groups), cmp_group);
	return (int)ng;
}

static int
env_set(struct gs_dp_container *c, const char *key, const char *value,
	struct gs_error *err)
{
	struct gs_dp_env *e;

	if (c->nenv == GS_DP_ENV_MAX)
		return gs_error_set(err, GS_EINVAL, "too many variables");
	e = &c->env[c->nenv];
	if (strlen(key) >= sizeof(e->key) ||
	    strlen(value) >= sizeof(e->value))
		return gs_error_set(err, GS_EINVAL,
		    "environment value for %s too long", key);
	strcpy(e->key, key);
	strcpy(e->value, value);
	c->nenv++;
	return 0;
}

/* Append s (with a comma before all but the first) to buf. */
static int
list_add(char *buf, size_t len, const char *s, struct gs_error *err)
{
	size_t used = strlen(buf);
	int w;

	w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", s);
	if (w < 0 || (size_t)w >= len - used)
		return gs_error_set(err, GS_EINVAL, "value list too long");
	return 0;
}

int
gs_dp_container_build(const char *agent_socket, const char *container_dir,
		      const uint64_t *alloc_ids, const char *const *uuids,
		      size_t n, struct gs_dp_container *out,
		      struct gs_error *err)
{
	struct gs_dp_container c;
	char num[24], devs[GS_DP_PATH_MAX] = "", allocs[GS_DP_PATH_MAX] = "";
	char sock[GS_DP_PATH_MAX];
	const char *slash, *base;
	size_t i, j, dlen;
	int w;

	memset(&c, 0, sizeof(c));
	if (n == 0)
		return gs_error_set(err, GS_EINVAL, "no allocation");
	if (agent_socket == NULL || agent_socket[0] != '/')
		return gs_error_set(err, GS_EINVAL,
		    "agent socket must be an absolute path");
	slash = strrchr(agent_socket, '/');
	base = slash + 1;
	dlen = slash == agent_socket ? 1 : (size_t)(slash - agent_socket);
	if (*base == '\0' || dlen >= sizeof(c.mount_host))
		return gs_error_set(err, GS_EINVAL,
		    "agent socket path \"%s\" has no usable directory",
		    agent_socket);
	memcpy(c.mount_host, agent_socket, dlen);
	c.mount_host[dlen] = '\0';
	if (container_dir == NULL || *container_dir == '\0')
		container_dir = c.mount_host;
	if (container_dir[0] != '/' ||
	    strlen(container_dir) >= sizeof(c.mount_container))
		return gs_error_set(err, GS_EINVAL,
		    "container socket directory must be an absolute path");
	strcpy(c.mount_container, container_dir);
	c.mount_read_only = 1;
	w = snprintf(sock, sizeof(sock), "%s%s%s", container_dir,
	    container_dir[strlen(container_dir) - 1] == '/' ? "" : "/", base);
	if (w < 0 || (size_t)w >= sizeof(sock))
		return gs_error_set(err, GS_EINVAL, "socket path too long");
	for (i = 0; i < n; i++) {
		int seen = 0;

		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)alloc_ids[i]);
		if (list_add(allocs, sizeof(allocs), num, err) == -1)
			return -1;
		for (j = 0; j < i; j++)
			if (strcmp(uuids[j], uuids[i]) == 0)
				seen = 1;
		if (!seen && list_add(devs, sizeof(devs), uuids[i], err) == -1)
			return -1;
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)alloc_ids[0]);
	if (env_set(&c, GS_ENV_SOCKET, sock, err) == -1 ||
	    env_set(&c, GS_ENV_ALLOC, num, err) == -1 ||
	    (n > 1 && env_set(&c, "GSHARE_ALLOCS", allocs, err) == -1) ||
	    env_set(&c, "NVIDIA_VISIBLE_DEVICES", devs, err) == -1 ||
	    env_set(&c, "CUDA_VISIBLE_DEVICES", devs, err) == -1)
		return -1;
	*out = c;
	return 0;
}

int
gs_dp_container_preload(struct gs_dp_container *c, const char *file,
			struct gs_error *err)
{
	char path[GS_DP_PATH_MAX];
	size_t n = strlen(c->mount_container);
	int w;

	if (file == NULL || *file == '\0' || strchr(file, '/') != NULL ||
	    strcmp(file, ".") == 0 || strcmp(file, "..") == 0)
		return gs_error_set(err, GS_EINVAL,
		    "preload \"%s\": expected a file name in the agent socket "
		    "directory", file ? file : "");
	w = snprintf(path, sizeof(path), "%s%s%s", c->mount_container,
	    n > 0 && c->mount_container[n - 1] == '/' ? "" : "/", file);
	if (w < 0 || (size_t)w >= sizeof(path))
		return gs_error_set(err, GS_EINVAL, "preload path too long");
	return env_set(c, "LD_PRELOAD", path, err);
}

int
gs_dp_container_mps(struct gs_dp_container *c, const char *pipe,
		    uint32_t pct, struct gs_error *err)
{
	char num[16];
	const char *p;
	size_t l;

	if (pipe == NULL || pipe[0] != '/' ||
	    strlen(pipe) >= sizeof(c->mps_mount))
		return gs_error_set(err, GS_EINVAL,
		    "MPS pipe directory \"%s\": expected an absolute path",
		    pipe ? pipe : "");
	for (p = pipe; *p != '\0'; p += l) {
		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if ((l == 1 && p[0] == '.') ||
		    (l == 2 && p[0] == '.' && p[1] == '.'))
			return gs_error_set(err, GS_EINVAL, "MPS pipe "
			    "directory \"%s\": \".\" or \"..\" in it", pipe);
	}
	if (pct > 100)
		return gs_error_set(err, GS_EINVAL,
		    "MPS thread percentage %u above 100", pct);
	if (env_set(c, GS_ENV_MPS_PIPE, pipe, err) == -1)
		return -1;
	if (pct > 0) {
		snprintf(num, sizeof(num), "%u", pct);
		if (env_set(c, GS_ENV_MPS_PCT, num, err) == -1) {
			c->nenv--;
			return -1;
		}
	}
	strcpy(c->mps_mount, pipe);
	return 0;
}
