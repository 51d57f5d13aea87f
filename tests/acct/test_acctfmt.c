/*
 * test_acctfmt.c — gsacct's time specifications, --format parsing, field
 * widths and cell layout.  Runs in UTC (TZ set in main).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "acctfmt.h"

/* 2026-11-21T20:24:16Z, a Saturday */
#define NOW ((time_t)1795292656)

static time_t
ymd(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
			 .tm_hour = h, .tm_min = mi, .tm_sec = s };

	return timegm(&tm);
}

static void
ok(const char *spec, time_t want)
{
	struct gs_error err;
	time_t t = 0;

	if (gs_time_parse(spec, NOW, &t, &err) != 0)
		fail_msg("'%s' rejected: %s", spec, err.msg);
	if (t != want)
		fail_msg("'%s' -> %lld, want %lld", spec, (long long)t,
			 (long long)want);
}

static void
bad(const char *spec, const char *msg)
{
	struct gs_error err;
	time_t t = 0;

	assert_int_equal(gs_time_parse(spec, NOW, &t, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	if (msg != NULL && strcmp(err.msg, msg) != 0)
		fail_msg("'%s': message '%s', want '%s'", spec, err.msg, msg);
}

static void
test_time_now(void **state)
{
	(void)state;
	assert_int_equal(NOW, ymd(2026, 11, 21, 20, 24, 16));
	ok("now", NOW);
	ok("NOW", NOW);
	ok("now-1hour", NOW - 3600);
	ok("now-1hours", NOW - 3600);
	ok("now-90", NOW - 90);
	ok("now+2minutes", NOW + 120);
	ok("now-3days", NOW - 3 * 86400);
	ok("now-1week", NOW - 604800);
	ok("now-10min", NOW - 600);
	ok("now-5s", NOW - 5);
	ok("now-2h", NOW - 7200);
	bad("now-", "Invalid time specification (pos=4): now-");
	bad("now-1fortnight", "Invalid time specification (pos=5): now-1fortnight");
	bad("now*3", "Invalid time specification (pos=3): now*3");
	bad("nowx", NULL);
}

static void
test_time_keywords(void **state)
{
	(void)state;
	ok("today", ymd(2026, 11, 21, 0, 0, 0));
	ok("midnight", ymd(2026, 11, 21, 0, 0, 0));
	ok("noon", ymd(2026, 11, 21, 12, 0, 0));
	ok("elevenses", ymd(2026, 11, 21, 11, 0, 0));
	ok("fika", ymd(2026, 11, 21, 15, 0, 0));
	ok("teatime", ymd(2026, 11, 21, 16, 0, 0));
	ok("tomorrow", ymd(2026, 11, 22, 0, 0, 0));
}

static void
test_time_forms(void **state)
{
	(void)state;
	ok("10:30", ymd(2026, 11, 21, 10, 30, 0));
	ok("10:30:15", ymd(2026, 11, 21, 10, 30, 15));
	ok("1:05pm", ymd(2026, 11, 21, 13, 5, 0));
	ok("12:00AM", ymd(2026, 11, 21, 0, 0, 0));
	ok("1120", ymd(2026, 11, 20, 0, 0, 0));
	ok("112025", ymd(2025, 11, 20, 0, 0, 0));
	ok("1120-08:15", ymd(2026, 11, 20, 8, 15, 0));
	ok("11/20", ymd(2026, 11, 20, 0, 0, 0));
	ok("11/20/25", ymd(2025, 11, 20, 0, 0, 0));
	ok("11/20/25-08:15:30", ymd(2025, 11, 20, 8, 15, 30));
	ok("11.20.25", ymd(2025, 11, 20, 0, 0, 0));
	ok("2026-01-02", ymd(2026, 1, 2, 0, 0, 0));
	ok("2026-01-02T03:04", ymd(2026, 1, 2, 3, 4, 0));
	ok("2026-01-02T03:04:05", ymd(2026, 1, 2, 3, 4, 5));
	ok("1795292656", NOW);
}

static void
test_time_bad(void **state)
{
	(void)state;
	bad("", "Invalid time specification (pos=0): ");
	bad("bogus", "Invalid time specification (pos=0): bogus");
	bad("25:00", NULL);
	bad("10:7", NULL);
	bad("13:00pm", NULL);
	bad("1320", NULL);		/* month 13 */
	bad("0230", NULL);		/* 30 February */
	bad("2026-13-01", NULL);
	bad("2026-01-02T", NULL);
	bad("2026-01-02T25:00", NULL);
	bad("2026-1-02", "Invalid time specification (pos=5): 2026-1-02");
	bad("11/20/2025", NULL);
	bad("123", NULL);
	bad("10:30 ", NULL);
	bad("11/20-", NULL);
}

static void
test_elapsed(void **state)
{
	char b[32];

	(void)state;
	gs_elapsed_format(0, b, sizeof(b));
	assert_string_equal(b, "00:00:00");
	gs_elapsed_format(3661, b, sizeof(b));
	assert_string_equal(b, "01:01:01");
	gs_elapsed_format(86400 * 2 + 5, b, sizeof(b));
	assert_string_equal(b, "2-00:00:05");
	gs_time_format(NOW, b, sizeof(b));
	assert_string_equal(b, "2026-11-21T20:24:16");
}

static void
test_format_parse(void **state)
{
	struct gs_col cols[GS_MAX_COLS];
	struct gs_error err;
	unsigned n = 0;

	(void)state;
	assert_int_equal(gs_format_parse("jobid,GPUSec%12,user%-20", cols, &n,
					 &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(cols[0].f->name, "JobID");
	assert_int_equal(cols[0].width, 12);
	assert_int_equal(cols[0].align, GS_ALIGN_LEFT);
	assert_string_equal(cols[1].f->name, "GPUSec");
	assert_int_equal(cols[1].width, 12);
	assert_int_equal(cols[1].align, GS_ALIGN_RIGHT);
	assert_int_equal(cols[2].width, 20);
	assert_int_equal(cols[2].align, GS_ALIGN_LEFT);

	n = 0;
	assert_int_equal(gs_format_parse(gs_format_default, cols, &n, &err), 0);
	assert_int_equal(n, 10);
	n = 0;
	assert_int_equal(gs_format_parse(gs_format_long, cols, &n, &err), 0);
	assert_true(n > 20);

	n = 0;
	assert_int_equal(gs_format_parse("JobID,Bogus", cols, &n, &err), -1);
	assert_string_equal(err.msg, "Invalid field requested: \"Bogus\"");
	const char *widths[] = { "GPUSec%", "GPUSec%abc", "GPUSec%0",
				 "GPUSec%12x", "GPUSec%-", "GPUSec%1001",
				 "GPUSec%+3" };
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		char want[128];

		n = 0;
		assert_int_equal(gs_format_parse(widths[i], cols, &n, &err), -1);
		snprintf(want, sizeof(want),
			 "Invalid field width specification: \"%s\"", widths[i]);
		assert_string_equal(err.msg, want);
	}
	n = 0;
	assert_int_equal(gs_format_parse(",", cols, &n, &err), -1);
	assert_string_equal(err.msg, "No fields requested");
	/* every field has a unique, case-insensitively distinct name */
	for (unsigned i = 0; i < gs_nfields; i++)
		for (unsigned j = i + 1; j < gs_nfields; j++)
			assert_true(strcasecmp(gs_fields[i].name,
					       gs_fields[j].name) != 0);
}

static char *
render(const char *fmt, int style, const struct gs_row *r)
{
	struct gs_col cols[GS_MAX_COLS];
	struct gs_error err;
	unsigned n = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(gs_format_parse(fmt, cols, &n, &err), 0);
	gs_print_row(f, cols, n, style, r);
	fclose(f);
	return buf;
}

static void
test_cells(void **state)
{
	struct gs_store_alloc a;
	struct gs_row r;
	char *s;

	(void)state;
	memset(&a, 0, sizeof(a));
	strcpy(a.labels.job, "4242");
	strcpy(a.labels.step, "0");
	strcpy(a.labels.user, "averyveryverylongname");
	a.start_ns = (int64_t)NOW * 1000000000 - 100000000000LL;
	a.end_ns = (int64_t)NOW * 1000000000;
	a.shares = 30;
	a.tot.gpu_ns = 30000000000ull;
	a.state = GS_SST_COMPLETED;
	gs_row_from_alloc(&r, &a, 0);
	assert_string_equal(r.jobid, "4242.0");
	assert_string_equal(r.jobname, "0");

	s = render("JobID,GPUSec%8,AvgShare,State", GS_OUT_TABLE, &r);
	assert_string_equal(s, "4242.0          30.00     30.0  COMPLETED\n");
	free(s);
	s = render("User", GS_OUT_TABLE, &r);	/* cut with '+' */
	assert_string_equal(s, "averyver+\n");
	free(s);
	s = render("JobID%-3,Share%-6", GS_OUT_TABLE, &r);
	assert_string_equal(s, "42+ 30    \n");
	free(s);
	s = render("JobID,User,Elapsed", GS_OUT_PARSABLE, &r);
	assert_string_equal(s, "4242.0|averyveryverylongname|00:01:40|\n");
	free(s);
	s = render("JobID,User,Elapsed", GS_OUT_PARSABLE2, &r);
	assert_string_equal(s, "4242.0|averyveryverylongname|00:01:40\n");
	free(s);

	memset(&a, 0, sizeof(a));
	strcpy(a.labels.ns, "team-a");
	strcpy(a.labels.pod, "train-7");
	strcpy(a.labels.container, "main");
	a.uid = 1000;
	gs_row_from_alloc(&r, &a, 0);
	assert_string_equal(r.jobid, "team-a/train-7/main");
	s = render("JobID%30,User,End", GS_OUT_PARSABLE2, &r);
	assert_string_equal(s, "team-a/train-7/main|1000|Unknown\n");
	free(s);
}

static void
test_job_rows(void **state)
{
	struct gs_store_alloc s0, s1;
	struct gs_row j;

	(void)state;
	memset(&s0, 0, sizeof(s0));
	strcpy(s0.labels.job, "7");
	strcpy(s0.labels.step, "0");
	s0.key = 1;
	s0.gpu = 0;
	s0.shares = 30;
	s0.start_ns = 100;
	s0.end_ns = 500;
	s0.state = GS_SST_COMPLETED;
	s0.tot.gpu_ns = 10;
	s0.tot.evict_ns_max = 7;
	s1 = s0;
	s1.key = 2;
	strcpy(s1.labels.step, "1");
	s1.gpu = 1;
	s1.shares = 50;
	s1.start_ns = 50;
	s1.end_ns = 0;
	s1.state = GS_SST_RUNNING;
	s1.tot.gpu_ns = 5;
	s1.tot.evict_ns_max = 3;
	gs_row_job_init(&j, &s0, 0);
	gs_row_job_add(&j, &s0);	/* the first member is not added twice */
	gs_row_job_add(&j, &s1);
	assert_string_equal(j.jobid, "7");
	assert_int_equal(j.a.tot.gpu_ns, 15);
	assert_int_equal(j.a.tot.evict_ns_max, 7);
	assert_int_equal(j.a.start_ns, 50);
	assert_int_equal(j.a.end_ns, 0);	/* a step still runs */
	assert_int_equal(j.a.state, GS_SST_RUNNING);
	assert_int_equal(j.a.shares, 50);
	assert_true(j.gpus_mixed);
	/* a row with a figure near 2^64 (an old store): the job's sum
	 * stays at the top, it does not wrap to a small number */
	s1.key = 3;
	s1.tot.block_tasks = UINT64_MAX - 1;
	s1.tot.gpu_ns = UINT64_MAX;
	gs_row_job_add(&j, &s1);
	gs_row_job_add(&j, &s1);
	assert_true(j.a.tot.block_tasks == UINT64_MAX);
	assert_true(j.a.tot.gpu_ns == UINT64_MAX);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_now),
		cmocka_unit_test(test_time_keywords),
		cmocka_unit_test(test_time_forms),
		cmocka_unit_test(test_time_bad),
		cmocka_unit_test(test_elapsed),
		cmocka_unit_test(test_format_parse),
		cmocka_unit_test(test_cells),
		cmocka_unit_test(test_job_rows),
	};

	setenv("TZ", "UTC", 1);
	tzset();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
