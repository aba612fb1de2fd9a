/* kvbench report --table compare --base METHOD[@BUDGET]: every (method, params, budget) row
 * against the base method's row of the same model at the same budget (or at BUDGET),
 * paired over the cases both saw.
 *
 * Per row: the mean of each over the common cases, their difference (row - base) with a
 * 95% small-n interval (st_boot_paired: bootstrap-t over the pairs, widened to Student's t),
 * and a two-sided p-value: McNemar's exact test (the binomial on the discordant pairs) when
 * both are binary scores, else the paired permutation test on the differences (every sign
 * assignment up to 20 non-zero pairs, else 10000 drawn from a fixed seed). The
 * p-values are Holm-adjusted over the rows of the table; * marks adjusted p < 0.05. */
#include <csv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../methods/method.h"
#include "report_tables.h"
#include "report_out.h"
#include "../kernels/stats.h"

typedef struct {
    int row, base_row, n, binary, pos, neg;
    double base, mean, diff, lo, hi, p, adj;
} cmp_line;

/* every cell through kv_csv_cell: control bytes escaped, formulas neutralised */
static void csv_put(FILE *f, const char *s, int last) { kv_csv_cell(f, s, last); }
static void csv_num(FILE *f, double x, int last) {
    char b[64] = "";
    if (!isnan(x)) snprintf(b, sizeof b, "%.17g", x);
    csv_put(f, b, last);
}

/* The base row of row i: the base method's row of the same model (default params if run,
 * else its first) at budget bb (given as --base M@B), else at row i's own budget, since a
 * method at another budget is another comparison. A method that keeps every token
 * (FullKV) has no budget to match: its row at row i's budget if run, else its first. -1
 * when there is none. */
static int base_row(const rt_data *d, int i, const char *base, double bb) {
    const char *model = d->fam[d->row[i].fam].model;
    const kv_method *m = kv_method_find(base);
    int free_budget = isnan(bb) && m && m->keeps_all;
    double want = isnan(bb) ? d->row[i].budget : bb;
    int any = -1, at = -1;
    for (int k = 0; k < d->nrow; k++) {
        const rt_family *f = &d->fam[d->row[k].fam];
        if (strcmp(f->model, model) || strcasecmp(f->method, base)) continue;
        if (d->row[k].budget == want && at < 0) at = k;   /* rows sort default params ("") first */
        if (any < 0) any = k;
    }
    return at >= 0 ? at : free_budget ? any : -1;
}

/* --base METHOD[@BUDGET] into the method (buf) and the budget (NAN: each row's own). 0, or
 * -1 after printing why. */
int rt_base_parse(const char *arg, char *buf, size_t n, double *budget) {
    const char *at = strchr(arg, '@');
    *budget = NAN;
    snprintf(buf, n, "%.*s", at ? (int)(at - arg) : (int)strlen(arg), arg);
    if (!kv_method_find(buf)) {
        fprintf(stderr, "kvbench report: --base '%s' is not a method (kvbench methods lists them)\n", arg);
        return -1;
    }
    if (at) {
        char *end;
        *budget = strtod(at + 1, &end);
        if (end == at + 1 || *end || !(*budget > 0)) {
            fprintf(stderr, "kvbench report: --base '%s': the budget after @ is not a positive number\n", arg);
            return -1;
        }
    }
    return 0;
}

int rt_compare(const rt_data *d, int metric, const char *base, FILE *md, FILE *csv, const char *run) {
    char bname[64];
    double bb;
    if (!base || !*base) base = kv_method_reference() ? kv_method_reference()->name : "";
    if (rt_base_parse(base, bname, sizeof bname, &bb)) return -1;
    char bdesc[128];   /* "chunkkv at each row's budget", "chunkkv@0.05" */
    if (isnan(bb)) snprintf(bdesc, sizeof bdesc, "%s at each row's budget", bname);
    else snprintf(bdesc, sizeof bdesc, "%s at budget %g", bname, bb);
    int pct = metric == RT_M_SCORE || metric == RT_M_TOP1;
    double scale = pct ? 100 : 1;
    rt_samples *rows = calloc((size_t)d->nrow + 1, sizeof *rows);
    cmp_line *ln = calloc((size_t)d->nrow + 1, sizeof *ln);
    int *bases = malloc(sizeof(int) * (d->nrow + 1)), nl = 0, rc = -1;
    if (!rows || !ln || !bases) {
        fprintf(stderr, "kvbench report: out of memory\n");
        goto done;
    }
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        rows[r->row].nfail += !r->ok;
        rt_samples_add(&rows[r->row], rt_rec_value(r, metric), 0, r->cas);
    }
    int have_base = 0;
    for (int i = 0; i < d->nrow; i++) {
        bases[i] = base_row(d, i, bname, bb);
        have_base |= bases[i] >= 0;
    }
    if (!have_base) {
        fprintf(stderr, "kvbench report: --base %s: no results of %s in %s\n", base, bdesc,
                strcmp(run, "all") ? "this run" : "these runs");
        goto done;
    }
    for (int i = 0; i < d->nrow; i++) {
        int b = bases[i];
        if (b == i || (b < 0 && !strcasecmp(d->fam[d->row[i].fam].method, bname))) continue;   /* the base itself */
        if (b < 0) {   /* no base row at this budget: listed, not compared */
            ln[nl++] = (cmp_line){.row = i, .base_row = -1, .base = NAN, .mean = NAN, .diff = NAN, .lo = NAN,
                                  .hi = NAN, .p = NAN};
            continue;
        }
        double *xa = NULL, *xb = NULL;
        int n = rt_paired(&rows[i], &rows[b], &xa, &xb);
        cmp_line *l = &ln[nl++];
        *l = (cmp_line){.row = i, .base_row = b, .n = n > 0 ? n : 0, .base = NAN, .mean = NAN, .diff = NAN, .lo = NAN, .hi = NAN, .p = NAN};
        if (n > 0) {
            double sa = 0, sb = 0;
            for (int k = 0; k < n; k++) {
                sa += xa[k], sb += xb[k];
                l->pos += xa[k] > xb[k], l->neg += xa[k] < xb[k];
            }
            l->mean = sa / n, l->base = sb / n;
            l->binary = st_is_binary(xa, n) && st_is_binary(xb, n);
            l->diff = st_boot_paired(xa, xb, n, ST_BOOT_B, ST_SEED, 0.95, &l->lo, &l->hi);
            if (l->binary) l->p = st_sign_p(l->pos, l->neg);
            else {
                for (int k = 0; k < n; k++) xa[k] -= xb[k];
                l->p = st_perm_p(xa, n, ST_PERM_B, ST_SEED);
            }
        }
        free(xa), free(xb);
    }
    /* Holm over the comparisons that have a p-value */
    double *p = malloc(sizeof *p * (nl + 1));
    int np = 0;
    for (int i = 0; p && i < nl; i++)
        if (!isnan(ln[i].p)) p[np++] = ln[i].p;
    if (p) st_holm(p, np, p);
    for (int i = 0, k = 0; p && i < nl; i++) ln[i].adj = isnan(ln[i].p) ? NAN : p[k++];
    free(p);
    const char *unit = pct ? " (points of %)" : " (nats)";
    if (md) {
        fprintf(md,
                "Each row against %s (base: its model's %s row, default params if run), paired over the cases"
                " both saw (n): mean %s of the base and of the row on those cases, difference (row - base)%s with"
                " its 95%% small-n interval (bootstrap-t over the pairs, 2000 resamples, fixed seed, widened to at"
                " least Student's t-interval), and a two-sided p-value: McNemar's exact test on the discordant pairs"
                " (+ row better / - base better) when both are binary scores, else the exact paired permutation test"
                " on the differences (every sign assignment up to 20 non-zero pairs, else 10000 from a fixed seed)."
                " p (Holm): adjusted over the %d comparisons of this table; * where below 0.05.%s\n\n",
                bdesc, bname, rt_metric_names[metric], pct ? " in points of %" : " in nats", nl,
                metric == RT_M_SCORE || metric == RT_M_TOP1 ? " Infeasible and failed results count as 0."
                                                            : " Infeasible and failed results are left out.");
        int model = d->n_models > 1;
        fprintf(md, "|%s method | budget | n | base | base budget | base mean | row | difference%s [95%% CI] | test (+/-) | p"
                    " | p (Holm) | |\n", model ? " model |" : "", unit);
        fprintf(md, "|%s---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---|\n", model ? "---|" : "");
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            char lab[192], b[32], bbud[32] = "-";
            rt_family_label(&d->fam[r->fam], lab, sizeof lab);
            kv_budget_str(r->budget, b, sizeof b);
            if (l->base_row >= 0) kv_budget_str(d->row[l->base_row].budget, bbud, sizeof bbud);
            if (model) fprintf(md, "| %s ", d->fam[r->fam].model);
            if (l->base_row < 0) {
                fprintf(md, "| %s | %s | 0 | %s | - | - | - | - | no %s row at budget %s | - | - | |\n", lab, b, bname,
                        bname, b);
                continue;
            }
            if (!l->n) {
                fprintf(md, "| %s | %s | 0 | %s | %s | - | - | - | no common case | - | - | |\n", lab, b, bname, bbud);
                continue;
            }
            char ci[96] = "[-, -]";   /* one pair: no spread to go by */
            if (!isnan(l->lo))
                snprintf(ci, sizeof ci, "[%+.*f, %+.*f]", pct ? 1 : 3, scale * l->lo, pct ? 1 : 3, scale * l->hi);
            fprintf(md, "| %s | %s | %d | %s | %s | %.*f | %.*f | %+.*f %s | %s (+%d/-%d) | %.3g | %.3g | %s |\n", lab, b,
                    l->n, bname, bbud, pct ? 1 : 3, scale * l->base, pct ? 1 : 3, scale * l->mean, pct ? 1 : 3,
                    scale * l->diff, ci, l->binary ? "McNemar" : "perm", l->pos, l->neg, l->p, l->adj,
                    l->adj < 0.05 ? "*" : "");
        }
        int sig = 0;
        for (int i = 0; i < nl; i++) sig += ln[i].adj < 0.05;
        fprintf(md, "\n%d of %d differences significant after Holm (p < 0.05).\n", sig, nl);
    }
    if (csv) {
        const char *h[] = {"run", "table", "metric", "model", "method", "params", "budget", "base", "base_budget", "n",
                           "base_mean", "mean", "diff", "lo", "hi", "test", "pos", "neg", "p", "p_holm"};
        for (int k = 0; k < 20; k++) csv_put(csv, h[k], k == 19);
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            const rt_family *f = &d->fam[r->fam];
            csv_put(csv, run, 0), csv_put(csv, "compare", 0), csv_put(csv, rt_metric_names[metric], 0);
            csv_put(csv, f->model, 0), csv_put(csv, f->method, 0), csv_put(csv, f->params, 0);
            csv_num(csv, r->budget, 0), csv_put(csv, bname, 0);
            csv_num(csv, l->base_row >= 0 ? d->row[l->base_row].budget : NAN, 0), csv_num(csv, l->n, 0);
            csv_num(csv, scale * l->base, 0), csv_num(csv, scale * l->mean, 0), csv_num(csv, scale * l->diff, 0);
            csv_num(csv, scale * l->lo, 0), csv_num(csv, scale * l->hi, 0);
            csv_put(csv, !l->n ? "" : l->binary ? "mcnemar" : "perm", 0);
            csv_num(csv, l->pos, 0), csv_num(csv, l->neg, 0), csv_num(csv, l->p, 0), csv_num(csv, l->adj, 1);
        }
    }
    rc = 0;
done:
    for (int i = 0; rows && i < d->nrow; i++) rt_samples_free(&rows[i]);
    free(rows), free(ln), free(bases);
    return rc;
}
