/* The synthetic workloads as a case source of `kvbench run` (case_loop.h): the Q/K/V
 * streams of workloads/synthetic.h replayed over methods and budgets.
 *
 * Per case (workload variant x ctx x depth): generate the Q/K/V streams layer by layer,
 * run the prefill once with the statistics every method asked for (timed), compute the
 * FullKV reference outputs of the decode steps, then for every (method, budget) the case
 * lacks: init, ingest every layer (compression time), decode (append + attend per layer),
 * score. One run per workload variant, its cases ctx x depth in that order. */
#include "run_sources.h"
#include "method_params.h"
#include "rss.h"
#include "../identity/run_ident.h"
#include "model_workload.h"
#include "run_mem.h"
#include "../../kernels/core.h"
#include "../../methods/budget_check.h"
#include "../../workloads/split.h"
#include "../../workloads/synthetic.h"
#include "../../kernels/host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LIST = 64, PREFILL_CHUNK = 512 };

typedef struct {
    syn_kind kinds[3];
    int n_kinds;
    const kv_method *methods[MAX_LIST];
    int n_methods;
    double budgets[MAX_LIST];
    int n_budgets;
    int ctxs[MAX_LIST];
    int n_ctx;
    double depths[MAX_LIST];
    int n_depths;
    uint64_t seed;
    const char *db_path;
    int layers, steps, heads, kv_heads, head_dim, needles, threads;
    int decode_rule;        /* kv_decode_rule, the same for every method */
    int kv_type;            /* kb_kvtype of every method's K/V rows */
    const char *backend;
    int quiet;
    method_params params;   /* --params overrides */
    wl_split split;         /* --split: generator seeds 2*seed (test) or 2*seed+1 (dev) */
    int oracle_hints;       /* --oracle-hints: needle spans planted in surprisal and sentence ends */
    shard_spec shard;       /* --shard K/N: only the cases of shard K */
} run_opts;

static const char *workload_name(syn_kind k) {
    return k == SYN_MULTIKEY ? "synthetic-multikey" : k == SYN_MULTIVALUE ? "synthetic-multivalue" : "synthetic-niah";
}

static void syn_options(FILE *f) {
    fprintf(f,
            "  --workload LIST    synthetic-niah, synthetic-multikey, synthetic-multivalue (default\n"
            "                     synthetic-niah): the synthetic Q/K/V streams, no model\n"
            "  --ctx LIST         synthetic: prompt lengths in tokens, each >= 16 (default 2048,8192)\n"
            "  --depths LIST      synthetic: needle depths in [0,1] (default 0.1,0.5,0.9)\n"
            "  --oracle-hints B   1: plant the needles in the text statistics methods read (needle spans\n"
            "                     are sentences of their own, highly surprising at their start and needle),\n"
            "                     an ablation; 0 (default): surprisal and sentence ends ignore the needles\n"
            "  --layers N         layers (default 3: retrieval heads live in layers >= 1)\n"
            "  --steps N          decode steps after the prompt (default 8)\n"
            "  --heads N, --kv-heads N, --head-dim N   attention shape (default 8, 2, 64)\n"
            "  --needles N        needles of multikey/multivalue (default 4)\n"
            "\n"
            "A synthetic run is identified by the workload and its shape, seed, split, oracle hints, K/V\n"
            "type, backend, the code and every method's effective parameters; methods, budgets, ctx and\n"
            "depths only select which results to add. Score: the fraction of (retrieval head, asked\n"
            "needle) probes whose attention output is nearest the needle's value (workloads/synthetic.h).\n");
}

/* ---------------------------------------------------------------- parsing */

static int add_kind(const char *flag, const char *s, void *ctx) {
    run_opts *o = ctx;
    syn_kind k;
    mw_spec text;
    char e[256];
    if (strncmp(s, "synthetic-", 10) && mw_parse(s, &text, e, sizeof e) == 0)
        return run_fail("%s: '%s' is a text workload; synthetic and text workloads go in separate runs", flag, s);
    if (strncmp(s, "synthetic-", 10) || syn_kind_parse(s, &k))
        return run_fail("%s '%s': unknown workload (valid: synthetic-niah, synthetic-multikey, synthetic-multivalue)",
                        flag, s);
    if (!o) return 0;                      /* checking only */
    for (int i = 0; i < o->n_kinds; i++)
        if (o->kinds[i] == k) return 0;
    o->kinds[o->n_kinds++] = k;
    return 0;
}

static int add_method(const char *flag, const char *s, void *ctx) {
    run_opts *o = ctx;
    return run_add_method(flag, s, o->methods, &o->n_methods, MAX_LIST);
}

static int add_budget(const char *flag, const char *s, void *ctx) {
    run_opts *o = ctx;
    return run_add_budget(flag, s, o->budgets, &o->n_budgets, MAX_LIST);
}

static int add_ctx(const char *flag, const char *s, void *ctx) {
    run_opts *o = ctx;
    int v = 0;
    if (run_parse_int(flag, s, 16, 1 << 22, &v)) return -1;   /* "expected an integer in 16..4194304" */
    for (int i = 0; i < o->n_ctx; i++)
        if (o->ctxs[i] == v) return 0;
    if (o->n_ctx == MAX_LIST) return run_fail("%s: more than %d contexts", flag, MAX_LIST);
    o->ctxs[o->n_ctx++] = v;
    return 0;
}

static int add_depth(const char *flag, const char *s, void *ctx) {
    run_opts *o = ctx;
    double v = 0;
    if (run_parse_double(s, &v) || v < 0 || v > 1) return run_fail("%s '%s': a depth must be a number in [0,1]", flag, s);
    for (int i = 0; i < o->n_depths; i++)
        if (o->depths[i] == v) return 0;
    if (o->n_depths == MAX_LIST) return run_fail("%s: more than %d depths", flag, MAX_LIST);
    o->depths[o->n_depths++] = v;
    return 0;
}

/* The synthetic run's own options (run_parse takes the shared ones): 1, 0 or -1. */
static int syn_flag(void *ctx, const char *flag, const char *val) {
    run_opts *o = ctx;
    if (!strcmp(flag, "--oracle-hints")) return run_parse_int(flag, val, 0, 1, &o->oracle_hints) ? -1 : 1;
    if (!strcmp(flag, "--layers")) return run_parse_int(flag, val, 1, 1024, &o->layers) ? -1 : 1;
    if (!strcmp(flag, "--steps")) return run_parse_int(flag, val, 1, 1 << 20, &o->steps) ? -1 : 1;
    if (!strcmp(flag, "--heads")) return run_parse_int(flag, val, 1, 1024, &o->heads) ? -1 : 1;
    if (!strcmp(flag, "--kv-heads")) return run_parse_int(flag, val, 1, 1024, &o->kv_heads) ? -1 : 1;
    if (!strcmp(flag, "--head-dim")) return run_parse_int(flag, val, 8, 1024, &o->head_dim) ? -1 : 1;
    if (!strcmp(flag, "--needles")) return run_parse_int(flag, val, 2, SYN_MAX_NEEDLES, &o->needles) ? -1 : 1;
    return 0;
}

/* ---------------------------------------------------------------- timing, strings */

static void fmt_budget(char *buf, size_t len, double b) { snprintf(buf, len, "%.10g", b); }

static void syn_config_of(const run_opts *o, syn_kind kind, int ctx, double depth, syn_config *c) {
    syn_defaults(c);
    c->n_layers = o->layers;
    c->n_heads = o->heads;
    c->n_kv_heads = o->kv_heads;
    c->head_dim = o->head_dim;
    c->ctx = ctx;
    c->n_decode = o->steps;
    c->depth = depth;
    c->kind = kind;
    c->n_needles = o->needles;
    c->seed = wl_split_seed(o->seed, o->split);
    c->oracle_hints = o->oracle_hints;
}

/* The run's identity: everything that changes the numbers of a result (the code and every
 * method's effective parameters included, see run_ident.h), nothing that only selects
 * which results exist (methods, budgets, ctx, depths) or how fast (threads). 0, or -1
 * when it does not fit. */
static int run_key(const run_opts *o, syn_kind kind, const char *code, char *buf, size_t len) {
    char dflt[4096], mp[2048];
    if (run_ident_methods(NULL, dflt, sizeof dflt)) return -1;
    mparams_canon(&o->params, mp, sizeof mp);
    int n = snprintf(buf, len,
             "synthetic/v2;workload=%s;seed=%llu;split=%s;oracle_hints=%d;layers=%d;heads=%d;kv_heads=%d;"
             "head_dim=%d;steps=%d;needles=%d;kv_type=%s;elem_bytes=%d;backend=%s;decode_rule=%s;code=%s;methods=%s%s%s",
             workload_name(kind), (unsigned long long)o->seed, wl_split_name(o->split), o->oracle_hints, o->layers,
             o->heads, o->kv_heads, o->head_dim, o->steps, kind == SYN_SINGLE ? 1 : o->needles,
             kb_kvtype_name(o->kv_type), kb_kvtype_bytes(o->kv_type),
             o->backend, kv_decode_name(o->decode_rule), code, dflt, *mp ? ";params=" : "", mp);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

static void config_json(const run_opts *o, syn_kind kind, char *buf, size_t len) {
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
    PUT("{\"workload\":\"%s\",\"generator\":\"synthetic/v2\",\"seed\":%llu,\"split\":\"%s\","
        "\"generator_seed\":%llu,\"oracle_hints\":%d,\"layers\":%d,\"heads\":%d,"
        "\"kv_heads\":%d,\"head_dim\":%d,\"steps\":%d,\"needles\":%d,\"kv_type\":\"%s\",\"elem_bytes\":%d,"
        "\"backend\":\"%s\",\"decode_rule\":\"%s\",\"threads\":%d,\"methods\":[",
        workload_name(kind), (unsigned long long)o->seed, wl_split_name(o->split),
        (unsigned long long)wl_split_seed(o->seed, o->split), o->oracle_hints, o->layers, o->heads, o->kv_heads,
        o->head_dim, o->steps, kind == SYN_SINGLE ? 1 : o->needles, kb_kvtype_name(o->kv_type),
        kb_kvtype_bytes(o->kv_type), o->backend,
        kv_decode_name(o->decode_rule), kb_threads());
    for (int i = 0; i < o->n_methods; i++) PUT("%s\"%s\"", i ? "," : "", o->methods[i]->name);
    PUT("],\"budgets\":[");
    for (int i = 0; i < o->n_budgets; i++) PUT("%s%.10g", i ? "," : "", o->budgets[i]);
    PUT("],\"ctx\":[");
    for (int i = 0; i < o->n_ctx; i++) PUT("%s%d", i ? "," : "", o->ctxs[i]);
    PUT("],\"depths\":[");
    for (int i = 0; i < o->n_depths; i++) PUT("%s%.10g", i ? "," : "", o->depths[i]);
    char mp[4096];   /* names, parameter names and values: no characters JSON must escape */
    run_ident_methods(&o->params, mp, sizeof mp);
    PUT("],\"method_params\":\"%s\"}", mp);
#undef PUT
}

static kv_setup setup_of(const run_opts *o, const kv_method *m, int ctx, double budget) {
    kv_setup s = {.n_layers = o->layers, .n_heads = o->heads, .n_kv_heads = o->kv_heads, .head_dim = o->head_dim,
                  .n_prompt = ctx, .max_decode = o->steps, .kv_type = o->kv_type, .decode_rule = o->decode_rule,
                  .params = mparams_get(&o->params, m)};
    if (budget <= 1) s.budget_frac = budget;
    else s.budget_tokens = (int)budget;
    return s;
}

/* ---------------------------------------------------------------- one case */

/* Everything a case holds for its methods: all layers' K/V (prompt + decode tokens), the
 * decode queries, the prefill statistics and the FullKV reference outputs. */
typedef struct {
    syn_workload *w;
    int L, H, Hkv, d, n, ctx, T;
    size_t kv_stride;          /* n * d */
    float **K, **V;            /* [L] -> [Hkv][n][d] */
    float *Qdec;               /* [L][T][H][d] */
    float *col_mass;           /* [L][H][ctx] or NULL */
    float *win_probs;          /* [L][H][win][ctx] or NULL */
    float *Qp;                 /* [L][H][q_rows][d]: the prompt's last queries, if asked (kv_needs.queries) */
    int q_rows;
    float *Wo;                 /* [L][H*d][H*d], if asked (kv_needs.wo): syn_wo */
    int win;
    float *ref;                /* [L][T][H][d] */
    double prefill_s;
} case_data;

static void case_free(case_data *c) {
    if (c->K)
        for (int l = 0; l < c->L; l++) free(c->K[l]);
    free(c->K);
    free(c->V);
    free(c->Qdec);
    free(c->col_mass);
    free(c->win_probs);
    free(c->Qp);
    free(c->Wo);
    free(c->ref);
    syn_free(c->w);
    memset(c, 0, sizeof *c);
}

/* Generates every layer and runs the timed prefill with the statistics asked for. */
static int case_prepare(case_data *c, const syn_config *cfg, const kv_needs *needs) {
    char err[256];
    memset(c, 0, sizeof *c);
    c->w = syn_create(cfg, err, sizeof err);
    if (!c->w) return run_fail("%s", err);
    c->L = cfg->n_layers, c->H = cfg->n_heads, c->Hkv = cfg->n_kv_heads, c->d = cfg->head_dim;
    c->ctx = cfg->ctx, c->T = cfg->n_decode, c->n = c->w->n_total;
    c->kv_stride = (size_t)c->n * c->d;
    c->win = needs->window > c->ctx ? c->ctx : needs->window;
    const size_t hd = (size_t)c->H * c->d;
    c->K = cl_xcalloc((size_t)c->L, sizeof *c->K);
    c->V = cl_xcalloc((size_t)c->L, sizeof *c->V);
    c->Qdec = cl_xcalloc((size_t)c->L * c->T * hd, sizeof(float));
    c->ref = cl_xcalloc((size_t)c->L * c->T * hd, sizeof(float));
    if (needs->col_mass) c->col_mass = cl_xcalloc((size_t)c->L * c->H * c->ctx, sizeof(float));
    if (c->win > 0) c->win_probs = cl_xcalloc((size_t)c->L * c->H * c->win * c->ctx, sizeof(float));
    c->q_rows = needs->queries < c->ctx ? needs->queries : c->ctx;
    if (c->q_rows > 0) c->Qp = cl_xcalloc((size_t)c->L * hd * c->q_rows, sizeof(float));
    if (needs->wo) c->Wo = cl_xcalloc((size_t)c->L * hd * hd, sizeof(float));
    float *Q = cl_xcalloc((size_t)c->n * hd, sizeof(float));
    float *out = cl_xcalloc((size_t)PREFILL_CHUNK * hd, sizeof(float));
    const kb_backend *be = kb_get();
    for (int l = 0; l < c->L; l++) {
        c->K[l] = cl_xcalloc(2 * (size_t)c->Hkv * c->kv_stride, sizeof(float));
        c->V[l] = c->K[l] + (size_t)c->Hkv * c->kv_stride;
        syn_layer(c->w, l, Q, c->K[l], c->V[l], c->kv_stride);
        memcpy(c->Qdec + (size_t)l * c->T * hd, Q + (size_t)c->ctx * hd, (size_t)c->T * hd * sizeof(float));
        for (int h = 0; c->Qp && h < c->H; h++)   /* [token][head] -> [head][token] */
            for (int i = 0; i < c->q_rows; i++)
                memcpy(c->Qp + (((size_t)l * c->H + h) * c->q_rows + i) * c->d,
                       Q + (size_t)(c->ctx - c->q_rows + i) * hd + (size_t)h * c->d, (size_t)c->d * sizeof(float));
        if (c->Wo) syn_wo(c->w, l, c->Wo + (size_t)l * hd * hd, (int)hd, (int)hd);
        double t0 = kb_now_s();
        for (int t0q = 0; t0q < c->ctx; t0q += PREFILL_CHUNK) {
            kb_prefill_args a = {
                .H = c->H, .Hkv = c->Hkv, .d = c->d, .t0 = t0q,
                .m = c->ctx - t0q < PREFILL_CHUNK ? c->ctx - t0q : PREFILL_CHUNK,
                .Q = Q + (size_t)t0q * hd, .K = c->K[l], .V = c->V[l], .kv_stride = c->kv_stride, .out = out,
                .col_mass = c->col_mass ? c->col_mass + (size_t)l * c->H * c->ctx : NULL, .mass_ld = (size_t)c->ctx,
                .win_probs = c->win_probs ? c->win_probs + (size_t)l * c->H * c->win * c->ctx : NULL,
                .win = c->win, .win_start = c->ctx - c->win, .win_ld = (size_t)c->ctx,
            };
            be->prefill(&a);
        }
        c->prefill_s += kb_now_s() - t0;
    }
    free(out);
    free(Q);

    /* FullKV reference: exact attention of each decode query over every token up to itself. */
    const int g = c->H / c->Hkv;
    for (int l = 0; l < c->L; l++)
        for (int s = 0; s < c->T; s++)
            for (int j = 0; j < c->Hkv; j++) {
                size_t at = ((size_t)l * c->T + s) * hd + (size_t)j * g * c->d;
                kb_decode_args a = {.g = g, .d = c->d, .n = c->ctx + s + 1, .q = c->Qdec + at,
                                    .K = c->K[l] + (size_t)j * c->kv_stride, .V = c->V[l] + (size_t)j * c->kv_stride,
                                    .out = c->ref + at};
                be->decode(&a);
            }
    return 0;
}

static const kv_rope no_rope = {0, 0, NULL, 1};

/* One (method, budget) on a prepared case, filling r (the strings point into buffers). */
typedef struct {
    kvdb_result r;
    char output[512];
    kv_headstat *heads;
    double *layer_err;
} method_result;

static void run_method(const run_opts *o, case_data *c, const kv_method *m, double budget, method_result *mr) {
    const int L = c->L, H = c->H, Hkv = c->Hkv, d = c->d, T = c->T;
    const size_t hd = (size_t)H * d;
    kvdb_result *r = &mr->r;
    memset(r, 0, sizeof *r);
    r->method = m->name;
    r->budget = budget;
    r->prefill_s = c->prefill_s;
    r->n_layers = L;
    r->n_heads = H;
    r->score = r->rel_err = NAN;
    kv_setup setup = setup_of(o, m, c->ctx, budget);
    r->params = setup.params;
    r->budget_tokens = kv_budget(&setup);
    char err[256] = "";
    int rss_rc = rss_reset_peak();
    kv_state *st = m->init(&setup, err, sizeof err);
    if (!st) {
        r->status = kv_init_refused(err) ? "refused" : "infeasible";
        snprintf(mr->output, sizeof mr->output, "%s", *err ? err : "init refused the setup");
        r->output = mr->output;
        return;
    }
    const syn_workload *w = c->w;
    double t0 = kb_now_s();
    for (int l = 0; l < L; l++) {
        kv_prefill p = {
            .layer = l, .n = c->ctx, .K = c->K[l], .V = c->V[l], .kv_stride = c->kv_stride,
            .col_mass = c->col_mass ? c->col_mass + (size_t)l * H * c->ctx : NULL,
            .win_probs = c->win_probs ? c->win_probs + (size_t)l * H * c->win * c->ctx : NULL,
            .win = c->win_probs ? c->win : 0, .surprisal = w->surprisal, .sent_end = w->sent_end,
            /* door version 4; the synthetic queries and keys carry no RoPE: a rope of 0 channels */
            .Q = c->Qp ? c->Qp + (size_t)l * H * c->q_rows * d : NULL, .q_stride = (size_t)c->q_rows * d,
            .q_rows = c->Qp ? c->q_rows : 0, .rope = &no_rope,
            .Wo = c->Wo ? c->Wo + (size_t)l * hd * hd : NULL, .embd = c->Wo ? (int)hd : 0,
        };
        if (m->ingest(st, &p, err, sizeof err)) {
            /* as the model driver: a method that finds at ingest that the budget cannot hold
             * what it must keep says "infeasible: ..."; anything else is an error */
            r->status = !strncmp(err, "infeasible", 10) ? "infeasible" : "error";
            snprintf(mr->output, sizeof mr->output, "ingest layer %d: %s", l, err);
            r->output = mr->output;
            m->free(st);
            return;
        }
    }
    double t1 = kb_now_s();
    /* the budget, where results are made: after compression and after every decode step */
    if (kv_budget_check(m, st, &setup, 0, err, sizeof err)) {
        r->status = "error";
        snprintf(mr->output, sizeof mr->output, "over budget after compression: %s", err);
        r->output = mr->output;
        m->free(st);
        return;
    }
    double t_check = kb_now_s();
    kv_mem mem;
    m->memory(st, &mem);   /* the steady (decode-time) fast tier: after compression, after each step */
    r->fast_decode_peak = (int64_t)mem.fast_bytes;
    float *out = cl_xcalloc((size_t)L * T * hd, sizeof(float));
    for (size_t i = 0; i < (size_t)L * T * hd; i++) out[i] = NAN;   /* an unwritten output fails */
    float *k = cl_xcalloc(2 * (size_t)Hkv * d, sizeof(float)), *v = k + (size_t)Hkv * d;
    for (int s = 0; s < T; s++) {
        int pos = c->ctx + s;
        kv_token tok = {.pos = pos, .surprisal = w->surprisal[pos], .sent_end = w->sent_end[pos]};
        for (int l = 0; l < L; l++) {
            for (int j = 0; j < Hkv; j++) {
                memcpy(k + (size_t)j * d, c->K[l] + j * c->kv_stride + (size_t)pos * d, (size_t)d * sizeof(float));
                memcpy(v + (size_t)j * d, c->V[l] + j * c->kv_stride + (size_t)pos * d, (size_t)d * sizeof(float));
            }
            m->append(st, l, k, v, &tok);
            size_t at = ((size_t)l * T + s) * hd;
            m->attend(st, l, c->Qdec + at, out + at);
        }
        m->memory(st, &mem);
        if ((int64_t)mem.fast_bytes > r->fast_decode_peak) r->fast_decode_peak = (int64_t)mem.fast_bytes;
        double tc = kb_now_s();
        int over = kv_budget_check(m, st, &setup, s + 1, err, sizeof err);
        t_check += kb_now_s() - tc;   /* not the method's decode time */
        if (over) {
            r->status = "error";
            snprintf(mr->output, sizeof mr->output, "over budget at decode step %d: %s", s, err);
            r->output = mr->output;
            free(k), free(out);
            m->free(st);
            return;
        }
    }
    double t2 = kb_now_s() - (t_check - t1);
    free(k);
    m->memory(st, &r->mem);
    r->rss_peak = rss_peak_since(rss_rc);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) m->head_stats(st, l, h, &mr->heads[(size_t)l * H + h]);
    m->free(st);

    int hits = 0, probes = 0;
    r->score = syn_score(w, (const float *const *)c->V, c->kv_stride, out, &hits, &probes);
    r->rel_err = syn_layer_errors(w, out, c->ref, mr->layer_err);
    free(out);
    r->compress_s = t1 - t0;
    r->decode_s = t2 - t1;
    r->decode_tokens = T;
    r->tokens_per_s = r->decode_s > 0 ? T / r->decode_s : 0;
    r->heads = mr->heads;
    r->layer_err = mr->layer_err;
    if (isfinite(r->rel_err)) {
        r->status = "ok";
        snprintf(mr->output, sizeof mr->output, "retrieved %d/%d", hits, probes);
    } else {
        r->status = "error";
        snprintf(mr->output, sizeof mr->output, "non-finite attention output");
    }
    r->output = mr->output;
}

/* ---------------------------------------------------------------- summary */

typedef struct {
    syn_kind kind;
    const char *method;
    double budget;
    int n_ok, n_other, n_error;   /* n_other: not ok (infeasible or error); n_error: error */
    double score, err, fast;
} summary_row;

static void summary_add(summary_row *rows, int *n, int cap, syn_kind kind, const kvdb_result *r) {
    summary_row *row = NULL;
    for (int i = 0; i < *n && !row; i++)
        if (rows[i].kind == kind && rows[i].method == r->method && rows[i].budget == r->budget) row = &rows[i];
    if (!row) {
        if (*n == cap) return;
        row = &rows[(*n)++];
        *row = (summary_row){.kind = kind, .method = r->method, .budget = r->budget};
    }
    if (strcmp(r->status, "ok")) {
        row->n_other++;
        row->n_error += !strcmp(r->status, "error");
        return;
    }
    row->n_ok++;
    row->score += r->score;
    row->err += r->rel_err;
    row->fast += (double)r->fast_decode_peak;
}

static void summary_print(const run_opts *o, const summary_row *rows, int n) {
    printf("\nsplit %s, oracle hints %s, seed %llu; decode rule: %s; fast KV decode: the most fast-tier bytes "
           "from compression through decode\n",
           wl_split_name(o->split), o->oracle_hints ? "on" : "off", (unsigned long long)o->seed,
           kv_decode_name(o->decode_rule));
    printf("\n%-22s %-14s %-8s %6s %9s %14s\n", "workload", "method", "budget", "score", "rel_err", "fast KV decode");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        char b[32], f[32];
        fmt_budget(b, sizeof b, r->budget);
        if (!r->n_ok) {
            const char *why = r->n_error == r->n_other ? "error" : r->n_error ? "infeasible/error" : "infeasible";
            printf("%-22s %-14s %-8s %6s %9s %14s\n", workload_name(r->kind), r->method, b, "-", "-", why);
            continue;
        }
        cl_fmt_bytes(f, sizeof f, r->fast / r->n_ok);
        printf("%-22s %-14s %-8s %6.3f %9.4f %14s%s\n", workload_name(r->kind), r->method, b, r->score / r->n_ok,
               r->err / r->n_ok, f, r->n_other ? "  (some cases not ok)" : "");
    }
}

/* ---------------------------------------------------------------- the command */

static void case_key_of(syn_kind kind, int ctx, double depth, char *buf, size_t len) {
    snprintf(buf, len, "ctx=%d,depth=%.10g,variant=%s", ctx, depth, syn_kind_name(kind));
}

/* The statistics every (method, budget) asks for at this context length. */
static kv_needs union_needs(const run_opts *o, int ctx) {
    kv_needs all = {0};
    for (int i = 0; i < o->n_methods; i++)
        for (int b = 0; b < o->n_budgets; b++) {
            kv_setup s = setup_of(o, o->methods[i], ctx, o->budgets[b]);
            char err[256];
            kv_state *st = o->methods[i]->init(&s, err, sizeof err);
            if (!st) continue;   /* recorded as infeasible when its turn comes */
            o->methods[i]->free(st);   /* only feasible pairs count */
            kv_needs nd = {0};
            o->methods[i]->needs(&s, &nd);
            kv_needs_union(&all, &nd);
        }
    return all;
}

/* Refuses (message printed, -1) a context whose case cannot fit in this machine's
 * memory; the window statistics are sized by the largest window a chosen method asks
 * for (kv_method.needs) at any budget. */
static int check_memory(const run_opts *o) {
    char err[512];
    for (int c = 0; c < o->n_ctx; c++) {
        int win = 0;
        for (int i = 0; i < o->n_methods; i++)
            for (int b = 0; b < o->n_budgets; b++) {
                kv_setup s = setup_of(o, o->methods[i], o->ctxs[c], o->budgets[b]);
                kv_needs nd = {0};
                o->methods[i]->needs(&s, &nd);
                if (nd.window > win) win = nd.window;
            }
        double need = run_mem_synthetic(o->layers, o->heads, o->kv_heads, o->head_dim, o->ctxs[c], o->steps, win);
        char what[128];
        snprintf(what, sizeof what, "K/V of %d layers, queries, prefill statistics, a method's cache", o->layers);
        if (run_mem_check(need, what, err, sizeof err))
            return run_fail("--ctx %d: a synthetic case %s; lower --ctx, --layers, --heads or --head-dim", o->ctxs[c], err);
    }
    return 0;
}

/* ---------------------------------------------------------------- the case source */

/* The source's state: the options, the plan (a case's cost ctx^2), the grid's pairs (every
 * method at every budget), one result buffer per pair of a case and the summary's rows. */
typedef struct {
    run_opts o;
    cl_case *cases;
    char (*keys)[128];                  /* [case]: its case_key */
    int n_cases;
    int *kind_of, *ctx_of, *depth_of;   /* [case]: index into o.kinds, o.ctxs, o.depths */
    kv_needs *needs;                    /* [n_ctx]: the union of the methods' needs at that ctx */
    int *needs_known;
    const kv_method **pair_m;           /* [methods x budgets]: the grid, method by method */
    double *pair_b;
    method_result *mr;                  /* [methods x budgets]: one per pair of a case */
    summary_row *rows;
    int n_rows;
} syn_source;

static void syn_source_init(syn_source *ss) {
    const run_opts *o = &ss->o;
    int n = o->n_kinds * o->n_ctx * o->n_depths, per_case = o->n_methods * o->n_budgets;
    ss->cases = cl_xcalloc((size_t)n, sizeof *ss->cases);
    ss->keys = cl_xcalloc((size_t)n, sizeof *ss->keys);
    ss->kind_of = cl_xcalloc((size_t)n, sizeof *ss->kind_of);
    ss->ctx_of = cl_xcalloc((size_t)n, sizeof *ss->ctx_of);
    ss->depth_of = cl_xcalloc((size_t)n, sizeof *ss->depth_of);
    for (int k = 0; k < o->n_kinds; k++)
        for (int c = 0; c < o->n_ctx; c++)
            for (int d = 0; d < o->n_depths; d++, ss->n_cases++) {
                cl_case *cs = &ss->cases[ss->n_cases];
                case_key_of(o->kinds[k], o->ctxs[c], o->depths[d], ss->keys[ss->n_cases], sizeof ss->keys[0]);
                cs->key = ss->keys[ss->n_cases];
                cs->run = k;
                cs->cost = (double)o->ctxs[c] * o->ctxs[c];
                cs->pair_cost = o->ctxs[c];   /* compression and each decode step read the prompt's rows */
                cs->label = workload_name(o->kinds[k]);
                ss->kind_of[ss->n_cases] = k, ss->ctx_of[ss->n_cases] = c, ss->depth_of[ss->n_cases] = d;
            }
    ss->needs = cl_xcalloc((size_t)o->n_ctx, sizeof *ss->needs);
    ss->needs_known = cl_xcalloc((size_t)o->n_ctx, sizeof *ss->needs_known);
    ss->pair_m = cl_xcalloc((size_t)per_case, sizeof *ss->pair_m);
    ss->pair_b = cl_xcalloc((size_t)per_case, sizeof *ss->pair_b);
    for (int m = 0, p = 0; m < o->n_methods; m++)
        for (int b = 0; b < o->n_budgets; b++, p++) ss->pair_m[p] = o->methods[m], ss->pair_b[p] = o->budgets[b];
    ss->mr = cl_xcalloc((size_t)per_case, sizeof *ss->mr);
    for (int p = 0; p < per_case; p++) {
        ss->mr[p].heads = cl_xcalloc((size_t)o->layers * o->heads, sizeof *ss->mr[p].heads);
        ss->mr[p].layer_err = cl_xcalloc((size_t)o->layers, sizeof *ss->mr[p].layer_err);
    }
    ss->rows = cl_xcalloc((size_t)o->n_kinds * per_case, sizeof *ss->rows);
}

static int syn_run_row(void *self, int r, const provenance *prov, char *key, size_t key_len, char *json,
                       size_t json_len, kvdb_run *row) {
    const syn_source *ss = self;
    const run_opts *o = &ss->o;
    if (run_key(o, o->kinds[r], prov->code, key, key_len)) return run_fail("the run key is too long (too many --params)");
    config_json(o, o->kinds[r], json, json_len);
    *row = (kvdb_run){.run_key = key, .config_json = json, .workload = workload_name(o->kinds[r]),
                      .model = "synthetic", .git_commit = prov->git_commit, .build_flags = KB_BUILD_FLAGS,
                      .host = prov->host, .cpu = prov->cpu, .backend = o->backend, .seed = o->seed};
    return 0;
}

/* The prefill's statistics are those every pair at the case's ctx asks for, the missing
 * ones or not (a case's prefill is the same whatever was resumed). */
static int syn_prepare(void *self, int c, const char *label, const kv_method *const *methods, const double *budgets,
                       int n, void **prepared, kvdb_case *row) {
    (void)label, (void)methods, (void)budgets, (void)n;
    syn_source *ss = self;
    const run_opts *o = &ss->o;
    int k = ss->kind_of[c], ci = ss->ctx_of[c], ctx = o->ctxs[ci];
    double depth = o->depths[ss->depth_of[c]];
    if (!ss->needs_known[ci]) {
        ss->needs[ci] = union_needs(o, ctx);
        ss->needs_known[ci] = 1;
    }
    syn_config cfg;
    syn_config_of(o, o->kinds[k], ctx, depth, &cfg);
    case_data *cd = cl_xcalloc(1, sizeof *cd);
    if (case_prepare(cd, &cfg, &ss->needs[ci])) {   /* it fails before allocating (syn_create) */
        free(cd);
        return -1;
    }
    *row = (kvdb_case){.case_key = ss->cases[c].key, .workload = workload_name(o->kinds[k]), .ctx = ctx,
                       .depth = depth, .variant = syn_kind_name(o->kinds[k]), .seed = cfg.seed,
                       .prefill_s = cd->prefill_s};
    *prepared = cd;
    return 0;
}

/* The synthetic cases run their pairs one after another on the shared prefill. */
static void syn_run_pairs(void *self, void *prepared, const kv_method *const *methods, const double *budgets, int n,
                          const kvdb_result **results) {
    syn_source *ss = self;
    for (int i = 0; i < n; i++) {
        run_method(&ss->o, prepared, methods[i], budgets[i], &ss->mr[i]);
        results[i] = &ss->mr[i].r;
    }
}

static void syn_release(void *self, void *prepared, kv_db *db, int64_t case_id, int finished) {
    (void)self, (void)db, (void)case_id, (void)finished;
    case_free(prepared);
    free(prepared);
}

static void syn_added(void *self, void *prepared, kv_db *db, int64_t case_id, int c, int i, const kvdb_result *r) {
    (void)prepared, (void)db, (void)case_id, (void)i;
    syn_source *ss = self;
    const run_opts *o = &ss->o;
    summary_add(ss->rows, &ss->n_rows, o->n_kinds * o->n_methods * o->n_budgets, o->kinds[ss->kind_of[c]], r);
}

static void syn_summary(void *self, kv_db *db, const int64_t *run_ids) {
    (void)db, (void)run_ids;
    const syn_source *ss = self;
    if (ss->n_rows) summary_print(&ss->o, ss->rows, ss->n_rows);
}

/* ---------------------------------------------------------------- built from the options */

static int syn_check_workload(const char *workload) {
    return workload ? run_each_item("--workload", workload, add_kind, NULL) : 0;
}

/* 0 ok, -1 error printed. */
static int parse_opts(const run_common *c, const run_given *own, int n_own, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->layers = 3;
    o->steps = 8;
    o->heads = 8;
    o->kv_heads = 2;
    o->head_dim = 64;
    o->needles = 4;
    if (run_apply_own(own, n_own, syn_flag, o)) return -1;
    o->seed = c->seed_given ? c->seed : 1, o->split = c->split, o->db_path = c->db_path, o->backend = c->backend;
    o->quiet = c->quiet, o->kv_type = c->kv_type, o->decode_rule = c->decode_rule, o->threads = c->threads;
    o->shard = c->shard;
    if (run_each_item("--workload", c->workload ? c->workload : "synthetic-niah", add_kind, o) ||
        run_each_item("--methods", c->methods, add_method, o) || run_each_item("--budget", c->budgets, add_budget, o) ||
        run_each_item("--ctx", c->ctxs ? c->ctxs : "2048,8192", add_ctx, o) ||
        run_each_item("--depths", c->depths ? c->depths : "0.1,0.5,0.9", add_depth, o))
        return -1;
    if (!o->db_path || !*o->db_path) return run_fail("--db FILE is required (the results file to write)");
    char perr[512];
    if (mparams_parse(&o->params, c->params, perr, sizeof perr)) return run_fail("%s", perr);
    if (o->heads % o->kv_heads)
        return run_fail("--heads %d is not a multiple of --kv-heads %d", o->heads, o->kv_heads);
    if (o->n_methods == 0) return run_fail("--methods: no methods are built into this kvbench");
    return 0;
}

static int syn_open(const run_common *c, const run_given *own, int n_own, int argc, char **argv, cl_source *src,
                    cl_grid *g) {
    (void)argc, (void)argv;
    syn_source *ss = cl_xcalloc(1, sizeof *ss);
    run_opts *o = &ss->o;
    int rc = 2;
    char err[512];
    if (parse_opts(c, own, n_own, o)) goto fail;
    /* Every configuration must be generable before anything starts. */
    for (int k = 0; k < o->n_kinds; k++)
        for (int x = 0; x < o->n_ctx; x++) {
            syn_config cfg;
            syn_config_of(o, o->kinds[k], o->ctxs[x], 0.5, &cfg);
            if (syn_check(&cfg, err, sizeof err)) {
                run_fail("%s: %s", workload_name(o->kinds[k]), err);
                goto fail;
            }
        }
    /* ... and fit in this machine's memory (--ctx 4000000 would need tens of GB). */
    if (check_memory(o) || run_kv_type_backend(&o->kv_type, o->backend)) goto fail;
    const char *why = NULL;
    if (kb_select(o->backend, &why)) {
        run_fail("--backend %s: %s", o->backend, why ? why : "not available (cpu or cuda)");
        goto fail;
    }
    /* Every method must accept its parameters before anything is stored: a setup of the
     * run's shape at its largest context (at most 4096 tokens) and half of it kept. */
    int check_ctx = 0;
    for (int x = 0; x < o->n_ctx; x++) check_ctx = o->ctxs[x] > check_ctx ? o->ctxs[x] : check_ctx;
    kv_setup shape = setup_of(o, o->methods[0], check_ctx < 4096 ? check_ctx : 4096, 0.5);
    if (run_check_methods(o->methods, o->n_methods, &o->params, &shape, err, sizeof err)) {
        run_fail("%s", err);
        goto fail;
    }
    if (o->threads) kb_set_threads(o->threads);
    syn_source_init(ss);
    *src = (cl_source){.name = "synthetic", .self = ss, .n_runs = o->n_kinds, .cases = ss->cases,
                       .n_cases = ss->n_cases, .run_row = syn_run_row, .prepare = syn_prepare,
                       .run_pairs = syn_run_pairs, .release = syn_release, .added = syn_added,
                       .summary = syn_summary};
    *g = (cl_grid){.methods = ss->pair_m, .budgets = ss->pair_b, .n_pairs = o->n_methods * o->n_budgets,
                   .shard = o->shard, .jobs = 1, .job_index = -1, .threads = o->threads, .quiet = o->quiet};
    return RUN_READY;
fail:
    free(ss);
    return rc;
}

static void syn_close(cl_source *src) {
    syn_source *ss = src->self;
    if (!ss) return;
    if (ss->mr)
        for (int p = 0; p < ss->o.n_methods * ss->o.n_budgets; p++) free(ss->mr[p].heads), free(ss->mr[p].layer_err);
    free(ss->cases), free(ss->keys), free(ss->kind_of), free(ss->ctx_of), free(ss->depth_of);
    free(ss->needs), free(ss->needs_known), free(ss->pair_m), free(ss->pair_b), free(ss->mr), free(ss->rows);
    free(ss);
    src->self = NULL;
}

static const char *const syn_flags[] = {"--oracle-hints", "--layers", "--steps", "--heads", "--kv-heads",
                                        "--head-dim", "--needles", NULL};

const run_source_kind syn_source_kind = {
    .name = "synthetic",
    .flags = syn_flags,
    .bare = (const char *const[]){NULL},
    .where = "the synthetic workloads (synthetic-niah, synthetic-multikey, synthetic-multivalue)",
    .not_these = "synthetic-* ones",
    .options = syn_options,
    .check_workload = syn_check_workload,
    .open = syn_open,
    .close = syn_close,
};
