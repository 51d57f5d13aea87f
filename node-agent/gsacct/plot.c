/*
 * plot.c — SVG stacked share timeline for gsacct --plot.
 *
 * Layout: one panel per GPU (in order of first appearance), x = time,
 * y = percent of that GPU, each job a filled step polygon on top of the
 * ones before it; a legend below.  Coordinates are printed with one
 * decimal so the file stays small and diffs stay stable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plot.h"

#define W		960.0
#define PANEL_H		220.0
#define MARGIN_L	60.0
#define MARGIN_R	20.0
#define TOP		40.0
#define GAP		50.0
#define LEGEND_ROW	18.0

static const char *const palette[] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
#define NPAL (sizeof(palette) / sizeof(palette[0]))

void
gs_plot_bin_add(double *v, unsigned nbins, int64_t t0, int64_t t1,
		int64_t s0, int64_t s1, double gpu_ns)
{
	double bw = (double)(t1 - t0) / nbins;

	if (t1 <= t0 || nbins == 0)
		return;
	if (s1 <= s0) {		/* instantaneous: all in one bin */
		if (s0 < t0 || s0 > t1)
			return;
		unsigned b = (unsigned)((double)(s0 - t0) / bw);

		v[b < nbins ? b : nbins - 1] += gpu_ns / bw * 100.0;
		return;
	}
	for (unsigned b = 0; b < nbins; b++) {
		double b0 = (double)t0 + b * bw, b1 = b0 + bw;
		double o0 = (double)s0 > b0 ? (double)s0 : b0;
		double o1 = (double)s1 < b1 ? (double)s1 : b1;

		if (o1 > o0)
			v[b] += gpu_ns * (o1 - o0) / (double)(s1 - s0) / bw *
				100.0;
	}
}

static void
xml(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

static void
tlabel(int64_t t_ns, int64_t span_ns, char *buf, size_t n)
{
	time_t t = (time_t)(t_ns / 1000000000);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, n, span_ns > 86400LL * 1000000000 ? "%m-%d %H:%M" :
		 "%H:%M:%S", &tm);
}

int
gs_plot_svg(FILE *f, const char *title, int64_t t0, int64_t t1,
	    unsigned nbins, const struct gs_plot_series *s, unsigned ns,
	    struct gs_error *err)
{
	int32_t gpus[64];
	unsigned ngpus = 0;
	double pw = W - MARGIN_L - MARGIN_R, h;
	double *cum = NULL;
	char lab[64];

	for (unsigned i = 0; i < ns; i++) {
		unsigned g;

		for (g = 0; g < ngpus; g++)
			if (gpus[g] == s[i].gpu)
				break;
		if (g == ngpus && ngpus < 64)
			gpus[ngpus++] = s[i].gpu;
	}
	cum = calloc(nbins ? nbins : 1, sizeof(*cum));
	if (cum == NULL)
		return gs_error_set(err, GS_ENOMEM, "plot: out of memory");
	h = TOP + (ngpus ? ngpus : 1) * (PANEL_H + GAP) + ns * LEGEND_ROW + 20;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n",
		W, h, W, h);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">", MARGIN_L);
	xml(f, title);
	fputs("</text>\n", f);
	for (unsigned g = 0; g < ngpus; g++) {
		double y0 = TOP + g * (PANEL_H + GAP);	/* panel top */
		double ymax = 100.0;

		memset(cum, 0, nbins * sizeof(*cum));
		for (unsigned i = 0; i < ns; i++)
			if (s[i].gpu == gpus[g])
				for (unsigned b = 0; b < nbins; b++)
					cum[b] += s[i].v[b];
		for (unsigned b = 0; b < nbins; b++)
			if (cum[b] > ymax)
				ymax = cum[b];
		fprintf(f, "<g class=\"gpu\" id=\"gpu%d\">\n", gpus[g]);
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\">GPU %d, %% of GPU time</text>\n",
			MARGIN_L, y0 - 6, gpus[g]);
		for (int k = 0; k <= 4; k++) {
			double yy = y0 + PANEL_H - PANEL_H * k * 25.0 / ymax;

			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				"y2=\"%.1f\" stroke=\"#ddd\"/>\n", MARGIN_L, yy,
				MARGIN_L + pw, yy);
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" "
				"text-anchor=\"end\">%d%%</text>\n",
				MARGIN_L - 4, yy + 4, k * 25);
		}
		for (int k = 0; k <= 5; k++) {
			int64_t tt = t0 + (t1 - t0) / 5 * k;
			double xx = MARGIN_L + pw * k / 5.0;

			tlabel(tt, t1 - t0, lab, sizeof(lab));
			/* the end labels grow inwards, not past the edges */
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" "
				"text-anchor=\"%s\">%s</text>\n", xx,
				y0 + PANEL_H + 16, k == 0 ? "start" :
				k == 5 ? "end" : "middle", lab);
		}
		memset(cum, 0, nbins * sizeof(*cum));
		for (unsigned i = 0; i < ns; i++) {
			if (s[i].gpu != gpus[g])
				continue;
			fprintf(f, "<polygon class=\"job\" fill=\"%s\" "
				"fill-opacity=\"0.85\" points=\"",
				palette[i % NPAL]);
			for (unsigned b = 0; b < nbins; b++) {
				double top = cum[b] + s[i].v[b];
				double yy = y0 + PANEL_H - PANEL_H * top / ymax;

				fprintf(f, "%.1f,%.1f %.1f,%.1f ",
					MARGIN_L + pw * b / nbins, yy,
					MARGIN_L + pw * (b + 1) / nbins, yy);
			}
			for (unsigned b = nbins; b-- > 0;) {
				double yy = y0 + PANEL_H -
					PANEL_H * cum[b] / ymax;

				fprintf(f, "%.1f,%.1f %.1f,%.1f ",
					MARGIN_L + pw * (b + 1) / nbins, yy,
					MARGIN_L + pw * b / nbins, yy);
				cum[b] += s[i].v[b];
			}
			fputs("\"><title>", f);
			xml(f, s[i].label);
			fputs("</title></polygon>\n", f);
		}
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			"height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
			MARGIN_L, y0, pw, PANEL_H);
		fputs("</g>\n", f);
	}
	for (unsigned i = 0; i < ns; i++) {
		double yy = TOP + (ngpus ? ngpus : 1) * (PANEL_H + GAP) +
			i * LEGEND_ROW;

		fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"12\" "
			"height=\"12\" fill=\"%s\"/>\n", MARGIN_L, yy - 10,
			palette[i % NPAL]);
		fprintf(f, "<text class=\"legend\" x=\"%.0f\" y=\"%.1f\">",
			MARGIN_L + 18, yy);
		xml(f, s[i].label);
		fprintf(f, " (GPU %d)</text>\n", s[i].gpu);
	}
	fputs("</svg>\n", f);
	free(cum);
	if (ferror(f))
		return gs_error_set(err, GS_EIO, "plot: write error");
	return 0;
}
