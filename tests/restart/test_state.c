/*
 * test_state.c — unit tests of the allocation table file (state.c):
 * round trips (escaped labels, empty table, large ids), the two slot
 * files (generations, a torn slot, an older agent's file, set aside),
 * and every rejection path of the decoder (foreign magic and version,
 * damaged bytes, checksum, counts, order, ranges, escapes, lengths,
 * truncation, trailing bytes).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"

static void fill(struct gs_state_alloc *a, uint64_t id)
{
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->gpu = 1;
	snprintf(a->gpu_uuid, sizeof(a->gpu_uuid), "GPU-sim-%llu",
		 (unsigned long long)id);
	a->shares = 30;
	a->weight = 7;
	a->priority = 16;
	a->mode = 1;
	a->uid = 1000;
	a->flags = 1;
	a->created_unix_ns = 1795292656000000000ull + id;
	snprintf(a->labels.cluster, sizeof(a->labels.cluster), "c1");
	snprintf(a->labels.job, sizeof(a->labels.job), "%llu",
		 (unsigned long long)(4000 + id));
	snprintf(a->labels.step, sizeof(a->labels.step), "batch");
	snprintf(a->labels.ns, sizeof(a->labels.ns), "team a");
	snprintf(a->labels.pod, sizeof(a->labels.pod), "p%%o=d\twith\xc3\xa9");
	snprintf(a->labels.user, sizeof(a->labels.user), "bob");
}

/* encode st, decode it back, compare */
static void roundtrip(const struct gs_state *st)
{
	struct gs_state back;
	struct gs_error err;
	char *buf;
	size_t len;

	assert_int_equal(gs_state_encode(st, &buf, &len, &err), 0);
	assert_int_equal(strlen(buf), len);
	assert_int_equal(gs_state_decode(buf, len, &back, &err), 0);
	assert_int_equal(back.next_id, st->next_id);
	assert_int_equal(back.n, st->n);
	if (st->n)
		assert_memory_equal(back.v, st->v, st->n * sizeof(*st->v));
	gs_state_clear(&back);
	free(buf);
}

static void test_roundtrip(void **state)
{
	struct gs_state st;
	struct gs_state_alloc a;
	struct gs_error err;

	(void)state;
	memset(&st, 0, sizeof(st));
	st.next_id = 1;
	roundtrip(&st);			/* empty table */
	st.next_id = 100;
	for (uint64_t id = 3; id < 100; id += 17) {
		fill(&a, id);
		if (id % 2)	/* a memory limit asked for, or not */
			a.mem_req = (20ull << 30) + id;
		assert_int_equal(gs_state_add(&st, &a, &err), 0);
	}
	roundtrip(&st);
	/* labels filled to their limit, every escaped byte */
	fill(&a, 99);
	memset(a.labels.pod, '%', sizeof(a.labels.pod) - 1);
	a.labels.pod[sizeof(a.labels.pod) - 1] = '\0';
	for (size_t i = 0; i < sizeof(a.labels.account) - 1; i++)
		a.labels.account[i] = (char)(1 + i * 4);
	st.v[st.n - 1] = a;
	roundtrip(&st);
	/* extreme numbers */
	st.next_id = UINT64_MAX;
	st.v[st.n - 1].id = UINT64_MAX - 1;
	st.v[st.n - 1].gpu = INT32_MAX;
	st.v[st.n - 1].uid = UINT32_MAX;
	st.v[st.n - 1].created_unix_ns = UINT64_MAX;
	st.v[st.n - 1].mem_req = UINT64_MAX;
	roundtrip(&st);
	gs_state_clear(&st);
}

static char *good_text(size_t *len)
{
	struct gs_state st;
	struct gs_state_alloc a;
	struct gs_error err;
	char *buf;

	memset(&st, 0, sizeof(st));
	st.next_id = 9;
	fill(&a, 2);
	assert_int_equal(gs_state_add(&st, &a, &err), 0);
	fill(&a, 5);
	assert_int_equal(gs_state_add(&st, &a, &err), 0);
	assert_int_equal(gs_state_encode(&st, &buf, len, &err), 0);
	gs_state_clear(&st);
	return buf;
}

/* Recompute the end line's checksum so a test reaches the check it
 * means rather than the checksum. */
static uint32_t crc(const char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= (uint8_t)p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

/* body (without end line) + a correct end line for `count` records */
static char *with_end(const char *body, unsigned count)
{
	size_t n = strlen(body);
	char *out = malloc(n + 64);

	assert_non_null(out);
	snprintf(out, n + 64, "%send allocs=%u crc32=%08x\n", body, count,
		 crc(body, n));
	return out;
}

static void expect_bad(const char *text, size_t len, int code,
		       const char *needle)
{
	struct gs_state st;
	struct gs_error err;

	memset(&err, 0, sizeof(err));
	assert_int_equal(gs_state_decode(text, len, &st, &err), -1);
	assert_int_equal(err.code, code);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("error '%s' does not mention '%s'", err.msg, needle);
	assert_int_equal(st.n, 0);
	assert_null(st.v);
}

static void expect_str(const char *text, int code, const char *needle)
{
	expect_bad(text, strlen(text), code, needle);
}

static void expect_bad_body(const char *body, unsigned count, int code,
			    const char *needle)
{
	char *t = with_end(body, count);

	expect_bad(t, strlen(t), code, needle);
	free(t);
}

#define REC(id, rest) "alloc id=" #id " gpu=0 uuid=G shares=1 weight=1 " \
	"priority=0 mode=0 uid=0 flags=0 created=1" rest
#define LABELS " cluster= job=j step= node= ns= pod= container= user= " \
	"account="

/* mem= is written only for a limit asked for (files without one read
 * the same in an agent from before memory limits), and it must be a
 * number at the end of the line */
static void test_mem_key(void **state)
{
	struct gs_state st, back;
	struct gs_state_alloc a;
	struct gs_error err;
	char *buf;
	size_t len;

	(void)state;
	memset(&st, 0, sizeof(st));
	st.next_id = 9;
	fill(&a, 5);
	assert_int_equal(gs_state_add(&st, &a, &err), 0);
	assert_int_equal(gs_state_encode(&st, &buf, &len, &err), 0);
	assert_null(strstr(buf, "mem="));
	free(buf);
	st.v[0].mem_req = 1ull << 30;
	assert_int_equal(gs_state_encode(&st, &buf, &len, &err), 0);
	assert_non_null(strstr(buf, " account= mem=1073741824\n"));
	assert_int_equal(gs_state_decode(buf, len, &back, &err), 0);
	assert_int_equal(back.v[0].mem_req, 1ull << 30);
	gs_state_clear(&back);
	free(buf);
	gs_state_clear(&st);
	expect_bad_body("gshare-allocs 2\nseq 1\nnext_id 9\n"
			REC(1, LABELS " mem=x") "\n", 1, GS_EPROTO,
			"not a number");
	expect_bad_body("gshare-allocs 2\nseq 1\nnext_id 9\n"
			REC(1, LABELS " mem=5 x=1") "\n", 1, GS_EPROTO,
			"trailing");
	expect_bad_body("gshare-allocs 2\nseq 1\nnext_id 9\n"
			REC(1, LABELS " memory=5") "\n", 1, GS_EPROTO,
			"trailing");
}

static void test_reject(void **state)
{
	size_t len;
	char *g = good_text(&len), *t;

	(void)state;
	/* the good one decodes */
	{
		struct gs_state st;
		struct gs_error err;

		assert_int_equal(gs_state_decode(g, len, &st, &err), 0);
		assert_int_equal(st.n, 2);
		gs_state_clear(&st);
	}
	/* every proper prefix is refused */
	for (size_t n = 0; n < len; n++) {
		struct gs_state st;
		struct gs_error err;

		assert_int_equal(gs_state_decode(g, n, &st, &err), -1);
		assert_int_equal(err.code, GS_EPROTO);
	}
	/* any flipped byte is refused */
	t = malloc(len);
	assert_non_null(t);
	for (size_t i = 0; i < len; i++) {
		struct gs_state st;
		struct gs_error err;

		memcpy(t, g, len);
		t[i] ^= 0x01;
		assert_int_equal(gs_state_decode(t, len, &st, &err), -1);
	}
	free(t);
	/* trailing bytes */
	t = malloc(len + 2);
	assert_non_null(t);
	memcpy(t, g, len);
	memcpy(t + len, "x\n", 2);
	expect_bad(t, len + 2, GS_EPROTO, "after the end line");
	free(t);
	free(g);

	expect_str("", GS_EPROTO, "ends");
	expect_str("hello\n", GS_EPROTO, "not a gshare allocation table");
	expect_str("gshare-allocs 3\nseq 1\nnext_id 1\nend allocs=0 "
		   "crc32=0\n", GS_EVERSION, "version 3");
	expect_bad_body("gshare-allocs 2\nnext_id 1\n", 0, GS_EPROTO, "line 2");
	expect_bad_body("gshare-allocs 2\nseq -1\nnext_id 1\n", 0, GS_EPROTO,
			"seq");
	expect_bad_body("gshare-allocs 2\nseq 18446744073709551616\n"
			"next_id 1\n", 0, GS_EPROTO, "out of range");
	/* version 1 (older agents) still reads, generation 0 */
	{
		char *v1 = with_end("gshare-allocs 1\nnext_id 9\n"
				    REC(3, LABELS) "\n", 1);
		struct gs_state st;
		struct gs_error err;

		assert_int_equal(gs_state_decode(v1, strlen(v1), &st, &err),
				 0);
		assert_int_equal(st.n, 1);
		assert_int_equal(st.seq, 0);
		gs_state_clear(&st);
		free(v1);
	}
	expect_str("gshare-allocs 01\n", GS_EPROTO, "leading zero");
	expect_str("gshare-allocs 1\nnext_id 0\n", GS_EPROTO, "next_id 0");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(3, LABELS) "\n", 2,
			GS_EPROTO, "counts 2");
	t = with_end("gshare-allocs 1\nnext_id 9\n", 0);
	t[strlen(t) - 2] ^= 0x01;	/* last crc digit */
	expect_bad(t, strlen(t), GS_EPROTO, "checksum");
	free(t);
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(5, LABELS) "\n"
			REC(3, LABELS) "\n", 2, GS_EPROTO, "not increasing");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(9, LABELS) "\n", 1,
			GS_EPROTO, "not below next_id");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(0, LABELS) "\n", 1,
			GS_EPROTO, "id 0");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n"
			"alloc id=1 gpu=-1 uuid=G shares=1 weight=1 priority=0"
			" mode=0 uid=0 flags=0 created=1" LABELS "\n", 1,
			GS_EPROTO, "not a number: gpu");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n"
			"alloc id=1 gpu=0 uuid=G shares=4294967296 weight=1 "
			"priority=0 mode=0 uid=0 flags=0 created=1" LABELS
			"\n", 1, GS_EPROTO, "out of range: shares");
	expect_bad_body("gshare-allocs 1\nnext_id 99999999999999999999\n", 0,
			GS_EPROTO, "out of range");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, " cluster=%4")
			" job=j step= node= ns= pod= container= user= "
			"account=\n", 1, GS_EPROTO, "bad escape in cluster");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, " cluster=%00")
			" job=j step= node= ns= pod= container= user= "
			"account=\n", 1, GS_EPROTO, "NUL byte");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, " cluster=%4a")
			" job=j step= node= ns= pod= container= user= "
			"account=\n", 1, GS_EPROTO, "bad escape");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, " cluster=a\tb")
			" job=j step= node= ns= pod= container= user= "
			"account=\n", 1, GS_EPROTO, "bad byte in cluster");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, " job=j") "\n",
			1, GS_EPROTO, "expected cluster");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, LABELS) " x\n",
			1, GS_EPROTO, "trailing");
	expect_bad_body("gshare-allocs 1\nnext_id 9\n" REC(1, LABELS) "\n"
			"garbage\n", 1, GS_EPROTO, "line 4");
	/* a label one byte longer than its field */
	{
		char body[512], longv[GS_LABEL_MAX + 1];

		memset(longv, 'x', GS_LABEL_MAX);
		longv[GS_LABEL_MAX] = '\0';
		snprintf(body, sizeof(body), "gshare-allocs 1\nnext_id 9\n"
			 REC(1, " cluster=%s") " job=j step= node= ns= pod= "
			 "container= user= account=\n", longv);
		expect_bad_body(body, 1, GS_EPROTO, "too long: cluster");
	}
	expect_str("gshare-allocs 1\nnext_id 9\nend allocs=0 crc32=xyz\n",
		   GS_EPROTO, "crc32");
}

static void append(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* load path, expect result r, generation seq and n allocations */
static void expect_load(const char *path, int r, uint64_t seq, unsigned n,
			unsigned skipped)
{
	struct gs_state back;
	struct gs_error err;
	unsigned sk = 99;

	memset(&err, 0, sizeof(err));
	assert_int_equal(gs_state_load(path, &back, &sk, &err), r);
	assert_int_equal(back.seq, seq);
	assert_int_equal(back.n, n);
	if (r >= 0)
		assert_int_equal(sk, skipped);
	gs_state_clear(&back);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/gs-state-test.XXXXXX", path[256], s0[300],
	     s1[300], b0[320], b1[320];
	struct gs_state st, back;
	struct gs_state_alloc a;
	struct gs_error err;
	char *v1;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/allocs", dir);
	snprintf(s0, sizeof(s0), "%s.0", path);
	snprintf(s1, sizeof(s1), "%s.1", path);
	snprintf(b0, sizeof(b0), "%s.bad", s0);
	snprintf(b1, sizeof(b1), "%s.bad", s1);
	/* no file: 0, empty */
	expect_load(path, 0, 0, 0, 0);
	/* generation 1 goes to slot 1, 2 to slot 0 */
	memset(&st, 0, sizeof(st));
	st.seq = 1;
	st.next_id = 12;
	fill(&a, 11);
	assert_int_equal(gs_state_add(&st, &a, &err), 0);
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	assert_true(exists(s1) && !exists(s0));
	assert_int_equal(gs_state_load(path, &back, NULL, &err), 1);
	assert_int_equal(back.n, 1);
	assert_memory_equal(back.v, st.v, sizeof(a));
	gs_state_clear(&back);
	gs_state_clear(&st);
	st.seq = 2;
	st.next_id = 12;
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	assert_true(exists(s0));
	expect_load(path, 1, 2, 0, 0);
	/* a save cut short: the newest slot is torn, the other one is used */
	append(s0, "junk\n");
	expect_load(path, 1, 1, 1, 1);
	/* saving that generation again repairs it (in place, shorter) */
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	expect_load(path, 1, 2, 0, 0);
	/* generation 3 overwrites slot 1 in place, shorter than before */
	st.seq = 3;
	st.next_id = 13;
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	expect_load(path, 1, 3, 0, 0);
	/* an older agent's version 1 file wins over the slots until a save
	 * of this version removes it */
	v1 = with_end("gshare-allocs 1\nnext_id 9\n" REC(3, LABELS) "\n", 1);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(v1, f);
	assert_int_equal(fclose(f), 0);
	free(v1);
	expect_load(path, 1, 3, 1, 0);	/* its table, the slots' generation */
	assert_int_equal(gs_state_load(path, &back, NULL, &err), 1);
	assert_true(back.old_file);
	gs_state_clear(&back);
	st.seq = 4;
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	assert_true(exists(path));	/* kept: this save was not told */
	st.old_file = 1;
	assert_int_equal(gs_state_save(path, &st, &err), 0);
	assert_false(exists(path));
	expect_load(path, 1, 4, 0, 0);
	/* every copy damaged: -1 naming the file, then kept aside */
	append(s0, "junk\n");
	append(s1, "junk\n");
	memset(&err, 0, sizeof(err));
	assert_int_equal(gs_state_load(path, &back, NULL, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	assert_non_null(strstr(err.msg, s0));
	assert_int_equal(gs_state_set_aside(path), 2);
	assert_true(exists(b0) && exists(b1) && !exists(s0) && !exists(s1));
	expect_load(path, 0, 0, 0, 0);
	unlink(b0);
	unlink(b1);
	/* a directory where a slot should be */
	assert_int_equal(mkdir(s0, 0700), 0);
	expect_load(path, -1, 0, 0, 0);
	st.seq = 2;
	assert_int_equal(gs_state_save(path, &st, &err), -1);
	assert_int_equal(err.code, GS_EIO);
	rmdir(s0);
	/* unwritable directory path */
	snprintf(path, sizeof(path), "%s/nodir/allocs", dir);
	assert_int_equal(gs_state_save(path, &st, &err), -1);
	assert_int_equal(err.code, GS_EIO);
	gs_state_clear(&st);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_mem_key),
		cmocka_unit_test(test_reject),
		cmocka_unit_test(test_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
