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
#include "paper_rows.h"

const char *const rt_table_names = "main, niah, budget, rank, ablation, memory, latency, compare, paper, zoom";
enum { T_MAIN, T_NIAH, T_BUDGET, T_RANK, T_ABLATION, T_MEMORY, T_LATENCY, T_COMPARE, T_PAPER, T_ZOOM, T_COUNT };
static const char *const names[T_COUNT] = {"main", "niah", "budget", "rank", "ablation", "memory", "latency", "compare",
                                           "paper", "zoom"};

int rt_table_known(const char *name) {
    for (int t = 0; t < T_COUNT; t++)
        if (!strcmp(name, names[t])) return t;
    return -1;
}

/* The metric of the score-type cells (report --metric), set by rt_write. */
static int metric = RT_M_SCORE;
static int metric_fmt(void) { return metric == RT_M_NLL || metric == RT_M_KL ? RT_NUM : RT_PCT; }
static int metric_better(void) { return metric == RT_M_NLL || metric == RT_M_KL ? -1 : +1; }

/* What a score-type cell holds, for the table's legend. */
static const char *metric_label(void) {
    switch (metric) {
    case RT_M_NLL: return "Answer NLL: mean -ln p per token of the reference answer, teacher-forced (nats; lower is better)";
    case RT_M_KL: return "KL: mean KL(FullKV || method) of the next-token distribution over FullKV's greedy answer (nats)";
    case RT_M_TOP1: return "Top-1: share (%) of FullKV's greedy steps where the method's argmax agrees";
    default: return "Score: mean task score (%) over every case";
    }
}

/* One record into a cell of the metric: failures counted, and 0 or left out (rt_rec_value). */
static void push(rt_samples *s, const rt_rec *r, int g) {
    s->nfail += !r->ok;
    s->ninf += r->infeasible;
    rt_samples_add(s, rt_rec_value(r, metric), g, r->cas);
}
/* A plain measurement (memory, latency) of a finished result. */
static void push_x(rt_samples *s, const rt_rec *r, double x) {
    if (!isnan(x)) s->nnoisy += r->noisy;
    rt_samples_add(s, x, 0, r->cas);
}

static int samples_copy(rt_samples *dst, const rt_samples *src) {
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n; i++)
        if (rt_samples_add(dst, src->x[i], src->g[i], src->cas[i])) return -1;
    dst->nfail = src->nfail;
    dst->ninf = src->ninf;
    dst->nnoisy = src->nnoisy;
    return 0;
}
static void samples_free_all(rt_samples *a, size_t n) {
    for (size_t i = 0; a && i < n; i++) rt_samples_free(&a[i]);
    free(a);
}

enum { MAX_GRIDS = 64 };
typedef struct {
    rt_grid g[MAX_GRIDS];
    int n;
    char units[2048];
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
    o->g[o->n].graded = metric == RT_M_TOP1;   /* a per-case share of steps, not a 0/1 outcome */
    return &o->g[o->n++];
}

static void row_label(const rt_data *d, int row, rt_grow *r) {
    r->fam = d->row[row].fam;
    r->budget = d->row[row].budget;
    rt_family_label(&d->fam[r->fam], r->label, sizeof r->label);
}

/* Mean of the metric per (selected row, workload); columns = workloads with results in
 * these rows, then Avg (the mean of the columns, only when every column has results; its
 * interval resamples cases within each workload). */
static int workload_grid(rt_out *o, const rt_data *d, const int *sel, const rt_grow *labels, int ns) {
    rt_samples *a = calloc((size_t)d->nrow * d->nwl + 1, sizeof *a);
    int *where = malloc(sizeof(int) * (d->nrow + 1)), *cols = malloc(sizeof(int) * (d->nwl + 1)), nc = 0;
    rt_grid *g = NULL;
    if (!a || !where || !cols) goto done;
    for (int i = 0; i < d->nrow; i++) where[i] = -1;
    for (int i = 0; i < ns; i++) where[sel[i]] = i;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (where[r->row] >= 0) push(&a[(size_t)where[r->row] * d->nwl + r->wl], r, 0);
    }
    for (int w = 0; w < d->nwl; w++) {
        int any = 0;
        for (int i = 0; i < ns && !any; i++) any = a[(size_t)i * d->nwl + w].n > 0;
        if (any) cols[nc++] = w;
    }
    g = new_grid(o, ns, nc + 1);
    if (!g) goto done;
    g->has_budget = 1;
    for (int j = 0; j < nc; j++) set_col(&g->cols[j], metric_fmt(), metric_better(), "%s", d->wl[cols[j]]);
    set_col(&g->cols[nc], metric_fmt(), metric_better(), "Avg");
    for (int i = 0; i < ns; i++) {
        g->rows[i] = labels[i];
        rt_samples avg = {0};
        int all = 1;
        for (int j = 0; j < nc; j++) {
            rt_samples *c = &a[(size_t)i * d->nwl + cols[j]];
            all &= c->n > 0;
            for (int k = 0; k < c->n; k++) rt_samples_add(&avg, c->x[k], j, c->cas[k]);
            avg.nfail += c->nfail;
            avg.ninf += c->ninf;
            rt_grid_set(g, i, j, c);
        }
        if (all && nc) rt_grid_set(g, i, nc, &avg);
        else rt_samples_free(&avg);
    }
done:
    samples_free_all(a, (size_t)d->nrow * d->nwl);
    free(where), free(cols);
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
             "%s per workload; Avg: mean of the workload columns (- when one is missing). Rows: method (with its"
             " params when set) and budget.", metric_label());
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
        snprintf(why, wn, "no results of a method with a rank parameter and no other params");
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
             " rank= only; unset = the method's default), by budget. %s per workload; Avg: mean of the columns (-"
             " when one is missing).", metric_label());
done:
    free(sel), free(dflt), free(rk), free(lab);
    return rc;
}

/* Marks the columns of a score grid where a reference (FullKV) row scores below
 * RT_CEILING; where the reference has no value in a column (the budget table: FullKV runs
 * at budget 1 alone) its mean over the columns it has stands for it. Returns the count
 * marked. */
static int mark_ceiling(const rt_data *d, rt_grid *g) {
    if (metric != RT_M_SCORE) return 0;
    int marked = 0;
    for (int i = 0; i < g->nr; i++) {
        const kv_method *ref = kv_method_reference();
        if (!ref || strcasecmp(d->fam[g->rows[i].fam].method, ref->name)) continue;
        double sum = 0;
        int n = 0;
        for (int j = 0; j < g->nc; j++)
            if (!isnan(g->v[i * g->nc + j])) sum += g->v[i * g->nc + j], n++;
        for (int j = 0; n && j < g->nc; j++) {
            double x = g->v[i * g->nc + j];
            if (rt_below_ceiling(isnan(x) ? sum / n : x) && !g->cols[j].low_ceiling) g->cols[j].low_ceiling = 1, marked++;
        }
    }
    return marked;
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
             " budget. %s per workload; Avg: mean of the columns (- when one is missing).", metric_label());
done:
    free(sel), free(lab);
    return rc;
}

/* ------------------------------------------------ niah, budget */

static int t_niah(rt_out *o, const rt_data *d, char *why, size_t wn) {
    int nx = d->nctx, ny = d->ndepth, rc = -1;
    /* per (row, ctx): the metric grouped by depth; per row: grouped by (ctx, depth) */
    rt_samples *a = calloc((size_t)d->nrow * nx + 1, sizeof *a), *all = calloc((size_t)d->nrow + 1, sizeof *all);
    int *rows = malloc(sizeof(int) * (d->nrow + 1)), *cols = malloc(sizeof(int) * (nx + 1)), nr = 0, nc = 0;
    char *rowseen = calloc((size_t)d->nrow + 1, 1), *ctxseen = calloc((size_t)nx + 1, 1);
    if (!a || !all || !rows || !cols || !rowseen || !ctxseen) goto done;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        if (r->depth < 0) continue;
        rowseen[r->row] = ctxseen[r->ctx] = 1;
        push(&a[(size_t)r->row * nx + r->ctx], r, r->depth);
        push(&all[r->row], r, r->ctx * ny + r->depth);
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
    for (int j = 0; j < nc; j++) set_col(&g->cols[j], metric_fmt(), metric_better(), "ctx %d", d->ctx[cols[j]]);
    set_col(&g->cols[nc], metric_fmt(), metric_better(), "overall");
    for (int i = 0; i < nr; i++) {
        row_label(d, rows[i], &g->rows[i]);
        int every = 1;
        for (int j = 0; j < nc; j++) {
            rt_samples *c = &a[(size_t)rows[i] * nx + cols[j]];
            every &= c->n > 0;
            rt_grid_set(g, i, j, c);
        }
        if (every && nc) rt_grid_set(g, i, nc, &all[rows[i]]);
    }
    snprintf(o->units, sizeof o->units,
             "Needle retrieval: %s per context length = mean over needle depths of the mean at that depth;"
             " overall = mean over every (context, depth) cell (- when a context is missing). Cases without a"
             " depth are left out.", metric == RT_M_SCORE ? "score (%)" : rt_metric_names[metric]);
    rc = 0;
done:
    samples_free_all(a, (size_t)d->nrow * nx);
    samples_free_all(all, (size_t)d->nrow);
    free(rows), free(cols), free(rowseen), free(ctxseen);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int t_budget(rt_out *o, const rt_data *d) {
    double *bud = malloc(sizeof(double) * (d->nrow + 1));
    int *fams = malloc(sizeof(int) * (d->nfam + 1)), nb = 0, nf = 0, rc = -1;
    rt_samples *a = calloc((size_t)d->nrow + 1, sizeof *a);   /* per row, grouped by workload */
    if (!a || !bud || !fams) goto done;
    for (int k = 0; k < d->nrec; k++) push(&a[d->rec[k].row], &d->rec[k], d->rec[k].wl);
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
        set_col(&g->cols[j], metric_fmt(), metric_better(), "budget %s", b);
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
        rt_grid_set(g, i, j, &a[r]);
    }
    snprintf(o->units, sizeof o->units,
             "%s per KV budget (fraction of the prompt, or tokens): mean over the workloads of the mean per"
             " workload. FullKV is recorded at budget 1.", metric == RT_M_SCORE ? "Score (%)" : rt_metric_names[metric]);
    rc = 0;
done:
    samples_free_all(a, (size_t)d->nrow);
    free(bud), free(fams);
    return rc;
}

/* ------------------------------------------------ memory, latency */

/* Per (row, ctx) the finished results' fields; score: the metric per (row, ctx), grouped
 * by workload, failures included. */
typedef struct {
    rt_samples *fast, *slow, *tok, *pf, *comp, *ms, *tps, *gpu, *dec, *rss, *score;
    rt_samples *gdrv, *pf_gpu, *pf_drv, *pf_ms;   /* device: driver's view; the case's prefill */
    size_t n;
} per_ctx;

static void per_ctx_free(per_ctx *p) {
    rt_samples *all[] = {p->fast, p->slow, p->tok, p->pf,  p->comp,   p->ms,     p->tps,   p->gpu,
                         p->dec,  p->rss,  p->score, p->gdrv, p->pf_gpu, p->pf_drv, p->pf_ms};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) samples_free_all(all[k], p->n);
}

static double mean_of(const rt_samples *s) { return rt_samples_mean(s); }

static int per_ctx_fill(const rt_data *d, per_ctx *p) {
    size_t n = (size_t)d->nrow * d->nctx + 1;
    p->n = n;
    rt_samples **all[] = {&p->fast, &p->slow, &p->tok, &p->pf,  &p->comp,   &p->ms,     &p->tps,   &p->gpu,
                          &p->dec,  &p->rss,  &p->score, &p->gdrv, &p->pf_gpu, &p->pf_drv, &p->pf_ms};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (!(*all[k] = calloc(n, sizeof(rt_samples)))) return -1;
    for (int k = 0; k < d->nrec; k++) {
        const rt_rec *r = &d->rec[k];
        size_t i = (size_t)r->row * d->nctx + r->ctx;
        push(&p->score[i], r, r->wl);
        if (!r->ok) continue;
        push_x(&p->fast[i], r, r->fast_peak), push_x(&p->slow[i], r, r->slow_peak), push_x(&p->tok[i], r, r->fast_tokens);
        push_x(&p->pf[i], r, r->prefill_s), push_x(&p->comp[i], r, r->compress_s);
        push_x(&p->ms[i], r, r->ms_tok), push_x(&p->tps[i], r, r->tok_s), push_x(&p->gpu[i], r, r->gpu_peak);
        push_x(&p->dec[i], r, r->fast_decode), push_x(&p->rss[i], r, r->rss_peak);
        push_x(&p->gdrv[i], r, r->gpu_driver), push_x(&p->pf_gpu[i], r, r->pf_gpu_peak);
        push_x(&p->pf_drv[i], r, r->pf_gpu_driver), push_x(&p->pf_ms[i], r, r->pf_gpu_ms);
    }
    return 0;
}

/* A rows x ctx grid of one per-(row, ctx) field, with intervals. */
static rt_grid *ctx_grid(rt_out *o, const rt_data *d, const rt_samples *a, const char *title, int fmt, int better) {
    rt_grid *g = new_grid(o, d->nrow, d->nctx);
    if (!g) return NULL;
    snprintf(g->title, sizeof g->title, "%s", title);
    g->has_budget = 1;
    for (int j = 0; j < d->nctx; j++) set_col(&g->cols[j], fmt, better, "ctx %d", d->ctx[j]);
    for (int i = 0; i < d->nrow; i++) {
        row_label(d, i, &g->rows[i]);
        for (int j = 0; a && j < d->nctx; j++) {
            rt_samples c;
            if (samples_copy(&c, &a[(size_t)i * d->nctx + j])) return NULL;
            rt_grid_set(g, i, j, &c);
        }
    }
    return g;
}

static int is_method(const rt_data *d, int row, const char *name) {
    return !strcasecmp(d->fam[d->row[row].fam].method, name);
}

/* A row of the reference method (kv_method_reference: FullKV). */
static int is_reference(const rt_data *d, int row) {
    const kv_method *ref = kv_method_reference();
    return ref && is_method(d, row, ref->name);
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
        double t = mean_of(&p->fast[(size_t)ref * d->nctx + x]);
        if (!isnan(t)) kv_human_bytes(t, h, sizeof h);
        if (len < sizeof g->note)
            len += (size_t)snprintf(g->note + len, sizeof g->note - len, "%s ctx %d: %s", x ? "," : "", d->ctx[x], h);
        set_col(&g->cols[3 * x], metric_fmt(), metric_better(), "ctx %d %s", d->ctx[x], rt_metric_names[metric]);
        set_col(&g->cols[3 * x + 1], RT_BUDGET, 0, "ctx %d budget", d->ctx[x]);
        set_col(&g->cols[3 * x + 2], RT_BYTES, 0, "ctx %d fast KV", d->ctx[x]);
    }
    if (len < sizeof g->note) snprintf(g->note + len, sizeof g->note - len, " (- where none fits).");
    for (int i = 0; i < nf; i++) {
        g->rows[i].fam = fams[i];
        g->rows[i].budget = NAN;
        rt_family_label(&d->fam[fams[i]], g->rows[i].label, sizeof g->rows[i].label);
        for (int x = 0; x < d->nctx; x++) {
            double target = mean_of(&p->fast[(size_t)ref * d->nctx + x]), best = NAN;
            int pick = -1;
            for (int r = 0; r < d->nrow && !isnan(target); r++) {
                double m = mean_of(&p->fast[(size_t)r * d->nctx + x]);
                if (d->row[r].fam == fams[i] && m <= target && (pick < 0 || m > best)) pick = r, best = m;
            }
            if (pick < 0) continue;
            rt_samples sc, fb;
            if (samples_copy(&sc, &p->score[(size_t)pick * d->nctx + x]) ||
                samples_copy(&fb, &p->fast[(size_t)pick * d->nctx + x])) {
                free(fams);
                return -1;
            }
            rt_grid_set(g, i, 3 * x, &sc);
            rt_grid_set(g, i, 3 * x + 2, &fb);
            g->v[i * g->nc + 3 * x + 1] = d->row[pick].budget;
            g->n[i * g->nc + 3 * x + 1] = g->n[i * g->nc + 3 * x + 2];
        }
    }
    free(fams);
    return 0;
}

/* The rows iso-memory compares at: the paper's primary row (pr_primary: SeKV) with its
 * default params, or every row of that method on a model that has no default-params row. */
static int is_iso_reference(const rt_data *d, int row) {
    const kv_method *pm = pr_primary();
    const rt_family *f = &d->fam[d->row[row].fam];
    if (!pm || !is_method(d, row, pm->name)) return 0;
    if (!*f->params) return 1;
    for (int k = 0; k < d->nrow; k++)
        if (is_method(d, k, pm->name) && !*d->fam[d->row[k].fam].params && !strcmp(d->fam[d->row[k].fam].model, f->model))
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
            if (is_reference(d, k) && !strcmp(d->fam[d->row[k].fam].model, model)) ref = k;
        have_full |= ref >= 0;
        for (int x = 0; ref >= 0 && x < d->nctx; x++) {
            const rt_samples *mine = &p->fast[(size_t)i * d->nctx + x], *full = &p->fast[(size_t)ref * d->nctx + x];
            g->v[i * d->nctx + x] = mean_of(mine) / mean_of(full);
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
        int seen = is_reference(d, i);
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
    if (refs) return 0;
    const kv_method *pm = pr_primary();
    if (!pm) return iso_note(o, "No method's paper has claims: the iso-memory view has no row to compare at.");
    snprintf(note, sizeof note, "No finished %s results: the iso-memory view compares at %s's fast-tier bytes.", pm->name,
             pm->paper->title);
    return iso_note(o, note);
}

static int t_memory(rt_out *o, const rt_data *d) {
    per_ctx p = {0};
    int rc = -1;
    if (!per_ctx_fill(d, &p) && ctx_grid(o, d, p.fast, "fast-tier KV peak", RT_BYTES, -1) &&
        (!d->n_decode || ctx_grid(o, d, p.dec, "fast-tier KV at decode (steady)", RT_BYTES, -1)) &&
        (!d->n_rss || ctx_grid(o, d, p.rss, "process peak RSS, measured", RT_BYTES, 0)) &&
        ctx_grid(o, d, p.slow, "slow-tier KV peak", RT_BYTES, 0) &&
        ctx_grid(o, d, p.tok, "fast-tier resident tokens", RT_COUNT, 0) && !ratio_grid(o, d, &p) &&
        !iso_section(o, d, &p) &&
        (!d->n_gpu || ctx_grid(o, d, p.gpu, "device peak, measured (CUDA runs)", RT_BYTES, -1)) &&
        (!d->n_gpu_driver || ctx_grid(o, d, p.gdrv, "device peak, driver view (CUDA runs)", RT_BYTES, -1)) &&
        (!d->n_pf_gpu || (ctx_grid(o, d, p.pf_gpu, "device prefill peak, allocator (CUDA runs)", RT_BYTES, 0) &&
                          ctx_grid(o, d, p.pf_drv, "device prefill peak, driver view (CUDA runs)", RT_BYTES, 0))))
        rc = 0;
    snprintf(o->units, sizeof o->units,
             "Memory per context length, means over the finished cases: fast-tier (GPU) and slow-tier (host) KV"
             " peak bytes, K/V rows resident on the fast tier (all layers and kv heads), and the fast-tier peak over"
             " FullKV's at the same context. Iso-memory: %s at the budget chosen per context, that budget, and its"
             " fast-tier peak. The fast-tier peak (the headline figure, also in the main report) includes the"
             " one uncompressed layer the layer-by-layer prefill holds; the steady figure is the most held from the"
             " end of compression through decode.%s%s%s%s", metric == RT_M_SCORE ? "score (%)" : rt_metric_names[metric],
             d->n_rss ? " Peak RSS: the process's measured high-water mark (VmHWM) over each method's compression"
                        " and decode, model weights and the case's prefill outputs included: what the accounting"
                        " leaves out." : "",
             d->n_gpu ? " Device peak (runs on the CUDA backend only): the allocator's high-water mark over each"
                        " method's compression and decode, weights included." : "",
             d->n_gpu_driver ? " Driver view: cudaMemGetInfo's device memory in use, sampled at every allocation"
                               " over the same span (the CUDA context, cuBLAS, cuSOLVER and other processes"
                               " included)." : "",
             d->n_pf_gpu ? " Device prefill peak: the case's shared prefill, the same for every row of a case"
                           " (allocator and driver view; - where not measured)." : "");
    per_ctx_free(&p);
    return rc;
}

static int t_latency(rt_out *o, const rt_data *d) {
    per_ctx p = {0};
    int rc = -1;
    if (!per_ctx_fill(d, &p) && ctx_grid(o, d, p.pf, "prefill (s)", RT_NUM, 0) &&
        ctx_grid(o, d, p.comp, "compression (s)", RT_NUM, -1) &&
        ctx_grid(o, d, p.ms, "decode (ms/token)", RT_NUM, -1) && ctx_grid(o, d, p.tps, "decode (tokens/s)", RT_NUM, +1) &&
        (!d->n_pf_gpu || ctx_grid(o, d, p.pf_ms, "device prefill (ms, CUDA events)", RT_NUM, 0)))
        rc = 0;
    snprintf(o->units, sizeof o->units,
             "Latency per context length, means over the finished cases: the shared prefill (s), the method's"
             " compression of the prefill (s), decode time per generated token (ms) and decode throughput"
             " (tokens/s); with --repeat each result is the median of its repeats.%s",
             d->n_noisy ? " Noisy: the machine's 1-minute load average moved (by more than 1, or a quarter) during"
                          " the case of some results, so their times are noisy; see the note under the tables."
                        : "");
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

/* 1 when two rows of one model were run over different sets of cases. */
static int different_cases(const rt_data *d) {
    unsigned char *seen = calloc((size_t)d->nrow * d->ncase + 1, 1);
    int differ = 0;
    if (!seen) return 0;
    for (int k = 0; k < d->nrec; k++) seen[(size_t)d->rec[k].row * d->ncase + d->rec[k].cas] = 1;
    for (int i = 0; i < d->nrow && !differ; i++)
        for (int k = i + 1; k < d->nrow && !differ; k++)
            differ = !strcmp(d->fam[d->row[i].fam].model, d->fam[d->row[k].fam].model) &&
                     memcmp(seen + (size_t)i * d->ncase, seen + (size_t)k * d->ncase, d->ncase);
    free(seen);
    return differ;
}

static const char *legend =
    "Each cell: value [95% interval] n=cases, and (k infeasible) or (k failed) when results were infeasible or failed: they count"
    " as 0 in score and top-1 means and are left out of NLL and KL means. Intervals: Wilson for binary scores (on the"
    " effective number of cases where a column averages groups of different sizes), else the small-n interval:"
    " bootstrap-t over cases (2000 resamples, fixed seed; resampled within each workload, depth or context where a"
    " column averages them) widened to at least Student's t-interval; none for a single case (docs/statistics.md). Bold: best in its column and better than every other row of its model by an exact"
    " paired sign test over the cases both saw (McNemar's exact test on binary scores), Holm-adjusted p < 0.05; a"
    " column without such a row has no bold.";

int rt_write(sqlite3 *h, const char *name, const kv_runinfo *ri, int n_runs, int64_t run_id, int metric_, const char *base,
             FILE *md, FILE *csv) {
    int t = rt_table_known(name);
    if (t < 0) {
        fprintf(stderr, "kvbench report: unknown --table '%s' (valid: %s)\n", name, rt_table_names);
        return -1;
    }
    metric = metric_;
    rt_data d;
    if (rt_load(h, run_id, &d)) return -1;
    char where[64], why[256] = "", run[32];
    if (run_id > 0) snprintf(where, sizeof where, "run %lld", (long long)run_id);
    else snprintf(where, sizeof where, "the results file");
    if (run_id > 0) snprintf(run, sizeof run, "%lld", (long long)run_id);
    else snprintf(run, sizeof run, "all");
    if (!d.nrec) {
        fprintf(stderr, "kvbench report: %s has no results yet\n", where);
        rt_data_free(&d);
        return -1;
    }
    if (t == T_ZOOM) {   /* report_zoom.c: from head_stats and zoom_events */
        if (md) header(md, name, ri, n_runs, run_id);
        int rc = rt_zoom(h, run_id, md, csv, run, why, sizeof why);
        if (rc) fprintf(stderr, "kvbench report: --table zoom: %s\n", why);
        rt_data_free(&d);
        return rc;
    }
    if (t == T_PAPER) {   /* report_paper.c prints its own sections */
        if (md) header(md, name, ri, n_runs, run_id);
        int rc = rt_paper(&d, h, run_id, md, csv, run, why, sizeof why);
        if (rc) fprintf(stderr, "kvbench report: --table paper: %s\n", why);
        rt_data_free(&d);
        return rc;
    }
    int differ = different_cases(&d);
    if (t == T_COMPARE) {
        if (md) header(md, name, ri, n_runs, run_id);
        int rc = rt_compare(&d, metric, base, md, csv, run);
        if (!rc && md && differ)
            fprintf(md, "Rows were run over different sets of cases: each comparison uses the cases both saw (n).\n");
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
    int low = 0;
    for (int i = 0; !rc && t != T_MEMORY && t != T_LATENCY && i < o->n; i++) low += mark_ceiling(&d, &o->g[i]);
    if (!rc && md) {
        header(md, name, ri, n_runs, run_id);
        if (differ)
            fprintf(md, "**Rows were run over different sets of cases** (compare n): their means are not over the"
                        " same cases.\n\n");
        fprintf(md, "%s\n\n%s%s\n\n", o->units, legend, low ? " " RT_CEILING_NOTE : "");
        for (int i = 0; i < o->n; i++) rt_grid_markdown(md, &d, &o->g[i]);
        if (d.n_infeasible || d.n_error)
            fprintf(md, "Failed: %d infeasible and %d failed results, in the cells' n%s.\n", d.n_infeasible, d.n_error,
                    metric == RT_M_NLL || metric == RT_M_KL ? " as failures (left out of these means)" : " as 0");
        if (t == T_LATENCY && d.n_noisy)
            fprintf(md, "Noisy: %d finished results ran while the load average moved, marked (k noisy) in their"
                        " cells; their latency is not comparable. Rerun on a quiet machine (and with --repeat N).\n",
                    d.n_noisy);
    }
    if (!rc && csv) {
        rt_csv_header(csv);
        for (int i = 0; i < o->n; i++) rt_grid_csv(csv, run, name, &d, &o->g[i]);
    }
    for (int i = 0; o && i < o->n; i++) rt_grid_free(&o->g[i]);
    free(o);
    rt_data_free(&d);
    return rc;
}
