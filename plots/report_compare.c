/* kvbench report --table compare --base METHOD: every (method, params, budget) row against
 * the base method's row of the same model, paired over the cases both saw.
 *
 * Per row: the mean of each over the common cases, their difference (row - base) with a
 * 95% paired bootstrap interval (cases resampled together, 2000 resamples, fixed seed),
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
#include "stats.h"

typedef struct {
    int row, n, binary, pos, neg;
    double base, mean, diff, lo, hi, p, adj;
} cmp_line;

static void csv_put(FILE *f, const char *s, int last) {
    csv_fwrite(f, s, strlen(s));
    fputc(last ? '\n' : ',', f);
}
static void csv_num(FILE *f, double x, int last) {
    char b[64] = "";
    if (!isnan(x)) snprintf(b, sizeof b, "%.17g", x);
    csv_put(f, b, last);
}

/* The base row of a model: the base method with default params if run, else its first row. */
static int base_row(const rt_data *d, const char *model, const char *base) {
    int any = -1;
    for (int i = 0; i < d->nrow; i++) {
        const rt_family *f = &d->fam[d->row[i].fam];
        if (strcmp(f->model, model) || strcasecmp(f->method, base)) continue;
        if (!*f->params) return i;
        if (any < 0) any = i;
    }
    return any;
}

int rt_compare(const rt_data *d, int metric, const char *base, FILE *md, FILE *csv, const char *run) {
    if (!base || !*base) base = kv_method_reference() ? kv_method_reference()->name : "";
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
        bases[i] = base_row(d, d->fam[d->row[i].fam].model, base);
        have_base |= bases[i] >= 0;
    }
    if (!have_base) {
        fprintf(stderr, "kvbench report: --base %s: no results of that method in %s\n", base,
                strcmp(run, "all") ? "this run" : "these runs");
        goto done;
    }
    for (int i = 0; i < d->nrow; i++) {
        int b = bases[i];
        if (b < 0 || b == i) continue;
        double *xa = NULL, *xb = NULL;
        int n = rt_paired(&rows[i], &rows[b], &xa, &xb);
        cmp_line *l = &ln[nl++];
        *l = (cmp_line){.row = i, .n = n > 0 ? n : 0, .base = NAN, .mean = NAN, .diff = NAN, .lo = NAN, .hi = NAN, .p = NAN};
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
                "Each row against %s (its model's %s row), paired over the cases both saw (n): mean %s of the base"
                " and of the row on those cases, difference (row - base)%s with its 95%% paired bootstrap interval"
                " (2000 resamples, fixed seed), and a two-sided p-value: McNemar's exact test on the discordant pairs"
                " (+ row better / - base better) when both are binary scores, else the paired permutation test on the"
                " differences (exact up to 20 non-zero pairs, else 10000 sign flips from a fixed seed). p (Holm):"
                " adjusted over the %d comparisons of this table; * where below 0.05.%s\n\n",
                base, base, rt_metric_names[metric], pct ? " in points of %" : " in nats", nl,
                metric == RT_M_SCORE || metric == RT_M_TOP1 ? " Infeasible and failed results count as 0."
                                                            : " Infeasible and failed results are left out.");
        int model = d->n_models > 1;
        fprintf(md, "|%s method | budget | n | %s | row | difference%s [95%% CI] | test (+/-) | p | p (Holm) | |\n",
                model ? " model |" : "", base, unit);
        fprintf(md, "|%s---|---:|---:|---:|---:|---:|---|---:|---:|---|\n", model ? "---|" : "");
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            char lab[192], b[32];
            rt_family_label(&d->fam[r->fam], lab, sizeof lab);
            kv_budget_str(r->budget, b, sizeof b);
            if (model) fprintf(md, "| %s ", d->fam[r->fam].model);
            if (!l->n) {
                fprintf(md, "| %s | %s | 0 | - | - | - | no common case | - | - | |\n", lab, b);
                continue;
            }
            fprintf(md, "| %s | %s | %d | %.*f | %.*f | %+.*f [%+.*f, %+.*f] | %s (+%d/-%d) | %.3g | %.3g | %s |\n", lab,
                    b, l->n, pct ? 1 : 3, scale * l->base, pct ? 1 : 3, scale * l->mean, pct ? 1 : 3, scale * l->diff,
                    pct ? 1 : 3, scale * l->lo, pct ? 1 : 3, scale * l->hi, l->binary ? "McNemar" : "perm", l->pos,
                    l->neg, l->p, l->adj, l->adj < 0.05 ? "*" : "");
        }
        int sig = 0;
        for (int i = 0; i < nl; i++) sig += ln[i].adj < 0.05;
        fprintf(md, "\n%d of %d differences significant after Holm (p < 0.05).\n", sig, nl);
    }
    if (csv) {
        const char *h[] = {"run", "table", "metric", "model", "method", "params", "budget", "base", "n", "base_mean",
                           "mean", "diff", "lo", "hi", "test", "pos", "neg", "p", "p_holm"};
        for (int k = 0; k < 19; k++) csv_put(csv, h[k], k == 18);
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            const rt_family *f = &d->fam[r->fam];
            csv_put(csv, run, 0), csv_put(csv, "compare", 0), csv_put(csv, rt_metric_names[metric], 0);
            csv_put(csv, f->model, 0), csv_put(csv, f->method, 0), csv_put(csv, f->params, 0);
            csv_num(csv, r->budget, 0), csv_put(csv, base, 0), csv_num(csv, l->n, 0);
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
