/* kvbench plot --figure memory on a kvbench sim run: total memory (weights + fast-tier K/V
 * and method state at its peak + the prefill's activations and statistics) in GB against
 * context length, one line per method and budget, and the points a method's paper reports
 * (kv_paper.memory: SeKV's) beside them when the run has that paper's backbone shapes.
 * A second, dashed line per method: the fast tier's K/V alone (steady, after compression),
 * so weights and activations can be told from the cache. Sim results are computed, not
 * sampled: no intervals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paper_rows.h"
#include "plot_util.h"
#include "../results/query.h"

typedef struct {
    char method[64];
    double budget;
    int n;
    double ctx[64], total[64], kv[64];
} sim_series;

int plot_sim_memory(sqlite3 *h, const kv_runinfo *ri, const char *out, const char *gp, const char *dat) {
    sqlite3_stmt *st = kvq_sim_memory(h, ri->id);
    if (!st) {
        fprintf(stderr, "kvbench plot: reading sim results: %s\n", sqlite3_errmsg(h));
        return -1;
    }
    sim_series ss[64];
    int ns = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        double b = sqlite3_column_double(st, 1);
        sim_series *s = ns ? &ss[ns - 1] : NULL;
        if (!s || strcmp(s->method, m) || s->budget != b) {
            if (ns == 64) break;
            s = &ss[ns++];
            memset(s, 0, sizeof *s);
            snprintf(s->method, sizeof s->method, "%s", m);
            s->budget = b;
        }
        if (s->n == 64) continue;
        s->ctx[s->n] = sqlite3_column_double(st, 2);
        s->total[s->n] = sqlite3_column_double(st, 3) / 1e9;
        s->kv[s->n++] = sqlite3_column_double(st, 4) / 1e9;
    }
    sqlite3_finalize(st);
    if (!ns) {
        fprintf(stderr, "kvbench plot: sim run %lld has no finished results\n", (long long)ri->id);
        return -1;
    }
    /* the primary paper's memory points, when the run has its backbone */
    const kv_method *pm = pr_primary();
    const kv_paper *pp = pm ? pm->paper : NULL;
    int paper = pp && pp->memory[0].method && *pp->memory_model && ri->model && strstr(ri->model, pp->memory_model);
    const char *who[8];   /* the methods of the points, in their order */
    int nwho = 0;
    for (const kv_paper_mem *q = paper ? pp->memory : NULL; q && q->method && nwho < 8; q++) {
        int seen = 0;
        for (int k = 0; k < nwho; k++) seen |= !strcmp(who[k], q->method);
        if (!seen) who[nwho++] = q->method;
    }
    FILE *d = fopen(dat, "w");
    if (!d) return -1;
    fprintf(d, "# kvbench plot --figure memory (sim run): per line ctx total_GB fast_kv_steady_GB\n");
    double xmin = INFINITY, xmax = 0;
    for (int i = 0; i < ns; i++) {
        fprintf(d, "%s# ", i ? "\n\n" : "");
        gp_comment(d, ss[i].method);
        fprintf(d, " @ %g\n", ss[i].budget);
        for (int k = 0; k < ss[i].n; k++) {
            fprintf(d, "%.10g %.10g %.10g\n", ss[i].ctx[k], ss[i].total[k], ss[i].kv[k]);
            xmin = fmin(xmin, ss[i].ctx[k]), xmax = fmax(xmax, ss[i].ctx[k]);
        }
    }
    int paper_block = ns;
    if (paper) {
        fprintf(d, "\n\n# the paper's reported memory (%s): ctx GB method\n", pp->memory_label);
        for (const kv_paper_mem *q = pp->memory; q->method; q++) {
            fprintf(d, "%d %.10g %s\n", q->ctx, q->gb, q->method);
            xmin = fmin(xmin, q->ctx), xmax = fmax(xmax, q->ctx);
        }
    }
    if (fclose(d)) return -1;
    FILE *f = fopen(gp, "w");
    if (!f) return -1;
    char line[1024];
    kv_runinfo_line(ri, line, sizeof line);
    gp_open(f, "memory", gp, out, 1100, 700);
    /* methods without a finished point (infeasible at this budget, failed) are named */
    char missing[512] = "";
    sqlite3_stmt *mq = kvq_unfinished(h, ri->id);
    if (mq) {
        while (sqlite3_step(mq) == SQLITE_ROW)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", *missing ? ", " : "; not drawn: ",
                     (const char *)sqlite3_column_text(mq, 0));
        sqlite3_finalize(mq);
    }
    fprintf(f, "  set title 'total = weights + fast-tier K/V peak + prefill activations (solid); fast-tier K/V"
               " steady (dashed)%s" GP_NL, paper ? "; marks: the paper''s GPU memory" : "");
    if (*missing) gp_text(f, missing + 2), fputs(GP_NL, f);
    gp_text_wrap(f, line, 120);
    fprintf(f, "' noenhanced font ',9'\n");
    fprintf(f, "  set xlabel 'context length (tokens)'\n  set ylabel 'GB (10^9 bytes)'\n");
    fprintf(f, "  set key outside right top\n  set grid\n  set tics nomirror\n  set yrange [0:*]\n");
    if (xmin > 0 && xmax / xmin >= 4) fprintf(f, "  set logscale x 2\n  set xrange [%g:%g]\n", xmin / 1.15, xmax * 1.15);
    fprintf(f, "  plot ");
    int items = 0;
    for (int i = 0; i < ns; i++) {
        char label[128];
        snprintf(label, sizeof label, "%.63s @ %g", ss[i].method, ss[i].budget);
        fprintf(f, "%s", items++ ? ", \\\n       " : "");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '%s' title ", i,
                kv_method_color(ss[i].method));
        gp_str(f, label);
        fprintf(f, ", \\\n       ");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:3 with lines lw 1 dt 2 lc rgb '%s' notitle", i, kv_method_color(ss[i].method));
    }
    for (int k = 0; paper && k < nwho; k++) {
        const char *m = who[k];
        fprintf(f, ", \\\n       ");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:(strcol(3) eq '%s' ? $2 : 1/0) with points pt %d ps 2.5 lw 2 lc rgb '%s' title ",
                paper_block, m, k ? 9 : 5, kv_method_color(m));
        char t[160];
        snprintf(t, sizeof t, "paper: %.60s (%.60s)", m, pp->memory_label);
        gp_str(f, t);
    }
    fprintf(f, "\n");
    gp_close(f);
    return fclose(f) ? -1 : 0;
}
