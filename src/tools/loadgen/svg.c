/*
 * svg.c — plots as SVG 1.1 text, drawn by hand (no plotting library): a run's
 * latency CDFs (TTFT, TPOT, E2E) and its output tokens per second over time,
 * and a sweep's throughput-latency curves.
 *
 * A figure is a grid of panels. Each panel maps its data range onto a plot
 * area with "nice" ticks (1, 2 or 5 times a power of ten) and draws lines as
 * polylines; everything is written straight to the file.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

#define PANEL_W 460
#define PANEL_H 300
#define MARGIN_L 64
#define MARGIN_R 20
#define MARGIN_T 36
#define MARGIN_B 48

static const char *const k_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

struct panel {
    FILE *f;
    double px, py;         /* top-left corner of the panel in the figure */
    double x0, x1, y0, y1; /* data range */
};

static double ax_x(const struct panel *p, double x) {
    double w = PANEL_W - MARGIN_L - MARGIN_R;
    return p->px + MARGIN_L + (x - p->x0) / (p->x1 - p->x0) * w;
}

static double ax_y(const struct panel *p, double y) {
    double h = PANEL_H - MARGIN_T - MARGIN_B;
    return p->py + MARGIN_T + h - (y - p->y0) / (p->y1 - p->y0) * h;
}

static double nice_step(double range) {
    if (!(range > 0)) return 1;
    double raw = range / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

/* Widens [lo, hi] to whole ticks (hi > lo afterwards). */
static void nice_range(double *lo, double *hi) {
    if (!(*hi > *lo)) *hi = *lo + 1;
    double s = nice_step(*hi - *lo);
    *lo = floor(*lo / s) * s;
    *hi = ceil(*hi / s) * s;
}

static void text_esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static void fmt_tick(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;
    if (step >= 1) snprintf(buf, n, "%.0f", v);
    else if (step >= 0.1) snprintf(buf, n, "%.1f", v);
    else if (step >= 0.01) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%g", v);
}

static void panel_frame(struct panel *p, const char *title, const char *xlabel, const char *ylabel) {
    FILE *f = p->f;
    double l = ax_x(p, p->x0), r = ax_x(p, p->x1), t = ax_y(p, p->y1), b = ax_y(p, p->y0);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">", p->px + MARGIN_L, p->py + 22);
    text_esc(f, title);
    fprintf(f, "</text>\n");
    double sx = nice_step(p->x1 - p->x0), sy = nice_step(p->y1 - p->y0);
    char buf[32];
    for (double v = ceil(p->x0 / sx) * sx; v <= p->x1 + sx * 1e-6; v += sx) {
        double x = ax_x(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, t, x, b);
        fmt_tick(buf, sizeof buf, v, sx);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x, b + 15, buf);
    }
    for (double v = ceil(p->y0 / sy) * sy; v <= p->y1 + sy * 1e-6; v += sy) {
        double y = ax_y(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", l, y, r, y);
        fmt_tick(buf, sizeof buf, v, sy);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", l - 5, y + 4, buf);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", l, t,
            r - l, b - t);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", (l + r) / 2, b + 34);
    text_esc(f, xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f,%.1f) rotate(-90)\" font-size=\"12\" "
               "text-anchor=\"middle\">",
            p->px + 16, (t + b) / 2);
    text_esc(f, ylabel);
    fprintf(f, "</text>\n");
}

static void panel_line(struct panel *p, const double *x, const double *y, int64_t n, const char *color,
                       bool dashed, bool dots) {
    FILE *f = p->f;
    if (n <= 0) return;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"", color,
            dashed ? " stroke-dasharray=\"5,3\"" : "");
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%.1f,%.1f", i ? " " : "", ax_x(p, x[i]), ax_y(p, y[i]));
    fprintf(f, "\"/>\n");
    for (int64_t i = 0; dots && i < n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", ax_x(p, x[i]), ax_y(p, y[i]), color);
}

static void legend(struct panel *p, int row, const char *name, const char *color, bool dashed) {
    FILE *f = p->f;
    double x = ax_x(p, p->x1) - 150, y = ax_y(p, p->y1) + 14 + 15 * row;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"146\" height=\"15\" fill=\"white\" fill-opacity=\"0.85\"/>\n",
            x - 3, y - 11);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x,
            y - 4, x + 22, y - 4, color, dashed ? " stroke-dasharray=\"5,3\"" : "");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", x + 27, y);
    text_esc(f, name);
    fprintf(f, "</text>\n");
}

static FILE *svg_open(const char *path, int w, int h, const char *title, struct kvik_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) {
        err_set(err, KVIK_ERR_IO, "cannot write %s", path);
        return NULL;
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\" text-anchor=\"middle\">",
            w, h, w, h, w / 2);
    text_esc(f, title ? title : "");
    fprintf(f, "</text>\n");
    return f;
}

static kvik_status svg_close(FILE *f, const char *path, struct kvik_err *err) {
    fprintf(f, "</svg>\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) return err_set(err, KVIK_ERR_IO, "cannot write %s", path);
    return KVIK_OK;
}

/* ---- one run ------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* An empirical CDF panel of v[0..n) (NANs dropped; sorted in place). */
static void cdf_panel(struct panel *p, double *v, int64_t n, const char *title, const char *color) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[m++] = v[i];
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    p->x0 = 0;
    p->x1 = m ? v[m - 1] : 1;
    nice_range(&p->x0, &p->x1);
    p->y0 = 0;
    p->y1 = 1;
    panel_frame(p, title, "milliseconds", "fraction of requests");
    if (!m) return;
    /* a staircase through at most 1,000 steps */
    int64_t steps = m < 1000 ? m : 1000;
    double *x = malloc(sizeof(double) * (size_t)(2 * steps + 1)), *y = malloc(sizeof(double) * (size_t)(2 * steps + 1));
    if (!x || !y) {
        free(x);
        free(y);
        return;
    }
    int64_t k = 0;
    double prev = 0;
    for (int64_t s = 1; s <= steps; s++) {
        int64_t i = (s * m + steps - 1) / steps - 1; /* last sample of step s */
        x[k] = v[i];
        y[k] = prev;
        k++;
        prev = (double)(i + 1) / (double)m;
        x[k] = v[i];
        y[k] = prev;
        k++;
    }
    panel_line(p, x, y, k, color, false, false);
    free(x);
    free(y);
}

kvik_status lg_plot_run_svg(const char *path, const char *title, const struct lg_result *res, struct kvik_err *err) {
    int64_t n = res->n;
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!v) return err_set(err, KVIK_ERR_NOMEM, "out of memory plotting");
    FILE *f = svg_open(path, 2 * PANEL_W, 2 * PANEL_H + 40, title, err);
    if (!f) {
        free(v);
        return err->code;
    }
    static const char *names[3] = {"TTFT", "TPOT", "E2E"};
    for (int which = 0; which < 3; which++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            const struct lg_record *r = &res->recs[i];
            if (r->error != LG_ERR_NONE) continue;
            v[m++] = which == 0 ? lg_record_ttft_ms(r) : which == 1 ? lg_record_tpot_ms(r) : lg_record_e2e_ms(r);
        }
        struct panel p = {f, (double)(which % 2) * PANEL_W, 40.0 + (double)(which / 2) * PANEL_H, 0, 0, 0, 0};
        char t[64];
        snprintf(t, sizeof t, "%s CDF", names[which]);
        cdf_panel(&p, v, m, t, k_colors[which]);
    }
    /* output tokens per second over time, in about 60 bins */
    struct panel p = {f, PANEL_W, 40.0 + PANEL_H, 0, 0, 0, 0};
    int64_t t_end = 0;
    for (int64_t i = 0; i < n; i++)
        if (res->recs[i].t_end_ns > t_end) t_end = res->recs[i].t_end_ns;
    double dur = (double)t_end * 1e-9;
    double bin = nice_step(dur > 0 ? dur * 5 / 60 : 1);
    int nb = dur > 0 ? (int)ceil(dur / bin) : 1;
    if (nb < 1) nb = 1;
    if (nb > 10000) nb = 10000;
    double *x = calloc((size_t)nb + 1, sizeof *x), *y = calloc((size_t)nb + 1, sizeof *y);
    if (x && y) {
        for (int64_t i = 0; i < n; i++) {
            const struct lg_record *r = &res->recs[i];
            for (int32_t c = 0; c < r->n_chunks; c++) {
                int b = (int)((double)r->chunk_ns[c] * 1e-9 / bin);
                if (b >= 0 && b < nb) y[b] += 1;
            }
        }
        double ymax = 0;
        for (int b = 0; b < nb; b++) {
            x[b] = (b + 0.5) * bin;
            y[b] /= bin;
            if (y[b] > ymax) ymax = y[b];
        }
        p.x0 = 0;
        p.x1 = nb * bin;
        nice_range(&p.x0, &p.x1);
        p.y0 = 0;
        p.y1 = ymax > 0 ? ymax * 1.05 : 1;
        nice_range(&p.y0, &p.y1);
        panel_frame(&p, "Output tokens over time", "seconds from start", "tokens / s (streamed events)");
        panel_line(&p, x, y, nb, k_colors[3], false, nb <= 30);
    }
    free(x);
    free(y);
    free(v);
    return svg_close(f, path, err);
}

/* ---- sweeps ------------------------------------------------------------------------ */

kvik_status lg_plot_sweep_svg(const char *path, const char *title, const struct lg_sweep_series *series,
                              int n_series, struct kvik_err *err) {
    FILE *f = svg_open(path, 2 * PANEL_W, PANEL_H + 40, title, err);
    if (!f) return err->code;
    for (int which = 0; which < 2; which++) {
        struct panel p = {f, which * PANEL_W, 40, 0, 0, 0, 0};
        double xmax = 0, ymax = 0;
        for (int s = 0; s < n_series; s++)
            for (int i = 0; i < series[s].n; i++) {
                const struct lg_summary *su = &series[s].pts[i].s;
                const struct lg_dist *d = which ? &su->tpot : &su->ttft;
                if (su->output_throughput > xmax) xmax = su->output_throughput;
                if (d->n && d->p99 > ymax) ymax = d->p99;
            }
        p.x1 = xmax > 0 ? xmax * 1.05 : 1;
        p.y1 = ymax > 0 ? ymax * 1.05 : 1;
        nice_range(&p.x0, &p.x1);
        nice_range(&p.y0, &p.y1);
        panel_frame(&p, which ? "TPOT against throughput" : "TTFT against throughput", "output tokens / s",
                    which ? "TPOT ms" : "TTFT ms");
        int row = 0;
        for (int s = 0; s < n_series; s++) {
            int m = series[s].n;
            double *x = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1)), *y50 = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1)),
                   *y99 = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
            if (!x || !y50 || !y99) {
                free(x), free(y50), free(y99);
                continue;
            }
            int k = 0;
            for (int i = 0; i < m; i++) {
                const struct lg_summary *su = &series[s].pts[i].s;
                const struct lg_dist *d = which ? &su->tpot : &su->ttft;
                if (!d->n) continue;
                x[k] = su->output_throughput;
                y50[k] = d->median;
                y99[k] = d->p99;
                k++;
            }
            const char *color = k_colors[s % 6];
            panel_line(&p, x, y50, k, color, false, true);
            panel_line(&p, x, y99, k, color, true, true);
            char name[96];
            snprintf(name, sizeof name, "%s median", series[s].name ? series[s].name : "");
            legend(&p, row++, name, color, false);
            snprintf(name, sizeof name, "%s p99", series[s].name ? series[s].name : "");
            legend(&p, row++, name, color, true);
            free(x), free(y50), free(y99);
        }
    }
    return svg_close(f, path, err);
}
