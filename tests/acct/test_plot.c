/*
 * test_plot.c — SVG output of gsacct --plot: binning arithmetic, stacking,
 * one panel per GPU, XML escaping, well-formed document ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plot.h"

static unsigned
count(const char *s, const char *needle)
{
	unsigned n = 0;

	for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void
test_bins(void **state)
{
	double v[10] = { 0 };

	(void)state;
	/* window 0..10 s, 10 bins of 1 s; 0.5 s of GPU used over [2, 3] */
	gs_plot_bin_add(v, 10, 0, 10000000000LL, 2000000000LL, 3000000000LL,
			5e8);
	assert_true(v[2] > 49.999 && v[2] < 50.001);
	assert_true(v[1] == 0 && v[3] == 0);
	/* a sample over [4.5, 6.5]: 2 s of GPU spread 25/50/25 % of it */
	gs_plot_bin_add(v, 10, 0, 10000000000LL, 4500000000LL, 6500000000LL,
			2e9);
	assert_true(v[4] > 49.99 && v[4] < 50.01);
	assert_true(v[5] > 99.99 && v[5] < 100.01);
	assert_true(v[6] > 49.99 && v[6] < 50.01);
	/* outside the window: ignored; empty window: ignored */
	gs_plot_bin_add(v, 10, 0, 10000000000LL, 20000000000LL,
			21000000000LL, 1e9);
	gs_plot_bin_add(v, 10, 5, 5, 0, 1, 1e9);
	double sum = 0;
	for (int i = 0; i < 10; i++)
		sum += v[i];
	assert_true(sum > 249.99 && sum < 250.01);
}

static void
test_svg(void **state)
{
	double a[4] = { 30, 30, 30, 30 }, b[4] = { 70, 70, 0, 0 },
	       c[4] = { 100, 100, 100, 100 };
	struct gs_plot_series s[3];
	struct gs_error err;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	memset(s, 0, sizeof(s));
	strcpy(s[0].label, "42");
	s[0].gpu = 0;
	s[0].v = a;
	strcpy(s[1].label, "ns<&>/pod\"x\"/c");
	s[1].gpu = 0;
	s[1].v = b;
	strcpy(s[2].label, "43.0");
	s[2].gpu = 1;
	s[2].v = c;
	f = open_memstream(&buf, &len);
	assert_int_equal(gs_plot_svg(f, "t<1>", 0, 4000000000LL, 4, s, 3,
				     &err), 0);
	fclose(f);
	assert_true(strncmp(buf, "<?xml", 5) == 0);
	assert_non_null(strstr(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	assert_true(len > 7 && strcmp(buf + len - 7, "</svg>\n") == 0);
	assert_int_equal(count(buf, "<polygon"), 3);
	assert_int_equal(count(buf, "</polygon>"), 3);
	assert_int_equal(count(buf, "<g class=\"gpu\""), 2);
	assert_int_equal(count(buf, "</g>"), 2);
	assert_non_null(strstr(buf, "t&lt;1&gt;"));
	assert_non_null(strstr(buf, "ns&lt;&amp;&gt;/pod&quot;x&quot;/c"));
	assert_null(strstr(buf, "<&>"));
	/* stacking: series 1 on GPU 0 tops out at 100% in bin 0, which is
	 * y = TOP (40.0); its lower edge there is the 30% line */
	assert_non_null(strstr(buf, "60.0,40.0 "));
	/* legend rows, one per series */
	assert_int_equal(count(buf, "class=\"legend\""), 3);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bins),
		cmocka_unit_test(test_svg),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
