/* kvbench report --table paper: the claims of a method's paper (kv_method.paper; SeKV's
 * is methods/sekv/sekv_paper.c) that a run can test, side by side with kvbench's numbers.
 * The papers' backbones may be larger than the run's model, so only the direction of each
 * claim is compared, never the level.
 *
 * Each claim is judged for each row of the paper (every method whose table points at it,
 * in registry order), each with its default params; an ablation is that method with
 * exactly one parameter changed (matched exactly: KEY=same and KEY=16 are different rows).
 * NIAH claims are over the NIAH cells (workload niah, one cell = context x depth, repeats
 * averaged) that every method of the comparison ran; C2 is judged on every workload of
 * the file, over its cases. An infeasible or failed result counts 0, and the rows say how
 * many of the row's results were infeasible: a claim whose row's results were all
 * infeasible is "untested", not "no"; "yes" and "no" need the sign test's p < 0.05 (else
 * "not significant"); one that fails where FullKV scores below RT_CEILING
 * over its cells is "undecidable: ceiling" (the model cannot do the task). Intervals are the 95% small-n interval over the
 * cells (paired: st_boot_paired, a bootstrap-t widened to Student's t; fixed seed), with
 * the exact two-sided sign-test p of the paired cells; never a normal interval. A zoom
 * claim (sparse, in few heads, stronger in middle and later layers) reads the zoom rates
 * (zoom_rate.h). With results of the paper's uncapped setting in the file, an iso-memory
 * section compares every method at the budget whose fast-tier bytes are nearest to, not
 * above, the primary row's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report_tables.h"
#include "report_out.h"
#include "../kernels/stats.h"
#include "zoom_rate.h"
#include "../methods/method.h"

/* The paper being reported and its rows (set by rt_paper; the report runs on one
 * thread). rows[0] is the primary row. */
static const kv_paper *paper;
static const char *rows[16];
static int n_rows;

/* Per-cell scores of one (family, budget): NAN where the cell did not run. Cells are the
 * NIAH (workload, ctx, depth) cells, or with `workload` set, the cases of that workload
 * (the name before any ':'). */
typedef struct {
    int ncase;
    const rt_data *d;
    const char *model;      /* the one model compared: the one with the most results of the rows */
    const char *workload;   /* NULL: NIAH cells */
} cases;

static int is_niah(const rt_data *d, const rt_rec *r) {
    return r->depth >= 0 && r->wl >= 0 && !strncmp(d->wl[r->wl], "niah", 4);
}

static int same_workload(const char *col, const char *w) {
    size_t n = strcspn(col, ":");
    return strlen(w) == n && !strncmp(col, w, n);
}

/* The record's cell, or -1 when it is outside the selection. */
static int cell_of(const cases *c, const rt_rec *r) {
    const rt_data *d = c->d;
    if (c->workload) return r->wl >= 0 && same_workload(d->wl[r->wl], c->workload) ? r->cas : -1;
    return is_niah(d, r) ? (r->wl * d->nctx + r->ctx) * d->ndepth + r->depth : -1;
}

/* 1 if params (normalised "k=v,k=v") holds exactly the settings of base plus, when extra
 * is given, the one setting extra ("zoom=0", "fixed_chunk=same"), exactly. */
static int params_match(const char *params, const char *base, const char *extra) {
    int n_base = 0, found = 0, n = 0, extra_seen = 0;
    for (const char *b = base; *b; n_base++) {
        const char *e = strchr(b, ',');
        size_t len = e ? (size_t)(e - b) : strlen(b);
        for (const char *p = params; *p;) {
            const char *q = strchr(p, ',');
            size_t pl = q ? (size_t)(q - p) : strlen(p);
            found += pl == len && !strncmp(p, b, len);
            p += pl + (q != NULL);
        }
        b += len + (e != NULL);
    }
    for (const char *p = params; *p; n++) {
        const char *q = strchr(p, ',');
        size_t pl = q ? (size_t)(q - p) : strlen(p);
        extra_seen += extra && pl == strlen(extra) && !strncmp(p, extra, pl);
        p += pl + (q != NULL);
    }
    return found == n_base && n == n_base + (extra != NULL) && (!extra || extra_seen == 1);
}

/* Scores [ncase] of method with params base (+ the one setting extra, if given) at budget
 * (NAN: any budget, the reference's 1). Infeasible and failed count 0; repeats are averaged;
 * NAN where the cell did not run. *infeasible (optional): the infeasible results among
 * them. */
static double *scores_of(const cases *c, const char *method, const char *base, const char *extra, double budget,
                         int *infeasible) {
    const rt_data *d = c->d;
    double *s = malloc((size_t)c->ncase * sizeof *s);
    int *n = calloc((size_t)c->ncase, sizeof *n);
    if (!s || !n) return free(s), free(n), NULL;
    if (infeasible) *infeasible = 0;
    for (int i = 0; i < c->ncase; i++) s[i] = 0;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        const rt_family *f = &d->fam[r->fam];
        int i = cell_of(c, r);
        if (i < 0 || strcmp(f->model, c->model) || strcmp(f->method, method) || !params_match(f->params, base, extra))
            continue;
        if (!isnan(budget) && fabs(d->row[r->row].budget - budget) > 1e-9) continue;
        s[i] += r->ok && !isnan(r->score) ? r->score : 0;
        n[i]++;
        if (infeasible) *infeasible += r->infeasible;
    }
    for (int i = 0; i < c->ncase; i++) s[i] = n[i] ? s[i] / n[i] : NAN;
    free(n);
    return s;
}

/* Mean of a[i] - (b ? b[i] : 0) over the cells where both ran, its 95% percentile
 * bootstrap interval and the exact sign-test p of the pairs (b NULL: p is NAN); *n the
 * cells. NAN when none. */
typedef struct {
    double mean, lo, hi, p;
    int n;
} est;

static est paired(const cases *c, const double *a, const double *b) {
    est e = {NAN, NAN, NAN, NAN, 0};
    double *x = malloc((size_t)(c->ncase ? c->ncase : 1) * sizeof *x), *y = malloc((size_t)(c->ncase ? c->ncase : 1) * sizeof *y);
    if (!x || !y) return free(x), free(y), e;
    for (int i = 0; i < c->ncase; i++) {
        if (isnan(a[i]) || (b && isnan(b[i]))) continue;
        x[e.n] = a[i], y[e.n++] = b ? b[i] : 0;
    }
    if (e.n && b) e.mean = st_boot_paired(x, y, e.n, ST_BOOT_B, ST_SEED, 0.95, &e.lo, &e.hi);
    else if (e.n) e.mean = st_interval(x, NULL, e.n, 1, &e.lo, &e.hi);   /* a score: Wilson when binary, within [0, 1] */
    if (e.n && b) e.p = st_paired_p(x, y, e.n);
    free(x), free(y);
    return e;
}

/* Keeps in a only the cells every array of the list ran (a NAN elsewhere). */
static void common(const cases *c, double *a, double *const *others, int n_others) {
    for (int i = 0; i < c->ncase; i++)
        for (int k = 0; k < n_others; k++)
            if (others[k] && isnan(others[k][i])) a[i] = NAN;
}

typedef struct {
    char number[256], n[16], holds[24];
    double value, lo, hi, p;   /* the number compared (a fraction; NAN when none), its interval, p */
    int infeasible;            /* the row's infeasible results in the comparison's cells */
} verdict;

/* "x [lo, hi]" in percent (points when sign). */
static void pct(char *buf, size_t len, const est *e, int sign) {
    double x = e->mean == 0 ? 0 : e->mean;   /* no "-0.0" */
    if (isnan(x)) snprintf(buf, len, "-");
    else if (e->n < 2 || isnan(e->lo)) snprintf(buf, len, sign ? "%+.1f" : "%.1f", 100 * x);
    else snprintf(buf, len, sign ? "%+.1f [%+.1f, %+.1f]" : "%.1f [%.1f, %.1f]", 100 * x, 100 * e->lo, 100 * e->hi);
}

/* A claim is decided only by a significant paired difference: "yes" or "no" by the
 * direction when the sign test's p is below CLAIM_ALPHA, "not significant" otherwise
 * (11 cells that differ in 1 say nothing either way). p NAN (no paired test): the direction. */
#define CLAIM_ALPHA 0.05
static void set_holds(verdict *v, int n, int yes, int ran, double p) {
    if (!n) return;
    if (ran && v->infeasible >= ran) snprintf(v->holds, sizeof v->holds, "untested (infeasible)");
    else if (!isnan(p) && p >= CLAIM_ALPHA) snprintf(v->holds, sizeof v->holds, "not significant");
    else snprintf(v->holds, sizeof v->holds, "%s", yes ? "yes" : "no");
}

/* The best compressed baseline of the cells of c against method's, over the cells every
 * present baseline and the method ran (on equal means, the first in the paper's list). Returns the method's mean minus the best
 * baseline's mean with its interval; *who the best baseline (NULL: none), *se_mean the
 * method's own mean. */
static est best_margin(const cases *c, double *se, double budget, const char **who, est *own) {
    enum { NB = 32 };
    double *b[NB] = {0}, best = NAN;
    const char *const *baselines = paper->baselines;
    int bi = -1;
    *who = NULL;
    for (int k = 0; k < NB && baselines[k]; k++) {
        b[k] = scores_of(c, baselines[k], "", NULL, budget, NULL);
        int any = 0;
        for (int i = 0; b[k] && i < c->ncase; i++) any |= !isnan(b[k][i]);
        if (!any) free(b[k]), b[k] = NULL;
    }
    common(c, se, b, NB);
    for (int k = 0; k < NB; k++) {
        if (!b[k]) continue;
        common(c, b[k], &se, 1);
        est m = paired(c, b[k], NULL);
        /* Means that differ only by rounding (the same sum added in another order) are a
         * tie, and a tie goes to the first baseline of the paper's list: the pairing, and
         * so the interval and p, must not hinge on the last bit of a sum. */
        if (!isnan(m.mean) && (isnan(best) || m.mean > best + 1e-12 * fmax(1, fabs(best)))) best = m.mean, bi = k;
    }
    *own = paired(c, se, NULL);
    est e = {NAN, NAN, NAN, NAN, 0};
    if (bi >= 0) e = paired(c, se, b[bi]), *who = baselines[bi];
    for (int k = 0; k < NB; k++) free(b[k]);
    return e;
}

/* The values of the settings lo_set and hi_set ("rank=8", "rank=64") and of their key in
 * method m with params base (its default unless base sets it). */
static void setting_values(const char *m, const char *base, const char *lo_set, const char *hi_set, char *lo,
                           char *mid, char *hi, size_t len) {
    const char *e = strchr(lo_set, '=');
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(e - lo_set), lo_set);
    snprintf(lo, len, "%s", e + 1);
    snprintf(hi, len, "%s", strchr(hi_set, '=') + 1);
    const kv_method *mm = kv_method_find(m);
    char err[128];
    if (!mm || kv_param_text(mm, base, key, mid, len, err, sizeof err)) snprintf(mid, len, "?");
}

/* A claim that fails where the reference (FullKV) itself scores below RT_CEILING, over
 * the cells the row ran, is "undecidable: ceiling": the model cannot do the task there,
 * so a method's loss says nothing about the method. The reference's score is added. */
static void ceiling(const cases *c, const double *se, verdict *v) {
    const kv_method *ref = kv_method_reference();
    if ((strcmp(v->holds, "no") && strcmp(v->holds, "not significant")) || !ref) return;
    double *f = scores_of(c, ref->name, "", NULL, NAN, NULL), sum = 0;
    int n = 0;
    for (int i = 0; f && i < c->ncase; i++)
        if (!isnan(se[i]) && !isnan(f[i])) sum += f[i], n++;
    free(f);
    if (!n || !rt_below_ceiling(sum / n)) return;
    snprintf(v->holds, sizeof v->holds, "undecidable: ceiling");
    size_t k = strlen(v->number);
    snprintf(v->number + k, sizeof v->number - k, " (FullKV %.1f)", 100 * sum / n);
}

/* 1 when params (normalised "k=v,k=v") asks for the untrained router: params_file=none. */
static int untrained(const char *params) {
    char suffix[160];
    rt_params_suffix(params, suffix, sizeof suffix);   /* the one parser of params_file */
    return !strcmp(suffix, RT_UNTRAINED);
}

/* 1 when method m runs the untrained router with params base by its own default
 * (sekv-spread: params_file defaults to none), with nothing set in base. */
static int untrained_default(const char *m, const char *base) {
    const kv_method *mm = kv_method_find(m);
    char val[64], err[128];
    return mm && !kv_param_text(mm, base, "params_file", val, sizeof val, err, sizeof err) && !strcmp(val, "none");
}

/* The claim on method m with params base ("" = its capped defaults, "uncapped=1"); extra:
 * the ablation setting of a KV_CLAIM_DROP row. */
static void judge(const cases *c, const kv_claim *cl, const char *m, const char *base, const char *extra, verdict *v) {
    snprintf(v->number, sizeof v->number, "-"), snprintf(v->n, sizeof v->n, "0"), v->holds[0] = '-', v->holds[1] = 0;
    v->value = v->lo = v->hi = v->p = NAN;
    v->infeasible = 0;
    int ran = 0;
    if (cl->kind == KV_CLAIM_DROP && cl->other && !strncmp(cl->other, "trained_", 8) &&
        (untrained(base) || untrained_default(m, base))) {
        /* an ablation that removes the trained part says nothing about a row run untrained */
        snprintf(v->number, sizeof v->number, "- (the row runs the untrained router: nothing trained to remove)");
        snprintf(v->holds, sizeof v->holds, "undecidable: untrained");
        return;
    }
    double *se = scores_of(c, m, base, NULL, cl->budget, &v->infeasible);
    est e = {NAN, NAN, NAN, NAN, 0};
    for (int i = 0; se && i < c->ncase; i++) ran += !isnan(se[i]);
    if (!se) return;
    if (cl->kind == KV_CLAIM_BEST) {   /* the method's score and its margin over the best baseline, same cells */
        const char *who;
        est own, mg = best_margin(c, se, cl->budget, &who, &own);
        char a[64], b2[64];
        pct(a, sizeof a, &own, 0);
        pct(b2, sizeof b2, &mg, 1);
        if (who) snprintf(v->number, sizeof v->number, "%s; vs best baseline %s %s", a, who, b2);
        else snprintf(v->number, sizeof v->number, "%s (no baseline)", a);
        e = mg;
        e.n = who ? mg.n : own.n;
        if (who) set_holds(v, mg.n, mg.mean > 0, ran, mg.p);
    } else if (cl->kind == KV_CLAIM_MARGIN || cl->kind == KV_CLAIM_DROP) {
        double *o = cl->kind == KV_CLAIM_MARGIN ? scores_of(c, cl->other, "", NULL, cl->budget, NULL)
                                         : scores_of(c, m, base, extra, cl->budget, NULL);
        if (o) {
            e = cl->kind == KV_CLAIM_MARGIN ? paired(c, se, o) : paired(c, o, se);   /* row - other; ablation - row */
            pct(v->number, sizeof v->number, &e, 1);
            set_holds(v, e.n, cl->kind == KV_CLAIM_MARGIN ? e.mean > 0 : e.mean < 0, ran, e.p);
            common(c, se, &o, 1);   /* the ceiling below: FullKV over the cells compared */
        }
        free(o);
    } else if (cl->kind == KV_CLAIM_RANK) {
        double *r8 = scores_of(c, m, base, cl->other, cl->budget, NULL), *r64 = scores_of(c, m, base, cl->other2, cl->budget, NULL);
        if (r8 && r64) {
            double *all[2] = {r8, r64};
            common(c, se, all, 2);
            est up = paired(c, se, r8), flat = paired(c, r64, se);
            char a[64], b[64];
            pct(a, sizeof a, &up, 1), pct(b, sizeof b, &flat, 1);
            char lo[32], mid[32], hi[32];   /* "8->32 +x, 32->64 +y": the settings and the row's value */
            setting_values(m, base, cl->other, cl->other2, lo, mid, hi, sizeof lo);
            snprintf(v->number, sizeof v->number, "%.15s->%.15s %.63s, %.15s->%.15s %.63s", lo, mid, a, mid, hi, b);
            e = up;
            set_holds(v, up.n, up.mean > 0 && fabs(flat.mean) < up.mean, ran, up.p);
        }
        free(r8), free(r64);
    } else {   /* KV_CLAIM_SATURATE */
        double *s5 = scores_of(c, m, base, NULL, 0.05, NULL), *s20 = scores_of(c, m, base, NULL, 0.20, NULL);
        if (s5 && s20) {
            double *all[2] = {s5, s20};
            common(c, se, all, 2);
            est g1 = paired(c, se, s5), g2 = paired(c, s20, se);
            char a[64], b[64];
            pct(a, sizeof a, &g1, 1), pct(b, sizeof b, &g2, 1);
            snprintf(v->number, sizeof v->number, "%s then %s", a, b);
            /* p: the sign test of each cell's first gain against its second */
            double *d1 = malloc((size_t)(c->ncase ? c->ncase : 1) * sizeof *d1), *d2 = malloc((size_t)(c->ncase ? c->ncase : 1) * sizeof *d2);
            for (int i = 0; d1 && d2 && i < c->ncase; i++) d1[i] = se[i] - s5[i], d2[i] = s20[i] - se[i];
            double p = d1 && d2 ? paired(c, d1, d2).p : NAN;
            free(d1), free(d2);
            e = g2;
            e.n = g1.n;
            e.p = p;
            set_holds(v, g1.n, g2.mean < g1.mean, ran, p);
        }
        free(s5), free(s20);
    }
    v->value = e.mean, v->lo = e.lo, v->hi = e.hi, v->p = e.p;
    snprintf(v->n, sizeof v->n, "%d", e.n);
    ceiling(c, se, v);
    free(se);
}

/* One row: Markdown, and CSV: the value with n, interval and infeasible count, then a
 * row "ID:p" with the sign-test p. */
static void emit(FILE *md, FILE *csv, const char *run, const char *section, const char *id, const char *what,
                 const char *paper, const char *m, const char *params, double budget, const verdict *v) {
    if (md) {
        /* a row every result of which was infeasible was not run there: its zeros are no
         * number to read (the CSV keeps them, with the infeasible count) */
        int untested = !strcmp(v->holds, "untested (infeasible)");
        char p[32] = "-", number[256];
        if (!isnan(v->p) && !untested) snprintf(p, sizeof p, "%.3g", v->p);
        snprintf(number, sizeof number, "%s", untested ? "- (every result infeasible)" : v->number);
        char suffix[160];
        rt_params_suffix(params, suffix, sizeof suffix);
        fprintf(md, "| %s | %s | %s | %s%s | %s | %s | %s | %d | %s |\n", id, what, paper, m, suffix, number, v->n,
                p, v->infeasible, v->holds);
    }
    if (!csv) return;
    kv_csv_line(csv, "%s,paper,%s,,%s,%s,%g,%s,%.17g,%s,%.17g,%.17g,,%d", run, section, m, params, budget, id, v->value,
                v->n, v->lo, v->hi, v->infeasible);
    kv_csv_line(csv, "%s,paper,%s,,%s,%s,%g,%s:p,%.17g,%s,,,,", run, section, m, params, budget, id, v->p, v->n);
}

/* The distinct settings of key ("KEY=V", key given as "KEY=") among method's families of
 * the model, sorted; returns the count (at most cap). */
static int key_settings(const rt_data *d, const char *model, const char *m, const char *key, char out[][48], int cap) {
    int n = 0;
    for (int f = 0; f < d->nfam; f++) {
        const rt_family *g = &d->fam[f];
        if (strcmp(g->model, model) || strcmp(g->method, m)) continue;
        const char *p = strstr(g->params, key);
        if (!p || (p != g->params && p[-1] != ',')) continue;
        char s[48];
        size_t len = strcspn(p, ",");
        snprintf(s, sizeof s, "%.*s", (int)(len < 47 ? len : 47), p);
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= !strcmp(out[i], s);
        if (seen || n == cap) continue;
        int i = n++;
        while (i > 0 && strcmp(out[i - 1], s) > 0) memcpy(out[i], out[i - 1], 48), i--;
        memcpy(out[i], s, 48);
    }
    return n;
}

/* The file's workloads (each column's name before any ':'), in first-seen order; the count. */
static int workload_names(const rt_data *d, char names[32][64]) {
    int nw = 0;
    for (int w = 0; w < d->nwl && nw < 32; w++) {
        char s[64];
        snprintf(s, sizeof s, "%.*s", (int)strcspn(d->wl[w], ":"), d->wl[w]);
        int seen = 0;
        for (int i = 0; i < nw; i++) seen |= !strcmp(names[i], s);
        if (!seen) snprintf(names[nw++], 64, "%s", s);
    }
    return nw;
}

/* C2 on every workload of the file: per workload, the method's margin over the best
 * compressed baseline at 10%, over that workload's cases; then the count of workloads won. */
static void workloads(const rt_data *d, const cases *nc, const kv_claim *cl, const char *m, const char *base,
                      FILE *md, FILE *csv, const char *run) {
    char names[32][64];
    int nw = workload_names(d, names), won = 0, lost = 0, tested = 0;
    for (int w = 0; w < nw; w++) {
        cases c = {d->ncase, d, nc->model, names[w]};
        verdict v;
        judge(&c, &(kv_claim){cl->id, cl->claim, cl->paper, KV_CLAIM_BEST, cl->budget, NULL, NULL}, m, base, NULL, &v);
        if (!strcmp(v.n, "0")) continue;
        tested += strncmp(v.holds, "untested", 8) != 0 && strncmp(v.holds, "undecidable", 11) != 0 &&
                  strcmp(v.holds, "-") != 0;
        won += !strcmp(v.holds, "yes");
        lost += !strcmp(v.holds, "no");
        char what[160], id[80];
        snprintf(what, sizeof what, "%.63s: %s", names[w], paper->each_workload);
        snprintf(id, sizeof id, "%.15s %.63s", cl->id, names[w]);
        emit(md, csv, run, "claims", id, what, cl->paper, m, base, cl->budget, &v);
    }
    verdict v = {.value = tested ? (double)won / tested : NAN, .lo = NAN, .hi = NAN, .p = NAN};
    snprintf(v.number, sizeof v.number, "best on %d of %d workloads", won, tested);
    snprintf(v.n, sizeof v.n, "%d", tested);
    /* "no" needs a workload the row significantly loses; short of that, not shown */
    snprintf(v.holds, sizeof v.holds, "%s", !tested ? "-" : won == tested ? "yes" : lost ? "no" : "not significant");
    emit(md, csv, run, "claims", cl->id, cl->claim, cl->paper, m, base, cl->budget, &v);
}

/* An ablation claim (C6-C9: a drop or the rank claim) once more on each workload other
 * than NIAH where its setting ran, over that workload's cases, one row each ("C8
 * fixed_chunk=same ruler"): the paper states C8 and C9 across its benchmarks. After the
 * NIAH row, which is always printed. */
static void ablation_workloads(const rt_data *d, const cases *nc, const kv_claim *cl, const char *m, const char *base,
                               const char *extra, const char *id, const char *what, const char *section, FILE *md,
                               FILE *csv, const char *run) {
    char names[32][64];
    int nw = workload_names(d, names);
    for (int w = 0; w < nw; w++) {
        if (!strncmp(names[w], "niah", 4)) continue;   /* the NIAH cells' row, as is_niah */
        cases c = {d->ncase, d, nc->model, names[w]};
        verdict v;
        judge(&c, cl, m, base, extra, &v);
        if (!strcmp(v.n, "0")) continue;
        char id_w[112], what_w[224];
        snprintf(id_w, sizeof id_w, "%.63s %.47s", id, names[w]);
        snprintf(what_w, sizeof what_w, "%.47s: %.159s", names[w], what);
        emit(md, csv, run, section, id_w, what_w, cl->paper, m, base, cl->budget, &v);
    }
}

/* A zoom claim from the zoom rates of method at each budget: sparse (at least half the heads
 * below 0.05), concentrated (the top 10% of heads take at least 30% of the expansions, 3x
 * their share) and stronger in the middle or late third than in the early one. */
static void zoom_rows(sqlite3 *h, int64_t run_id, const char *model, const kv_claim *cl, const char *m,
                      const char *base, FILE *md, FILE *csv, const char *run) {
    char label[192], suffix[160];   /* the panels name the row as the tables do */
    rt_params_suffix(base, suffix, sizeof suffix);
    snprintf(label, sizeof label, "%s%s", m, suffix);
    zr_panel *p;
    int n;
    char why[256];
    if (zr_load(h, run_id, NULL, model, &p, &n, why, sizeof why)) {
        if (md) fprintf(md, "| %s | %s | %s | %s | - (%s) | 0 | - | 0 | - |\n", cl->id, cl->claim, cl->paper, m, why);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(p[i].method, label)) continue;
        zr_summary s;
        zr_summarize(&p[i], &s);
        verdict v = {.value = s.quiet, .lo = NAN, .hi = NAN, .p = NAN};
        snprintf(v.number, sizeof v.number,
                 "@%g: heads below 0.05: %.2f; mean rate early/middle/late %.3f/%.3f/%.3f; top 10%% of heads: %.2f of "
                 "expansions", p[i].budget, s.quiet, s.third[0], s.third[1], s.third[2], s.top10);
        snprintf(v.n, sizeof v.n, "%d", p[i].n_results);
        int yes = s.quiet >= 0.5 && s.top10 >= 0.3 && fmax(s.third[1], s.third[2]) > s.third[0];
        int thirds = !isnan(s.third[0]) && !isnan(s.third[1]) && !isnan(s.third[2]);   /* >= 3 layers */
        snprintf(v.holds, sizeof v.holds, "%s",
                 isnan(s.top10) ? "- (no zoom)" : !thirds ? "- (fewer than 3 layers)" : yes ? "yes" : "no");
        emit(md, NULL, run, "claims", cl->id, cl->claim, cl->paper, m, base, p[i].budget, &v);
        static const char *const col[] = {"", ":early", ":middle", ":late", ":top10"};
        double val[] = {s.quiet, s.third[0], s.third[1], s.third[2], s.top10};
        for (int k = 0; csv && k < 5; k++) {
            char cid[128];
            snprintf(cid, sizeof cid, "%s%s", cl->id, col[k]);
            kv_csv_line(csv, "%s,paper,zoom,,%s,,%g,%s,%.17g,%d", run, m, p[i].budget, cid, val[k], p[i].n_results);
        }
    }
    zr_free(p, n);
}

/* Mean fast-tier peak of (method, params, budget) over its NIAH cases (NAN: none). */
static double mean_fast(const rt_data *d, int fam_row, int *n) {
    double s = 0;
    int m = 0;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (r->row != fam_row || !is_niah(d, r) || !r->ok || isnan(r->fast_peak)) continue;   /* one model: the row's */
        s += r->fast_peak, m++;
    }
    *n = m;
    return m ? s / m : NAN;
}

/* Iso-memory: for each budget of the primary row with the paper's uncapped setting, its
 * score and mean fast-tier peak, then each baseline and the reference at its budget with
 * the largest mean fast-tier peak not above that. */
static void iso_memory(const cases *c, FILE *md, FILE *csv, const char *run) {
    const rt_data *d = c->d;
    int printed = 0;
    const char *me = rows[0], *un = paper->uncapped, *T = paper->title;
    for (int i = 0; i < d->nrow; i++) {
        const rt_family *f = &d->fam[d->row[i].fam];
        if (strcmp(f->model, c->model) || strcmp(f->method, me) || strcmp(f->params, un)) continue;
        int n;
        double ref = mean_fast(d, i, &n), b = d->row[i].budget;
        if (isnan(ref)) continue;
        if (md && !printed++)
            fprintf(md, "\nIso-memory view (uncapped %s runs past its budget; every method at the budget whose mean "
                        "fast-tier peak is nearest to, not above, %s's):\n\n"
                        "| %s uncapped at | its fast-tier peak | method | budget | fast-tier peak | score %% [95%%] | n |\n"
                        "|---|---:|---|---:|---:|---:|---:|\n", T, T, T);
        double *se = scores_of(c, me, un, NULL, b, NULL);
        est m = se ? paired(c, se, NULL) : (est){NAN, NAN, NAN, NAN, 0};
        char sc[64];
        pct(sc, sizeof sc, &m, 0);
        if (md) fprintf(md, "| %g | %.1f MiB | %s %s | %g | %.1f MiB | %s | %d |\n", b, ref / 1048576, me, un, b, ref / 1048576, sc, m.n);
        if (csv) kv_csv_line(csv, "%s,paper,iso-memory,,%s,%s,%.17g,score,%.17g,%d", run, me, un, b, m.mean, m.n);
        free(se);
        enum { NB = 32 };
        const char *others[NB + 1];
        int nb = 0;
        for (; nb < NB && paper->baselines[nb]; nb++) others[nb] = paper->baselines[nb];
        const kv_method *ref_m = kv_method_reference();   /* the reference, budget-free */
        int with_ref = ref_m != NULL;
        if (with_ref) others[nb] = ref_m->name;
        for (int k = 0; k < nb + with_ref; k++) {
            int best = -1;
            double best_fast = -1;
            for (int j = 0; j < d->nrow; j++) {
                const rt_family *g = &d->fam[d->row[j].fam];
                if (strcmp(g->model, c->model) || strcmp(g->method, others[k]) || *g->params) continue;
                int nf;
                double fb = mean_fast(d, j, &nf);
                if (!isnan(fb) && fb <= ref && fb > best_fast) best = j, best_fast = fb;
            }
            if (best < 0) {
                if (md) fprintf(md, "| | | %s | - | none at or below | - | 0 |\n", others[k]);
                continue;
            }
            double bb = d->row[best].budget, *s = scores_of(c, others[k], "", NULL, k == nb ? NAN : bb, NULL);
            est mm = s ? paired(c, s, NULL) : (est){NAN, NAN, NAN, NAN, 0};
            pct(sc, sizeof sc, &mm, 0);
            if (md) fprintf(md, "| | | %s | %g | %.1f MiB | %s | %d |\n", others[k], bb, best_fast / 1048576, sc, mm.n);
            if (csv) kv_csv_line(csv, "%s,paper,iso-memory,,%s,,%.17g,score,%.17g,%d", run, others[k], bb, mm.mean, mm.n);
            free(s);
        }
    }
    if (md && !printed)
        fprintf(md, "\nIso-memory view: no `%s %s` results (run `--params %s:%s` to measure "
                    "%s past its budget).\n", me, un, me, un, T);
}

/* Per row of the paper (its defaults, or only a parameter file named) and budget: results, infeasible ones, on every workload. */
static void feasibility(const rt_data *d, const char *model, FILE *md, FILE *csv, const char *run) {
    int printed = 0;
    for (int i = 0; i < d->nrow; i++) {
        const rt_family *f = &d->fam[d->row[i].fam];
        int is = 0;
        for (int k = 0; k < n_rows; k++) is |= !strcmp(f->method, rows[k]);
        if (!is || !rt_params_file_only(f->params) || strcmp(f->model, model)) continue;
        int n = 0, inf = 0;
        for (int k = 0; k < d->nrec; k++)
            if (d->rec[k].row == i) n++, inf += d->rec[k].infeasible;
        if (md && !printed++)
            fprintf(md, "\nFeasibility (an infeasible result is no test of a claim; it counts 0 in the scores "
                        "above):\n\n| method | budget | results | infeasible |\n|---|---:|---:|---:|\n");
        char suffix[160];
        rt_params_suffix(f->params, suffix, sizeof suffix);
        if (md) fprintf(md, "| %s%s | %g | %d | %d |\n", f->method, suffix, d->row[i].budget, n, inf);
        if (csv)
            kv_csv_line(csv, "%s,paper,feasibility,,%s,%s,%.17g,infeasible,%d,%d", run, f->method, f->params, d->row[i].budget,
                        inf, n);
    }
}

/* The rows (methods) of paper p in registry order, into rows[]; returns their count. */
static int rows_of(const kv_paper *p, const char **out, int cap) {
    int n = 0;
    for (int i = 0; i < kv_method_count() && n < cap; i++)
        if (kv_method_at(i)->paper == p) out[n++] = kv_method_at(i)->name;
    return n;
}

/* The first paper with claims whose rows have results in d (NULL: none); why lists the
 * rows of every paper when none has. */
static const kv_paper *pick_paper(const rt_data *d, char *why, size_t wn) {
    char names[512] = "";
    int n_names = 0;
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_paper *p = kv_method_at(i)->paper;
        if (!p->claims[0].id || rows_of(p, rows, 16) == 0 || strcmp(rows[0], kv_method_at(i)->name)) continue;
        n_rows = rows_of(p, rows, 16);
        for (int k = 0; k < d->nrec; k++)
            for (int r = 0; r < n_rows; r++)
                if (!strcmp(d->fam[d->rec[k].fam].method, rows[r])) return p;
        for (int r = 0; r < n_rows; r++, n_names++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", n_names ? ", " : "", rows[r]);
    }
    char *last = strrchr(names, ',');   /* "a, b or c" */
    if (last && n_names > 1) {
        char tail[256];
        snprintf(tail, sizeof tail, " or%s", last + 1);
        snprintf(last, sizeof names - (size_t)(last - names), "%s", tail);
    }
    snprintf(why, wn, "no %s results (the paper table reads `kvbench run` results)", n_names ? names : "paper");
    return NULL;
}

int rt_paper(const rt_data *d, sqlite3 *h, int64_t run_id, FILE *md, FILE *csv, const char *run, char *why,
             size_t wn) {
    int ncell = d->nwl * d->nctx * d->ndepth;
    cases c = {ncell > d->ncase ? ncell : d->ncase, d, NULL, NULL};
    paper = pick_paper(d, why, wn);
    if (!paper) return -1;
    int *per_fam = calloc((size_t)d->nfam + 1, sizeof *per_fam), best = -1;
    if (!per_fam) return snprintf(why, wn, "out of memory"), -1;
    for (int k = 0; k < d->nrec; k++)
        for (int s = 0; s < n_rows; s++) per_fam[d->rec[k].fam] += !strcmp(d->fam[d->rec[k].fam].method, rows[s]);
    for (int f = 0; f < d->nfam; f++) {   /* the model with the most results of the rows */
        int n = 0;
        for (int g = 0; g < d->nfam; g++) n += !strcmp(d->fam[g].model, d->fam[f].model) ? per_fam[g] : 0;
        if (n && (best < 0 || n > per_fam[d->nfam])) best = f, per_fam[d->nfam] = n;
    }
    free(per_fam);
    if (best < 0 || c.ncase <= 0) {
        pick_paper(&(rt_data){0}, why, wn);   /* the same message as for a file without them */
        return -1;
    }
    c.model = d->fam[best].model;
    if (md) fprintf(md, "Model: %s.\n\n", c.model);
    /* capped: the paper's rule; uncapped: the same claims within the primary row past its
     * budget (the comparisons with baselines at the same nominal budget would not be fair
     * there: see the iso-memory section) */
    if (csv) rt_csv_header(csv);
    /* Each row is judged at its defaults; a row run only with a parameter file named
     * explicitly (params_file=PATH: trained parameters that are not the model's default) is
     * judged with it, labelled with the file's name; a row run only untrained
     * (params_file=none: no trained parameters for this model) is judged at that setting,
     * labelled so. Either way not left out. */
    char row_base[16][2][256];
    for (int si = 0; si < n_rows; si++)
        for (int bi = 0; bi < 2; bi++) {
            const char *b = bi ? (paper->uncapped ? paper->uncapped : "") : "";
            int plain = 0, untr = 0;
            char ub[256], file[256] = "";
            snprintf(ub, sizeof ub, "params_file=none%s%s", *b ? "," : "", b);
            for (int k = 0; k < d->nrec; k++) {
                const rt_family *f = &d->fam[d->rec[k].fam];
                if (strcmp(f->method, rows[si]) || strcmp(f->model, c.model)) continue;
                plain |= params_match(f->params, b, NULL), untr |= params_match(f->params, ub, NULL);
                char item[256], cand[256];
                if (*file || !rt_params_file_item(f->params, item, sizeof item) || !strcmp(item, "params_file=none"))
                    continue;
                if (snprintf(cand, sizeof cand, "%s%s%s", item, *b ? "," : "", b) >= (int)sizeof cand) continue;
                if (params_match(f->params, cand, NULL)) snprintf(file, sizeof file, "%s", cand);
            }
            snprintf(row_base[si][bi], sizeof row_base[si][bi], "%s", plain ? b : *file ? file : untr ? ub : b);
        }
    for (int bi = 0; bi < (paper->uncapped ? 2 : 1); bi++) {
        int have = 0;
        for (int k = 0; k < d->nrec && !have; k++)
            have = !strcmp(d->fam[d->rec[k].fam].method, rows[0]) && !strcmp(d->fam[d->rec[k].fam].model, c.model) &&
                   params_match(d->fam[d->rec[k].fam].params, row_base[0][bi], NULL);
        if (bi && !have) continue;
        if (md) fputs(bi ? paper->uncapped_intro : paper->intro, md);
        if (md)
            fprintf(md, "| claim | what | paper | row | kvbench | n | p | infeasible | holds |\n"
                        "|---|---|---|---|---|---:|---:|---:|---|\n");
        for (int si = 0; si < (bi ? 1 : n_rows); si++) {
            const char *m = rows[si], *base = row_base[si][bi];
            int any = 0;
            for (int k = 0; k < d->nrec && !any; k++)
                any = !strcmp(d->fam[d->rec[k].fam].method, m) && !strcmp(d->fam[d->rec[k].fam].model, c.model);
            if (!any) continue;
            for (const kv_claim *cl = paper->claims; cl->id; cl++) {
                if (bi && (cl->kind == KV_CLAIM_BEST || cl->kind == KV_CLAIM_MARGIN || cl->kind == KV_CLAIM_WORKLOADS ||
                           cl->kind == KV_CLAIM_ZOOM))
                    continue;
                const char *section = bi ? "claims uncapped" : "claims";
                if (cl->kind == KV_CLAIM_ZOOM) {
                    if (h) zoom_rows(h, run_id, c.model, cl, m, base, md, csv, run);
                    continue;
                }
                if (cl->kind == KV_CLAIM_WORKLOADS) {
                    workloads(d, &c, cl, m, base, md, csv, run);
                    continue;
                }
                size_t ol = cl->other ? strlen(cl->other) : 0;
                if (cl->kind == KV_CLAIM_DROP && ol && cl->other[ol - 1] == '=') {   /* one row per value of KEY */
                    char set[16][48];
                    int ns = key_settings(d, c.model, m, cl->other, set, 16);
                    for (int k = 0; k < ns; k++) {
                        verdict v;
                        char what[160], id[64];
                        judge(&c, cl, m, base, set[k], &v);
                        snprintf(what, sizeof what, "%.47s %s", set[k], cl->claim);
                        snprintf(id, sizeof id, "%.15s %.47s", cl->id, set[k]);
                        emit(md, csv, run, section, id, what, cl->paper, m, base, cl->budget, &v);
                        ablation_workloads(d, &c, cl, m, base, set[k], id, what, section, md, csv, run);
                    }
                    continue;
                }
                verdict v;
                const char *extra = cl->kind == KV_CLAIM_DROP ? cl->other : NULL;
                judge(&c, cl, m, base, extra, &v);
                emit(md, csv, run, section, cl->id, cl->claim, cl->paper, m, base, cl->budget, &v);
                if (cl->kind == KV_CLAIM_DROP || cl->kind == KV_CLAIM_RANK)
                    ablation_workloads(d, &c, cl, m, base, extra, cl->id, cl->claim, section, md, csv, run);
            }
        }
    }
    feasibility(d, c.model, md, csv, run);
    if (paper->uncapped) iso_memory(&c, md, csv, run);
    return 0;
}
