/* The records behind kvbench report --table: every result of the selected runs, read once,
 * with its method family, (family, budget) row, workload column, context and depth as
 * indices; and the grid printer, Markdown (bold best) or CSV (one line per cell). */
#include <csv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report_tables.h"
#include "report_out.h"
#include "../kernels/stats.h"
#include "../results/query.h"

const char *const rt_metric_names[] = {"score", "nll", "kl", "top1"};

int rt_metric_known(const char *name) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, rt_metric_names[i])) return i;
    return -1;
}

double rt_rec_value(const rt_rec *r, int metric) {
    switch (metric) {
    case RT_M_NLL: return r->ok ? r->nll : NAN;
    case RT_M_KL: return r->ok ? r->kl : NAN;
    case RT_M_TOP1: return r->ok ? r->top1 : 0;
    default: return r->ok ? r->score : 0;
    }
}

void rt_data_free(rt_data *d) {
    for (int i = 0; i < d->nfam; i++) free(d->fam[i].model), free(d->fam[i].method), free(d->fam[i].params);
    for (int i = 0; i < d->nwl; i++) free(d->wl[i]);
    free(d->fam), free(d->row), free(d->wl), free(d->ctx), free(d->depth), free(d->rec);
    memset(d, 0, sizeof *d);
}

/* Makes room for element n of array a (capacity cap, doubled as needed): 0, or -1 with a
 * unchanged. Needs a `void *tmp` in scope. */
#define ROOM(a, n, cap)                                                                                         \
    ((n) < (cap) ? 0                                                                                            \
     : (tmp = realloc((a), sizeof *(a) * (size_t)((cap) ? 2 * (cap) : 64)))                                    \
         ? ((a) = tmp, (cap) = (cap) ? 2 * (cap) : 64, 0)                                                       \
         : -1)

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "b=2, a=1" -> "a=1,b=2": params that differ only in order or spaces are one family. */
static char *params_norm(const char *p) {
    if (!p) p = "";
    char *copy = strdup(p), *items[64], *out = malloc(strlen(p) + 1);
    if (!copy || !out) {
        free(copy), free(out);
        return NULL;
    }
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ' || *t == '\t') t++;
        char *e = t + strlen(t);
        while (e > t && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
        if (*t) items[n++] = t;
    }
    qsort(items, n, sizeof *items, cmp_str);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strcat(out, ",");
        strcat(out, items[i]);
    }
    free(copy);
    return out;
}

static const char *text(sqlite3_stmt *st, int i, const char *dflt) {
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : dflt;
}
static double real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static int find_family(rt_data *d, const char *model, const char *method, const char *params) {
    for (int i = d->nfam - 1; i >= 0; i--)
        if (!strcmp(d->fam[i].method, method) && !strcmp(d->fam[i].params, params) && !strcmp(d->fam[i].model, model))
            return i;
    return -1;
}

static int fam_cmp(const rt_family *x, const rt_family *y) {
    int c = strcmp(x->model, y->model);
    if (!c) c = kv_method_cmp(x->method, y->method);
    return c ? c : strcmp(x->params, y->params);
}

/* Sort helpers: an index array ordered by a key, then every reference renumbered. */
static const rt_data *sort_d;
static int fam_idx_cmp(const void *a, const void *b) {
    return fam_cmp(&sort_d->fam[*(const int *)a], &sort_d->fam[*(const int *)b]);
}
static int row_idx_cmp(const void *a, const void *b) {
    const rt_row *x = &sort_d->row[*(const int *)a], *y = &sort_d->row[*(const int *)b];
    if (x->fam != y->fam) return x->fam < y->fam ? -1 : 1;
    return (x->budget > y->budget) - (x->budget < y->budget);
}
static int int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}
static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Orders families and rows, then turns each record's raw ctx/depth (kept in ctx and
 * the depth field's slot) into indices of the sorted distinct values. */
static int finish(rt_data *d, const int *raw_ctx, const double *raw_depth) {
    int *perm = malloc(sizeof(int) * (d->nfam + d->nrow + 1)), *inv = malloc(sizeof(int) * (d->nfam + d->nrow + 1));
    if (!perm || !inv) {
        free(perm), free(inv);
        return -1;
    }
    sort_d = d;
    for (int i = 0; i < d->nfam; i++) perm[i] = i;
    qsort(perm, d->nfam, sizeof *perm, fam_idx_cmp);
    for (int i = 0; i < d->nfam; i++) inv[perm[i]] = i;
    rt_family *f = malloc(sizeof *f * (d->nfam + 1));
    if (!f) goto oom;
    for (int i = 0; i < d->nfam; i++) f[i] = d->fam[perm[i]];
    free(d->fam), d->fam = f;
    for (int i = 0; i < d->nrow; i++) d->row[i].fam = inv[d->row[i].fam];
    for (int i = 0; i < d->nrec; i++) d->rec[i].fam = inv[d->rec[i].fam];
    for (int i = 0; i < d->nrow; i++) perm[i] = i;
    qsort(perm, d->nrow, sizeof *perm, row_idx_cmp);
    for (int i = 0; i < d->nrow; i++) inv[perm[i]] = i;
    rt_row *r = malloc(sizeof *r * (d->nrow + 1));
    if (!r) goto oom;
    for (int i = 0; i < d->nrow; i++) r[i] = d->row[perm[i]];
    free(d->row), d->row = r;
    for (int i = 0; i < d->nrec; i++) d->rec[i].row = inv[d->rec[i].row];
    free(perm), free(inv);
    /* distinct contexts and depths */
    d->ctx = malloc(sizeof(int) * (d->nrec + 1));
    d->depth = malloc(sizeof(double) * (d->nrec + 1));
    if (!d->ctx || !d->depth) return -1;
    for (int i = 0; i < d->nrec; i++) {
        int found = 0;
        for (int k = 0; k < d->nctx && !found; k++) found = d->ctx[k] == raw_ctx[i];
        if (!found) d->ctx[d->nctx++] = raw_ctx[i];
        found = isnan(raw_depth[i]);
        for (int k = 0; k < d->ndepth && !found; k++) found = d->depth[k] == raw_depth[i];
        if (!found) d->depth[d->ndepth++] = raw_depth[i];
    }
    qsort(d->ctx, d->nctx, sizeof *d->ctx, int_cmp);
    qsort(d->depth, d->ndepth, sizeof *d->depth, dbl_cmp);
    for (int i = 0; i < d->nrec; i++) {
        d->rec[i].ctx = d->rec[i].depth = -1;
        for (int k = 0; k < d->nctx; k++)
            if (d->ctx[k] == raw_ctx[i]) d->rec[i].ctx = k;
        for (int k = 0; k < d->ndepth; k++)
            if (d->depth[k] == raw_depth[i]) d->rec[i].depth = k;
    }
    for (int i = 0; i < d->nfam; i++) {
        int seen = 0;
        for (int k = 0; k < i && !seen; k++) seen = !strcmp(d->fam[k].model, d->fam[i].model);
        d->n_models += !seen;
    }
    return 0;
oom:
    free(perm), free(inv);
    return -1;
}

/* The part of a run's identity that pooled runs of one model may differ in: the code,
 * the split, the synthetic oracle hints, the methods' parameter defaults and the compiled
 * sources with the plugins (hashes; the run key holds them in full; overrides are the
 * rows' params). Fields a run key lacks
 * (files from before they were recorded) are left out. */
static void run_ident(const char *commit, const char *key, char *buf, size_t n) {
    char c[32];
    const char *dirty = strstr(commit, "+dirty");   /* files of older runs: "+dirty.<diff hash>" */
    snprintf(c, sizeof c, "%.12s%s%.12s", commit, dirty ? "+" : "", dirty && dirty[6] == '.' ? dirty + 7 : "");
    size_t k = (size_t)snprintf(buf, n, "git %s", c);
    static const char *const fields[] = {";split=", ";oracle_hints=", ";methods="};
    for (int i = 0; i < 3 && k < n; i++) {
        const char *f = strstr(key, fields[i]);
        if (!f) continue;
        f += strlen(fields[i]);
        size_t len = strcspn(f, ";");
        if (i == 0) k += (size_t)snprintf(buf + k, n - k, ", %.*s", (int)len, f);
        else if (i == 1) k += (size_t)snprintf(buf + k, n - k, ", hints %.*s", (int)len, f);
        else {
            uint64_t hsh = 1469598103934665603ULL;
            for (size_t j = 0; j < len; j++) hsh = (hsh ^ (unsigned char)f[j]) * 1099511628211ULL;
            k += (size_t)snprintf(buf + k, n - k, ", defaults %06llx", (unsigned long long)(hsh & 0xffffff));
        }
    }
    /* the compiled sources and plugins (code=COMMIT+src.HASH+plugin...): a short hash */
    const char *code = strstr(key, ";code="), *src = code ? strstr(code, "+src.") : NULL;
    if (src && k < n) {
        size_t len = strcspn(src, ";");
        uint64_t hsh = 1469598103934665603ULL;
        for (size_t j = 0; j < len; j++) hsh = (hsh ^ (unsigned char)src[j]) * 1099511628211ULL;
        snprintf(buf + k, n - k, ", code %06llx", (unsigned long long)(hsh & 0xffffff));
    }
}

/* 1 if the runs with results in the selection differ in run_ident (then each model is
 * shown per identity, side by side, instead of pooling different code or settings). */
static int idents_differ(sqlite3 *h, int64_t run_id) {
    sqlite3_stmt *st = NULL;
    char first[256] = "", id[256];
    int differ = 0, any = 0;
    if (run_id > 0 || !(st = kvq_runs_with_results(h))) return 0;
    while (!differ && sqlite3_step(st) == SQLITE_ROW) {
        run_ident((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1), id, sizeof id);
        if (any) differ = strcmp(first, id) != 0;
        else snprintf(first, sizeof first, "%s", id), any = 1;
    }
    sqlite3_finalize(st);
    return differ;
}

int rt_load(sqlite3 *h, int64_t run_id, rt_data *d) {
    sqlite3_stmt *st = NULL;
    int tag = idents_differ(h, run_id);
    memset(d, 0, sizeof *d);
    int cap_fam = 0, cap_row = 0, cap_wl = 0, cap_rec = 0, cap_ctx = 0, cap_depth = 0, last_row = -1;
    int *raw_ctx = NULL, cap_case = 0, *case_wl = NULL, cap_cwl = 0;
    char **case_key = NULL;
    int64_t last_cid = -1;
    int last_cas = -1;
    double *raw_depth = NULL;
    void *tmp;
    if (!(st = kvq_report_records(h, run_id))) {
        fprintf(stderr, "kvbench report: reading results: %s\n", sqlite3_errmsg(h));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *model = text(st, 0, "?"), *workload = text(st, 1, "?"), *variant = text(st, 2, NULL);
        char tagged[768], ident[256];
        if (tag) {   /* the model as run by this code with these settings */
            run_ident(text(st, 28, "?"), text(st, 29, ""), ident, sizeof ident);
            snprintf(tagged, sizeof tagged, "%s [%s]", model, ident);
            model = tagged;
        }
        const char *method = text(st, 5, "?"), *status = text(st, 8, "");
        double budget = real(st, 7);
        char *params = params_norm(text(st, 6, ""));
        if (!params) goto oom;
        int fi = find_family(d, model, method, params);
        if (fi < 0) {
            if (ROOM(d->fam, d->nfam, cap_fam)) {
                free(params);
                goto oom;
            }
            rt_family *f = &d->fam[d->nfam];
            f->model = strdup(model), f->method = strdup(method), f->params = params;
            params = NULL;
            if (!f->model || !f->method) {
                free(f->model), free(f->method), free(f->params);
                goto oom;
            }
            fi = d->nfam++;
        }
        free(params);
        /* the row: usually the previous record's (results come case by case, methods in turn) */
        int ri = last_row >= 0 && d->row[last_row].fam == fi && d->row[last_row].budget == budget ? last_row : -1;
        for (int k = d->nrow - 1; k >= 0 && ri < 0; k--)
            if (d->row[k].fam == fi && d->row[k].budget == budget) ri = k;
        if (ri < 0) {
            if (ROOM(d->row, d->nrow, cap_row)) goto oom;
            d->row[d->nrow] = (rt_row){fi, budget};
            ri = d->nrow++;
        }
        last_row = ri;
        char wl[256];
        size_t wn = strlen(workload);
        if (!variant || !strcmp(variant, workload)) snprintf(wl, sizeof wl, "%s", workload);
        else if (!strncmp(variant, workload, wn) && variant[wn] == ':')   /* "ruler:vt" already says it */
            snprintf(wl, sizeof wl, "%s", variant);
        else snprintf(wl, sizeof wl, "%s:%s", workload, variant);
        int wi = -1;
        for (int k = d->nwl - 1; k >= 0 && wi < 0; k--)
            if (!strcmp(d->wl[k], wl)) wi = k;
        if (wi < 0) {
            if (ROOM(d->wl, d->nwl, cap_wl) || !(d->wl[d->nwl] = strdup(wl))) goto oom;
            wi = d->nwl++;
        }
        if (ROOM(d->rec, d->nrec, cap_rec) || ROOM(raw_ctx, d->nrec, cap_ctx) || ROOM(raw_depth, d->nrec, cap_depth))
            goto oom;
        raw_ctx[d->nrec] = sqlite3_column_int(st, 3);
        raw_depth[d->nrec] = real(st, 4);
        /* the case: the previous record's when the same row of cases, else (workload, key) */
        int64_t cid = sqlite3_column_int64(st, 20);
        int cas = cid == last_cid ? last_cas : -1;
        const char *ckey = text(st, 19, "");
        for (int k = d->ncase - 1; k >= 0 && cas < 0; k--)
            if (case_wl[k] == wi && !strcmp(case_key[k], ckey)) cas = k;
        if (cas < 0) {
            if (ROOM(case_key, d->ncase, cap_case) || ROOM(case_wl, d->ncase, cap_cwl) ||
                !(case_key[d->ncase] = strdup(ckey)))
                goto oom;
            case_wl[d->ncase] = wi;
            cas = d->ncase++;
        }
        last_cid = cid, last_cas = cas;
        double l0 = real(st, 24), l1 = real(st, 25);
        int ok = !strcmp(status, "ok");
        d->n_infeasible += !strcmp(status, "infeasible");
        d->n_error += !strcmp(status, "error");
        int dt = sqlite3_column_int(st, 16);
        d->rec[d->nrec++] = (rt_rec){
            .fam = fi, .row = ri, .wl = wi, .ok = ok, .score = real(st, 9), .fast_peak = real(st, 10),
            .slow_peak = real(st, 11), .fast_tokens = real(st, 12), .prefill_s = real(st, 13),
            .compress_s = real(st, 14), .ms_tok = dt > 0 ? 1000.0 * real(st, 15) / dt : NAN,
            .tok_s = dt > 0 ? real(st, 17) : NAN, .gpu_peak = real(st, 18), .cas = cas, .nll = real(st, 21),
            .kl = real(st, 22), .top1 = real(st, 23), .fast_decode = real(st, 26), .rss_peak = real(st, 27),
            .pf_gpu_peak = real(st, 30), .pf_gpu_driver = real(st, 31), .pf_gpu_ms = real(st, 32),
            .gpu_driver = real(st, 33),
            /* noisy: the 1-minute load average moved by more than 1 or by a quarter */
            .noisy = !isnan(l0) && !isnan(l1) && fabs(l1 - l0) > fmax(1.0, 0.25 * l0)};
        d->n_gpu += ok && !isnan(d->rec[d->nrec - 1].gpu_peak);
        d->n_noisy += ok && d->rec[d->nrec - 1].noisy;
        d->rec[d->nrec - 1].infeasible = !strcmp(status, "infeasible");
        d->n_decode += ok && !isnan(d->rec[d->nrec - 1].fast_decode);
        d->n_rss += ok && !isnan(d->rec[d->nrec - 1].rss_peak);
        const rt_rec *lr = &d->rec[d->nrec - 1];
        d->n_gpu_driver += ok && !isnan(lr->gpu_driver);
        d->n_pf_gpu += ok && (!isnan(lr->pf_gpu_peak) || !isnan(lr->pf_gpu_driver) || !isnan(lr->pf_gpu_ms));
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "kvbench report: reading results: %s\n", sqlite3_errmsg(h));
        goto bad;
    }
    if (finish(d, raw_ctx, raw_depth)) goto oom;
    free(raw_ctx), free(raw_depth);
    for (int k = 0; k < d->ncase; k++) free(case_key[k]);
    free(case_key), free(case_wl);
    return 0;
oom:
    fprintf(stderr, "kvbench report: out of memory\n");
bad:
    sqlite3_finalize(st);
    free(raw_ctx), free(raw_depth);
    for (int k = 0; k < d->ncase; k++) free(case_key[k]);
    free(case_key), free(case_wl);
    rt_data_free(d);
    return -1;
}

/* ------------------------------------------------ grids */

int rt_grid_init(rt_grid *g, int nr, int nc) {
    memset(g, 0, sizeof *g);
    g->nr = nr, g->nc = nc;
    g->rows = calloc((size_t)nr + 1, sizeof *g->rows);
    g->cols = calloc((size_t)nc + 1, sizeof *g->cols);
    g->v = malloc(sizeof *g->v * ((size_t)nr * nc + 1));
    g->n = calloc((size_t)nr * nc + 1, sizeof *g->n);
    g->lo = malloc(sizeof *g->lo * ((size_t)nr * nc + 1));
    g->hi = malloc(sizeof *g->hi * ((size_t)nr * nc + 1));
    g->nfail = calloc((size_t)nr * nc + 1, sizeof *g->nfail);
    g->ninf = calloc((size_t)nr * nc + 1, sizeof *g->ninf);
    g->nnoisy = calloc((size_t)nr * nc + 1, sizeof *g->nnoisy);
    g->cell = calloc((size_t)nr * nc + 1, sizeof *g->cell);
    if (!g->rows || !g->cols || !g->v || !g->n || !g->lo || !g->hi || !g->nfail || !g->ninf || !g->nnoisy || !g->cell) {
        rt_grid_free(g);
        return -1;
    }
    for (int i = 0; i < nr * nc; i++) g->v[i] = g->lo[i] = g->hi[i] = NAN;
    return 0;
}

void rt_grid_free(rt_grid *g) {
    for (int i = 0; g->cell && i < g->nr * g->nc; i++) rt_samples_free(&g->cell[i]);
    free(g->rows), free(g->cols), free(g->v), free(g->n), free(g->lo), free(g->hi), free(g->nfail), free(g->ninf), free(g->nnoisy), free(g->cell);
    memset(g, 0, sizeof *g);
}

int rt_samples_add(rt_samples *s, double x, int g, int cas) {
    if (isnan(x)) return 0;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        double *nx = realloc(s->x, sizeof *nx * cap);
        if (nx) s->x = nx;
        int *ng = realloc(s->g, sizeof *ng * cap);
        if (ng) s->g = ng;
        int *nc = realloc(s->cas, sizeof *nc * cap);
        if (nc) s->cas = nc;
        if (!nx || !ng || !nc) return -1;
        s->cap = cap;
    }
    s->x[s->n] = x, s->g[s->n] = g, s->cas[s->n++] = cas;
    return 0;
}

void rt_samples_free(rt_samples *s) {
    free(s->x), free(s->g), free(s->cas);
    memset(s, 0, sizeof *s);
}

double rt_samples_mean(const rt_samples *s) {
    if (!s->n) return NAN;
    double lo, hi;
    return st_boot_mean(s->x, s->g, s->n, 0, 0, 0.95, &lo, &hi);   /* B = 0: the estimate alone */
}

void rt_fail_note(char *buf, size_t n, int nfail, int ninf) {
    if (!nfail) snprintf(buf, n, "%s", "");
    else if (ninf == nfail) snprintf(buf, n, " (%d infeasible)", ninf);
    else if (!ninf) snprintf(buf, n, " (%d failed)", nfail);
    else snprintf(buf, n, " (%d infeasible, %d failed)", ninf, nfail - ninf);
}

void rt_grid_set(rt_grid *g, int i, int j, rt_samples *s) {
    size_t k = (size_t)i * g->nc + j;
    rt_samples_free(&g->cell[k]);
    g->cell[k] = *s;
    memset(s, 0, sizeof *s);
    const rt_samples *c = &g->cell[k];
    g->n[k] = c->n;
    g->nfail[k] = c->nfail;
    g->ninf[k] = c->ninf;
    g->nnoisy[k] = c->nnoisy;
    g->v[k] = c->n ? st_interval(c->x, c->g, c->n, g->cols[j].fmt == RT_PCT && !g->graded, &g->lo[k], &g->hi[k]) : NAN;
    if (!c->n) g->lo[k] = g->hi[k] = NAN;
}

int rt_params_file_item(const char *params, char *buf, size_t n) {
    snprintf(buf, n, "%s", "");
    for (const char *p = params; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len > 12 && !strncmp(p, "params_file=", 12)) {
            snprintf(buf, n, "%.*s", (int)len, p);
            return (int)len;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

void rt_params_suffix(const char *params, char *buf, size_t n) {
    char item[512];
    int len = rt_params_file_item(params, item, sizeof item);
    snprintf(buf, n, "%s", "");
    if (!len) return;
    const char *v = item + 12, *base = v;
    for (const char *q = v; *q; q++)
        if (*q == '/') base = q + 1;
    if (!strcmp(v, "none")) snprintf(buf, n, "%s", RT_UNTRAINED);
    else if (strcmp(v, "default")) snprintf(buf, n, " (params %s)", base);
}

int rt_params_file_only(const char *params) {
    return !params || !*params || (!strncmp(params, "params_file=", 12) && !strchr(params, ','));
}

void rt_family_label(const rt_family *f, char *buf, size_t n) {
    char rest[512] = "", suffix[160];
    size_t k = 0;
    rt_params_suffix(f->params, suffix, sizeof suffix);
    for (const char *p = f->params; *p;) {
        size_t len = strcspn(p, ",");
        if (!(len >= 12 && !strncmp(p, "params_file=", 12)) && k < sizeof rest)
            k += (size_t)snprintf(rest + k, sizeof rest - k, "%s%.*s", k ? " " : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    snprintf(buf, n, "%s%s%s%s", f->method, suffix, *rest ? " " : "", rest);
}

/* Three significant digits, no exponent for the usual range. */
static void fmt_sig(double x, char *buf, size_t n) {
    if (fabs(x) >= 1000) snprintf(buf, n, "%.0f", x);
    else snprintf(buf, n, "%.3g", x);
}

static void fmt_cell(const rt_col *c, double x, char *buf, size_t n) {
    if (isnan(x)) {
        snprintf(buf, n, "-");
        return;
    }
    switch (c->fmt) {
    case RT_PCT: snprintf(buf, n, "%.1f", 100 * x); break;
    case RT_BYTES: kv_human_bytes(x, buf, n); break;
    case RT_COUNT: snprintf(buf, n, "%.0f", x); break;
    case RT_RATIO: snprintf(buf, n, "%.3f", x); break;
    case RT_BUDGET: kv_budget_str(x, buf, n); break;
    default: fmt_sig(x, buf, n);
    }
}

static int is_best(double x, double best) { return !isnan(x) && fabs(x - best) <= 1e-12 * fmax(1, fabs(best)); }

/* (case, group, value) sorted by case then group, for pairing two cells */
typedef struct {
    int cas, g;
    double x;
} keyed;
static int keyed_cmp(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->cas != y->cas) return x->cas < y->cas ? -1 : 1;
    return (x->g > y->g) - (x->g < y->g);
}
static keyed *keyed_sorted(const rt_samples *s) {
    keyed *k = malloc(sizeof *k * (s->n + 1));
    if (!k) return NULL;
    for (int i = 0; i < s->n; i++) k[i] = (keyed){s->cas[i], s->g[i], s->x[i]};
    qsort(k, s->n, sizeof *k, keyed_cmp);
    return k;
}

/* Sorted by case; the values of one case (several groups: budgets, columns) averaged. */
static int per_case(const rt_samples *s, keyed **out) {
    keyed *k = keyed_sorted(s);
    if (!k) return -1;
    int m = 0;
    for (int i = 0; i < s->n;) {
        int j = i;
        double sum = 0;
        while (j < s->n && k[j].cas == k[i].cas) sum += k[j++].x;
        k[m++] = (keyed){k[i].cas, 0, sum / (j - i)};
        i = j;
    }
    *out = k;
    return m;
}

int rt_paired(const rt_samples *a, const rt_samples *b, double **xa, double **xb) {
    keyed *ka = NULL, *kb = NULL;
    int na = per_case(a, &ka), nb = per_case(b, &kb), n = 0, i = 0, j = 0, cap = a->n < b->n ? a->n : b->n;
    *xa = malloc(sizeof **xa * (cap + 1));
    *xb = malloc(sizeof **xb * (cap + 1));
    if (na < 0 || nb < 0 || !*xa || !*xb) {
        free(ka), free(kb), free(*xa), free(*xb);
        *xa = *xb = NULL;
        return -1;
    }
    while (i < na && j < nb) {
        if (ka[i].cas < kb[j].cas) i++;
        else if (ka[i].cas > kb[j].cas) j++;
        else (*xa)[n] = ka[i++].x, (*xb)[n++] = kb[j++].x;
    }
    free(ka), free(kb);
    return n;
}

int rt_significantly_best(const rt_samples *const *cells, int nr, int b, int better) {
    const rt_samples *sb = cells[b];
    double *p = malloc(sizeof *p * (nr + 1));
    int m = 0, ok = sb && sb->n > 0 && p;
    for (int k = 0; ok && k < nr; k++) {
        const rt_samples *sk = cells[k];
        if (k == b || !sk || !sk->n) continue;
        double *xa, *xb;
        int n = rt_paired(sb, sk, &xa, &xb);
        if (n <= 0) {
            ok = 0;   /* no common case: nothing shows it is better */
        } else {
            int pos = 0, neg = 0;
            for (int i = 0; i < n; i++) pos += better * (xa[i] - xb[i]) > 0, neg += better * (xa[i] - xb[i]) < 0;
            p[m++] = pos > neg ? st_sign_p(pos, neg) : 1;
        }
        free(xa), free(xb);
    }
    if (ok && m) {
        st_holm(p, m, p);
        for (int i = 0; i < m; i++) ok &= p[i] < 0.05;
    }
    free(p);
    return ok && m > 0;
}

/* The same for row b of grid column j, among the rows of its model. */
static int significantly_best(const rt_data *d, const rt_grid *g, int b, int j, int better) {
    const rt_samples **cells = malloc(sizeof *cells * (g->nr + 1));
    if (!cells) return 0;
    const char *model = d->fam[g->rows[b].fam].model;
    for (int k = 0; k < g->nr; k++)
        cells[k] = strcmp(d->fam[g->rows[k].fam].model, model) ? NULL : &g->cell[(size_t)k * g->nc + j];
    int ok = rt_significantly_best(cells, g->nr, b, better);
    free(cells);
    return ok;
}

void rt_grid_markdown(FILE *f, const rt_data *d, const rt_grid *g) {
    if (g->title[0]) fprintf(f, "### %s\n\n", g->title);
    if (g->note[0]) fprintf(f, "%s\n\n", g->note);
    if (!g->nr) return;
    int model = d->n_models > 1;
    fprintf(f, "|%s method |%s", model ? " model |" : "", g->has_budget ? " budget |" : "");
    for (int j = 0; j < g->nc; j++) fprintf(f, " %s%s |", g->cols[j].label, g->cols[j].low_ceiling ? RT_LOW_CEILING : "");
    fprintf(f, "\n|%s---|%s", model ? "---|" : "", g->has_budget ? "---:|" : "");
    for (int j = 0; j < g->nc; j++) fprintf(f, "---:|");
    fprintf(f, "\n");
    for (int i = 0; i < g->nr; i++) {
        const rt_grow *r = &g->rows[i];
        if (model) fprintf(f, "| %s ", d->fam[r->fam].model);
        fprintf(f, "| %s |", r->label);
        if (g->has_budget) {
            char b[32] = "-";
            if (!isnan(r->budget)) kv_budget_str(r->budget, b, sizeof b);
            fprintf(f, " %s |", b);
        }
        for (int j = 0; j < g->nc; j++) {
            const rt_col *c = &g->cols[j];
            double x = g->v[i * g->nc + j], best = NAN;
            for (int k = 0; c->better && k < g->nr; k++) {   /* best among the rows of the same model */
                double y = g->v[k * g->nc + j];
                if (strcmp(d->fam[g->rows[k].fam].model, d->fam[r->fam].model)) continue;
                if (!isnan(y) && (isnan(best) || (c->better > 0 ? y > best : y < best))) best = y;
            }
            char s[64], lo[32], hi[32];
            size_t k = (size_t)i * g->nc + j;
            fmt_cell(c, x, s, sizeof s);
            int bold = c->better && is_best(x, best) && g->cell[k].n && significantly_best(d, g, i, j, c->better);
            fprintf(f, bold ? " **%s**" : " %s", s);
            if (!isnan(g->lo[k]) && c->fmt != RT_BUDGET) {
                fmt_cell(c, g->lo[k], lo, sizeof lo);
                fmt_cell(c, g->hi[k], hi, sizeof hi);
                fprintf(f, " [%s, %s]", lo, hi);
            }
            if (g->n[k] || g->nfail[k]) fprintf(f, " n=%d", g->n[k]);
            char why[64];
            rt_fail_note(why, sizeof why, g->nfail[k], g->ninf[k]);
            fputs(why, f);
            if (g->nnoisy[k]) fprintf(f, " (%d noisy)", g->nnoisy[k]);
            fprintf(f, " |");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

/* every cell through kv_csv_cell: control bytes escaped, formulas neutralised */
static void csv_put(FILE *f, const char *s, int last) { kv_csv_cell(f, s, last); }

/* The shortest of %.15g / %.17g that reads back as the same double ("0.1", not
 * "0.10000000000000001"). */
static void fmt_exact(double x, char *buf, size_t n) {
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
}

void rt_csv_header(FILE *f) {
    const char *h[] = {"run", "table", "section", "model", "method", "params", "budget", "column", "value", "n",
                       "lo", "hi", "failed", "infeasible"};
    for (int k = 0; k < 14; k++) csv_put(f, h[k], k == 13);
}

/* One line per cell; numbers in full precision, "" where the Markdown shows "-", in the
 * units of the Markdown column (score in %, bytes, seconds, ...). */
void rt_grid_csv(FILE *f, const char *run, const char *table, const rt_data *d, const rt_grid *g) {
    for (int i = 0; i < g->nr; i++) {
        const rt_grow *r = &g->rows[i];
        const rt_family *fam = &d->fam[r->fam];
        char b[64] = "", v[64], n[32], lo[64], hi[64], nf[32], ni[32];
        if (!isnan(r->budget)) fmt_exact(r->budget, b, sizeof b);
        for (int j = 0; j < g->nc; j++) {
            double x = g->v[i * g->nc + j];
            if (isnan(x)) v[0] = 0;
            else fmt_exact(g->cols[j].fmt == RT_PCT ? 100 * x : x, v, sizeof v);
            snprintf(n, sizeof n, "%d", g->n[i * g->nc + j]);
            snprintf(nf, sizeof nf, "%d", g->nfail[i * g->nc + j]);
            snprintf(ni, sizeof ni, "%d", g->ninf[i * g->nc + j]);
            double scale = g->cols[j].fmt == RT_PCT ? 100 : 1, l = g->lo[i * g->nc + j], h = g->hi[i * g->nc + j];
            lo[0] = hi[0] = 0;
            if (!isnan(l)) fmt_exact(scale * l, lo, sizeof lo), fmt_exact(scale * h, hi, sizeof hi);
            const char *cells[] = {run,         table, g->title, fam->model,       fam->method, fam->params, b,
                                   g->cols[j].label, v, n,     lo,       hi,               nf, ni};
            for (int k = 0; k < 14; k++) csv_put(f, cells[k], k == 13);
        }
    }
}
