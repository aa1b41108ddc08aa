/*
 * nccl-net-bench-out.c - results as an nccl-tests style table, as CSV, and as
 * a hand-written SVG chart (bus bandwidth against log2 message size, one line
 * per test and plugin) so no plotting package is needed, and the comparison
 * table of a run with several plugins.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/nccl-net-bench.h"

int nb_parse_size(const char *s, size_t *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case 'G': case 'g': v *= 1024.0; /* fall through */
	case 'M': case 'm': v *= 1024.0; /* fall through */
	case 'K': case 'k': v *= 1024.0; end++; break;
	case '\0': break;
	default: return -1;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

void nb_fmt_size(char *buf, size_t len, double bytes)
{
	static const char *const units[] = { "B", "K", "M", "G", "T" };
	int u = 0;

	while (bytes >= 1024.0 && u < 4) {
		bytes /= 1024.0;
		u++;
	}
	if (bytes == floor(bytes))
		snprintf(buf, len, "%.0f%s", bytes, units[u]);
	else
		snprintf(buf, len, "%.1f%s", bytes, units[u]);
}

void nb_out_header(int t, const struct nb_ctx *c)
{
	const char *tcol = t == NB_T_LATENCY ? "half-RTT" : "time";

	printf("#\n# %s: %d ranks, plugin %s (ncclNet v%d), device %d %s, buffer %zu B, "
	       "%d iters, %d warmup, %d reps (median)\n#\n", nb_test_name(t), c->nranks,
	       c->e->net->name, c->e->net->version, c->e->dev, c->props.name, c->e->buffsize,
	       c->o->iters, c->o->warmup, c->o->repeat);
	if (t == NB_T_MULTIRECV)
		printf("# multirecv: %d senders x %d tags grouped per irecv; algbw counts all "
		       "bytes arriving at rank 0\n", c->nranks - 1, c->groups);
	if (t == NB_T_ALLTOALL)
		printf("# alltoall: a comm pair per peer; size is a rank's whole buffer, size / %d "
		       "to each rank; busbw = algbw * %d / %d, as alltoall_perf\n", c->nranks,
		       c->nranks - 1, c->nranks);
	if (t == NB_T_SENDRECV_BI)
		printf("# sendrecv-bi: algbw per direction, busbw both directions together\n");
	printf("# %10s %12s %8s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", tcol,
	       "algbw", "busbw", "#wrong");
	printf("# %10s %12s %8s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)",
	       "(GB/s)", "(GB/s)", "");
	fflush(stdout);
}

void nb_out_row(const struct nb_result *r)
{
	printf("  %10zu %12zu %8s %7s %10.2f %8.3f %8.3f %7ld\n", r->size, r->count, r->type,
	       r->redop, r->time_us, r->algbw, r->busbw, r->wrong);
	fflush(stdout);
}

void nb_out_summary(int t, const struct nb_result *rs, int n)
{
	double sum = 0, lat = 0;
	long wrong = 0;
	int i, k = 0;

	for (i = 0; i < n; i++) {
		if (rs[i].test != t)
			continue;
		sum += rs[i].busbw;
		lat += rs[i].time_us;
		wrong += rs[i].wrong;
		k++;
	}
	if (!k)
		return;
	printf("# Out of bounds values : %ld %s\n", wrong, wrong ? "FAILED" : "OK");
	if (t == NB_T_LATENCY)
		printf("# Avg half round trip  : %.3f us (%s)\n", lat / k, nb_test_name(t));
	printf("# Avg bus bandwidth    : %.4f GB/s (%s)\n#\n", sum / k, nb_test_name(t));
	fflush(stdout);
}

int nb_out_csv(const char *path, const struct nb_result *rs, int n, const struct nb_ctx *cs)
{
	FILE *f = fopen(path, "w");
	int i;

	if (!f) {
		nb_err("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f, "test,nranks,size,count,type,redop,time_us,algbw_GBps,busbw_GBps,wrong,"
		   "plugin,net_version,time_min_us,cpu_busbw_GBps\n");
	for (i = 0; i < n; i++) {
		const struct nb_ctx *c = &cs[rs[i].plugin];

		fprintf(f, "%s,%d,%zu,%zu,%s,%s,%.3f,%.4f,%.4f,%ld,%s,%d,%.3f,%.4f\n",
			nb_test_name(rs[i].test), c->nranks, rs[i].size, rs[i].count, rs[i].type,
			rs[i].redop, rs[i].time_us, rs[i].algbw, rs[i].busbw, rs[i].wrong,
			c->e->net->name, c->e->net->version, rs[i].time_min_us, rs[i].cpu_busbw);
	}
	if (fclose(f) != 0) {
		nb_err("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- SVG ------------------------------------------------------------------ */

#define NB_W 900
#define NB_H 540
#define NB_L 80
#define NB_R 190
#define NB_T 56
#define NB_B 70

struct nb_plot {
	FILE *f;
	double x0, x1, ymax;
};

static double nb_px(const struct nb_plot *p, double size)
{
	double lx = log2(size > 1 ? size : 1);

	return NB_L + (lx - p->x0) / (p->x1 - p->x0) * (NB_W - NB_L - NB_R);
}

static double nb_py(const struct nb_plot *p, double bw)
{
	return NB_H - NB_B - bw / p->ymax * (NB_H - NB_T - NB_B);
}

static double nb_nice(double v)
{
	double e = pow(10, floor(log10(v > 0 ? v : 1))), m = v / e;

	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
}

static void nb_svg_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<') fputs("&lt;", f);
		else if (*s == '>') fputs("&gt;", f);
		else if (*s == '&') fputs("&amp;", f);
		else if (*s == '"') fputs("&quot;", f);
		else fputc(*s, f);
	}
}

static void nb_svg_axes(const struct nb_plot *p)
{
	double ystep = nb_nice(p->ymax / 5), y, lx;
	int every = (p->x1 - p->x0) > 16 ? 4 : (p->x1 - p->x0) > 8 ? 2 : 1;
	char lab[32];

	fprintf(p->f, "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#333\">\n");
	for (y = 0; y <= p->ymax + 1e-9; y += ystep) {
		fprintf(p->f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			NB_L, nb_py(p, y), NB_W - NB_R, nb_py(p, y));
		fprintf(p->f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", NB_L - 6,
			nb_py(p, y) + 4, y);
	}
	for (lx = ceil(p->x0); lx <= p->x1 + 1e-9; lx += 1) {
		double x = nb_px(p, pow(2, lx));

		fprintf(p->f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n",
			x, NB_T, x, NB_H - NB_B);
		if (((long)lx) % every != 0)
			continue;
		nb_fmt_size(lab, sizeof(lab), pow(2, lx));
		fprintf(p->f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x,
			NB_H - NB_B + 18, lab);
	}
	fprintf(p->f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		   "stroke=\"#333\"/>\n", NB_L, NB_T, NB_W - NB_L - NB_R, NB_H - NB_T - NB_B);
	fprintf(p->f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size (bytes, "
		   "log2 scale)</text>\n", (NB_L + NB_W - NB_R) / 2, NB_H - 24);
	fprintf(p->f, "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
		   "%d)\">bus bandwidth (GB/s)</text>\n</g>\n", (NB_T + NB_H - NB_B) / 2,
		(NB_T + NB_H - NB_B) / 2);
}

/* One line: test t of plugin pl (label names the plugin when several are drawn). */
static void nb_svg_series(const struct nb_plot *p, const struct nb_result *rs, int n, int t,
			  int pl, const char *label, int k)
{
	static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
					      "#9467bd", "#8c564b" };
	const char *col = colors[k % 6];
	int i;

	fprintf(p->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
		col, pl ? " stroke-dasharray=\"6 3\"" : "");
	for (i = 0; i < n; i++)
		if (rs[i].test == t && rs[i].plugin == pl)
			fprintf(p->f, "%.1f,%.1f ", nb_px(p, (double)rs[i].size),
				nb_py(p, rs[i].busbw));
	fprintf(p->f, "\"/>\n");
	for (i = 0; i < n; i++)
		if (rs[i].test == t && rs[i].plugin == pl)
			fprintf(p->f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>"
				"%s %zu B: %.3f GB/s</title></circle>\n",
				nb_px(p, (double)rs[i].size), nb_py(p, rs[i].busbw), col,
				nb_test_name(t), rs[i].size, rs[i].busbw);
	fprintf(p->f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>\n",
		NB_W - NB_R + 16, NB_T + 10 + k * 22, col);
	fprintf(p->f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"13\">%s",
		NB_W - NB_R + 36, NB_T + 22 + k * 22, nb_test_name(t));
	if (label) {
		fputs(" ", p->f);
		nb_svg_escape(p->f, label);
	}
	fputs("</text>\n", p->f);
}

static void nb_svg_range(struct nb_plot *p, const struct nb_result *rs, int n)
{
	double lo = 1e300, hi = 0, ym = 0;
	int i;

	for (i = 0; i < n; i++) {
		double s = (double)(rs[i].size > 1 ? rs[i].size : 1);

		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
		ym = rs[i].busbw > ym ? rs[i].busbw : ym;
	}
	p->x0 = floor(log2(lo));
	p->x1 = ceil(log2(hi));
	if (p->x1 <= p->x0)
		p->x0 -= 1, p->x1 += 1;
	p->ymax = ym > 0 ? nb_nice(ym * 1.1) : 1;
	if (p->ymax < ym * 1.05)
		p->ymax = ym * 1.1;
}

int nb_out_svg(const char *path, const struct nb_result *rs, int n, const struct nb_ctx *cs,
	       int np)
{
	struct nb_plot p = { 0 };
	int t, pl, k = 0;

	p.f = fopen(path, "w");
	if (!p.f) {
		nb_err("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	nb_svg_range(&p, rs, n);
	fprintf(p.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/"
		     "2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
		     "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", NB_W, NB_H,
		NB_W, NB_H);
	fprintf(p.f, "<text x=\"%d\" y=\"30\" font-family=\"sans-serif\" font-size=\"16\" "
		     "text-anchor=\"middle\">nccl-net-bench: ", (NB_L + NB_W - NB_R) / 2);
	for (pl = 0; pl < np; pl++) {
		fputs(pl ? " vs " : "", p.f);
		nb_svg_escape(p.f, cs[pl].e->net->name);
		fprintf(p.f, " (ncclNet v%d)", cs[pl].e->net->version);
	}
	fprintf(p.f, ", %d ranks, device ", cs[0].nranks);
	nb_svg_escape(p.f, cs[0].props.name);
	fprintf(p.f, "</text>\n");
	nb_svg_axes(&p);
	for (t = 0; t < NB_T_COUNT; t++) {
		for (pl = 0; pl < np; pl++) {
			int i, has = 0;

			for (i = 0; i < n; i++)
				has |= rs[i].test == t && rs[i].plugin == pl;
			if (has)
				nb_svg_series(&p, rs, n, t, pl, np > 1 ? cs[pl].e->net->name : NULL,
					      k++);
		}
	}
	fprintf(p.f, "</svg>\n");
	if (fclose(p.f) != 0) {
		nb_err("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- comparison ------------------------------------------------------------ */

static const struct nb_result *nb_find(const struct nb_result *rs, int n, int t, int pl,
				       size_t size)
{
	int i;

	for (i = 0; i < n; i++)
		if (rs[i].test == t && rs[i].plugin == pl && rs[i].size == size)
			return &rs[i];
	return NULL;
}

void nb_out_compare(int t, const struct nb_result *rs, int n, const struct nb_ctx *cs, int np)
{
	int lat = t == NB_T_LATENCY, i, pl;

	printf("#\n# %s comparison: %s per plugin, ratio to %s (same run, sizes interleaved)\n",
	       nb_test_name(t), lat ? "half round trip (us)" : "busbw (GB/s)",
	       cs[0].e->net->name);
	printf("# %10s", "size (B)");
	for (pl = 0; pl < np; pl++)
		printf(" %12.12s%s", cs[pl].e->net->name, pl ? "    ratio" : "");
	printf("\n");
	for (i = 0; i < n; i++) {
		const struct nb_result *base = &rs[i];

		if (base->test != t || base->plugin != 0)
			continue;
		printf("  %10zu %12.3f", base->size, lat ? base->time_us : base->busbw);
		for (pl = 1; pl < np; pl++) {
			const struct nb_result *r = nb_find(rs, n, t, pl, base->size);
			double v = r ? (lat ? r->time_us : r->busbw) : 0;
			double b = lat ? base->time_us : base->busbw;

			printf(" %12.3f %8.3g", v, b > 0 ? v / b : 0);
		}
		printf("\n");
	}
	printf("#\n");
	fflush(stdout);
}
