/* SeKV (reference §8): setup, parameters, prefill ingest and accounting. Decode-time
 * append, compaction and zoom-in attention are in sekv_decode.c.
 *
 * Per layer and kv group the fast tier holds the persistent rows P (anchors, short-span
 * tokens, one coarse row per span, a local window, decoded tokens; sinks in sekv-spread)
 * plus the rows reconstructed at the last step; the slow tier holds each span's K and V,
 * as rank-r factors or as rows, whichever is smaller.
 * `sekv` runs the paper's text (parameters below): alpha fitted per prompt so that
 * P <= p_max*B, else infeasible; P + reconstructed <= B at every step; uncapped=1 lifts
 * the budget (the iso-memory view). `sekv-ref` (sekv_ref.c) runs the authors' code
 * defaults (alpha = 1, P <= B). `sekv-spread` (sekv_spread.c) is kvbench's own fit:
 * alpha, span cap and window searched, an untrained spread router. */
#include "sekv_state.h"
#include "../../kernels/core.h"
#include "../../kernels/host.h"

#include <limits.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `sekv`: the paper's text. Each default says where it comes from: [paper] the paper's
 * text (arXiv 2606.31145), [code] the authors' code (default.yaml; the paper states no
 * value), [kvbench] a kvbench choice where neither gives one. The paper gives no alpha,
 * so it is chosen per prompt (the smallest on alpha_grid whose persistent part fits
 * p_max*B) and recorded in each result's params; `sekv-ref` (sekv_ref.c) runs the
 * authors' code defaults instead (alpha = 1, P <= B or infeasible). */
static const kv_param params[] = {
    {"alpha", "auto", "[kvbench; the paper states none] anchor threshold mu + alpha*sigma; auto = the smallest "
                      "alpha on alpha_grid with P <= p_max*B (recorded per result)"},
    {"alpha_grid", "0.5:8:0.25", "[kvbench] alpha=auto's grid, LO:HI:STEP (LO, LO+STEP, .. HI)"},
    {"l_min", "4", "[code; the paper states none] spans shorter than this stay at full resolution"},
    {"l_max", "none", "[paper] none = spans are the maximal runs between neighbouring anchors; N = runs split into "
                      "balanced spans of at most N; auto = 32, else 48, 64, 128, 256 (the first that fits)"},
    {"sinks", "0", "[code] first tokens kept at full resolution (token 0 always is an anchor)"},
    {"local", "auto", "[paper: a local window stays on the fast tier (appendix D); its size is kvbench's] most recent "
                      "prompt tokens kept at full resolution; auto = 32, or clamp(B/8, 4, 32) if no alpha fits with 32"},
    {"rank", "32", "[paper: R = 32, 64 adds little] rank cap R of the span factors (truncated SVD): 8, 32 or 64"},
    {"dprime", "32", "[paper] routing dimension d' (fixed: 32)"},
    {"tau", "-1", "[paper: per-(layer, head) thresholds] zoom threshold on the relevance for every head; -1 = the "
                  "trained per-(layer, head) thresholds (0.05 untrained [code]; 0.05 with route=1)"},
    {"zoom", "1", "[paper] 0 = no reconstruction: coarse summaries only (ablation: without SVD)"},
    {"trained_zoom", "1", "[paper] 0 = untrained zoom: relevance sigmoid(q.kbar/sqrt d) alone, no W, no ln|S| (ablation)"},
    {"fixed_chunk", "0", "[paper: surprisal spans] > 0: fixed-length chunks instead of surprisal spans, token 0 the "
                         "only anchor; same = as many anchors as the surprisal segmentation finds, placed evenly, each "
                         "opening a chunk of equal length (claim C8 at the same anchors budget)"},
    {"route", "0", "[paper] span relevance: 0 = the paper's trained d'=32 routing summary sigmoid(W q . norm(W kbar)/sqrt "
                   "d' + ln|S|); 1 = kvbench's untrained mean + spread (q.kbar + sqrt(2 ln|S|) * the spread of the "
                   "span's keys along q); 2 = [kvbench] diagnostic oracle, not a method: each span's exact attention mass "
                   "from its rebuilt keys, every span a candidate (sekv-probe's upper bound for a router that "
                   "imitates training's teacher)"},
    {"gate", "2", "[paper] rank gate at decode: 2 = soft m, 1 = hard (component kept iff m > 0.5), 0 = off"},
    {"p_max", SEKV_PAPER_P, "[kvbench, tuned on NIAH dev cases: docs/sekv-results.md] the segmentation alone (anchors "
                            "+ local window + coarse rows) may take P <= p_max*B, leaving (1-p_max)*B of room to zoom; "
                            "more is infeasible"},
    {"uncapped", "0", "1 = no budget: the spans fitted as at this budget (the smallest P found if none fits), then P is "
                      "not capped and every span over its threshold expands (the iso-memory view: "
                      "compare baselines at the residency it measures)"},
    {"params_file", "default",
     "[kvbench: trained by train-sekv, methods/sekv/params/README.md] trained parameters; default = the first "
     "trained for the model in use of $KVBENCH_SEKV_PARAMS, else $KVBENCH_CACHE/sekv-HASH.params (this model's), "
     "the file shipped for the default model (methods/sekv/params/), ~/.cache/kvbench/sekv-smollm2-135m.params; "
     "none found on a model file: refused, naming the file and the command that trains it; none = untrained "
     "initial values"},
    {NULL, NULL, NULL},
};

/* The raw text of key in "k=v,k=v" (last one wins); 1 if present. */
static int raw_value(const char *params, const char *key, char *buf, size_t buflen) {
    int found = 0;
    size_t klen = strlen(key);
    for (const char *s = params; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > klen && strncmp(s, key, klen) == 0 && s[klen] == '=') {
            size_t v = len - klen - 1 < buflen - 1 ? len - klen - 1 : buflen - 1;
            memcpy(buf, s + klen + 1, v);
            buf[v] = 0;
            found = 1;
        }
        s = end ? end + 1 : NULL;
    }
    return found;
}

/* The method's declared default of key ("" if none). */
static void param_default(const kv_method *m, const char *key, char *buf, size_t len) {
    buf[0] = 0;
    for (const kv_param *p = m->params; p->name; p++)
        if (!strcmp(p->name, key)) snprintf(buf, len, "%s", p->deflt);
}

/* An integer parameter whose default is "auto": -1 when absent or "auto". */
static int auto_int(const kv_method *m, const char *ps, const char *key, int *out, char *err, size_t errlen) {
    char buf[64];
    *out = -1;
    if (!raw_value(ps, key, buf, sizeof buf)) param_default(m, key, buf, sizeof buf);
    if (!strcmp(buf, "auto")) return 0;
    if (!strcmp(buf, "none")) return *out = SEKV_LMAX_NONE, 0;
    return kv_param_int(m, ps, key, out, err, errlen);
}

/* alpha=auto's grid: the method's alpha_grid "LO:HI:STEP" (sekv), else sekv-spread's
 * fixed list, which its recorded results were made with. */
static int read_grid(kv_state *st, const char *ps, char *err, size_t errlen) {
    static const double spread_grid[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0};
    char buf[64];
    if (kv_param_text(st->m, ps, "alpha_grid", buf, sizeof buf, err, errlen)) {
        err[0] = 0;
        st->n_grid = (int)(sizeof spread_grid / sizeof spread_grid[0]);
        memcpy(st->grid, spread_grid, sizeof spread_grid);
        st->grid_text[0] = 0;
        return 0;
    }
    double lo, hi, step;
    char tail;
    if (sscanf(buf, "%lf:%lf:%lf%c", &lo, &hi, &step, &tail) != 3 || !(lo > 0) || !(hi >= lo) || !(step > 0) ||
        !isfinite(hi) || (hi - lo) / step + 1.5 > SEKV_GRID_MAX) {
        snprintf(err, errlen, "%s: alpha_grid='%s': expected LO:HI:STEP with 0 < LO <= HI, STEP > 0 and at most %d values",
                 st->m->name, buf, SEKV_GRID_MAX);
        return -1;
    }
    st->n_grid = 0;
    for (int i = 0; lo + i * step <= hi + 1e-9 * step && st->n_grid < SEKV_GRID_MAX; i++)
        st->grid[st->n_grid++] = lo + i * step;
    snprintf(st->grid_text, sizeof st->grid_text, "%s", buf);
    return 0;
}

static int read_params(kv_state *st, const char *ps, char *err, size_t errlen) {
    const kv_method *m = st->m;
    int dprime;
    double tau;
    if (kv_param_int(m, ps, "l_min", &st->l_min, err, errlen) ||
        auto_int(m, ps, "l_max", &st->l_max, err, errlen) || auto_int(m, ps, "local", &st->local, err, errlen) ||
        kv_param_double(m, ps, "p_max", &st->p_max, err, errlen) ||
        kv_param_int(m, ps, "uncapped", &st->uncapped, err, errlen) ||
        kv_param_int(m, ps, "sinks", &st->sinks, err, errlen) ||
        kv_param_int(m, ps, "rank", &st->rank, err, errlen) ||
        kv_param_int(m, ps, "dprime", &dprime, err, errlen) ||
        kv_param_double(m, ps, "tau", &tau, err, errlen) ||
        kv_param_int(m, ps, "zoom", &st->zoom, err, errlen) ||
        kv_param_int(m, ps, "trained_zoom", &st->trained_zoom, err, errlen) ||
        kv_param_int(m, ps, "route", &st->route, err, errlen) ||
        kv_param_int(m, ps, "gate", &st->gate, err, errlen))
        return -1;
    char buf[64];
    if (raw_value(ps, "fixed_chunk", buf, sizeof buf) && !strcmp(buf, "same")) st->fixed_chunk = SEKV_CHUNK_SAME;
    else if (kv_param_int(m, ps, "fixed_chunk", &st->fixed_chunk, err, errlen)) return -1;
    st->alpha = -1;
    if (!raw_value(ps, "alpha", buf, sizeof buf)) param_default(m, "alpha", buf, sizeof buf);
    if (strcmp(buf, "auto") != 0) {
        if (kv_param_double(m, ps, "alpha", &st->alpha, err, errlen)) return -1;
        if (!(st->alpha > 0)) {
            snprintf(err, errlen, "sekv: alpha=%g must be > 0 (or auto)", st->alpha);
            return -1;
        }
    }
    st->tau_override = tau;
    if (read_grid(st, ps, err, errlen)) return -1;
    /* only kvbench's fit (sekv-spread) lowers an l_min that was not given */
    st->lmin_given = raw_value(ps, "l_min", buf, sizeof buf) || st->m != &kv_sekv_spread;
    st->lmax_auto = st->l_max < 0;
    st->local_auto = st->local < 0;
    if (!raw_value(ps, "params_file", st->params_file, sizeof st->params_file))
        param_default(m, "params_file", st->params_file, sizeof st->params_file);
    const char *bad = NULL;
    if (st->l_min < 1) bad = "l_min must be >= 1";
    else if (st->l_max != -1 && st->l_max != SEKV_LMAX_NONE && (st->l_max < st->l_min || st->l_max > 4096))
        bad = "l_max must be in [l_min, 4096] (or auto, none)";
    else if (!(st->p_max > 0 && st->p_max <= 1)) bad = "p_max must be in (0,1]";
    else if (st->uncapped & ~1) bad = "uncapped must be 0 or 1";
    else if (st->sinks < 0 || st->local < -1) bad = "sinks and local must be >= 0 (local may be auto)";
    else if (st->rank != 8 && st->rank != 32 && st->rank != 64) bad = "rank must be 8, 32 or 64";
    else if (dprime != SEKV_DPRIME) bad = "dprime is fixed at 32";
    else if (tau != -1 && !(tau >= 0 && tau <= 1)) bad = "tau must be in [0,1] (or -1)";
    else if ((st->zoom | st->trained_zoom) & ~1) bad = "zoom and trained_zoom must be 0 or 1";
    else if (st->fixed_chunk < 0 && st->fixed_chunk != SEKV_CHUNK_SAME) bad = "fixed_chunk must be >= 0 (or same)";
    else if (st->route < 0 || st->route > 2) bad = "route must be 0, 1 or 2 (the diagnostic oracle)";
    else if (st->gate < 0 || st->gate > 2) bad = "gate must be 0 (off), 1 (hard) or 2 (soft)";
    if (bad) {
        snprintf(err, errlen, "%s: %s", m->name, bad);
        return -1;
    }
    return 0;
}

#define SEKV_PARAMS_NAME "sekv-smollm2-135m.params"

/* The file trained for one model that `sekv` looks for first, and that its refusal names:
 * $KVBENCH_CACHE/sekv-HASH.params (kv_model_hash of the model file, 16 hex digits). */
static void model_params_path(uint64_t model_hash, char *buf, size_t len) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "sekv-%016llx.params", (unsigned long long)model_hash);
    kb_cache_path(leaf, buf, len);
}

/* The default parameters files, in the order tried: $KVBENCH_SEKV_PARAMS; the file of
 * this model in the cache (model_params_path); the file
 * shipped in the repository (methods/sekv/params/), looked for beside the kvbench binary
 * and in the folders above it (./kvbench, build/tests/, build-san/, build-vg/...), then in
 * the source tree the binary was compiled from (KB_SRC_DIR, set by the Makefile), so that
 * every build of one tree finds the same file; the one `make sekv-params` writes to
 * ~/.cache/kvbench. Returns the count written to paths. */
enum { N_DEFAULT_PATHS = 8 };
static int default_params_paths(char paths[N_DEFAULT_PATHS][512], uint64_t model_hash) {
    const char *env = getenv("KVBENCH_SEKV_PARAMS"), *home = getenv("HOME");
    if (env && *env) return snprintf(paths[0], 512, "%s", env), 1;
    int n = 0;
    model_params_path(model_hash, paths[n++], 512);
    char exe[400];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        for (int up = 0; up < 4; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = 0;
            snprintf(paths[n++], 512, "%s/methods/sekv/params/" SEKV_PARAMS_NAME, exe);
        }
    }
#ifdef KB_SRC_DIR
    snprintf(paths[n++], 512, "%s/methods/sekv/params/" SEKV_PARAMS_NAME, KB_SRC_DIR);
#endif
    snprintf(paths[n++], 512, "%s/.cache/kvbench/" SEKV_PARAMS_NAME, home ? home : ".");
    return n;
}

const char *sekv_params_path(const kv_state *st) { return st->params_file; }

/* 1 when kv_setup names a model file whose trained parameters routing would need: not a
 * synthetic stream (model_hash 0) nor a random: model (weights made in memory, no file
 * bytes: their hash is that of nothing), where the routing's quality means nothing. */
static int has_model_file(const kv_setup *s) { return s->model_hash && s->model_hash != kv_model_hash(NULL, 0); }

/* params_file=default on a model with no trained parameters, where the trained router
 * would run (route=0 with zoom and trained zoom): a configuration error naming the file
 * looked for and the command that trains it; params_file=none runs the untrained router. */
static int refuse_untrained(const kv_state *st, const kv_setup *s, char *err, size_t errlen) {
    char mine[512];   /* the one file looked for first: $KVBENCH_SEKV_PARAMS (then the only one), else this model's */
    const char *env = getenv("KVBENCH_SEKV_PARAMS");
    if (env && *env) snprintf(mine, sizeof mine, "%s", env);
    else model_params_path(s->model_hash, mine, sizeof mine);
    snprintf(err, errlen,
             "%s: " SEKV_NO_PARAMS " (%s%s holds none for it; the shipped methods/sekv/params/" SEKV_PARAMS_NAME
             " is the default model's): train them with `make sekv-params SEKV_MODEL=MODEL SEKV_PARAMS=%s` "
             "(kvbench train-sekv --model MODEL --out that file), or run the untrained router with --params %s:params_file=none",
             st->m->name, env && *env ? "$KVBENCH_SEKV_PARAMS=" : "", mine, mine, st->m->name);
    return -1;
}

/* Trained parameters from params_file (checked against kv_setup.model_hash when known);
 * params_file=default: the first default file that holds trained parameters for this
 * very model (model_hash and shape); none on a model file is a refusal (refuse_untrained)
 * where the trained router would run, else (synthetic streams, random: models, the
 * untrained router or zoom) the untrained initial values, as with params_file=none.
 * A rank cap R other than the one trained keeps the trained routing and gate: the gate reads the first components
 * (inputs beyond a span's rank are 0 anyway) and lets components past its own R through;
 * the same for an explicit file. Which parameters a result used shows in its recorded
 * params. */
static int load_prm(kv_state *st, const kv_setup *s, char *err, size_t errlen) {
    char why[600], buf[16];
    int rank_given = raw_value(s->params, "rank", buf, sizeof buf);
    if (!strcmp(st->params_file, "none")) {
        st->params_file[0] = 0;
    } else if (!strcmp(st->params_file, "default")) {
        st->params_file[0] = 0;
        char paths[N_DEFAULT_PATHS][512];
        int np = s->model_hash ? default_params_paths(paths, s->model_hash) : 0;
        for (int i = 0; i < np; i++) {
            sekv_params p;
            if (sekv_params_load(&p, paths[i], s->model_hash, why, sizeof why)) continue;
            if (p.trained && !sekv_params_check_shape(&p, paths[i], st->L, st->H, st->d, why, sizeof why)) {
                st->prm = p;
                if (!rank_given) st->rank = p.rank_cap;
                st->params_default = 1;
                memcpy(st->params_file, paths[i], sizeof st->params_file);   /* same size */
                return 0;
            }
            sekv_params_free(&p);
        }
        if (has_model_file(s) && st->route == 0 && st->zoom && st->trained_zoom) return refuse_untrained(st, s, err, errlen);
    }
    if (!st->params_file[0])
        return sekv_params_init(&st->prm, st->L, st->H, st->d, st->rank, 0x5e4b5eedULL, err, errlen);
    if (sekv_params_load(&st->prm, st->params_file, s->model_hash, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", st->m->name, why);
        return -1;
    }
    if (sekv_params_check_shape(&st->prm, st->params_file, st->L, st->H, st->d, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", st->m->name, why);
        return -1;
    }
    if (!rank_given) st->rank = st->prm.rank_cap;
    return 0;
}

void sekv_free(kv_state *st);

kv_state *sekv_init_as(const kv_method *m, const kv_setup *s, char *err, size_t errlen) {
    if (kv_param_check(m, s->params, err, errlen)) return NULL;
    if (s->n_layers < 1 || s->n_heads < 1 || s->n_kv_heads < 1 || s->head_dim < 1 ||
        s->n_heads % s->n_kv_heads || s->n_prompt < 1 || s->max_decode < 0) {
        snprintf(err, errlen, "sekv: bad setup (layers %d, heads %d/%d, head dim %d, n_prompt %d)",
                 s->n_layers, s->n_heads, s->n_kv_heads, s->head_dim, s->n_prompt);
        return NULL;
    }
    if (kv_check_type(s, "sekv", err, errlen)) return NULL;
    if (s->budget_tokens < 0 || (s->budget_tokens == 0 && !(s->budget_frac > 0 && s->budget_frac <= 1))) {
        snprintf(err, errlen, "sekv: budget must be >= 1 token or a fraction in (0,1]");
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "sekv: out of memory");
        return NULL;
    }
    st->m = m;
    st->L = s->n_layers; st->H = s->n_heads; st->Hkv = s->n_kv_heads; st->d = s->head_dim;
    st->g = st->H / st->Hkv; st->kvt = s->kv_type; st->eb = kb_kvtype_bytes(s->kv_type); st->n_prompt = s->n_prompt;
    st->B = kv_budget(s);
    st->hold = s->decode_rule == KV_DECODE_HOLD;
    st->alpha_used = NAN;
    sekv_dev_init(st);
    if (read_params(st, s->params, err, errlen) || load_prm(st, s, err, errlen)) {
        sekv_free(st);
        return NULL;
    }
    st->layer = calloc((size_t)st->L, sizeof *st->layer);
    if (!st->layer) {
        snprintf(err, errlen, "sekv: out of memory");
        sekv_free(st);
        return NULL;
    }
    return st;
}

/* ---------------------------------------------------------------- growth */

int sekv_grow_rows(kv_state *st, sekv_layer *ly, int need) {
    if (need <= ly->row_cap) return 0;
    int cap = ly->row_cap ? ly->row_cap : 64;
    while (cap < need) cap *= 2;
    size_t rb = (size_t)cap * st->d * sizeof(float);
    int32_t *rs = realloc(ly->row_span, (size_t)cap * sizeof *rs);
    if (rs) ly->row_span = rs;
    int32_t *rp = realloc(ly->row_pos, (size_t)cap * sizeof *rp);
    if (rp) ly->row_pos = rp;
    if (!rs || !rp) return -1;
    for (int j = 0; j < st->Hkv; j++) {
        float *K = realloc(ly->kv[j].K, rb);
        if (K) ly->kv[j].K = K;
        float *V = realloc(ly->kv[j].V, rb);
        if (V) ly->kv[j].V = V;
        if (!K || !V) return -1;
    }
    ly->row_cap = cap;
    return 0;
}

int sekv_grow_spans(kv_state *st, sekv_layer *ly, int need) {
    if (need <= ly->span_cap) return 0;
    int cap = ly->span_cap ? ly->span_cap : 16;
    while (cap < need) cap *= 2;
    int H = st->H, Hkv = st->Hkv, dp = st->prm.dp, old = ly->span_cap;
    sekv_span *sp = realloc(ly->span, (size_t)cap * sizeof *sp);
    if (sp) ly->span = sp;
    int32_t *sr = realloc(ly->span_row, (size_t)cap * sizeof *sr);
    if (sr) ly->span_row = sr;
    float *kh = malloc((size_t)H * cap * dp * sizeof *kh);
    int32_t *sel = malloc((size_t)Hkv * cap * sizeof *sel);
    int32_t *rr = malloc((size_t)Hkv * cap * sizeof *rr);
    uint8_t *zh = calloc((size_t)H * cap, 1), *why = calloc((size_t)H * cap, 1);
    float *kb = malloc((size_t)Hkv * cap * 2 * st->d * sizeof *kb);
    if (!sp || !sr || !kh || !sel || !rr || !zh || !why || !kb) {
        free(kh), free(sel), free(rr), free(zh), free(why), free(kb);
        return -1;
    }
    for (int j = 0; j < Hkv && ly->kspread; j++)
        memcpy(kb + (size_t)j * cap * 2 * st->d, ly->kspread + (size_t)j * old * 2 * st->d,
               (size_t)ly->ns * 2 * st->d * sizeof *kb);
    free(ly->kspread);
    ly->kspread = kb;
    for (int h = 0; h < H && ly->khat; h++)   /* keep the routing keys, new row stride */
        memcpy(kh + (size_t)h * cap * dp, ly->khat + (size_t)h * old * dp, (size_t)ly->ns * dp * sizeof *kh);
    free(ly->khat), free(ly->sel), free(ly->recon_row), free(ly->zoom_h), free(ly->why);
    ly->khat = kh, ly->sel = sel, ly->recon_row = rr, ly->zoom_h = zh, ly->why = why;
    for (int j = 0; j < Hkv; j++) {
        sekv_basis *b = realloc(ly->kv[j].basis, (size_t)cap * sizeof *b);
        if (!b) return -1;
        memset(b + old, 0, (size_t)(cap - old) * sizeof *b);
        ly->kv[j].basis = b;
    }
    ly->span_cap = cap;
    return 0;
}

void sekv_refresh_span_rows(sekv_layer *ly) {
    for (int r = 0; r < ly->n_rows; r++)
        if (ly->row_span[r] >= 0) ly->span_row[ly->row_span[r]] = r;
}

/* ---------------------------------------------------------------- spans */

/* A span's factors as the K/V type stores them. */
static void round_factor(const kv_state *st, sekv_factor *f) {
    kb_kv_round_rows(st->kvt, f->U, (size_t)f->len * f->r);
    kb_kv_round_rows(st->kvt, f->s, (size_t)f->r);
    kb_kv_round_rows(st->kvt, f->Vt, (size_t)f->r * f->d);
}

int sekv_build_span(kv_state *st, int layer, int s, int j, const float *K, const float *V,
                    const float *surp, float *kbar, float *vbar) {
    sekv_layer *ly = &st->layer[layer];
    int len = ly->span[s].len, d = st->d, R = st->rank;
    sekv_coarse(K, V, surp, len, d, kbar, vbar, NULL);
    sekv_round_rows(st, kbar, 1), sekv_round_rows(st, vbar, 1);   /* stored rows: the K/V type */
    float *pc = ly->kspread + ((size_t)j * ly->span_cap + s) * 2 * d;
    if (st->route == 1) {   /* top-2 principal directions of the keys about kbar, scaled by their rms */
        float *c = malloc(((size_t)len * d + sekv_factor_floats(len, d, 2)) * sizeof *c);
        if (!c) return -1;
        for (int t = 0; t < len; t++)
            for (int i = 0; i < d; i++) c[(size_t)t * d + i] = K[(size_t)t * d + i] - kbar[i];
        sekv_factor f;
        if (sekv_factorize(c, len, d, 2, c + (size_t)len * d, &f)) return free(c), -1;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < d; i++)
                pc[k * d + i] = k < f.r ? (float)(f.s[k] / sqrt((double)len) * f.Vt[(size_t)k * d + i]) : 0.0f;
        free(c);
    }
    /* The slow tier keeps whichever is smaller: the factors, or the len rows they rebuild
     * (gate applied), so a span costs at most its raw rows and R changes the approximation
     * alone. Either way decode attends to the same numbers. */
    sekv_basis *b = &ly->kv[j].basis[s];
    size_t nf = sekv_factor_floats(len, d, R);
    b->rows = sekv_store_rows(len, d, R);
    float *fb = b->rows ? malloc(2 * nf * sizeof *fb) : sekv_slow_alloc(st, 2 * nf);
    if (!b->rows) b->buf = fb;
    if (!fb) return -1;
    if (sekv_factorize(K, len, d, R, fb, &b->fk) || sekv_factorize(V, len, d, R, fb + nf, &b->fv)) {
        if (b->rows) free(fb);
        return -1;
    }
    round_factor(st, &b->fk), round_factor(st, &b->fv);   /* the slow tier stores the K/V type too */
    int r = b->fk.r;
    if (st->gate == 0) {
        for (int i = 0; i < r; i++) b->mk[i] = b->mv[i] = 1;
    } else {
        sekv_gate_forward(&st->prm, b->fk.s, r, kbar, b->mk, NULL);
        sekv_gate_forward(&st->prm, b->fv.s, r, kbar, b->mv, NULL);
        for (int i = st->prm.rank_cap; i < r; i++) b->mk[i] = b->mv[i] = 1;   /* past the gate's own R */
        if (st->gate == 1)
            for (int i = 0; i < r; i++) {
                b->mk[i] = b->mk[i] > 0.5f;
                b->mv[i] = b->mv[i] > 0.5f;
            }
    }
    if (b->rows) {
        b->buf = sekv_slow_alloc(st, 2 * (size_t)len * d);
        if (b->buf) sekv_reconstruct(&b->fk, b->mk, b->buf), sekv_reconstruct(&b->fv, b->mv, b->buf + (size_t)len * d);
        if (b->buf) kb_kv_round_rows(st->kvt, b->buf, 2 * (size_t)len * d);
        free(fb);
        b->fk.U = b->fk.s = b->fk.Vt = b->fv.U = b->fv.s = b->fv.Vt = NULL;
        if (!b->buf) return -1;
    }
    int dp = st->prm.dp;
    for (int h = j * st->g; h < (j + 1) * st->g && st->route == 0; h++)
        sekv_route_key(st->prm.W + ((size_t)layer * st->H + h) * dp * d, kbar, d, dp,
                       ly->khat + ((size_t)h * ly->span_cap + s) * dp);
    return 0;
}

void sekv_basis_rows(const sekv_basis *b, int gated, float *K, float *V) {
    if (b->rows) {
        size_t n = (size_t)b->fk.len * b->fk.d;
        memcpy(K, b->buf, n * sizeof *K);
        memcpy(V, b->buf + n, n * sizeof *V);
        return;
    }
    sekv_reconstruct(&b->fk, gated ? b->mk : NULL, K);
    sekv_reconstruct(&b->fv, gated ? b->mv : NULL, V);
}

void sekv_par_for(int n, void (*fn)(void *, int), void *ctx) { kb_parallel_for(n, fn, ctx); }

/* ---------------------------------------------------------------- segmentation */

/* Picks the segmentation at the first ingest. A given (or, for sekv, default) alpha,
 * l_min, l_max and local stay as they are: one segmentation, infeasible when its
 * persistent part P exceeds p_max*B (uncapped: always taken). The automatic ones
 * (sekv-spread's defaults) are searched, least change first, for the first setting whose
 * P fits in p_max*B:
 *   span cap and window: l_max 32, 48, 64, 128, 256, each with local 32 and then local
 *          = clamp(B/8, 4, 32): short spans first, since they zoom more precisely (a
 *          needle's span costs fewer rows of the room B - P), which the smaller window
 *          pays for at small budgets (the window and one coarse row per span are most
 *          of P);
 *   l_min: as set (4), then 2 (raising it would keep more tokens at full resolution);
 *   alpha: the grid (sekv: alpha_grid; sekv-spread: 0.5 .. 4), smallest first (the most
 *          anchors kept at full resolution).
 * The setting used is kept in st (sekv_describe, sekv_params_used); when none fits the
 * case is "infeasible", naming the smallest P found. uncapped=1 segments as the capped
 * method would at this budget (the same search against p_max*B, so the iso-memory view
 * compares the same spans), taking the smallest P found when none fits; only the cap is
 * lifted. */
static int segment_at(const kv_state *st, const float *surp, double a, int l_min, int cap, int loc, sekv_seg *sg,
                      char *err, size_t errlen) {
    int n = st->n_prompt;
    if (st->fixed_chunk == SEKV_CHUNK_SAME ? sekv_segment_even(surp, n, a, l_min, cap, st->sinks, loc, sg)
                                           : sekv_segment_ex(surp, n, a, l_min, cap, st->fixed_chunk, st->sinks, loc, sg)) {
        snprintf(err, errlen, "sekv: out of memory segmenting %d tokens", n);
        return -1;
    }
    return 0;
}

/* Keeps segmentation sg (owned by st from here) and the setting that made it. */
static void take_seg(kv_state *st, sekv_seg *sg, double a, int l_min, int loc, int cap) {
    st->seg = *sg;
    st->have_seg = 1;
    st->alpha_used = st->fixed_chunk > 0 ? NAN : a;
    st->lmin_used = l_min;
    st->local = loc;
    st->l_max = cap;
    st->threshold = st->fixed_chunk ? INFINITY : sg->threshold;   /* decoded tokens never anchor then */
}

static int choose_seg(kv_state *st, const float *surp, char *err, size_t errlen) {
    const double *grid = st->grid;
    static const int caps[] = {32, 48, 64, 128, 256};
    int half = (int)floor(st->p_max * st->B);
    int auto_a = st->alpha < 0 && st->fixed_chunk <= 0;
    int n_alpha = auto_a ? st->n_grid : 1;
    int lmins[2] = {st->l_min, 2}, n_lmin = !st->lmin_given && st->l_min > 2 ? 2 : 1;
    /* (local, l_max) candidates, without repeats */
    int small = st->B / 8 < 4 ? 4 : st->B / 8 > 32 ? 32 : st->B / 8, shp[10][2], n_shp = 0;
    for (int c = 0; c < 10; c++) {   /* caps ascending; for each, local 32 then small */
        int loc = st->local >= 0 ? st->local : c % 2 == 0 ? 32 : small;
        int cap = st->l_max > 0 || st->fixed_chunk > 0 ? st->l_max : caps[c / 2];
        if (cap > 0 && cap < st->l_min) cap = st->l_min;
        int seen = 0;
        for (int i = 0; i < n_shp; i++) seen |= shp[i][0] == loc && shp[i][1] == cap;
        if (!seen) shp[n_shp][0] = loc, shp[n_shp++][1] = cap;
    }
    int best_p = -1, best_l = 0, best_loc = 0, best_cap = 0;
    double best_a = 0;
    for (int si = 0; si < n_shp; si++)
        for (int li = 0; li < n_lmin; li++)
            for (int ai = 0; ai < n_alpha; ai++) {
                double a = auto_a ? grid[ai] : st->alpha > 0 ? st->alpha : 1.0;
                int loc = shp[si][0], cap = shp[si][1] > 0 ? shp[si][1] : 64;
                sekv_seg sg;
                if (segment_at(st, surp, a, lmins[li], cap, loc, &sg, err, errlen)) return -1;
                int P = sekv_seg_persistent(&sg);
                if (P <= half) return take_seg(st, &sg, a, lmins[li], loc, cap), 0;
                if (best_p < 0 || P < best_p)
                    best_p = P, best_a = a, best_l = lmins[li], best_loc = loc, best_cap = cap;
                sekv_seg_free(&sg);
            }
    if (st->uncapped && best_p >= 0) {   /* no budget to fit: the smallest P found */
        sekv_seg sg;
        if (segment_at(st, surp, best_a, best_l, best_cap, best_loc, &sg, err, errlen)) return -1;
        return take_seg(st, &sg, best_a, best_l, best_loc, best_cap), 0;
    }
    if (st->fixed_chunk > 0)
        snprintf(err, errlen,
                 "infeasible: persistent part P=%d exceeds p_max*B=%d (B=%d; best: fixed_chunk=%d, l_min=%d, "
                 "sinks=%d, local=%d)",
                 best_p, half, st->B, st->fixed_chunk, best_l, st->sinks, best_loc);
    else if (best_cap == SEKV_LMAX_NONE)
        snprintf(err, errlen,
                 "infeasible: persistent part P=%d exceeds p_max*B=%d (B=%d; best: alpha=%g, l_min=%d, l_max=none, "
                 "sinks=%d, local=%d)",
                 best_p, half, st->B, best_a, best_l, st->sinks, best_loc);
    else
        snprintf(err, errlen,
                 "infeasible: persistent part P=%d exceeds p_max*B=%d (B=%d; best: alpha=%g, l_min=%d, l_max=%d, "
                 "sinks=%d, local=%d)",
                 best_p, half, st->B, best_a, best_l, best_cap, st->sinks, best_loc);
    return -1;
}

/* ---------------------------------------------------------------- ingest */

typedef struct {
    kv_state *st;
    const kv_prefill *p;
    int failed;
} ingest_ctx;

static void ingest_task(void *c_, int i) {
    ingest_ctx *c = c_;
    kv_state *st = c->st;
    sekv_layer *ly = &st->layer[c->p->layer];
    int s = i / st->Hkv, j = i % st->Hkv, d = st->d;
    const sekv_span *sp = &ly->span[s];
    const float *K = c->p->K + (size_t)j * c->p->kv_stride + (size_t)sp->start * d;
    const float *V = c->p->V + (size_t)j * c->p->kv_stride + (size_t)sp->start * d;
    int r = ly->span_row[s];
    if (sekv_build_span(st, c->p->layer, s, j, K, V, c->p->surprisal + sp->start,
                        ly->kv[j].K + (size_t)r * d, ly->kv[j].V + (size_t)r * d))
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
}

int sekv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    if (p->layer < 0 || p->layer >= st->L || st->layer[p->layer].ingested ||
        (p->layer > 0 && !st->layer[p->layer - 1].ingested)) {
        snprintf(err, errlen, "sekv: ingest of layer %d out of order", p->layer);
        return -1;
    }
    if (p->n != st->n_prompt || !p->K || !p->V || p->kv_stride < (size_t)p->n * st->d) {
        snprintf(err, errlen, "sekv: layer %d: prefill of %d tokens, expected %d", p->layer, p->n,
                 st->n_prompt);
        return -1;
    }
    if (!p->surprisal) {
        snprintf(err, errlen, "sekv: layer %d: the prefill gave no surprisal", p->layer);
        return -1;
    }
    int n = p->n, d = st->d;
    sekv_track_peak(st, (size_t)n * st->Hkv * 2 * d * st->eb);   /* the full layer, transient */
    if (!st->have_seg) {
        if (choose_seg(st, p->surprisal, err, errlen)) return -1;
        st->surp_cap = n + 64;
        st->surp = malloc((size_t)st->surp_cap * sizeof *st->surp);
        if (!st->surp) goto oom;
        memcpy(st->surp, p->surprisal, (size_t)n * sizeof *st->surp);
    }
    const sekv_seg *sg = &st->seg;
    sekv_layer *ly = &st->layer[p->layer];
    ly->kv = calloc((size_t)st->Hkv, sizeof *ly->kv);
    ly->n_sel = calloc((size_t)st->Hkv, sizeof *ly->n_sel);
    ly->kept = calloc((size_t)st->H, sizeof *ly->kept);
    ly->events = calloc((size_t)st->H, sizeof *ly->events);
    if (!ly->kv || !ly->n_sel || !ly->kept || !ly->events) goto oom;
    int P = sekv_seg_persistent(sg);
    if (sekv_grow_rows(st, ly, (P > st->B ? P : st->B) + 64) || sekv_grow_spans(st, ly, sg->n_spans + 1))
        goto oom;
    /* Rows in position order: full-resolution tokens and a coarse row at each span start. */
    int si = 0, r = 0;
    for (int t = 0; t < n; r++) {
        if (si < sg->n_spans && sg->span[si].start == t) {
            ly->span[si] = sg->span[si];
            ly->row_span[r] = si;
            ly->row_pos[r] = t;
            t += sg->span[si++].len;
            continue;
        }
        ly->row_span[r] = -1;
        ly->row_pos[r] = t;
        for (int j = 0; j < st->Hkv; j++) {
            memcpy(ly->kv[j].K + (size_t)r * d, p->K + (size_t)j * p->kv_stride + (size_t)t * d, d * sizeof(float));
            memcpy(ly->kv[j].V + (size_t)r * d, p->V + (size_t)j * p->kv_stride + (size_t)t * d, d * sizeof(float));
            sekv_round_rows(st, ly->kv[j].K + (size_t)r * d, 1), sekv_round_rows(st, ly->kv[j].V + (size_t)r * d, 1);
        }
        t++;
    }
    ly->n_rows = r;
    ly->ns = sg->n_spans;
    sekv_refresh_span_rows(ly);
    ingest_ctx c = {st, p, 0};
    sekv_par_for(ly->ns * st->Hkv, ingest_task, &c);
    if (c.failed) {
        snprintf(err, errlen, "sekv: layer %d: span factorisation failed (memory or SVD)", p->layer);
        return -1;
    }
    for (int s = 0; s < ly->ns; s++)
        st->slow_bytes += st->Hkv * sekv_store_floats(ly->span[s].len, d, st->rank) * st->eb;
    if (st->slow_bytes > st->slow_peak) st->slow_peak = st->slow_bytes;
    ly->total = n;
    int lw = st->local < n ? st->local : n;
    ly->frontier = n - lw > st->sinks ? n - lw : (st->sinks < n ? st->sinks : n);
    ly->ingested = 1;
    sekv_track_peak(st, 0);
    return 0;
oom:
    snprintf(err, errlen, "sekv: out of memory ingesting layer %d", p->layer);
    return -1;
}

/* ---------------------------------------------------------------- accounting */

size_t sekv_fast_bytes(const kv_state *st, size_t *aux, long *tokens) {
    size_t rows = 0, a = 0;
    for (int l = 0; l < st->L; l++) {
        const sekv_layer *ly = &st->layer[l];
        if (!ly->ingested) continue;
        for (int j = 0; j < st->Hkv; j++) rows += (size_t)ly->n_rows + ly->kv[j].n_recon;
        if (st->zoom && st->trained_zoom && st->route == 1) a += (size_t)st->Hkv * ly->ns * 2 * st->d * sizeof(float);
        else if (st->zoom && st->trained_zoom) a += (size_t)st->H * ly->ns * st->prm.dp * sizeof(float);
    }
    /* The trained parameters the decode uses live on the fast tier too. */
    const sekv_params *p = &st->prm;
    if (st->zoom && st->trained_zoom && st->route == 0) a += ((size_t)p->n_layers * p->n_heads * (p->dp * p->head_dim + 1)) * sizeof(float);
    if (st->zoom && st->gate) a += (sekv_params_count(p) - (size_t)p->n_layers * p->n_heads * (p->dp * p->head_dim + 1)) * sizeof(float);
    if (aux) *aux = a;
    if (tokens) *tokens = (long)rows;
    return rows * 2 * st->d * st->eb + a;
}

void sekv_track_peak(kv_state *st, size_t extra_fast) {
    size_t f = sekv_fast_bytes(st, NULL, NULL) + extra_fast;
    if (f > st->fast_peak) st->fast_peak = f;
}

void sekv_memory(const kv_state *st, kv_mem *out) {
    memset(out, 0, sizeof *out);
    out->fast_bytes = sekv_fast_bytes(st, &out->fast_aux_bytes, &out->fast_tokens);
    out->fast_peak = st->fast_peak > out->fast_bytes ? st->fast_peak : out->fast_bytes;
    out->slow_bytes = st->slow_bytes;
    out->slow_peak = st->slow_peak;
}

void sekv_head_stats(const kv_state *st, int layer, int head, kv_headstat *out) {
    const sekv_layer *ly = &st->layer[layer];
    out->kept = ly->kept ? ly->kept[head] : 0;
    out->events = ly->events ? (double)ly->events[head] : 0;
}

void sekv_free(kv_state *st) {
    if (!st) return;
    sekv_dev_free(st);
    for (int l = 0; st->layer && l < st->L; l++) {
        sekv_layer *ly = &st->layer[l];
        for (int j = 0; ly->kv && j < st->Hkv; j++) {
            for (int s = 0; s < ly->ns; s++) sekv_slow_free(st, ly->kv[j].basis[s].buf);
            free(ly->kv[j].basis), free(ly->kv[j].K), free(ly->kv[j].V);
        }
        free(ly->kv), free(ly->row_span), free(ly->row_pos), free(ly->span), free(ly->span_row);
        free(ly->khat), free(ly->kspread), free(ly->sel), free(ly->n_sel), free(ly->recon_row), free(ly->zoom_h);
        free(ly->why);
        free(ly->kept), free(ly->events);
    }
    free(st->layer);
    sekv_params_free(&st->prm);
    sekv_seg_free(&st->seg);
    free(st->surp), free(st->zlog), free(st->scores), free(st->idx), free(st->bias);
    free(st);
}

/* ---------------------------------------------------------------- views */

double sekv_chosen_alpha(const kv_state *st, int *l_min) {
    if (l_min) *l_min = st->have_seg ? st->lmin_used : st->l_min;
    return st->have_seg ? st->alpha_used : NAN;
}

void sekv_describe(const kv_state *st, char *buf, size_t len) {
    int ns = st->layer[0].ingested ? st->layer[0].ns : 0;
    char lmax[24] = "auto", local[24] = "auto";
    if (st->l_max == SEKV_LMAX_NONE) snprintf(lmax, sizeof lmax, "none");
    else if (st->l_max >= 0) snprintf(lmax, sizeof lmax, "%d%s", st->l_max, st->lmax_auto ? " (auto)" : "");
    if (st->local >= 0) snprintf(local, sizeof local, "%d%s", st->local, st->local_auto ? " (auto)" : "");
    snprintf(buf, len,
             "%s: alpha=%g%s l_min=%d l_max=%s sinks=%d local=%s spans=%d P=%d B=%d%s rank=%d zoom=%d%s gate=%d route=%s %s",
             st->m->name, st->alpha_used, st->alpha < 0 && st->fixed_chunk <= 0 ? " (auto)" : "",
             st->have_seg ? st->lmin_used : st->l_min, lmax, st->sinks, local, ns,
             st->have_seg ? sekv_seg_persistent(&st->seg) : -1, st->B, st->uncapped ? " (uncapped)" : "", st->rank,
             st->zoom, st->trained_zoom ? "" : " (untrained zoom)", st->gate,
             st->route == 2 ? "oracle" : st->route ? "spread" : "summary",
             !st->params_file[0] ? "params: none (untrained routing)"
             : st->prm.trained    ? (st->params_default ? "params: trained (default file)" : "params: trained")
                                  : "params: file, untrained");
}

void sekv_params_used(const kv_state *st, char *buf, size_t len) {
    char alpha[32] = "auto";
    if (st->have_seg && st->fixed_chunk <= 0) snprintf(alpha, sizeof alpha, "%.17g", st->alpha_used);
    else if (st->alpha > 0) snprintf(alpha, sizeof alpha, "%.17g", st->alpha);
    char lmax[16] = "auto", local[16] = "auto", chunk[16] = "same";
    if (st->fixed_chunk != SEKV_CHUNK_SAME) snprintf(chunk, sizeof chunk, "%d", st->fixed_chunk);
    if (st->l_max == SEKV_LMAX_NONE) snprintf(lmax, sizeof lmax, "none");
    else if (st->l_max >= 0) snprintf(lmax, sizeof lmax, "%d", st->l_max);
    if (st->local >= 0) snprintf(local, sizeof local, "%d", st->local);
    int n = snprintf(buf, len,
                     "alpha=%s,l_min=%d,l_max=%s,sinks=%d,local=%s,rank=%d,tau=%g,zoom=%d,trained_zoom=%d,"
                     "fixed_chunk=%s,gate=%d,route=%d,p_max=%g,uncapped=%d",
                     alpha, st->have_seg ? st->lmin_used : st->l_min, lmax, st->sinks, local, st->rank,
                     st->tau_override, st->zoom, st->trained_zoom, chunk, st->gate, st->route,
                     st->p_max, st->uncapped);
    if (n >= 0 && (size_t)n < len && st->grid_text[0])   /* the grid the alpha was chosen on */
        n += snprintf(buf + n, len - (size_t)n, ",alpha_grid=%s", st->grid_text);
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ",params_file=%s", st->params_file[0] ? st->params_file : "none");
}

size_t sekv_zoom_log(const kv_state *st, const sekv_zoom_event **events) {
    *events = st->zlog;
    return st->n_zlog;
}

const sekv_seg *sekv_segmentation(const kv_state *st) { return st->have_seg ? &st->seg : NULL; }

int sekv_resident(const kv_state *st, int layer, int kv_head, int *persistent, int *recon) {
    const sekv_layer *ly = &st->layer[layer];
    int P = ly->ingested ? ly->n_rows : 0, R = ly->ingested ? ly->kv[kv_head].n_recon : 0;
    if (persistent) *persistent = P;
    if (recon) *recon = R;
    return P + R;
}

int sekv_span_count(const kv_state *st, int layer) { return st->layer[layer].ns; }
sekv_span sekv_span_at(const kv_state *st, int layer, int s) { return st->layer[layer].span[s]; }

int sekv_rows(const kv_state *st, int layer, int32_t *pos, int32_t *span) {
    const sekv_layer *ly = &st->layer[layer];
    for (int r = 0; r < ly->n_rows; r++) {
        if (pos) pos[r] = ly->row_pos[r];
        if (span) span[r] = ly->row_span[r];
    }
    return ly->n_rows;
}

void sekv_row(const kv_state *st, int layer, int kv_head, int r, const float **k, const float **v) {
    const sekv_kvh *kv = &st->layer[layer].kv[kv_head];
    *k = kv->K + (size_t)r * st->d;
    *v = kv->V + (size_t)r * st->d;
}

void sekv_span_tokens(const kv_state *st, int layer, int kv_head, int s, float *K, float *V) {
    sekv_basis_rows(&st->layer[layer].kv[kv_head].basis[s], 0, K, V);
}

const float *sekv_span_factors(const kv_state *st, int layer, int kv_head, int s) {
    return st->layer[layer].kv[kv_head].basis[s].buf;
}

size_t sekv_device_bytes(const kv_state *st) { return sekv_dev_bytes_held(st); }

int sekv_why(const kv_state *st, int layer, int head, int s) {
    const sekv_layer *ly = &st->layer[layer];
    return ly->why && s >= 0 && s < ly->ns ? ly->why[(size_t)head * ly->span_cap + s] : SEKV_WHY_OFF;
}

int sekv_expanded(const kv_state *st, int layer, int head, int32_t *spans) {
    const sekv_layer *ly = &st->layer[layer];
    int n = 0;
    for (int s = 0; ly->zoom_h && s < ly->ns; s++)
        if (ly->zoom_h[(size_t)head * ly->span_cap + s]) spans[n++] = s;
    return n;
}

/* kv_method.rows: persistent + reconstructed rows on the fast tier; full-resolution rows
 * are the persistent rows that are no span's coarse row. */
int sekv_kv_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos) {
    const sekv_layer *ly = &st->layer[layer];
    if (!ly->ingested) {
        if (pos) *npos = 0;
        return 0;
    }
    if (pos) {
        int n = 0;
        for (int r = 0; r < ly->n_rows && n < cap; r++)
            if (ly->row_span[r] < 0) pos[n++] = ly->row_pos[r];
        *npos = n;
    }
    return ly->n_rows + ly->kv[kv_head].n_recon;
}

static kv_state *sekv_init(const kv_setup *s, char *err, size_t errlen) { return sekv_init_as(&kv_sekv, s, err, errlen); }

const kv_method kv_sekv = {
    KV_METHOD_HEAD,
    .name = "sekv",
    .summary = "the paper's text: surprisal anchors, alpha chosen per prompt (the paper gives none: the smallest "
               "on alpha_grid with P <= p_max*B, P = anchors + local window + one coarse row per span, leaving "
               "(1-p_max)*B of room to zoom), spans = the maximal runs between neighbouring anchors, coarse entries "
               "on the fast tier, rank-32 truncated-SVD factors (or the rows, if smaller) on the slow tier, zoom-in "
               "by the trained d'=32 routing summaries (+ln|S|) against trained per-(layer, head) thresholds, "
               "relevance-ranked cap within B, soft rank gate (uncapped=1: no cap). Each default's source is in "
               "brackets: [paper], [code] (the authors' default.yaml), [kvbench]. Repairs of the reference code "
               "(methods.md gaps): 1 decoded tokens join P at full resolution (folded into spans only past "
               "p_max*B); 2 causal spans in training; 3 STE z in the budget loss; 4 spans picked per kv group by "
               "the max relevance of its heads; 5 P > p_max*B is infeasible, not evicted; 6 token 0 is always an "
               "anchor; 7 the official benchmark definitions (workloads/)",
    .params = params,
    .init = sekv_init,
    SEKV_TABLE_REST,
    .commands = sekv_commands,
    .trained_file = sekv_door_trained_file,
};
