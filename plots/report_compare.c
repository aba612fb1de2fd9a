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

/* Whether the comma list holds the item item[0..len). */
static int list_has(const char *list, const char *item, size_t len) {
    for (const char *q = list; *q;) {
        size_t ql = strcspn(q, ",");
        if (ql == len && !strncmp(q, item, len)) return 1;
        q += ql + (q[ql] == ',');
    }
    return 0;
}

/* Whether params (normalised "k=v,k=v") holds every k=v item of settings: -1 when one is
 * missing, else how many of its items are not among the settings. */
static int settings_extra(const char *params, const char *settings) {
    for (const char *q = settings; *q;) {   /* every setting must be there */
        size_t ql = strcspn(q, ",");
        if (!list_has(params, q, ql)) return -1;
        q += ql + (q[ql] == ',');
    }
    int extra = 0;
    for (const char *p = params; *p;) {
        size_t len = strcspn(p, ",");
        extra += !list_has(settings, p, len);
        p += len + (p[len] == ',');
    }
    return extra;
}

/* Which families may be the base (ok[f] = 1): every family of the base method when no
 * settings were given; else, per model, the base method's family whose params hold every
 * setting with the fewest others (sekv:params_file=none picks the untrained router over
 * params_file=none,trained_zoom=0). 0; -1 after printing why when two families tie. */
static int base_families(const rt_data *d, const rt_base *b, char *ok) {
    for (int f = 0; f < d->nfam; f++) {
        const rt_family *x = &d->fam[f];
        ok[f] = 0;
        if (strcasecmp(x->method, b->method)) continue;
        if (!*b->settings) {
            ok[f] = 1;
            continue;
        }
        int e = settings_extra(x->params, b->settings), best = e, ties = 0;
        if (e < 0) continue;
        for (int g = 0; g < d->nfam; g++) {
            const rt_family *y = &d->fam[g];
            if (strcasecmp(y->method, b->method) || strcmp(y->model, x->model)) continue;
            int eg = settings_extra(y->params, b->settings);
            if (eg >= 0 && eg < best) best = eg;
            ties += eg == e;
        }
        if (e > best) continue;
        if (ties > 1) {
            fprintf(stderr, "kvbench report: --base %s:%s matches %d parameter sets of %s on %s with %d other setting%s"
                            " each; name more settings (its params are in the table's rows)\n",
                    b->method, b->settings, ties, b->method, x->model, e, e == 1 ? "" : "s");
            return -1;
        }
        ok[f] = 1;
    }
    return 0;
}

/* The base row of row i: the base family's row of the same model (without settings: default
 * params if run, else its first) at budget bb (given as --base M@B), else at row i's own
 * budget, since a method at another budget is another comparison. A method that keeps every
 * token (FullKV) has no budget to match: its row at row i's budget if run, else its first.
 * -1 when there is none. */
static int base_row(const rt_data *d, int i, const char *ok, const char *base, double bb) {
    const char *model = d->fam[d->row[i].fam].model;
    const kv_method *m = kv_method_find(base);
    int free_budget = isnan(bb) && m && m->keeps_all;
    double want = isnan(bb) ? d->row[i].budget : bb;
    int any = -1, at = -1;
    for (int k = 0; k < d->nrow; k++) {
        const rt_family *f = &d->fam[d->row[k].fam];
        if (!ok[d->row[k].fam] || strcmp(f->model, model)) continue;
        if (d->row[k].budget == want && at < 0) at = k;   /* rows sort default params ("") first */
        if (any < 0) any = k;
    }
    return at >= 0 ? at : free_budget ? any : -1;
}

/* --base METHOD[@BUDGET][:K=V,...] into b. 0, or -1 after printing why. */
int rt_base_parse(const char *arg, rt_base *b) {
    const char *colon = strchr(arg, ':');
    size_t head = colon ? (size_t)(colon - arg) : strlen(arg);
    const char *at = memchr(arg, '@', head);
    *b = (rt_base){.budget = NAN};
    snprintf(b->method, sizeof b->method, "%.*s", (int)(at ? (size_t)(at - arg) : head), arg);
    if (!kv_method_find(b->method)) {
        fprintf(stderr, "kvbench report: --base '%s' is not a method (kvbench methods lists them)\n", arg);
        return -1;
    }
    if (at) {
        char num[64], *end;
        size_t len = head - (size_t)(at + 1 - arg);   /* the budget's characters, up to the ':' */
        snprintf(num, sizeof num, "%.*s", (int)(len < sizeof num ? len : sizeof num - 1), at + 1);
        b->budget = strtod(num, &end);
        if (len >= sizeof num || end == num || *end || !(b->budget > 0)) {
            fprintf(stderr, "kvbench report: --base '%s': the budget after @ is not a positive number\n", arg);
            return -1;
        }
    }
    if (colon) {
        const char *s = colon + 1;
        if (strlen(s) >= sizeof b->settings) {
            fprintf(stderr, "kvbench report: --base '%.60s...': the settings are longer than %zu bytes\n", arg,
                    sizeof b->settings - 1);
            return -1;
        }
        for (const char *q = s;;) {   /* K=V items, each with a key */
            size_t len = strcspn(q, ","), key = strcspn(q, "=");
            if (!len || key == 0 || key >= len) {
                fprintf(stderr, "kvbench report: --base '%s': the settings after : are not KEY=VALUE[,KEY=VALUE...]\n",
                        arg);
                return -1;
            }
            if (!q[len]) break;
            q += len + 1;
        }
        snprintf(b->settings, sizeof b->settings, "%s", s);
    }
    return 0;
}

int rt_compare(const rt_data *d, int metric, const char *base, FILE *md, FILE *csv, const char *run) {
    rt_base bp;
    if (!base || !*base) base = kv_method_reference() ? kv_method_reference()->name : "";
    if (rt_base_parse(base, &bp)) return -1;
    const char *bname = bp.method;
    double bb = bp.budget;
    char bdesc[128];   /* "chunkkv at each row's budget", "chunkkv@0.05" */
    if (isnan(bb)) snprintf(bdesc, sizeof bdesc, "%s at each row's budget", bname);
    else snprintf(bdesc, sizeof bdesc, "%s at budget %g", bname, bb);
    int pct = metric == RT_M_SCORE || metric == RT_M_TOP1;
    double scale = pct ? 100 : 1;
    rt_samples *rows = calloc((size_t)d->nrow + 1, sizeof *rows);
    cmp_line *ln = calloc((size_t)d->nrow + 1, sizeof *ln);
    int *bases = malloc(sizeof(int) * (d->nrow + 1)), nl = 0, rc = -1;
    char *ok = calloc((size_t)d->nfam + 1, 1);
    if (!rows || !ln || !bases || !ok) {
        fprintf(stderr, "kvbench report: out of memory\n");
        goto done;
    }
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        rows[r->row].nfail += !r->ok;
        rt_samples_add(&rows[r->row], rt_rec_value(r, metric), 0, r->cas);
    }
    if (base_families(d, &bp, ok)) goto done;
    int have_base = 0;
    for (int i = 0; i < d->nrow; i++) {
        bases[i] = base_row(d, i, ok, bname, bb);
        have_base |= bases[i] >= 0;
    }
    if (!have_base) {
        fprintf(stderr, "kvbench report: --base %s: no results of %s%s%s in %s", base, bdesc,
                *bp.settings ? " with " : "", bp.settings, strcmp(run, "all") ? "this run" : "these runs");
        int listed = 0;   /* with settings: the params the method did run with */
        for (int f = 0; *bp.settings && f < d->nfam; f++)
            if (!strcasecmp(d->fam[f].method, bname))
                fprintf(stderr, "%s%s%s%s", listed++ ? ", " : " (its params here: ", *d->fam[f].params ? "'" : "",
                        *d->fam[f].params ? d->fam[f].params : "the defaults", *d->fam[f].params ? "'" : "");
        fprintf(stderr, "%s\n", listed ? ")" : "");
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
                "Each row against %s (base: its model's %s row%s%s%s), paired over the cases"
                " both saw (n): mean %s of the base and of the row on those cases, difference (row - base)%s with"
                " its 95%% small-n interval (bootstrap-t over the pairs, 2000 resamples, fixed seed, widened to at"
                " least Student's t-interval), and a two-sided p-value: McNemar's exact test on the discordant pairs"
                " (+ row better / - base better) when both are binary scores, else the exact paired permutation test"
                " on the differences (every sign assignment up to 20 non-zero pairs, else 10000 from a fixed seed)."
                " p (Holm): adjusted over the %d comparisons of this table; * where below 0.05.%s\n\n",
                bdesc, bname, *bp.settings ? " whose params hold " : ", default params if run",
                bp.settings, *bp.settings ? ", with the fewest other settings" : "", rt_metric_names[metric], pct ? " in points of %" : " in nats", nl,
                metric == RT_M_SCORE || metric == RT_M_TOP1 ? " Infeasible and failed results count as 0."
                                                            : " Infeasible and failed results are left out.");
        int model = d->n_models > 1;
        fprintf(md, "|%s method | budget | n | base | base budget | base mean | row | difference%s [95%% CI] | test (+/-) | p"
                    " | p (Holm) | |\n", model ? " model |" : "", unit);
        fprintf(md, "|%s---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---|\n", model ? "---|" : "");
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            char lab[192], blab[192], b[32], bbud[32] = "-";
            rt_family_label(&d->fam[r->fam], lab, sizeof lab);
            kv_budget_str(r->budget, b, sizeof b);
            snprintf(blab, sizeof blab, "%s", bname);
            if (l->base_row >= 0) {
                kv_budget_str(d->row[l->base_row].budget, bbud, sizeof bbud);
                rt_family_label(&d->fam[d->row[l->base_row].fam], blab, sizeof blab);
            }
            if (model) fprintf(md, "| %s ", d->fam[r->fam].model);
            if (l->base_row < 0) {
                fprintf(md, "| %s | %s | 0 | %s | - | - | - | - | no %s row at budget %s | - | - | |\n", lab, b, bname,
                        bname, b);
                continue;
            }
            if (!l->n) {
                fprintf(md, "| %s | %s | 0 | %s | %s | - | - | - | no common case | - | - | |\n", lab, b, blab, bbud);
                continue;
            }
            char ci[96] = "[-, -]";   /* one pair: no spread to go by */
            if (!isnan(l->lo))
                snprintf(ci, sizeof ci, "[%+.*f, %+.*f]", pct ? 1 : 3, scale * l->lo, pct ? 1 : 3, scale * l->hi);
            fprintf(md, "| %s | %s | %d | %s | %s | %.*f | %.*f | %+.*f %s | %s (+%d/-%d) | %.3g | %.3g | %s |\n", lab, b,
                    l->n, blab, bbud, pct ? 1 : 3, scale * l->base, pct ? 1 : 3, scale * l->mean, pct ? 1 : 3,
                    scale * l->diff, ci, l->binary ? "McNemar" : "perm", l->pos, l->neg, l->p, l->adj,
                    l->adj < 0.05 ? "*" : "");
        }
        int sig = 0;
        for (int i = 0; i < nl; i++) sig += ln[i].adj < 0.05;
        fprintf(md, "\n%d of %d differences significant after Holm (p < 0.05).\n", sig, nl);
    }
    if (csv) {
        const char *h[] = {"run",  "table",       "metric", "model",     "method", "params", "budget",
                           "base", "base_params", "base_budget", "n",  "base_mean", "mean",   "diff",   "lo",
                           "hi",   "test",        "pos",    "neg",       "p",      "p_holm"};
        for (int k = 0; k < 21; k++) csv_put(csv, h[k], k == 20);
        for (int i = 0; i < nl; i++) {
            const cmp_line *l = &ln[i];
            const rt_row *r = &d->row[l->row];
            const rt_family *f = &d->fam[r->fam];
            csv_put(csv, run, 0), csv_put(csv, "compare", 0), csv_put(csv, rt_metric_names[metric], 0);
            csv_put(csv, f->model, 0), csv_put(csv, f->method, 0), csv_put(csv, f->params, 0);
            csv_num(csv, r->budget, 0), csv_put(csv, bname, 0);
            csv_put(csv, l->base_row >= 0 ? d->fam[d->row[l->base_row].fam].params : "", 0);
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
    free(rows), free(ln), free(bases), free(ok);
    return rc;
}
