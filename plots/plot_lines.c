/* kvbench plot: the line figures and the zoom heatmap.
 *
 * memory   fast-tier KV peak (MiB) vs context length: one line per method (per method
 *          and budget when a method ran at several), mean over the cases at that length.
 * latency  decode ms per token vs context length, the same lines.
 * budget   mean score (%) vs budget, one line per method; a method recorded at a single
 *          budget (fullkv, which keeps everything) is a dashed horizontal reference.
 * zoom     SeKV's zoom rate per (layer, query head), zoom_rate.h: spans expanded over the
 *          compressed spans the head could expand, per decode step, mean over the cases;
 *          one panel per (sekv, sekv-ref, sekv-spread) x budget, all on one fixed 0-1
 *          colour scale so that panels compare (figure 6's quantity).
 * Memory and latency average the finished results (status ok); the budget figure counts an
 * infeasible or failed result as 0, as the report does. Every point carries its 95%
 * interval (stats.h: Wilson for binary scores, else a bootstrap over cases), drawn as an
 * error bar. Colours are fixed per method (runinfo.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plot_util.h"
#include "../kernels/stats.h"
#include "zoom_rate.h"
#include "../results/query.h"
#include "paper_rows.h"

typedef struct {
    char *method;
    double budget;        /* NAN: every budget of the method (budget figure) */
    int n, cap;
    double *x, *y, *lo, *hi;
} series;

typedef struct {
    series *s;
    int n, cap;
} series_set;

static void set_free(series_set *ss) {
    for (int i = 0; i < ss->n; i++)
        free(ss->s[i].method), free(ss->s[i].x), free(ss->s[i].y), free(ss->s[i].lo), free(ss->s[i].hi);
    free(ss->s);
    memset(ss, 0, sizeof *ss);
}

static series *series_get(series_set *ss, const char *method, double budget) {
    for (int i = 0; i < ss->n; i++)
        if (!strcmp(ss->s[i].method, method) &&
            (ss->s[i].budget == budget || (isnan(budget) && isnan(ss->s[i].budget))))
            return &ss->s[i];
    if (ss->n == ss->cap) {
        int cap = ss->cap ? 2 * ss->cap : 16;
        series *p = realloc(ss->s, cap * sizeof *p);
        if (!p) return NULL;
        ss->s = p, ss->cap = cap;
    }
    series *s = &ss->s[ss->n];
    *s = (series){.method = strdup(method), .budget = budget};
    if (!s->method) return NULL;
    ss->n++;
    return s;
}

static int series_add(series *s, double x, double y, double lo, double hi) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        double **arr[] = {&s->x, &s->y, &s->lo, &s->hi};
        for (int k = 0; k < 4; k++) {
            double *p = realloc(*arr[k], cap * sizeof *p);
            if (!p) return -1;
            *arr[k] = p;
        }
        s->cap = cap;
    }
    s->x[s->n] = x, s->y[s->n] = y, s->lo[s->n] = lo, s->hi[s->n] = hi, s->n++;
    return 0;
}

static int series_cmp(const void *a, const void *b) {
    const series *x = a, *y = b;
    int c = kv_method_cmp(x->method, y->method);
    if (c) return c;
    if (isnan(x->budget) || isnan(y->budget)) return 0;
    return (x->budget > y->budget) - (x->budget < y->budget);
}

/* The figures: kvq_fig_points gives method, budget, x, y per result; the points average y
 * over the results of each (series, x). score: y is a score (Wilson when binary). */
static const struct {
    const char *name;
    enum kvq_fig q;
    const char *title, *xlabel, *ylabel;
    int per_method;   /* 1: one series per method over its budgets */
    int score;
} FIGS[] = {
    {"memory", KVQ_FIG_MEMORY, "fast-tier KV cache peak", "context length (tokens)", "fast-tier KV peak (MiB)", 0, 0},
    {"latency", KVQ_FIG_LATENCY, "decode latency", "context length (tokens)", "decode time per token (ms)", 0, 0},
    {"budget", KVQ_FIG_BUDGET, "score vs KV budget (infeasible and failed count as 0)", NULL, "mean score (%)", 1, 1},
};
enum { N_FIGS = sizeof FIGS / sizeof FIGS[0] };

int plot_lines_known(const char *figure) {
    for (int i = 0; i < N_FIGS; i++)
        if (!strcmp(FIGS[i].name, figure)) return 1;
    return !strcmp(figure, "zoom");
}

static int load_series(sqlite3 *h, int fig, int64_t run, const char *variant, series_set *ss) {
    sqlite3_stmt *st = kvq_fig_points(h, FIGS[fig].q, run, variant);
    if (!st) {
        fprintf(stderr, "kvbench plot: reading results: %s\n", sqlite3_errmsg(h));
        return -1;
    }
    /* rows come ordered by (method, budget, x): each run of equal keys is one point */
    int rc = 0, n = 0, cap = 0, more = 1;
    double *ys = NULL, px = NAN, pb = NAN;
    char *pm = NULL;
    while (rc == 0 && more) {
        more = sqlite3_step(st) == SQLITE_ROW;
        const char *m = more ? (const char *)sqlite3_column_text(st, 0) : NULL;
        double b = more ? sqlite3_column_double(st, 1) : NAN, x = more ? sqlite3_column_double(st, 2) : NAN;
        if (more && sqlite3_column_type(st, 3) == SQLITE_NULL) continue;
        if (n && (!more || strcmp(pm, m ? m : "?") || b != pb || x != px)) {   /* flush the point */
            double lo, hi, y = st_interval(ys, NULL, n, FIGS[fig].score, &lo, &hi), k = FIGS[fig].score ? 100 : 1;
            if (isnan(lo)) lo = hi = y;   /* one case: no interval, a bar of no length */
            series *s = series_get(ss, pm, FIGS[fig].per_method ? NAN : pb);
            if (!s || series_add(s, px, k * y, k * lo, k * hi)) rc = -1;
            n = 0;
        }
        if (!more) break;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            double *p = realloc(ys, cap * sizeof *p);
            if (!p) {
                rc = -1;
                break;
            }
            ys = p;
        }
        if (!n) {
            free(pm);
            pm = strdup(m ? m : "?");
            if (!pm) rc = -1;
            pb = b, px = x;
        }
        ys[n++] = sqlite3_column_double(st, 3);
    }
    free(ys), free(pm);
    sqlite3_finalize(st);
    if (rc) fprintf(stderr, "kvbench plot: out of memory\n");
    if (ss->n) qsort(ss->s, ss->n, sizeof *ss->s, series_cmp);
    return rc;
}

/* Several budgets of one method in the set (the label then names the budget). */
static int method_has_budgets(const series_set *ss, const char *method) {
    int k = 0;
    for (int i = 0; i < ss->n; i++) k += !strcmp(ss->s[i].method, method);
    return k > 1;
}

/* Distinct budgets, for the dash type of a method run at several: 1 + rank of b. */
static int budget_dash(const series_set *ss, double b) {
    int rank = 0;
    for (int i = 0; i < ss->n; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= ss->s[k].budget == ss->s[i].budget;
        if (!dup && ss->s[i].budget < b) rank++;
    }
    return 1 + rank % 5;
}

/* Budget figure: a method recorded only at budget 1 (all tokens: fullkv) is a reference
 * line rather than a point. */
static int is_reference(const series *s) { return s->n == 1 && s->x[0] == 1; }

static void write_header(FILE *f, const char *figure, const char *gp, const char *out, const kv_runinfo *ri,
                         const char *title, const char *variant, int w, int h) {
    char line[1024];
    kv_runinfo_line(ri, line, sizeof line);
    gp_open(f, figure, gp, out, w, h);
    fprintf(f, "  set title '");
    gp_text(f, title);
    if (variant) fprintf(f, ", variant "), gp_text(f, variant);
    fputs(GP_NL, f);
    gp_text_wrap(f, line, 110);
    fprintf(f, "' noenhanced font ',9'\n");
}

static int write_lines(int fig, const series_set *ss, const kv_runinfo *ri, const char *variant, const char *out,
                       const char *gp, const char *dat) {
    const int budget_fig = FIGS[fig].per_method;
    /* budget axis: fractions (as %) unless every multi-budget point is a token count */
    int fractions = 0, tokens = 0;
    double xmin = INFINITY, xmax = -INFINITY;
    for (int i = 0; i < ss->n; i++)
        for (int k = 0; k < ss->s[i].n; k++) {
            if (budget_fig && is_reference(&ss->s[i])) continue;
            double x = ss->s[i].x[k];
            if (budget_fig) *(x <= 1 ? &fractions : &tokens) += 1;
            xmin = fmin(xmin, x), xmax = fmax(xmax, x);
        }
    int use_pct = budget_fig && (fractions > 0 || tokens == 0);
    FILE *d = fopen(dat, "w");
    if (!d) return -1;
    fprintf(d, "# kvbench plot --figure %s: one block per line (gnuplot index): x y lo hi (95%% interval)\n",
            FIGS[fig].name);
    int block = 0, dropped = 0;
    int *blk = calloc((size_t)ss->n + 1, sizeof *blk);
    if (!blk) {
        fclose(d);
        return -1;
    }
    for (int i = 0; i < ss->n; i++) {
        const series *s = &ss->s[i];
        blk[i] = -1;
        if (budget_fig && is_reference(s)) continue;   /* drawn as a constant */
        int kept = 0;
        for (int k = 0; k < s->n; k++) {
            double x = s->x[k];
            if (budget_fig && (x <= 1) != use_pct) {
                dropped++;
                continue;
            }
            if (!kept++) {
                fprintf(d, "%s# ", block ? "\n\n" : "");
                gp_comment(d, s->method);
                fprintf(d, " @ %g\n", s->budget);
            }
            fprintf(d, "%.10g %.10g %.10g %.10g\n", use_pct ? 100 * x : x, s->y[k], s->lo[k], s->hi[k]);
        }
        if (kept) blk[i] = block++;
    }
    if (dropped)
        fprintf(stderr, "kvbench plot: %d points with budgets given as %s left out (the axis shows %s)\n", dropped,
                use_pct ? "token counts" : "fractions", use_pct ? "fractions" : "token counts");
    if (fclose(d)) {
        free(blk);
        return -1;
    }
    FILE *f = fopen(gp, "w");
    if (!f) {
        free(blk);
        return -1;
    }
    write_header(f, FIGS[fig].name, gp, out, ri, FIGS[fig].title, variant, 1000, 650);
    const char *xlabel = FIGS[fig].xlabel ? FIGS[fig].xlabel
                         : use_pct       ? "KV budget (% of prompt tokens kept per layer and kv head)"
                                         : "KV budget (tokens kept per layer and kv head)";
    fprintf(f, "  set xlabel ");
    gp_str(f, xlabel);
    fprintf(f, "\n  set ylabel ");
    gp_str(f, FIGS[fig].ylabel);
    fprintf(f, "\n  set key below height 1.5\n  set grid\n  set tics nomirror\n");
    double scale = use_pct ? 100 : 1;
    if (!budget_fig && xmin > 0 && xmax / xmin >= 4) {
        fprintf(f, "  set logscale x 2\n");
        fprintf(f, "  set xrange [%g:%g]\n", xmin / 1.15, xmax * 1.15);
    } else if (budget_fig && xmax >= xmin) {   /* from 0, so that a single budget sits in a frame */
        fprintf(f, "  set xrange [0:%g]\n", scale * xmax * 1.1);
    } else if (xmax > xmin) {
        double pad = (xmax - xmin) * 0.05;
        fprintf(f, "  set xrange [%g:%g]\n", xmin - pad, xmax + pad);
    }
    if (!budget_fig) {   /* the lengths that were run, as tics */
        fprintf(f, "  set xtics (");
        int first = 1;
        for (int i = 0; i < ss->n; i++)
            for (int k = 0; k < ss->s[i].n; k++) {
                int dup = 0;
                for (int a = 0; a <= i && !dup; a++)
                    for (int b = 0; b < (a == i ? k : ss->s[a].n) && !dup; b++) dup = ss->s[a].x[b] == ss->s[i].x[k];
                if (dup) continue;
                fprintf(f, "%s'%g' %g", first ? "" : ", ", ss->s[i].x[k], ss->s[i].x[k]);
                first = 0;
            }
        fprintf(f, ")\n");
    }
    if (budget_fig) fprintf(f, "  set yrange [0:105]\n");
    else fprintf(f, "  set yrange [0:*]\n");
    fprintf(f, "  plot ");
    int n_items = 0;
    for (int i = 0; i < ss->n; i++) {
        const series *s = &ss->s[i];
        char label[256];
        if (!budget_fig && method_has_budgets(ss, s->method)) snprintf(label, sizeof label, "%s @ %g", s->method, s->budget);
        else snprintf(label, sizeof label, "%s", s->method);
        if (budget_fig && is_reference(s)) {
            char ref[300];
            snprintf(ref, sizeof ref, "%s (budget %g)", s->method, s->x[0]);
            fprintf(f, "%s%.10g with lines dt 2 lw 2 lc rgb '%s' title ", n_items++ ? ", \\\n       " : "", s->y[0],
                    kv_method_color(s->method));
            gp_str(f, ref);
            continue;
        }
        if (blk[i] < 0) continue;
        fprintf(f, "%s", n_items++ ? ", \\\n       " : "");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:2:3:4 with yerrorlines lw 2 pt %d ps 1.2 dt %d lc rgb '%s' title ", blk[i],
                1 + i % 13, budget_fig || !method_has_budgets(ss, s->method) ? 1 : budget_dash(ss, s->budget),
                kv_method_color(s->method));
        gp_str(f, label);
    }
    fprintf(f, "\n");
    gp_close(f);
    free(blk);
    return fclose(f) ? -1 : 0;
}

/* ---------------------------------------------------------------- zoom */

static int write_zoom(sqlite3 *h, const kv_runinfo *ri, const char *variant, const char *out, const char *gp,
                      const char *dat) {
    zr_panel *p;
    int np;
    char why[256];
    if (zr_load(h, ri->id, variant, NULL, &p, &np, why, sizeof why)) {
        fprintf(stderr, "kvbench plot: %s\n", why);
        return -1;
    }
    if (!np) {
        char names[512];
        pr_names(KV_CLAIM_ZOOM, names, sizeof names);
        fprintf(stderr, "kvbench plot: run %lld has no finished results with a zoom log, decode steps and head statistics"
                        " (the zoom figure needs a run with --methods %s)\n", (long long)ri->id, *names ? names : "(none has one)");
        return -1;
    }
    FILE *d = fopen(dat, "w");
    if (!d) return zr_free(p, np), -1;
    int max_layer = 0, max_head = 0;
    fprintf(d, "# kvbench plot --figure zoom: one block per (SeKV method, budget) (gnuplot index): head layer rate\n");
    for (int b = 0; b < np; b++) {
        fprintf(d, "%s# %s, %s @ %g (n = %d)\n", b ? "\n\n" : "", p[b].model, p[b].method, p[b].budget, p[b].n_results);
        for (int l = 0; l < p[b].L; l++)
            for (int hd = 0; hd < p[b].H; hd++) fprintf(d, "%d %d %.10g\n", hd, l, p[b].rate[l * p[b].H + hd]);
        max_layer = p[b].L - 1 > max_layer ? p[b].L - 1 : max_layer;
        max_head = p[b].H - 1 > max_head ? p[b].H - 1 : max_head;
    }
    if (fclose(d)) return zr_free(p, np), -1;
    FILE *f = fopen(gp, "w");
    if (!f) return zr_free(p, np), -1;
    int cols = np < 4 ? np : 4, rows = (np + cols - 1) / cols;
    int w = 520 * cols < 1000 ? 1000 : 520 * cols, hgt = (560 + 8 * max_layer) * rows;
    char line[1024];
    kv_runinfo_line(ri, line, sizeof line);
    gp_open(f, "zoom", gp, out, w, hgt);
    char title[1400];
    snprintf(title, sizeof title,
             "SeKV zoom rate: spans expanded / compressed spans available, per decode step, mean over cases%s%s",
             variant ? ", variant " : "", variant ? variant : "");
    fprintf(f, "  set multiplot layout %d,%d title '", rows, cols);
    gp_text(f, title);
    fputs(GP_NL, f);
    gp_text_wrap(f, line, 110);
    /* one fixed 0-1 scale in every panel, as figure 6: panels compare */
    fprintf(f, "' font ',9'\n  set palette defined (0 '#ffffff', 1 '#fde0ef', 2 '#e377c2', 3 '#7a0177')\n");
    fprintf(f, "  set cbrange [0:1]\n  set cblabel 'zoom rate'\n");
    fprintf(f, "  set xrange [-0.5:%g]\n  set yrange [-0.5:%g]\n", max_head + 0.5, max_layer + 0.5);
    fprintf(f, "  set xlabel 'query head'\n  set ylabel 'layer'\n  set tics nomirror\n");
    for (int b = 0; b < np; b++) {
        char t[256];
        snprintf(t, sizeof t, "%s @ budget %g (n = %d)", p[b].method, p[b].budget, p[b].n_results);
        fprintf(f, "  set title ");
        gp_str(f, t);
        fprintf(f, "\n  plot ");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:2:3 with image notitle\n", b);
    }
    fprintf(f, "  unset multiplot\n");
    gp_close(f);
    zr_free(p, np);
    return fclose(f) ? -1 : 0;
}

int plot_lines_write(const char *figure, sqlite3 *h, const kv_runinfo *ri, const char *variant, const char *out,
                     const char *gp, const char *dat) {
    int rc;
    if (!strcmp(figure, "zoom")) {
        rc = write_zoom(h, ri, variant, out, gp, dat);
    } else if (!strcmp(figure, "memory") && ri->workload && !strcmp(ri->workload, "sim")) {
        rc = plot_sim_memory(h, ri, out, gp, dat);   /* totals with weights, and the paper's points */
    } else {
        int fig = 0;
        while (fig < N_FIGS && strcmp(FIGS[fig].name, figure)) fig++;
        if (fig == N_FIGS) return -1;
        series_set ss = {0};
        rc = load_series(h, fig, ri->id, variant, &ss);
        if (rc == 0 && !ss.n) {
            fprintf(stderr, "kvbench plot: run %lld has no finished results for the %s figure%s%s\n",
                    (long long)ri->id, figure, variant ? " in variant " : "", variant ? variant : "");
            rc = -1;
        } else if (rc == 0) {
            rc = write_lines(fig, &ss, ri, variant, out, gp, dat);
            if (rc) fprintf(stderr, "kvbench plot: cannot write %s / %s\n", dat, gp);
        }
        set_free(&ss);
        return rc;
    }
    return rc;
}
