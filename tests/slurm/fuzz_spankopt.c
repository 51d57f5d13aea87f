/*
 * fuzz_spankopt.c — libFuzzer target over the SPANK plugin's parsers
 * (common/gs_spankopt.c).  The first byte picks the parser, the rest is
 * its input:
 *   0  gs_gres_count: a count is only reported with rv 1
 *   1  gs_spank_record_parse: what parses formats and parses back equal
 *   2  gs_spank_comment_merge: the result holds the new segment exactly
 *      once and keeps every foreign segment
 *   3  gs_spank_conf_parse over newline-separated arguments
 *   4  gs_spank_expand_path, and the option validators
 *   5  gs_spank_spool_parse: what parses formats and parses back equal;
 *      gs_gres_detail_gpu reports an index in 0..1023 only with rv 1;
 *      gs_spank_array_spec_ok
 * Any sanitizer report or failed invariant aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gs_spankopt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                          \
	do {                                                              \
		if (!(c)) {                                               \
			fprintf(stderr, "invariant failed: %s\n", #c);    \
			abort();                                          \
		}                                                         \
	} while (0)

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0, l = strlen(needle);
	const char *p = hay;

	if (l == 0)
		return 0;
	while ((p = strstr(p, needle)) != NULL) {
		n++;
		p += l;
	}
	return n;
}

static void fuzz_gres(const char *s)
{
	struct gs_error err;
	uint64_t c = 12345;
	int rv;

	rv = gs_gres_count(s, "gshare", &c, &err);
	CHECK(rv >= -1 && rv <= 1);
	if (rv != 1)
		CHECK(c == 12345);
	else
		CHECK(c <= UINT32_MAX);
}

static void fuzz_record(const char *s)
{
	struct gs_spank_record r, back;
	struct gs_error err;
	char buf[256];

	if (gs_spank_record_parse(s, &r, &err) < 0)
		return;
	CHECK(gs_spank_record_format(&r, buf, sizeof(buf), &err) > 0);
	CHECK(gs_spank_record_parse(buf, &back, &err) == 0);
	CHECK(back.id == r.id && back.shares == r.shares &&
	      back.gpu_ns == r.gpu_ns && back.held_ns == r.held_ns);
}

static void fuzz_spool(const char *s)
{
	struct gs_spank_spool r, back;
	struct gs_error err;
	char buf[512];
	int gpu = -1, rv;

	rv = gs_gres_detail_gpu(s, "shard", &gpu, &err);
	CHECK(rv >= -1 && rv <= 1);
	if (rv == 1)
		CHECK(gpu >= 0 && gpu <= 1023);
	(void)gs_spank_array_spec_ok(s);
	if (gs_spank_spool_parse(s, &r, &err) < 0)
		return;
	CHECK(gs_spank_spool_format(&r, buf, sizeof(buf), &err) > 0);
	CHECK(gs_spank_spool_parse(buf, &back, &err) == 0);
	CHECK(memcmp(&r, &back, sizeof(r)) == 0);
}

static void fuzz_comment(const char *s)
{
	static const char seg[] = "gshare[n1]:gpu_s=1.000,held_s=1.000,"
				  "share=30,allocs=1";
	struct gs_error err;
	char *out = NULL, *copy, *tok, *save = NULL;

	CHECK(gs_spank_comment_merge(s, "n1", seg, &out, &err) == 0);
	CHECK(count_of(out, seg) >= 1);
	/* every segment of the input that is not ours survives */
	copy = strdup(s);
	CHECK(copy != NULL);
	for (tok = strtok_r(copy, ";", &save); tok != NULL;
	     tok = strtok_r(NULL, ";", &save)) {
		/* ours compares without case (sacctmgr lower-cases) */
		if (strncasecmp(tok, "gshare[n1]:", 11) == 0)
			continue;
		CHECK(strstr(out, tok) != NULL);
	}
	free(copy);
	/* merging again is stable */
	{
		char *again = NULL;

		CHECK(gs_spank_comment_merge(out, "n1", seg, &again, &err) ==
		      0);
		CHECK(strcmp(again, out) == 0);
		free(again);
	}
	free(out);
}

static void fuzz_conf(char *s)
{
	struct gs_spank_conf c;
	struct gs_error err;
	char *argv[16];
	int argc = 0;
	char *p = s, *nl;

	while (argc < 16 && p != NULL) {
		argv[argc++] = p;
		nl = strchr(p, '\n');
		if (nl != NULL)
			*nl++ = '\0';
		p = nl;
	}
	if (gs_spank_conf_parse(&c, argc, argv, &err) == 0) {
		CHECK(c.agent[0] == '/' && c.state_dir[0] == '/');
		CHECK(memchr(c.agent, '\0', sizeof(c.agent)) != NULL);
		CHECK(c.timeout_ns >= 10000000ull);
	} else {
		CHECK(err.code == GS_ECONFIG);
		CHECK(memchr(err.msg, '\0', sizeof(err.msg)) != NULL);
	}
}

static void fuzz_expand(const char *s)
{
	struct gs_spank_opts o;
	struct gs_error err;
	char out[64];

	if (gs_spank_expand_path(s, "node7", out, sizeof(out), &err) == 0)
		CHECK(strlen(out) < sizeof(out));
	gs_spank_opts_init(&o);
	if (gs_spank_opt_weight(s, &o, &err) == 0)
		CHECK(o.weight >= 1 && o.weight <= GS_SPANK_WEIGHT_MAX);
	if (gs_spank_opt_priority(s, &o, &err) == 0)
		CHECK(o.priority <= 2);
	if (gs_spank_opt_mode(s, &o, &err) == 0)
		CHECK(o.mode <= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1 || size > 4096)
		return 0;
	s = malloc(size);
	if (s == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 6) {
	case 0: fuzz_gres(s); break;
	case 1: fuzz_record(s); break;
	case 2: fuzz_comment(s); break;
	case 3: fuzz_conf(s); break;
	case 5: fuzz_spool(s); break;
	default: fuzz_expand(s); break;
	}
	free(s);
	return 0;
}
