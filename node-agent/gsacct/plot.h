/*
 * plot.h — gsacct --plot: a stacked timeline of each job's achieved GPU
 * share, written as plain SVG (no plotting dependency).
 *
 * The window [t0, t1] is cut into bins; each series holds, per bin, the
 * GPU time its job used in that bin as a percent of one GPU.  Series on
 * the same GPU are stacked in one panel per GPU, so a fully used GPU
 * reaches 100%.
 */
#ifndef GS_PLOT_H
#define GS_PLOT_H

#include <stdint.h>
#include <stdio.h>

#include "gs_error.h"

struct gs_plot_series {
	char label[320];	/* a JobID */
	int32_t gpu;
	double *v;		/* nbins values, percent of one GPU */
};

/* Spread gpu_ns used during [s0, s1] over the bins of [t0, t1]. */
void gs_plot_bin_add(double *v, unsigned nbins, int64_t t0, int64_t t1,
		     int64_t s0, int64_t s1, double gpu_ns);

/* Write the SVG document.  Returns 0, or -1 on a write error. */
int gs_plot_svg(FILE *f, const char *title, int64_t t0, int64_t t1,
		unsigned nbins, const struct gs_plot_series *s, unsigned ns,
		struct gs_error *err);

#endif /* GS_PLOT_H */
