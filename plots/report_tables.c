/* kvbench report --table NAME: each paper-style table as one or more grids built from the
 * records of report_data.c. Every score is the task score of the results that finished
 * (status ok); infeasible and failed results are counted under the table instead.
 *
 *   main      rows (method, params, budget) x workload columns, score; Avg = mean of columns
 *   niah      rows x context length: mean over needle depths of the mean at each depth
 *   budget    rows (method, params) x budget: mean over workloads of the mean per workload
 *   rank      main's layout, rows = a method's rank settings (params with rank= only)
 *   ablation  main's layout, rows = every params setting of methods run with several
 *   memory    rows x context: fast-tier peak, slow-tier peak, fast-tier tokens, ratio to
 *             FullKV; then each method at SeKV's fast-tier bytes (iso-memory)
 *   latency   rows x context: prefill s, compression s, decode ms/token, tokens/s */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../methods/method.h"
#include "report_tables.h"

const char *const rt_table_names = "main, niah, budget, rank, ablation, memory, latency, paper";
enum { T_MAIN, T_NIAH, T_BUDGET, T_RANK, T_ABLATION, T_MEMORY, T_LATENCY, T_PAPER, T_COUNT };
static const char *const names[T_COUNT] = {"main", "niah", "budget", "rank", "ablation", "memory", "latency", "paper"};

int rt_table_known(const char *name) {
    for (int t = 0; t < T_COUNT; t++)
        if (!strcmp(name, names[t])) return t;
    return -1;
}

typedef struct {
    double s;
    int n;
} acc;
static void acc_add(acc *a, double x) {
    if (!isnan(x)) a->s += x, a->n++;
}
static double acc_mean(const acc *a) { return a->n ? a->s / a->n : NAN; }
static int has_score(const rt_rec *r) { return r->ok && !isnan(r->score); }

enum { MAX_GRIDS = 64 };
typedef struct {
    rt_grid g[MAX_GRIDS];
    int n;
    char units[1024];
} rt_out;

static void set_col(rt_col *c, int fmt, int better, const char *label, ...) __attribute__((format(printf, 4, 5)));
static void set_col(rt_col *c, int fmt, int better, const char *label, ...) {
    va_list ap;
    va_start(ap, label);
    vsnprintf(c->label, sizeof c->label, label, ap);
    va_end(ap);
    c->fmt = fmt, c->better = better;
}

static rt_grid *new_grid(rt_out *o, int nr, int nc) {
    if (o->n == MAX_GRIDS || rt_grid_init(&o->g[o->n], nr, nc)) return NULL;
    return &o->g[o->n++];
}

static void row_label(const rt_data *d, int row, rt_grow *r) {
    r->fam = d->row[row].fam;
    r->budget = d->row[row].budget;
    rt_family_label(&d->fam[r->fam], r->label, sizeof r->label);
}

/* Mean score per (selected row, workload); columns = workloads with a score in these rows,
 * then Avg (the mean of the columns, only when every column has a score). */
static int workload_grid(rt_out *o, const rt_data *d, const int *sel, const rt_grow *labels, int ns) {
    acc *a = calloc((size_t)d->nrow * d->nwl + 1, sizeof *a);
    int *where = malloc(sizeof(int) * (d->nrow + 1)), *cols = malloc(sizeof(int) * (d->nwl + 1)), nc = 0;
    rt_grid *g = NULL;
    if (!a || !where || !cols) goto done;
    for (int i = 0; i < d->nrow; i++) where[i] = -1;
    for (int i = 0; i < ns; i++) where[sel[i]] = i;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (has_score(r) && where[r->row] >= 0) acc_add(&a[(size_t)where[r->row] * d->nwl + r->wl], r->score);
    }
    for (int w = 0; w < d->nwl; w++) {
        int any = 0;
        for (int i = 0; i < ns && !any; i++) any = a[(size_t)i * d->nwl + w].n > 0;
        if (any) cols[nc++] = w;
    }
    g = new_grid(o, ns, nc + 1);
    if (!g) goto done;
    g->has_budget = 1;
    for (int j = 0; j < nc; j++) set_col(&g->cols[j], RT_PCT, +1, "%s", d->wl[cols[j]]);
    set_col(&g->cols[nc], RT_PCT, +1, "Avg");
    for (int i = 0; i < ns; i++) {
        g->rows[i] = labels[i];
        double s = 0;
        int all = 1, n = 0;
        for (int j = 0; j < nc; j++) {
            const acc *c = &a[(size_t)i * d->nwl + cols[j]];
            g->v[i * g->nc + j] = acc_mean(c);
            g->n[i * g->nc + j] = c->n;
            all &= c->n > 0;
            s += c->n ? acc_mean(c) : 0;
            n += c->n;
        }
        g->v[i * g->nc + nc] = all && nc ? s / nc : NAN;
        g->n[i * g->nc + nc] = n;
    }
done:
    free(a), free(where), free(cols);
    return g ? 0 : -1;
}

static int all_rows(const rt_data *d, int **sel, rt_grow **labels) {
    *sel = malloc(sizeof(int) * (d->nrow + 1));
    *labels = calloc((size_t)d->nrow + 1, sizeof **labels);
    if (!*sel || !*labels) return -1;
    for (int i = 0; i < d->nrow; i++) (*sel)[i] = i, row_label(d, i, &(*labels)[i]);
    return d->nrow;
}

/* ------------------------------------------------ main, rank, ablation */

static int t_main(rt_out *o, const rt_data *d) {
    int *sel;
    rt_grow *lab;
    int ns = all_rows(d, &sel, &lab), rc = ns < 0 ? -1 : workload_grid(o, d, sel, lab, ns);
    free(sel), free(lab);
    snprintf(o->units, sizeof o->units,
             "Score: mean task score (%%) over the cases that finished, per workload; Avg: mean of the workload"
             " columns (- when one is missing). Rows: method (with its params when set) and budget. Best per"
             " column in bold.");
    return rc;
}

/* The value of key in normalised params, or NULL. */
static const char *param_value(const char *params, const char *key, char *buf, size_t n) {
    size_t kl = strlen(key);
    for (const char *p = params; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            snprintf(buf, n, "%.*s", (int)(len - kl - 1), p + kl + 1);
            return buf;
        }
        p += len + (e != NULL);
    }
    return NULL;
}

/* The registry's default for a method's parameter, or NULL. */
static const char *param_default(const char *method, const char *key) {
    const kv_method *m = kv_method_find(method);
    for (const kv_param *p = m ? m->params : NULL; p && p->name; p++)
        if (!strcmp(p->name, key)) return p->deflt;
    return NULL;
}

/* A family of the rank table: a method with a rank parameter whose params set nothing
 * else. Returns the rank (registry default when unset), or NAN when not such a family. */
static double family_rank(const rt_family *f, int *is_default) {
    char buf[64];
    const char *v = param_value(f->params, "rank", buf, sizeof buf), *dflt = param_default(f->method, "rank");
    int only_rank = !*f->params || (v && !strchr(f->params, ','));
    *is_default = !v;
    if (!only_rank || (!v && !dflt)) return NAN;
    char *end;
    double r = strtod(v ? v : dflt, &end);
    return *end ? NAN : r;
}

static const rt_data *rank_d;
static double *rank_of;
static int rank_cmp(const void *a, const void *b) {
    const rt_row *x = &rank_d->row[*(const int *)a], *y = &rank_d->row[*(const int *)b];
    const rt_family *fx = &rank_d->fam[x->fam], *fy = &rank_d->fam[y->fam];
    int c = strcmp(fx->model, fy->model);
    if (!c) c = kv_method_cmp(fx->method, fy->method);
    if (!c) c = (rank_of[x->fam] > rank_of[y->fam]) - (rank_of[x->fam] < rank_of[y->fam]);
    if (!c) c = strcmp(fx->params, fy->params);
    return c ? c : (x->budget > y->budget) - (x->budget < y->budget);
}

static int t_rank(rt_out *o, const rt_data *d, char *why, size_t wn) {
    int *sel = malloc(sizeof(int) * (d->nrow + 1)), *dflt = calloc((size_t)d->nfam + 1, sizeof *dflt), ns = 0;
    double *rk = malloc(sizeof(double) * (d->nfam + 1));
    rt_grow *lab = calloc((size_t)d->nrow + 1, sizeof *lab);
    int rc = -1;
    if (!sel || !dflt || !rk || !lab) goto done;
    for (int f = 0; f < d->nfam; f++) rk[f] = family_rank(&d->fam[f], &dflt[f]);
    for (int i = 0; i < d->nrow; i++)
        if (!isnan(rk[d->row[i].fam])) sel[ns++] = i;
    if (!ns) {
        snprintf(why, wn, "no results of a method with a rank parameter (sekv) and no other params");
        goto done;
    }
    rank_d = d, rank_of = rk;
    qsort(sel, ns, sizeof *sel, rank_cmp);
    int distinct = 0;
    for (int i = 0; i < ns; i++) {
        const rt_family *f = &d->fam[d->row[sel[i]].fam];
        lab[i].fam = d->row[sel[i]].fam;
        lab[i].budget = d->row[sel[i]].budget;
        snprintf(lab[i].label, sizeof lab[i].label, "%s rank=%g%s", f->method, rk[lab[i].fam],
                 dflt[lab[i].fam] ? " (default)" : "");
        int seen = 0;
        for (int k = 0; k < i && !seen; k++) seen = rk[d->row[sel[k]].fam] == rk[lab[i].fam];
        distinct += !seen;
    }
    rc = workload_grid(o, d, sel, lab, ns);
    if (!rc && distinct < 2)
        snprintf(o->g[o->n - 1].note, sizeof o->g[0].note,
                 "Only one rank setting was run; rank sensitivity needs runs with params rank=8, 32, 64.");
    snprintf(o->units, sizeof o->units,
             "Rank-cap sensitivity: rows are the rank settings of methods with a rank parameter (params with"
             " rank= only; unset = the method's default), by budget. Score: mean task score (%%) over the cases"
             " that finished, per workload; Avg: mean of the columns (- when one is missing). Best per column in"
             " bold.");
done:
    free(sel), free(dflt), free(rk), free(lab);
    return rc;
}

static int t_ablation(rt_out *o, const rt_data *d) {
    int *sel = malloc(sizeof(int) * (d->nrow + 1)), ns = 0, rc = -1;
    rt_grow *lab = calloc((size_t)d->nrow + 1, sizeof *lab);
    if (!sel || !lab) goto done;
    /* methods (on a model) recorded with more than one params setting */
    for (int i = 0; i < d->nrow; i++) {
        const rt_family *f = &d->fam[d->row[i].fam];
        int settings = 0;
        for (int k = 0; k < d->nfam; k++)
            settings += !strcmp(d->fam[k].method, f->method) && !strcmp(d->fam[k].model, f->model);
        if (settings > 1) sel[ns++] = i;
    }
    int fallback = ns == 0;
    if (fallback)
        for (int i = 0; i < d->nrow; i++) sel[ns++] = i;
    for (int i = 0; i < ns; i++) {
        row_label(d, sel[i], &lab[i]);
        if (!*d->fam[lab[i].fam].params && !fallback) strcat(lab[i].label, " (defaults)");
    }
    rc = workload_grid(o, d, sel, lab, ns);
    if (!rc && fallback)
        snprintf(o->g[o->n - 1].note, sizeof o->g[0].note,
                 "No method was run with more than one params setting; every method is listed.");
    snprintf(o->units, sizeof o->units,
             "Ablations: rows are the params settings (as recorded) of each method run with more than one, by"
             " budget. Score: mean task score (%%) over the cases that finished, per workload; Avg: mean of the"
             " columns (- when one is missing). Best per column in bold.");
done:
    free(sel), free(lab);
    return rc;
}

/* ------------------------------------------------ niah, budget */

static int t_niah(rt_out *o, const rt_data *d, char *why, size_t wn) {
    int nx = d->nctx, ny = d->ndepth, rc = -1;
    acc *a = calloc((size_t)d->nrow * nx * ny + 1, sizeof *a);
    int *rows = malloc(sizeof(int) * (d->nrow + 1)), *cols = malloc(sizeof(int) * (nx + 1)), nr = 0, nc = 0;
    char *rowseen = calloc((size_t)d->nrow + 1, 1), *ctxseen = calloc((size_t)nx + 1, 1);
    if (!a || !rows || !cols || !rowseen || !ctxseen) goto done;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (r->depth < 0) continue;
        rowseen[r->row] = ctxseen[r->ctx] = 1;
        if (has_score(r)) acc_add(&a[((size_t)r->row * nx + r->ctx) * ny + r->depth], r->score);
    }
    for (int i = 0; i < d->nrow; i++)
        if (rowseen[i]) rows[nr++] = i;
    for (int x = 0; x < nx; x++)
        if (ctxseen[x]) cols[nc++] = x;
    if (!nr) {
        snprintf(why, wn, "no needle cases (cases with a depth; workloads niah, synthetic-*)");
        goto done;
    }
    rt_grid *g = new_grid(o, nr, nc + 1);
    if (!g) goto done;
    g->has_budget = 1;
    for (int j = 0; j < nc; j++) set_col(&g->cols[j], RT_PCT, +1, "ctx %d", d->ctx[cols[j]]);
    set_col(&g->cols[nc], RT_PCT, +1, "overall");
    for (int i = 0; i < nr; i++) {
        row_label(d, rows[i], &g->rows[i]);
        double s = 0;
        int all = 1, n = 0;
        for (int j = 0; j < nc; j++) {
            acc depths = {0};
            int cases = 0;
            for (int y = 0; y < ny; y++) {
                const acc *c = &a[((size_t)rows[i] * nx + cols[j]) * ny + y];
                acc_add(&depths, acc_mean(c));
                cases += c->n;
            }
            g->v[i * g->nc + j] = acc_mean(&depths);
            g->n[i * g->nc + j] = cases;
            all &= depths.n > 0;
            s += depths.n ? acc_mean(&depths) : 0;
            n += cases;
        }
        g->v[i * g->nc + nc] = all && nc ? s / nc : NAN;
        g->n[i * g->nc + nc] = n;
    }
    snprintf(o->units, sizeof o->units,
             "Needle retrieval: score (%%) per context length = mean over needle depths of the mean score of the"
             " finished cases at that depth; overall = mean of the context columns (- when one is missing). Cases"
             " without a depth are left out. Best per column in bold.");
    rc = 0;
done:
    free(a), free(rows), free(cols), free(rowseen), free(ctxseen);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int t_budget(rt_out *o, const rt_data *d) {
    acc *a = calloc((size_t)d->nrow * d->nwl + 1, sizeof *a);
    double *bud = malloc(sizeof(double) * (d->nrow + 1));
    int *fams = malloc(sizeof(int) * (d->nfam + 1)), nb = 0, nf = 0, rc = -1;
    if (!a || !bud || !fams) goto done;
    for (int k = 0; k < d->nrec; k++)
        if (has_score(&d->rec[k])) acc_add(&a[(size_t)d->rec[k].row * d->nwl + d->rec[k].wl], d->rec[k].score);
    for (int i = 0; i < d->nrow; i++) {
        int seen = 0;
        for (int k = 0; k < nb && !seen; k++) seen = bud[k] == d->row[i].budget;
        if (!seen) bud[nb++] = d->row[i].budget;
        if (!nf || fams[nf - 1] != d->row[i].fam) fams[nf++] = d->row[i].fam;   /* rows are sorted by family */
    }
    qsort(bud, nb, sizeof *bud, cmp_double);
    rt_grid *g = new_grid(o, nf, nb);
    if (!g) goto done;
    for (int j = 0; j < nb; j++) {
        char b[32];
        kv_budget_str(bud[j], b, sizeof b);
        set_col(&g->cols[j], RT_PCT, +1, "budget %s", b);
    }
    for (int i = 0; i < nf; i++) {
        g->rows[i].fam = fams[i];
        g->rows[i].budget = NAN;
        rt_family_label(&d->fam[fams[i]], g->rows[i].label, sizeof g->rows[i].label);
    }
    for (int r = 0; r < d->nrow; r++) {
        int i = 0, j = 0;
        while (fams[i] != d->row[r].fam) i++;
        while (bud[j] != d->row[r].budget) j++;
        acc w = {0};
        int n = 0;
        for (int k = 0; k < d->nwl; k++) {
            const acc *c = &a[(size_t)r * d->nwl + k];
            acc_add(&w, acc_mean(c));
            n += c->n;
        }
        g->v[i * nb + j] = acc_mean(&w);
        g->n[i * nb + j] = n;
    }
    snprintf(o->units, sizeof o->units,
             "Score (%%) per KV budget (fraction of the prompt, or tokens): mean over the workloads of the mean"
             " score of the finished cases per workload. FullKV is recorded at budget 1. Best per column in bold.");
    rc = 0;
done:
    free(a), free(bud), free(fams);
    return rc;
}

/* ------------------------------------------------ memory, latency */

/* Per (row, ctx) means of the finished results' fields. */
typedef struct {
    acc *fast, *slow, *tok, *pf, *comp, *ms, *tps, *gpu, *score_wl;   /* score_wl: [row][wl][ctx] */
} per_ctx;

static void per_ctx_free(per_ctx *p) {
    free(p->fast), free(p->slow), free(p->tok), free(p->pf), free(p->gpu);
    free(p->comp), free(p->ms), free(p->tps), free(p->score_wl);
}

static int per_ctx_fill(const rt_data *d, per_ctx *p) {
    size_t n = (size_t)d->nrow * d->nctx + 1;
    acc **all[] = {&p->fast, &p->slow, &p->tok, &p->pf, &p->comp, &p->ms, &p->tps, &p->gpu};
    for (int k = 0; k < 8; k++)
        if (!(*all[k] = calloc(n, sizeof(acc)))) return -1;
    if (!(p->score_wl = calloc((size_t)d->nrow * d->nwl * d->nctx + 1, sizeof(acc)))) return -1;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (!r->ok) continue;
        size_t i = (size_t)r->row * d->nctx + r->ctx;
        acc_add(&p->fast[i], r->fast_peak), acc_add(&p->slow[i], r->slow_peak), acc_add(&p->tok[i], r->fast_tokens);
        acc_add(&p->pf[i], r->prefill_s), acc_add(&p->comp[i], r->compress_s);
        acc_add(&p->ms[i], r->ms_tok), acc_add(&p->tps[i], r->tok_s), acc_add(&p->gpu[i], r->gpu_peak);
        acc_add(&p->score_wl[((size_t)r->row * d->nwl + r->wl) * d->nctx + r->ctx], r->score);
    }
    return 0;
}

/* A rows x ctx grid of one per-(row, ctx) mean. */
static rt_grid *ctx_grid(rt_out *o, const rt_data *d, const acc *a, const char *title, int fmt, int better) {
    rt_grid *g = new_grid(o, d->nrow, d->nctx);
    if (!g) return NULL;
    snprintf(g->title, sizeof g->title, "%s", title);
    g->has_budget = 1;
    for (int j = 0; j < d->nctx; j++) set_col(&g->cols[j], fmt, better, "ctx %d", d->ctx[j]);
    for (int i = 0; i < d->nrow; i++) {
        row_label(d, i, &g->rows[i]);
        for (int j = 0; a && j < d->nctx; j++) {
            g->v[i * d->nctx + j] = acc_mean(&a[(size_t)i * d->nctx + j]);
            g->n[i * d->nctx + j] = a[(size_t)i * d->nctx + j].n;
        }
    }
    return g;
}

static int is_method(const rt_data *d, int row, const char *name) {
    return !strcasecmp(d->fam[d->row[row].fam].method, name);
}

/* Score of a row at one context: mean over workloads of the mean of the finished cases. */
static double ctx_score(const rt_data *d, const per_ctx *p, int row, int x, int *n) {
    acc w = {0};
    *n = 0;
    for (int k = 0; k < d->nwl; k++) {
        const acc *c = &p->score_wl[((size_t)row * d->nwl + k) * d->nctx + x];
        acc_add(&w, acc_mean(c));
        *n += c->n;
    }
    return acc_mean(&w);
}

/* For SeKV row ref: every family of its model at the budget whose fast-tier peak at each
 * context is the largest not above SeKV's there. */
static int iso_grid(rt_out *o, const rt_data *d, const per_ctx *p, int ref) {
    const rt_family *rf = &d->fam[d->row[ref].fam];
    int *fams = malloc(sizeof(int) * (d->nfam + 1)), nf = 0;
    if (!fams) return -1;
    for (int i = 0; i < d->nrow; i++) {
        int f = d->row[i].fam;
        if (strcmp(d->fam[f].model, rf->model) || (nf && fams[nf - 1] == f)) continue;
        fams[nf++] = f;
    }
    rt_grid *g = new_grid(o, nf, 3 * d->nctx);
    if (!g) {
        free(fams);
        return -1;
    }
    char b[32], lab[192];
    kv_budget_str(d->row[ref].budget, b, sizeof b);
    rt_family_label(rf, lab, sizeof lab);
    snprintf(g->title, sizeof g->title, "iso-memory at %s @ %s%s%s", lab, b, d->n_models > 1 ? ", model " : "",
             d->n_models > 1 ? rf->model : "");
    size_t len = (size_t)snprintf(g->note, sizeof g->note, "Each method at its budget whose fast-tier peak is the"
                                  " largest not above %s @ %s's at that context:", lab, b);
    for (int x = 0; x < d->nctx; x++) {
        char h[32] = "-";
        double t = acc_mean(&p->fast[(size_t)ref * d->nctx + x]);
        if (!isnan(t)) kv_human_bytes(t, h, sizeof h);
        if (len < sizeof g->note)
            len += (size_t)snprintf(g->note + len, sizeof g->note - len, "%s ctx %d: %s", x ? "," : "", d->ctx[x], h);
        set_col(&g->cols[3 * x], RT_PCT, +1, "ctx %d score", d->ctx[x]);
        set_col(&g->cols[3 * x + 1], RT_BUDGET, 0, "ctx %d budget", d->ctx[x]);
        set_col(&g->cols[3 * x + 2], RT_BYTES, 0, "ctx %d fast KV", d->ctx[x]);
    }
    if (len < sizeof g->note) snprintf(g->note + len, sizeof g->note - len, " (- where none fits).");
    for (int i = 0; i < nf; i++) {
        g->rows[i].fam = fams[i];
        g->rows[i].budget = NAN;
        rt_family_label(&d->fam[fams[i]], g->rows[i].label, sizeof g->rows[i].label);
        for (int x = 0; x < d->nctx; x++) {
            double target = acc_mean(&p->fast[(size_t)ref * d->nctx + x]), best = NAN;
            int pick = -1;
            for (int r = 0; r < d->nrow && !isnan(target); r++) {
                double m = acc_mean(&p->fast[(size_t)r * d->nctx + x]);
                if (d->row[r].fam == fams[i] && m <= target && (pick < 0 || m > best)) pick = r, best = m;
            }
            if (pick < 0) continue;
            int n;
            double *v = &g->v[i * g->nc + 3 * x];
            v[0] = ctx_score(d, p, pick, x, &n);
            v[1] = d->row[pick].budget;
            v[2] = best;
            g->n[i * g->nc + 3 * x] = n;
            g->n[i * g->nc + 3 * x + 1] = g->n[i * g->nc + 3 * x + 2] = p->fast[(size_t)pick * d->nctx + x].n;
        }
    }
    free(fams);
    return 0;
}

/* The rows iso-memory compares at: SeKV with its default params, or every SeKV row of a
 * model that has no default-params SeKV row. */
static int is_iso_reference(const rt_data *d, int row) {
    const rt_family *f = &d->fam[d->row[row].fam];
    if (!is_method(d, row, "sekv")) return 0;
    if (!*f->params) return 1;
    for (int k = 0; k < d->nrow; k++)
        if (is_method(d, k, "sekv") && !*d->fam[d->row[k].fam].params && !strcmp(d->fam[d->row[k].fam].model, f->model))
            return 0;
    return 1;
}

/* Each row's fast-tier peak over that of the first FullKV row of its model. */
static int ratio_grid(rt_out *o, const rt_data *d, const per_ctx *p) {
    rt_grid *g = ctx_grid(o, d, NULL, "fast-tier KV peak / FullKV's", RT_RATIO, 0);
    if (!g) return -1;
    int have_full = 0;
    for (int i = 0; i < d->nrow; i++) {
        const char *model = d->fam[d->row[i].fam].model;
        int ref = -1;
        for (int k = 0; k < d->nrow && ref < 0; k++)
            if (is_method(d, k, "fullkv") && !strcmp(d->fam[d->row[k].fam].model, model)) ref = k;
        have_full |= ref >= 0;
        for (int x = 0; ref >= 0 && x < d->nctx; x++) {
            const acc *mine = &p->fast[(size_t)i * d->nctx + x], *full = &p->fast[(size_t)ref * d->nctx + x];
            g->v[i * d->nctx + x] = acc_mean(mine) / acc_mean(full);
            g->n[i * d->nctx + x] = mine->n;
        }
    }
    if (!have_full) snprintf(g->note, sizeof g->note, "No FullKV results to compare with.");
    return 0;
}

/* A note in place of the iso-memory tables. */
static int iso_note(rt_out *o, const char *note) {
    rt_grid *g = new_grid(o, 0, 0);
    if (!g) return -1;
    snprintf(g->title, sizeof g->title, "iso-memory");
    snprintf(g->note, sizeof g->note, "%s", note);
    return 0;
}

/* One iso-memory table per SeKV reference row, when the rows hold several budgets. */
static int iso_section(rt_out *o, const rt_data *d, const per_ctx *p) {
    double *bud = malloc(sizeof(double) * (d->nrow + 1));
    int budgets = 0, refs = 0;
    if (!bud) return -1;
    for (int i = 0; i < d->nrow; i++) {   /* FullKV's budget 1 is not a choice */
        int seen = is_method(d, i, "fullkv");
        for (int k = 0; k < budgets && !seen; k++) seen = bud[k] == d->row[i].budget;
        if (!seen) bud[budgets++] = d->row[i].budget;
    }
    char b[32] = "", note[512];
    if (budgets == 1) kv_budget_str(bud[0], b, sizeof b);
    free(bud);
    if (budgets < 2) {
        snprintf(note, sizeof note,
                 "Only one budget%s%s%s was run, so methods cannot be compared at equal fast-tier bytes; run"
                 " several (kvbench run --budget 0.05,0.1,0.2,...).", *b ? " (" : "", b, *b ? ")" : "");
        return iso_note(o, note);
    }
    for (int i = 0; i < d->nrow; i++) {
        int measured = 0;   /* a reference that never finished has no bytes to compare at */
        for (int x = 0; x < d->nctx; x++) measured |= p->fast[(size_t)i * d->nctx + x].n > 0;
        if (measured && is_iso_reference(d, i)) {
            if (iso_grid(o, d, p, i)) return -1;
            refs++;
        }
    }
    return refs ? 0 : iso_note(o, "No finished sekv results: the iso-memory view compares at SeKV's fast-tier bytes.");
}

static int t_memory(rt_out *o, const rt_data *d) {
    per_ctx p = {0};
    int rc = -1;
    if (!per_ctx_fill(d, &p) && ctx_grid(o, d, p.fast, "fast-tier KV peak", RT_BYTES, -1) &&
        ctx_grid(o, d, p.slow, "slow-tier KV peak", RT_BYTES, 0) &&
        ctx_grid(o, d, p.tok, "fast-tier resident tokens", RT_COUNT, 0) && !ratio_grid(o, d, &p) &&
        !iso_section(o, d, &p) &&
        (!d->n_gpu || ctx_grid(o, d, p.gpu, "device peak, measured (CUDA runs)", RT_BYTES, -1)))
        rc = 0;
    snprintf(o->units, sizeof o->units,
             "Memory per context length, means over the finished cases: fast-tier (GPU) and slow-tier (host) KV"
             " peak bytes, K/V rows resident on the fast tier (all layers and kv heads), and the fast-tier peak over"
             " FullKV's at the same context. Lowest fast-tier peak per column in bold. Iso-memory: score (%%) at"
             " the budget chosen per context, that budget, and its fast-tier peak; best score per column in bold.%s",
             d->n_gpu ? " Device peak (runs on the CUDA backend only): the allocator's high-water mark over each"
                        " method's compression and decode, weights included." : "");
    per_ctx_free(&p);
    return rc;
}

static int t_latency(rt_out *o, const rt_data *d) {
    per_ctx p = {0};
    int rc = -1;
    if (!per_ctx_fill(d, &p) && ctx_grid(o, d, p.pf, "prefill (s)", RT_NUM, 0) &&
        ctx_grid(o, d, p.comp, "compression (s)", RT_NUM, -1) &&
        ctx_grid(o, d, p.ms, "decode (ms/token)", RT_NUM, -1) && ctx_grid(o, d, p.tps, "decode (tokens/s)", RT_NUM, +1))
        rc = 0;
    snprintf(o->units, sizeof o->units,
             "Latency per context length, means over the finished cases: the shared prefill (s), the method's"
             " compression of the prefill (s), decode time per generated token (ms) and decode throughput"
             " (tokens/s). Lowest time and highest throughput per column in bold.");
    per_ctx_free(&p);
    return rc;
}

/* ------------------------------------------------ the command */

static void header(FILE *f, const char *name, const kv_runinfo *ri, int n_runs, int64_t run_id) {
    char line[1024];
    if (run_id > 0 || n_runs == 1) {
        for (int i = 0; i < n_runs; i++)
            if (run_id <= 0 || ri[i].id == run_id) {
                kv_runinfo_line(&ri[i], line, sizeof line);
                fprintf(f, "## kvbench %s table, %s\n\n", name, line);
            }
        return;
    }
    fprintf(f, "## kvbench %s table, runs", name);
    for (int i = 0; i < n_runs; i++) fprintf(f, "%s %lld", i ? "," : "", (long long)ri[i].id);
    fprintf(f, " pooled (rows by model, method, params and budget)\n\n");
    for (int i = 0; i < n_runs; i++) {
        kv_runinfo_line(&ri[i], line, sizeof line);
        fprintf(f, "- %s\n", line);
    }
    fprintf(f, "\n");
}

int rt_write(sqlite3 *h, const char *name, const kv_runinfo *ri, int n_runs, int64_t run_id, FILE *md, FILE *csv) {
    int t = rt_table_known(name);
    if (t < 0) {
        fprintf(stderr, "kvbench report: unknown --table '%s' (valid: %s)\n", name, rt_table_names);
        return -1;
    }
    rt_data d;
    if (rt_load(h, run_id, &d)) return -1;
    char where[64], why[256] = "";
    if (run_id > 0) snprintf(where, sizeof where, "run %lld", (long long)run_id);
    else snprintf(where, sizeof where, "the results file");
    if (!d.nrec) {
        fprintf(stderr, "kvbench report: %s has no results yet\n", where);
        rt_data_free(&d);
        return -1;
    }
    if (t == T_PAPER) {   /* report_paper.c prints its own sections */
        char run[32];
        snprintf(run, sizeof run, run_id > 0 ? "%lld" : "all", (long long)run_id);
        if (md) header(md, name, ri, n_runs, run_id);
        int rc = rt_paper(&d, md, csv, run, why, sizeof why);
        if (rc) fprintf(stderr, "kvbench report: --table paper: %s\n", why);
        rt_data_free(&d);
        return rc;
    }
    rt_out *o = calloc(1, sizeof *o);
    int rc = -1;
    if (!o) fprintf(stderr, "kvbench report: out of memory\n");
    else {
        switch (t) {
        case T_MAIN: rc = t_main(o, &d); break;
        case T_NIAH: rc = t_niah(o, &d, why, sizeof why); break;
        case T_BUDGET: rc = t_budget(o, &d); break;
        case T_RANK: rc = t_rank(o, &d, why, sizeof why); break;
        case T_ABLATION: rc = t_ablation(o, &d); break;
        case T_MEMORY: rc = t_memory(o, &d); break;
        default: rc = t_latency(o, &d); break;
        }
        if (rc) fprintf(stderr, "kvbench report: --table %s: %s%s\n", name, *why ? why : "out of memory",
                        *why ? (run_id > 0 ? " in this run" : " in these runs") : "");
    }
    if (!rc && md) {
        header(md, name, ri, n_runs, run_id);
        fprintf(md, "%s\n\n", o->units);
        for (int i = 0; i < o->n; i++) rt_grid_markdown(md, &d, &o->g[i]);
        if (d.n_infeasible || d.n_error)
            fprintf(md, "Not in the means: %d infeasible and %d failed results.\n", d.n_infeasible, d.n_error);
    }
    if (!rc && csv) {
        char run[32];
        if (run_id > 0) snprintf(run, sizeof run, "%lld", (long long)run_id);
        else snprintf(run, sizeof run, "all");
        rt_csv_header(csv);
        for (int i = 0; i < o->n; i++) rt_grid_csv(csv, run, name, &d, &o->g[i]);
    }
    for (int i = 0; o && i < o->n; i++) rt_grid_free(&o->g[i]);
    free(o);
    rt_data_free(&d);
    return rc;
}
