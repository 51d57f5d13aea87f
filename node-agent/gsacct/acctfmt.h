/*
 * acctfmt.h — gsacct's pure parts: sacct time specifications, the field
 * table, --format lists with widths, value formatting and the report rows.
 *
 * No I/O here except writing to a FILE the caller gives; everything is
 * deterministic given `now` and the time zone, so the unit tests and the
 * golden files pin it down.
 */
#ifndef GS_ACCTFMT_H
#define GS_ACCTFMT_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "gs_error.h"
#include "store.h"

/*
 * Parse a sacct time specification, local time:
 *   HH:MM[:SS][AM|PM]                   today at that time
 *   MMDD[YY][-HH:MM[:SS]]  MM/DD[/YY][-HH:MM[:SS]]  MM.DD[.YY][-HH:MM[:SS]]
 *   YYYY-MM-DD[THH:MM[:SS]]
 *   now[{+|-}N[seconds|minutes|hours|days|weeks]]  (units may be
 *   abbreviated: s, min, h, d, w ...; default seconds)
 *   today midnight noon elevenses fika teatime tomorrow
 *   a plain number of 9 or more digits: seconds since the epoch
 * Error message: "Invalid time specification (pos=N): TEXT"; for a time
 * before 1970 or after GS_TIME_MAX, "... (pos=0): TEXT: out of range ...".
 */
/* The latest time whose nanoseconds since the epoch fit an int64_t
 * (2262-04-11T23:47:16Z); gs_time_parse refuses times outside
 * 0..GS_TIME_MAX. */
#define GS_TIME_MAX	9223372036LL
int gs_time_parse(const char *s, time_t now, time_t *out,
		  struct gs_error *err);
/* sacct's time output, "YYYY-MM-DDTHH:MM:SS" local time. */
void gs_time_format(time_t t, char *buf, size_t n);
/* [D-]HH:MM:SS */
void gs_elapsed_format(uint64_t secs, char *buf, size_t n);

/* One report row: an allocation, or the job row summing its steps. */
struct gs_row {
	char jobid[GS_LABEL_MAX * 5];
	char jobname[GS_LABEL_MAX * 2];
	int is_step;		/* shown as JobID.Step */
	struct gs_store_alloc a;	/* identity + totals */
	int gpus_mixed;		/* job row over steps on several GPUs */
	int64_t now_ns;		/* reference for open rows' Elapsed */
};

/* Build a row from one allocation (jobid as "42", "42.0" or ns/pod/c). */
void gs_row_from_alloc(struct gs_row *r, const struct gs_store_alloc *a,
		       int64_t now_ns);
/* Fold step row s into job row j (j initialized from the first step with
 * gs_row_job_init). */
void gs_row_job_init(struct gs_row *j, const struct gs_store_alloc *a,
		     int64_t now_ns);
void gs_row_job_add(struct gs_row *j, const struct gs_store_alloc *a);

enum gs_falign { GS_ALIGN_RIGHT = 0, GS_ALIGN_LEFT = 1 };

struct gs_field {
	const char *name;
	int width;		/* default width */
	int align;		/* enum gs_falign */
	const char *help;
	/* value as text into buf; json_num: 1 when the text is a number */
	void (*fmt)(const struct gs_row *r, char *buf, size_t n, int *json_num);
};

extern const struct gs_field gs_fields[];
extern const unsigned gs_nfields;

/* One column of the output: a field and its width/alignment. */
struct gs_col {
	const struct gs_field *f;
	int width;
	int align;
};

#define GS_MAX_COLS 64

/* Parse "JobID,User%20,GPUSec%-12" (case-insensitive names) and append
 * to cols; errors: 'Invalid field requested: "X"', 'Invalid field width
 * specification: "X"'. */
int gs_format_parse(const char *spec, struct gs_col *cols, unsigned *ncols,
		    struct gs_error *err);

extern const char gs_format_default[];
extern const char gs_format_long[];

enum gs_out_style { GS_OUT_TABLE = 0, GS_OUT_PARSABLE = 1,
		    GS_OUT_PARSABLE2 = 2 };

void gs_print_header(FILE *f, const struct gs_col *cols, unsigned ncols,
		     int style);
void gs_print_row(FILE *f, const struct gs_col *cols, unsigned ncols,
		  int style, const struct gs_row *r);
/* One JSON object (every field, keys as field names) */
void gs_print_json_row(FILE *f, const struct gs_row *r, int first);
/* --helpformat: field names in columns */
void gs_print_helpformat(FILE *f);

#endif /* GS_ACCTFMT_H */
