/*
 * gs_spankopt.c — pure helpers of the SPANK plugin (see gs_spankopt.h).
 *
 * No Slurm header here: the plugin turns Slurm's data into the plain
 * strings and integers these functions take.  Every parser bounds its
 * input and reports one-line errors; nothing prints.
 */
#include "gs_spankopt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gs_config.h"
#include "gs_paths.h"
#include "gs_proto.h"

static const char *const down_names[] = { "fail", "unmanaged", NULL };

const struct gs_cfg_key gs_spank_conf_keys[] = {
	GS_CFG_KEY_STRING("agent", struct gs_spank_conf, agent, 1,
			  GS_DEFAULT_SOCKET, "agent socket path"),
	GS_CFG_KEY_STRING("required_gres", struct gs_spank_conf, gres, 1,
			  "gshare",
			  "name of the gres that asks for a share"),
	GS_CFG_KEY_DURATION("timeout", struct gs_spank_conf, timeout_ns,
			    10 * GS_NS_PER_MS, 60 * GS_NS_PER_S, "2s",
			    "bound on connecting to the agent and on each "
			    "request"),
	GS_CFG_KEY_ENUM("on_agent_down", struct gs_spank_conf, on_agent_down,
			down_names, "fail",
			"fail: fail the step; unmanaged: warn and run it "
			"without a share"),
	GS_CFG_KEY_STRING("state_dir", struct gs_spank_conf, state_dir, 1,
			  "/run/gshare/spank",
			  "where steps leave their usage for the job epilog"),
	GS_CFG_KEY_STRING("spool_dir", struct gs_spank_conf, spool_dir, 1,
			  "/var/spool/gshare/slurm",
			  "where job totals wait for slurmdbd (persistent)"),
	GS_CFG_KEY_BOOL("admin_comment", struct gs_spank_conf, admin_comment,
			"yes", "write the job's gshare totals to AdminComment"),
	GS_CFG_KEY_STRING("sacct", struct gs_spank_conf, sacct, 1,
			  "/usr/bin/sacct", "sacct, to read AdminComment"),
	GS_CFG_KEY_STRING("sacctmgr", struct gs_spank_conf, sacctmgr, 1,
			  "/usr/bin/sacctmgr",
			  "sacctmgr, to write AdminComment"),
	GS_CFG_KEY_UINT("max_user_weight", struct gs_spank_conf,
			max_user_weight, 0, GS_SPANK_WEIGHT_MAX, "0",
			"largest --gshare-weight a user may ask for (0: the "
			"job's shares; only lower weights)"),
	GS_CFG_KEY_STRING("preload", struct gs_spank_conf, preload, 1,
			  gs_gate_lib,
			  "launch gate preloaded into every step (unmodified "
			  "CUDA applications get their share); no: none"),
	GS_CFG_KEY_DURATION("late_epilog", struct gs_spank_conf,
			    late_epilog_ns, 0, 30 * 24 * 3600 * GS_NS_PER_S,
			    "5m",
			    "a job that ended this long ago and whose epilog "
			    "left its allocation open on the node (ran "
			    "without the plugin, or the agent was down) is "
			    "closed and its totals written by the next job "
			    "epilog there; 0: never"),
	GS_CFG_KEY_END,
};

int gs_spank_conf_parse(struct gs_spank_conf *conf, int argc,
			char *const argv[], struct gs_error *err)
{
	struct gs_spank_conf c;
	struct gs_error perr;
	char probe[GS_SPANK_PATH_MAX];

	memset(&c, 0, sizeof(c));
	if (gs_cfg_defaults(gs_spank_conf_keys, &c, err) < 0)
		return -1;
	if (gs_cfg_parse_args(gs_spank_conf_keys, &c, argc, argv, err) < 0)
		return -1;
	if (c.agent[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "agent: '%s' is not an absolute path",
				    c.agent);
	if (gs_spank_expand_path(c.agent, "node", probe, sizeof(probe),
				 &perr) < 0)
		return gs_error_set(err, GS_ECONFIG, "agent: %s", perr.msg);
	if (c.state_dir[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "state_dir: '%s' is not an absolute path",
				    c.state_dir);
	if (c.spool_dir[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "spool_dir: '%s' is not an absolute path",
				    c.spool_dir);
	if (c.sacct[0] != '/' || c.sacctmgr[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: '%s' is not an absolute path",
				    c.sacct[0] != '/' ? "sacct" : "sacctmgr",
				    c.sacct[0] != '/' ? c.sacct : c.sacctmgr);
	*conf = c;
	return 0;
}

int gs_spank_expand_path(const char *tmpl, const char *node, char *out,
			 size_t len, struct gs_error *err)
{
	size_t used = 0, n;
	const char *p, *add;

	for (p = tmpl; *p != '\0'; p++) {
		char one[2] = { *p, '\0' };

		add = one;
		if (*p == '%') {
			if (p[1] == 'n')
				add = node;
			else if (p[1] == '%')
				add = "%";
			else
				return gs_error_set(err, GS_EINVAL,
						    "'%s': unknown '%%%c' "
						    "(only %%n and %%%%)",
						    tmpl, p[1] ? p[1] : ' ');
			p++;
		}
		n = strlen(add);
		if (used + n + 1 > len)
			return gs_error_set(err, GS_EINVAL,
					    "'%s' for node '%s' is too long",
					    tmpl, node);
		memcpy(out + used, add, n);
		used += n;
	}
	if (len == 0)
		return gs_error_set(err, GS_EINVAL, "no room");
	out[used] = '\0';
	return 0;
}

void gs_spank_opts_init(struct gs_spank_opts *o)
{
	o->weight = 0;
	o->priority = GS_PRIO_NORMAL;
	o->mode = GS_MODE_TIME;
	o->mem = 0;
	o->no_preload = 0;
}

/* A decimal number made of digits only (no sign, no spaces), <= max. */
static int parse_small_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

int gs_spank_opt_weight(const char *val, struct gs_spank_opts *o,
			struct gs_error *err)
{
	uint64_t v;

	if (parse_small_uint(val, GS_SPANK_WEIGHT_MAX, &v) < 0 || v == 0)
		return gs_error_set(err, GS_EINVAL,
				    "--gshare-weight=%s: expected a whole "
				    "number from 1 to %u",
				    val ? val : "", GS_SPANK_WEIGHT_MAX);
	o->weight = (uint32_t)v;
	return 0;
}

int gs_spank_weight_allowed(const struct gs_spank_opts *o, uint32_t shares,
			    uint32_t max_user_weight, struct gs_error *err)
{
	uint32_t lim = shares > max_user_weight ? shares : max_user_weight;

	if (o->weight == 0 || o->weight <= lim)
		return 0;
	return gs_error_set(err, GS_EPERM,
			    "--gshare-weight=%u: above %u (%s); users may "
			    "only lower their weight, raising it is for "
			    "administrators (plugstack max_user_weight, or "
			    "gsharectl set-weight as root)", o->weight, lim,
			    lim == shares ? "the job's shares" :
			    "max_user_weight");
}

int gs_spank_opt_priority(const char *val, struct gs_spank_opts *o,
			  struct gs_error *err)
{
	uint32_t p;

	if (val == NULL || gs_priority_parse(val, &p) < 0)
		return gs_error_set(err, GS_EINVAL,
				    "--gshare-priority=%s: expected low, "
				    "normal or high",
				    val ? val : "");
	o->priority = p;
	return 0;
}

int gs_spank_opt_mode(const char *val, struct gs_spank_opts *o,
		      struct gs_error *err)
{
	uint32_t m;

	if (val == NULL || gs_mode_parse(val, &m) < 0)
		return gs_error_set(err, GS_EINVAL,
				    "--gshare-mode=%s: expected time or space",
				    val ? val : "");
	o->mode = m;
	return 0;
}

int gs_spank_opt_mem(const char *val, struct gs_spank_opts *o,
		     struct gs_error *err)
{
	uint64_t v;

	if (val == NULL || gs_cfg_parse_size(val, &v) < 0 ||
	    v < (1ull << 20) || v > (16ull << 40))
		return gs_error_set(err, GS_EINVAL,
				    "--gshare-mem=%s: expected a size from 1M "
				    "to 16T, such as 20G or 512M (units K, M, "
				    "G, T: powers of 1024)", val ? val : "");
	o->mem = v;
	return 0;
}

int gs_spank_opt_preload(const char *val, struct gs_spank_opts *o,
			 struct gs_error *err)
{
	if (val != NULL && strcmp(val, "yes") == 0)
		o->no_preload = 0;
	else if (val != NULL && strcmp(val, "no") == 0)
		o->no_preload = 1;
	else
		return gs_error_set(err, GS_EINVAL,
				    "--gshare-preload=%s: expected yes or no",
				    val ? val : "");
	return 0;
}

int gs_preload_join(const char *old, const char *lib, char *out, size_t len,
		    struct gs_error *err)
{
	size_t n = strlen(lib), i = 0;
	int r;

	if (old == NULL)
		old = "";
	/* already there (an entry equal to lib): leave it as it is */
	while (old[i] != '\0') {
		size_t j = i;

		while (old[j] != '\0' && old[j] != ' ' && old[j] != ':')
			j++;
		if (j - i == n && strncmp(old + i, lib, n) == 0) {
			r = snprintf(out, len, "%s", old);
			goto done;
		}
		i = old[j] != '\0' ? j + 1 : j;
	}
	r = old[0] != '\0' ? snprintf(out, len, "%s:%s", lib, old) :
		snprintf(out, len, "%s", lib);
done:
	if (r < 0 || (size_t)r >= len)
		return gs_error_set(err, GS_EINVAL,
				    "LD_PRELOAD too long with %s", lib);
	return 0;
}

/* Parse a gres count: digits with an optional k/m/g suffix. */
static int parse_count(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	size_t i;

	if (n == 0)
		return -1;
	switch (s[n - 1]) {
	case 'k': case 'K': mult = 1ull << 10; n--; break;
	case 'm': case 'M': mult = 1ull << 20; n--; break;
	case 'g': case 'G': mult = 1ull << 30; n--; break;
	default: break;
	}
	if (n == 0 || n > 12)
		return -1;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX / mult)
		return -1;	/* no gres count is that large */
	*out = v * mult;
	return 0;
}

/*
 * One entry, [gres(:|/)]name[:type][(:|=)count].  Sets *match when the
 * entry is for `name`; then *count holds its count.  Returns -1 only for
 * a malformed entry that names `name`.
 */
static int gres_entry(const char *e, size_t n, const char *name, int *match,
		      uint64_t *count)
{
	size_t nl = strlen(name), i, last;
	const char *rest;
	size_t rn;

	*match = 0;
	if (n >= 5 && (strncmp(e, "gres:", 5) == 0 ||
		       strncmp(e, "gres/", 5) == 0)) {
		e += 5;
		n -= 5;
	}
	if (n < nl || strncmp(e, name, nl) != 0)
		return 0;
	if (n > nl && e[nl] != ':' && e[nl] != '=')
		return 0;	/* a longer name, e.g. "gsharex" */
	*match = 1;
	if (n == nl) {
		*count = 1;
		return 0;
	}
	rest = e + nl + 1;
	rn = n - nl - 1;
	if (rn == 0)
		return -1;
	if (e[nl] == '=')
		return parse_count(rest, rn, count);
	/* name:count or name:type:count (the count is after the last ':') */
	last = rn;
	for (i = 0; i < rn; i++)
		if (rest[i] == ':')
			last = i;
	if (last == rn) {
		/* only one field: a count, or a type with an implied 1 */
		if (parse_count(rest, rn, count) == 0)
			return 0;
		if (isdigit((unsigned char)rest[0]))
			return -1;
		*count = 1;
		return 0;
	}
	if (last == 0)
		return -1;	/* empty type */
	return parse_count(rest + last + 1, rn - last - 1, count);
}

int gs_gres_count(const char *tres, const char *name, uint64_t *count,
		  struct gs_error *err)
{
	const char *p, *end;
	uint64_t total = 0, c = 0;
	int found = 0, match;

	if (name == NULL || *name == '\0')
		return gs_error_set(err, GS_EINVAL, "empty gres name");
	if (tres == NULL)
		return 0;
	for (p = tres; *p != '\0'; p = *end ? end + 1 : end) {
		end = p + strcspn(p, ",;");
		if (end == p)
			continue;
		if (gres_entry(p, (size_t)(end - p), name, &match, &c) < 0)
			return gs_error_set(err, GS_EINVAL,
					    "malformed gres entry '%.*s'",
					    (int)(end - p), p);
		if (!match)
			continue;
		/* typed entries of one gres add up */
		if (c > UINT32_MAX || total + c > UINT32_MAX)
			return gs_error_set(err, GS_EINVAL,
					    "gres count too large in '%.*s'",
					    (int)(end - p), p);
		total += c;
		found = 1;
	}
	if (found)
		*count = total;
	return found;
}

int gs_gres_detail_gpu(const char *detail, const char *name, int *gpu,
		       struct gs_error *err)
{
	size_t nlen;
	const char *p, *q;
	unsigned long v;
	char *end;

	if (name == NULL || *name == '\0')
		return gs_error_set(err, GS_EINVAL, "empty gres name");
	if (detail == NULL)
		return 0;
	nlen = strlen(name);
	for (p = detail; *p != '\0'; p++) {
		/* an entry starts the string or follows a ',' outside
		 * parentheses; it begins with the gres name and ':' or '(' */
		if (p != detail && p[-1] != ',')
			continue;
		if (strncmp(p, name, nlen) != 0 ||
		    (p[nlen] != ':' && p[nlen] != '('))
			continue;
		q = p + nlen + strcspn(p + nlen, "(,");
		if (*q != '(')
			return 0;	/* no index: a gres without File= */
		if (strncmp(q, "(IDX:", 5) != 0)
			return 0;
		q += 5;
		if (*q < '0' || *q > '9')
			return gs_error_set(err, GS_EINVAL,
					    "malformed gres index in '%s'",
					    detail);
		errno = 0;
		v = strtoul(q, &end, 10);
		if (errno != 0 || v > 1023 || end == q ||
		    (*end != ')' && *end != ',' && *end != '-'))
			return gs_error_set(err, GS_EINVAL,
					    "malformed gres index in '%s'",
					    detail);
		*gpu = (int)v;
		return 1;
	}
	return 0;
}

int gs_spank_array_spec_ok(const char *s)
{
	size_t a, t;

	if (s == NULL)
		return 0;
	a = strspn(s, "0123456789");
	if (a == 0 || a > 10 || s[a] != '_')
		return 0;
	t = strspn(s + a + 1, "0123456789");
	return t > 0 && t <= 10 && s[a + 1 + t] == '\0';
}

void gs_spank_step_name(uint32_t step, char *buf, size_t len)
{
	switch (step) {
	case GS_SLURM_STEP_BATCH:
		snprintf(buf, len, "batch");
		break;
	case GS_SLURM_STEP_EXTERN:
		snprintf(buf, len, "extern");
		break;
	case GS_SLURM_STEP_INTERACTIVE:
		snprintf(buf, len, "interactive");
		break;
	case GS_SLURM_STEP_PENDING:
		snprintf(buf, len, "pending");
		break;
	default:
		snprintf(buf, len, "%" PRIu32, step);
		break;
	}
}

#define RECORD_TAG "gshare-record 1 "

int gs_spank_record_format(const struct gs_spank_record *r, char *buf,
			   size_t len, struct gs_error *err)
{
	int n;

	n = snprintf(buf, len,
		     RECORD_TAG "id=%" PRIu64 " shares=%" PRIu32
		     " gpu_ns=%" PRIu64 " held_ns=%" PRIu64 "%s",
		     r->id, r->shares, r->gpu_ns, r->held_ns,
		     r->mem_max ? "" : "\n");
	if (n >= 0 && (size_t)n < len && r->mem_max)
		n += snprintf(buf + n, len - (size_t)n,
			      " mem_max=%" PRIu64 "\n", r->mem_max);
	if (n < 0 || (size_t)n >= len)
		return gs_error_set(err, GS_EINVAL, "record buffer too small");
	return n;
}

/* Parse " key=<u64>" at *p, advancing it. */
static int record_field(const char **p, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);
	uint64_t v = 0;
	const char *s = *p;
	int digits = 0;

	if (strncmp(s, key, kl) != 0 || s[kl] != '=')
		return -1;
	s += kl + 1;
	for (; isdigit((unsigned char)*s); s++, digits++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (digits == 0)
		return -1;
	if (*s == ' ')
		s++;
	else if (*s != '\n' && *s != '\0')
		return -1;
	*p = s;
	*out = v;
	return 0;
}

int gs_spank_record_parse(const char *text, struct gs_spank_record *r,
			  struct gs_error *err)
{
	struct gs_spank_record rec;
	const char *p = text;
	uint64_t shares;

	if (text == NULL || strncmp(p, RECORD_TAG, strlen(RECORD_TAG)) != 0)
		return gs_error_set(err, GS_EINVAL,
				    "not a gshare usage record");
	p += strlen(RECORD_TAG);
	if (record_field(&p, "id", &rec.id) < 0 ||
	    record_field(&p, "shares", &shares) < 0 ||
	    record_field(&p, "gpu_ns", &rec.gpu_ns) < 0 ||
	    record_field(&p, "held_ns", &rec.held_ns) < 0 ||
	    shares > UINT32_MAX)
		return gs_error_set(err, GS_EINVAL,
				    "malformed gshare usage record");
	rec.mem_max = 0;
	if (strncmp(p, "mem_max=", 8) == 0 &&
	    record_field(&p, "mem_max", &rec.mem_max) < 0)
		return gs_error_set(err, GS_EINVAL,
				    "malformed gshare usage record");
	if (*p != '\0' && strcmp(p, "\n") != 0)
		return gs_error_set(err, GS_EINVAL,
				    "malformed gshare usage record");
	rec.shares = (uint32_t)shares;
	*r = rec;
	return 0;
}

int gs_spank_job_dir(const char *state_dir, uint32_t job, const char *node,
		     char *buf, size_t len, struct gs_error *err)
{
	int n;

	if (node == NULL || *node == '\0' || strchr(node, '/') != NULL ||
	    strcmp(node, ".") == 0 || strcmp(node, "..") == 0)
		return gs_error_set(err, GS_EINVAL, "bad node name '%s'",
				    node ? node : "");
	n = snprintf(buf, len, "%s/%" PRIu32 ".%s", state_dir, job, node);
	if (n < 0 || (size_t)n >= len)
		return gs_error_set(err, GS_EINVAL, "state path too long");
	return 0;
}

void gs_spank_totals_add(struct gs_spank_totals *t,
			 const struct gs_spank_record *r)
{
	t->allocs++;
	if (r->shares > t->max_shares)
		t->max_shares = r->shares;
	t->gpu_ns += r->gpu_ns;
	t->held_ns += r->held_ns;
	if (r->mem_max > t->mem_max)
		t->mem_max = r->mem_max;
}

#define SEG_PREFIX "gshare["

int gs_spank_comment_segment(const char *node,
			     const struct gs_spank_totals *t, char *buf,
			     size_t len, struct gs_error *err)
{
	int n;

	if (node == NULL || *node == '\0' || strpbrk(node, "[];") != NULL)
		return gs_error_set(err, GS_EINVAL, "bad node name '%s'",
				    node ? node : "");
	n = snprintf(buf, len,
		     SEG_PREFIX "%s]:gpu_s=%" PRIu64 ".%03" PRIu64
		     ",held_s=%" PRIu64 ".%03" PRIu64 ",share=%" PRIu32
		     ",allocs=%" PRIu32,
		     node, t->gpu_ns / 1000000000u,
		     (t->gpu_ns / 1000000u) % 1000u, t->held_ns / 1000000000u,
		     (t->held_ns / 1000000u) % 1000u, t->max_shares,
		     t->allocs);
	if (n >= 0 && (size_t)n < len && t->mem_max)
		n += snprintf(buf + n, len - (size_t)n, ",mem_max=%" PRIu64,
			      t->mem_max);
	if (n < 0 || (size_t)n >= len)
		return gs_error_set(err, GS_EINVAL,
				    "AdminComment buffer too small");
	return n;
}

int gs_spank_comment_merge(const char *old, const char *node,
			   const char *segment, char **out,
			   struct gs_error *err)
{
	char own[GS_LABEL_MAX + 16];
	size_t olen = old ? strlen(old) : 0, cap, used = 0, n;
	const char *p, *end;
	char *res;
	int replaced = 0;

	snprintf(own, sizeof(own), SEG_PREFIX "%s]:", node);
	cap = olen + strlen(segment) + 2;
	res = malloc(cap);
	if (res == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	res[0] = '\0';
	for (p = old; p != NULL && *p != '\0'; p = *end ? end + 1 : end) {
		end = p + strcspn(p, ";");
		n = (size_t)(end - p);
		if (n == 0)
			continue;
		if (used > 0)
			res[used++] = ';';
		/* sacctmgr stores the AdminComment lower-cased: node
		 * names compare without case */
		if (n >= strlen(own) && strncasecmp(p, own, strlen(own)) == 0) {
			if (replaced) {	/* drop a duplicate of our own */
				used--;
				continue;
			}
			/* same node: swap in the new segment */
			memcpy(res + used, segment, strlen(segment));
			used += strlen(segment);
			replaced = 1;
		} else {
			memcpy(res + used, p, n);
			used += n;
		}
		res[used] = '\0';
	}
	if (!replaced) {
		if (used > 0)
			res[used++] = ';';
		memcpy(res + used, segment, strlen(segment));
		used += strlen(segment);
	}
	res[used] = '\0';
	*out = res;
	return 0;
}

/* A job spec: digits, or digits_digits. */
static int spool_job_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (n > 0 && n <= 10 && s[n] == '\0')
		return 1;
	return gs_spank_array_spec_ok(s);
}

/* A Slurm node name as the plugin uses it: no separators, no spaces. */
static int spool_node_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < sizeof(((struct gs_spank_spool *)0)->node) &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz"
			 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

static int spool_seg_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 7 && n < 256 && strncmp(s, "gshare[", 7) == 0 &&
	       strpbrk(s, " \t\n;'\"\\") == NULL;
}

int gs_spank_spool_format(const struct gs_spank_spool *r, char *buf,
			  size_t len, struct gs_error *err)
{
	int n;

	if (!spool_job_ok(r->job) || !spool_node_ok(r->node) ||
	    r->nodes == 0 || !spool_seg_ok(r->seg))
		return gs_error_set(err, GS_EINVAL, "bad spool record");
	n = snprintf(buf, len,
		     "gshare-spool 1 job=%s node=%s nodes=%" PRIu32
		     " seg=%s\n",
		     r->job, r->node, r->nodes, r->seg);
	if (n < 0 || (size_t)n >= len)
		return gs_error_set(err, GS_EINVAL,
				    "spool record does not fit");
	return n;
}

/* Copy the value of "key=" at *p up to the next space (or the end when
 * last) into out; advance *p past it. */
static int spool_field(const char **p, const char *key, int last, char *out,
		       size_t len)
{
	size_t k = strlen(key), n;

	if (strncmp(*p, key, k) != 0)
		return -1;
	*p += k;
	n = last ? strcspn(*p, "\n") : strcspn(*p, " \n");
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += n;
	if (last)
		return (**p == '\n' && (*p)[1] == '\0') || **p == '\0' ? 0
									 : -1;
	if (**p != ' ')
		return -1;
	(*p)++;
	return 0;
}

int gs_spank_spool_parse(const char *line, struct gs_spank_spool *r,
			 struct gs_error *err)
{
	const char *p = line;
	char nodes[16], *end;
	unsigned long v;

	memset(r, 0, sizeof(*r));
	if (strncmp(p, "gshare-spool 1 ", 15) != 0)
		return gs_error_set(err, GS_EINVAL, "not a spool record");
	p += 15;
	if (spool_field(&p, "job=", 0, r->job, sizeof(r->job)) < 0 ||
	    spool_field(&p, "node=", 0, r->node, sizeof(r->node)) < 0 ||
	    spool_field(&p, "nodes=", 0, nodes, sizeof(nodes)) < 0 ||
	    spool_field(&p, "seg=", 1, r->seg, sizeof(r->seg)) < 0)
		return gs_error_set(err, GS_EINVAL, "malformed spool record");
	errno = 0;
	v = strtoul(nodes, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > UINT32_MAX ||
	    nodes[0] < '0' || nodes[0] > '9')
		return gs_error_set(err, GS_EINVAL, "spool record: bad nodes");
	r->nodes = (uint32_t)v;
	if (!spool_job_ok(r->job) || !spool_node_ok(r->node) ||
	    !spool_seg_ok(r->seg))
		return gs_error_set(err, GS_EINVAL, "spool record: bad field");
	return 0;
}
