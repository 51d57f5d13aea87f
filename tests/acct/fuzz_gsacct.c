/*
 * fuzz_gsacct.c — libFuzzer target for gsacct's parsers: the input is
 * split at the first NUL into a time specification and a --format list;
 * both are parsed (fixed "now", UTC), a parsed format prints one row, and
 * the metrics address parser gets the same text.  Any crash, sanitizer
 * report, or an accepted time that does not format back, is a failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acctfmt.h"
#include "metrics.h"

#define TERR "Invalid time specification (pos="

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct gs_col cols[GS_MAX_COLS];
	struct gs_store_alloc a;
	struct gs_error err;
	struct gs_row r;
	char *s = malloc(size + 1), *fmt, host[64], buf[64];
	unsigned n = 0;
	uint16_t port;
	time_t t;
	FILE *f;

	if (!init) {
		setenv("TZ", "UTC", 1);
		init = 1;
	}
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	fmt = s + strlen(s) + (strlen(s) < size ? 1 : 0);
	if (gs_time_parse(s, 1795292656, &t, &err) == 0)
		gs_time_format(t, buf, sizeof(buf));
	else if (strncmp(err.msg, TERR, sizeof(TERR) - 1) != 0)
		abort();	/* every rejection says where */
	gs_metrics_parse_addr(s, host, sizeof(host), &port, &err);
	if (gs_format_parse(fmt, cols, &n, &err) == 0) {
		memset(&a, 0, sizeof(a));
		snprintf(a.labels.job, sizeof(a.labels.job), "%.20s", s);
		a.tot.gpu_ns = size * 1000000ull;
		a.tot.suspensions = size;
		gs_row_from_alloc(&r, &a, 0);
		f = fopen("/dev/null", "w");
		if (f != NULL) {
			gs_print_header(f, cols, n, GS_OUT_TABLE);
			gs_print_row(f, cols, n, GS_OUT_TABLE, &r);
			gs_print_row(f, cols, n, GS_OUT_PARSABLE2, &r);
			gs_print_json_row(f, &r, 1);
			fclose(f);
		}
	}
	free(s);
	return 0;
}
