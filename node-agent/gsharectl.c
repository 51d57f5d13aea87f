/*
 * gsharectl.c — command-line control of the node agent.
 *
 *   gsharectl [-s|--socket socket] [-t|--timeout ms] status [--json]
 *   gsharectl -h|--help | -V|--version
 *   gsharectl set-weight ALLOC N
 *   gsharectl set-priority ALLOC N|low|normal|high
 *   gsharectl set-mem ALLOC SIZE|default   (root; no process attached)
 *   gsharectl drain GPU | undrain GPU
 *   gsharectl gpu-fail GPU | gpu-ok GPU     (simulated GPUs only: tests)
 *   gsharectl create --shares N [--gpu G] [--weight W] [--priority P]
 *                    [--mode time|space] [--uid U | --any-uid] [--job J]
 *                    [--step S] [--mem SIZE]
 *   gsharectl close ALLOC
 *   gsharectl ping
 *
 * The socket is -s, else $GSHARE_SOCKET, else the default.  Exit status:
 * 0 success, 1 the agent refused or failed, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_config.h"

static const char *prog = "gsharectl";

static void usage_to(FILE *f)
{
	fprintf(f,
		"usage: gsharectl [-s socket] [-t timeout_ms] command\n"
		"  -s, --socket PATH          the agent's socket\n"
		"  -t, --timeout MS           timeout of each request\n"
		"  -h, --help                 this text\n"
		"  -V, --version              version and protocol\n"
		"commands:\n"
		"  status [--json]            allocations per GPU\n"
		"  set-weight ALLOC N         change an allocation's weight\n"
		"  set-priority ALLOC P       0..31 or low|normal|high\n"
		"  set-mem ALLOC SIZE         device memory limit (e.g. 20G;\n"
		"                             default: the shares' part), root,\n"
		"                             while no process is attached\n"
		"  drain GPU | undrain GPU    stop / resume new allocations\n"
		"  gpu-fail GPU | gpu-ok GPU  inject / clear a fault "
		"(simulated GPUs only)\n"
		"  create --shares N [--gpu G] [--weight W] [--priority P]\n"
		"         [--mode time|space] [--uid U | --any-uid] [--job J]\n"
		"         [--step S] [--mem SIZE]\n"
		"  close ALLOC                close an allocation\n"
		"  ping                       check that the agent answers\n");
}

static void usage(void)
{
	usage_to(stderr);
	exit(2);
}

static int die(const struct gs_error *err)
{
	fprintf(stderr, "%s: %s\n", prog, err->msg);
	return 1;
}

static uint64_t num(const char *what, const char *s, uint64_t max)
{
	uint64_t v;

	if (gs_cfg_parse_uint(s, &v) < 0 || v > max) {
		fprintf(stderr, "%s: %s: '%s' is not a number in 0..%" PRIu64
			"\n", prog, what, s, max);
		exit(2);
	}
	return v;
}

static uint32_t prio_arg(const char *s)
{
	uint32_t p;

	if (gs_priority_parse(s, &p) == 0)
		return p;
	return (uint32_t)num("priority", s, 1000000);
}

static void fmt_sec(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%.3f", (double)ns / 1e9);
}

/* Device memory for the table: GiB with one decimal ("23.7G"), MiB
 * below 1 GiB ("512M"), "-" for none. */
static void fmt_mem(char *buf, size_t len, uint64_t b, int none_dash)
{
	if (b == 0 && none_dash)
		snprintf(buf, len, "-");
	else if (b < (1ull << 30))
		snprintf(buf, len, "%.0fM", (double)b / (1 << 20));
	else
		snprintf(buf, len, "%.1fG", (double)b / (1 << 30));
}

static void json_str(const char *s)
{
	const unsigned char *p;

	putchar('"');
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void json_labels(const struct gs_labels *l)
{
	static const char *const names[] = { "cluster", "job", "step",
					     "node", "namespace", "pod",
					     "container", "user", "account" };
	const char *vals[] = { l->cluster, l->job, l->step, l->node, l->ns,
			       l->pod, l->container, l->user, l->account };
	size_t i;

	printf("{");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		printf("%s\"%s\": ", i ? ", " : "", names[i]);
		json_str(vals[i]);
	}
	printf("}");
}

static void print_json(const struct gs_status *st)
{
	uint32_t i;

	printf("{\"policy\": ");
	json_str(st->policy);
	printf(", \"slice_ns\": %" PRIu64 ", \"warning\": ", st->slice_ns);
	json_str(st->warning);
	printf(", \"gpus\": [");
	for (i = 0; i < st->ngpus; i++) {
		const struct gs_gpu_info *g = &st->gpus[i];

		printf("%s{\"index\": %d, \"uuid\": ", i ? ", " : "", g->index);
		json_str(g->uuid);
		printf(", \"name\": ");
		json_str(g->name);
		printf(", \"shares_total\": %u, \"shares_used\": %u, "
		       "\"healthy\": %s, \"drained\": %s, \"simulated\": %s, "
		       "\"holder\": %" PRIu64 ", \"mem_total\": %" PRIu64
		       ", \"mem_limits\": %" PRIu64 ", \"health\": ",
		       g->shares_total, g->shares_used,
		       g->healthy ? "true" : "false",
		       g->drained ? "true" : "false",
		       g->simulated ? "true" : "false", g->holder,
		       g->mem_total, g->mem_limits);
		json_str(g->health);
		printf(", \"unmanaged\": %u}", g->unmanaged);
	}
	printf("], \"allocations_total\": %u, \"allocations\": [",
	       st->nallocs_total);
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		printf("%s{\"id\": %" PRIu64 ", \"gpu\": %d, \"gpu_uuid\": ",
		       i ? ", " : "", a->id, a->gpu);
		json_str(a->gpu_uuid);
		printf(", \"shares\": %u, \"weight\": %u, \"priority\": %u, "
		       "\"mode\": \"%s\", \"uid\": %u, \"state\": \"%s\", "
		       "\"pid\": %u, \"nattached\": %u, \"unmanaged\": %u, "
		       "\"unmanaged_held\": %u, "
		       "\"created_unix_ns\": %" PRIu64
		       ", \"gpu_ns\": %" PRIu64 ", \"held_ns\": %" PRIu64
		       ", \"suspensions\": %" PRIu64 ", \"block_tasks\": %"
		       PRIu64 ", \"vtime_ns\": %" PRIu64 ", \"any_uid\": %s"
		       ", \"mem_limit\": %" PRIu64 ", \"mem_used\": %" PRIu64
		       ", \"mem_peak\": %" PRIu64 ", \"labels\": ",
		       a->shares, a->weight, a->priority,
		       gs_mode_name(a->mode), a->uid,
		       gs_alloc_state_name(a->state), a->pid, a->nattached,
		       a->unmanaged, a->unmanaged_held, a->created_unix_ns, a->gpu_ns, a->held_ns,
		       a->suspensions, a->block_tasks, a->vtime_ns,
		       (a->flags & GS_ALLOC_ANY_UID) ? "true" : "false",
		       a->mem_limit, a->mem_used, a->mem_peak);
		json_labels(&a->labels);
		printf(", \"sm_first\": %u, \"sm_count\": %u, "
		       "\"mps_pct\": %u, \"mps_pipe\": ", a->sm_first,
		       a->sm_count, a->mps_pct);
		json_str(a->mps_pipe);
		printf(", \"space\": ");
		json_str(a->space_why);
		printf("}");
	}
	printf("]}\n");
}

static const char *owner_label(const struct gs_alloc_info *a, char *buf,
			       size_t len)
{
	if (a->labels.job[0] != '\0')
		snprintf(buf, len, "job %s%s%s", a->labels.job,
			 a->labels.step[0] ? "." : "", a->labels.step);
	else if (a->labels.pod[0] != '\0')
		snprintf(buf, len, "pod %s/%s", a->labels.ns, a->labels.pod);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* Space mode: the planner's decision, the partition and the MPS pipe. */
static void print_space(const struct gs_alloc_info *a)
{
	printf("         space: %s", a->space_why[0] ? a->space_why :
		"not planned");
	if (a->sm_count > 0)
		printf("; SMs %u-%u", a->sm_first,
		       a->sm_first + a->sm_count - 1);
	printf("; %s%s\n", a->mps_pipe[0] ? "MPS " : "outside MPS",
	       a->mps_pipe);
}

static void print_table(const struct gs_status *st)
{
	char slice[32], g1[32], g2[32], own[256], prio[16], uid[16];
	char m1[16], m2[16], m3[16];
	uint32_t i, j, shown;

	gs_cfg_format_duration(st->slice_ns, slice, sizeof(slice));
	printf("policy %s, slice %s\n", st->policy, slice);
	if (st->warning[0])
		printf("WARNING: %s\n", st->warning);
	for (i = 0; i < st->ngpus; i++) {
		const struct gs_gpu_info *g = &st->gpus[i];

		printf("\nGPU %d  %s  %s%s  shares %u/%u%s%s%s%s%s  holder ",
		       g->index, g->uuid, g->name,
		       g->simulated ? "" : "", g->shares_used,
		       g->shares_total, g->drained ? "  DRAINED" : "",
		       g->healthy ? "" : "  UNHEALTHY",
		       !g->healthy && g->health[0] ? " (" : "",
		       g->healthy ? "" : g->health,
		       !g->healthy && g->health[0] ? ")" : "");
		if (g->holder)
			printf("%" PRIu64, g->holder);
		else
			printf("-");
		if (g->mem_total) {
			fmt_mem(m1, sizeof(m1), g->mem_limits, 0);
			fmt_mem(m2, sizeof(m2), g->mem_total, 0);
			printf("  memory limits %s/%s", m1, m2);
		}
		printf("\n");
		shown = 0;
		for (j = 0; j < st->nallocs; j++) {
			const struct gs_alloc_info *a = &st->allocs[j];

			if (a->gpu != g->index)
				continue;
			if (shown++ == 0)
				printf("  %6s %6s %6s %6s %6s %5s %-10s %5s "
				       "%12s %10s %10s %8s %7s %7s %7s  %s\n",
				       "ALLOC", "UID", "SHARES", "WEIGHT",
				       "PRIO", "MODE", "STATE", "PROCS",
				       "VTIME(ms)", "GPU(s)", "HELD(s)",
				       "SUSP", "MEM", "MAXMEM", "MEMLIM",
				       "OWNER");
			if (a->flags & GS_ALLOC_ANY_UID)
				snprintf(uid, sizeof(uid), "any");
			else
				snprintf(uid, sizeof(uid), "%u", a->uid);
			fmt_sec(g1, sizeof(g1), a->gpu_ns);
			fmt_sec(g2, sizeof(g2), a->held_ns);
			if (a->priority <= 2)
				snprintf(prio, sizeof(prio), "%s",
					 gs_priority_name(a->priority));
			else
				snprintf(prio, sizeof(prio), "%u",
					 a->priority);
			fmt_mem(m1, sizeof(m1), a->mem_used, 0);
			fmt_mem(m2, sizeof(m2), a->mem_peak, 0);
			fmt_mem(m3, sizeof(m3), a->mem_limit, 1);
			printf("  %6" PRIu64 " %6s %6u %6u %6s %5s %-10s "
			       "%5u %12.3f %10s %10s %8" PRIu64 " %7s %7s %7s  "
			       "%s\n", a->id, uid, a->shares, a->weight, prio,
			       gs_mode_name(a->mode),
			       gs_alloc_state_name(a->state), a->nattached,
			       (double)a->vtime_ns / 1e6, g1, g2,
			       a->suspensions, m1, m2, m3,
			       owner_label(a, own, sizeof(own)));
			if (a->mode == GS_MODE_SPACE)
				print_space(a);
			if (a->unmanaged)
				printf("  %6s unmanaged: %u GPU process%s "
				       "bypassing the gate (%u held back)\n",
				       "", a->unmanaged,
				       a->unmanaged == 1 ? "" : "es",
				       a->unmanaged_held);
		}
		if (g->unmanaged)
			printf("  unmanaged: %u GPU process%s of no "
			       "allocation\n", g->unmanaged,
			       g->unmanaged == 1 ? "" : "es");
		if (shown == 0)
			printf("  (no allocations%s)\n",
			       getuid() == 0 ? "" : " of yours");
	}
	if (st->nallocs_total > st->nallocs)
		printf("\n(showing %u of %u allocations: the agent is older "
		       "than protocol 1.2 and sends one frame only)\n",
		       st->nallocs, st->nallocs_total);
}

/* A label as the protocol carries it: refused, not cut, when longer. */
static int label_arg(const char *what, const char *v, char *dst, size_t len)
{
	if (strlen(v) >= len) {
		fprintf(stderr, "%s: %s: '%.20s...' is %zu characters, longer "
			"than the protocol's limit of %zu\n", prog, what, v,
			strlen(v), len - 1);
		return -1;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int cmd_create(struct gs_client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "shares", required_argument, NULL, 'S' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "weight", required_argument, NULL, 'w' },
		{ "priority", required_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		{ "uid", required_argument, NULL, 'u' },
		{ "job", required_argument, NULL, 'j' },
		{ "step", required_argument, NULL, 'x' },
		{ "any-uid", no_argument, NULL, 'A' },
		{ "mem", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_error err;
	int ch, uid_given = 0;

	memset(&req, 0, sizeof(req));
	req.gpu = -1;
	req.priority = GS_PRIO_NORMAL;
	req.uid = (uint32_t)getuid();
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'S':
			req.shares = (uint32_t)num("shares", optarg, 100000);
			break;
		case 'g':
			req.gpu = (int32_t)num("gpu", optarg, 1023);
			break;
		case 'w':
			req.weight = (uint32_t)num("weight", optarg,
						   100000000);
			break;
		case 'p':
			req.priority = prio_arg(optarg);
			break;
		case 'm':
			if (gs_mode_parse(optarg, &req.mode) < 0) {
				fprintf(stderr, "%s: mode: '%s' is not time "
					"or space\n", prog, optarg);
				return 2;
			}
			break;
		case 'u':
			req.uid = (uint32_t)num("uid", optarg, UINT32_MAX);
			uid_given = 1;
			break;
		case 'j':
			if (label_arg("job", optarg, req.labels.job,
				      sizeof(req.labels.job)) < 0)
				return 2;
			break;
		case 'x':
			if (label_arg("step", optarg, req.labels.step,
				      sizeof(req.labels.step)) < 0)
				return 2;
			break;
		case 'A':
			req.flags |= GS_ALLOC_ANY_UID;
			break;
		case 'M':
			if (gs_cfg_parse_size(optarg, &req.mem_limit) < 0 ||
			    req.mem_limit == 0) {
				fprintf(stderr, "%s: mem: '%s' is not a size "
					"(e.g. 20G, 512M)\n", prog, optarg);
				return 2;
			}
			break;
		default:
			usage();
		}
	}
	if (optind != argc || req.shares == 0)
		usage();
	if (uid_given && (req.flags & GS_ALLOC_ANY_UID)) {
		fprintf(stderr, "%s: --uid and --any-uid exclude each other: "
			"an any-uid allocation has no owner to name\n", prog);
		return 2;
	}
	if (gs_client_alloc_create(c, &req, &info, &err) < 0)
		return die(&err);
	printf("%" PRIu64 "\n", info.id);
	return 0;
}

/* Check the command line before talking to the agent. */
static int known(const char *cmd, int argc)
{
	static const struct {
		const char *name;
		int min, max;
	} cmds[] = {
		{ "status", 1, 2 },	  { "set-weight", 3, 3 },
		{ "set-priority", 3, 3 }, { "drain", 2, 2 },
		{ "undrain", 2, 2 },	  { "close", 2, 2 },
		{ "create", 1, 64 },	  { "ping", 1, 1 },
		{ "gpu-fail", 2, 2 },	  { "gpu-ok", 2, 2 },
		{ "set-mem", 3, 3 },
	};
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(cmd, cmds[i].name) == 0)
			return argc >= cmds[i].min && argc <= cmds[i].max;
	return 0;
}

int main(int argc, char *argv[])
{
	struct gs_client *c = NULL;
	struct gs_status *st = NULL;
	struct gs_alloc_info info;
	struct gs_error err;
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = getenv(GS_ENV_SOCKET);
	const char *cmd;
	int ch, timeout = 5000, rv = 0;

	while ((ch = getopt_long(argc, argv, "+hs:t:V", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			sock = optarg;
			break;
		case 't':
			timeout = (int)num("timeout", optarg, 3600000);
			break;
		case 'h':
			usage_to(stdout);
			return 0;
		case 'V':
			printf("gsharectl (gshare) protocol %d.%d\n",
			       GS_PROTO_MAJOR, GS_PROTO_MINOR);
			return 0;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	cmd = argv[0];
	if (!known(cmd, argc))
		usage();
	if (gs_client_connect(sock, timeout, &c, &err) < 0)
		return die(&err);
	if (strcmp(cmd, "status") == 0) {
		int json = argc == 2 && strcmp(argv[1], "--json") == 0;

		if (argc > 2 || (argc == 2 && !json))
			usage();
		if (gs_client_status(c, &st, &err) < 0) {
			rv = die(&err);
		} else {
			if (json)
				print_json(st);
			else
				print_table(st);
			gs_status_free(st);
		}
	} else if (strcmp(cmd, "set-weight") == 0 && argc == 3) {
		if (gs_client_set_weight(c, num("allocation", argv[1],
						UINT64_MAX),
					 (uint32_t)num("weight", argv[2],
						       UINT32_MAX), &err) < 0)
			rv = die(&err);
	} else if (strcmp(cmd, "set-mem") == 0 && argc == 3) {
		uint64_t lim = 0, id = num("allocation", argv[1], UINT64_MAX);

		if (strcmp(argv[2], "default") != 0 &&
		    (gs_cfg_parse_size(argv[2], &lim) < 0 || lim == 0)) {
			fprintf(stderr, "%s: set-mem: '%s' is not a size "
				"(e.g. 20G, 512M) or 'default'\n", prog,
				argv[2]);
			rv = 2;
		} else if (gs_client_alloc_set_mem(c, id, lim, &info,
						   &err) < 0) {
			rv = die(&err);
		} else {
			printf("allocation %" PRIu64 ": memory limit %" PRIu64
			       " MiB\n", info.id, info.mem_limit >> 20);
		}
	} else if (strcmp(cmd, "set-priority") == 0 && argc == 3) {
		if (gs_client_set_priority(c, num("allocation", argv[1],
						  UINT64_MAX),
					   prio_arg(argv[2]), &err) < 0)
			rv = die(&err);
	} else if ((strcmp(cmd, "drain") == 0 ||
		    strcmp(cmd, "undrain") == 0) && argc == 2) {
		if (gs_client_drain(c, (int32_t)num("gpu", argv[1], INT32_MAX),
				    cmd[0] == 'd', &err) < 0)
			rv = die(&err);
	} else if ((strcmp(cmd, "gpu-fail") == 0 ||
		    strcmp(cmd, "gpu-ok") == 0) && argc == 2) {
		if (gs_client_gpu_fault(c, (int32_t)num("gpu", argv[1],
							 INT32_MAX),
					cmd[4] == 'f', &err) < 0)
			rv = die(&err);
	} else if (strcmp(cmd, "close") == 0 && argc == 2) {
		if (gs_client_alloc_close(c, num("allocation", argv[1],
						 UINT64_MAX), &info,
					  &err) < 0)
			rv = die(&err);
		else
			printf("allocation %" PRIu64 ": gpu time %.3f s, held "
			       "%.3f s, %" PRIu64 " suspensions\n", info.id,
			       (double)info.gpu_ns / 1e9,
			       (double)info.held_ns / 1e9, info.suspensions);
	} else if (strcmp(cmd, "create") == 0) {
		rv = cmd_create(c, argc, argv);
	} else if (strcmp(cmd, "ping") == 0 && argc == 1) {
		if (gs_client_ping(c, &err) < 0)
			rv = die(&err);
		else
			printf("ok\n");
	} else {
		gs_client_free(c);
		usage();
	}
	gs_client_free(c);
	return rv;
}
