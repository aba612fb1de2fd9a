/* One text case through the model for every (method, budget); see model_case.h.
 *
 * Timing, per result: prefill_s is the shared prefill (timed once per case) plus, with
 * question_after, this method's decode steps over the question tokens; compress_s is the
 * method's ingest of every layer; decode_s covers the generation loop, whose forward
 * passes (decode_tokens) give tokens_per_s. The first generated token comes from the
 * prefill's logits, so a generation of k tokens that ends on a stop token takes k passes
 * and one that hits max_new takes k - 1. */
#include "model_case.h"
#include "rss.h"
#include "../identity/run_ident.h"
#include "../../methods/budget_check.h"
#include "../../kernels/host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kv_setup mc_setup(const mc_case *c, const kv_method *m, double budget) {
    const kv_model_config *cf = model_config(c->model);
    kv_setup s = {.n_layers = cf->n_layer, .n_heads = cf->n_head, .n_kv_heads = cf->n_head_kv,
                  .head_dim = cf->head_dim, .n_prompt = c->n_pf,
                  .max_decode = c->max_new + (c->n - c->n_pf), .kv_type = c->kv_type, .params = mparams_get(c->params, m),
                  .model_hash = model_content_hash(c->model), .decode_rule = c->decode_rule};
    if (budget <= 1) s.budget_frac = budget;
    else s.budget_tokens = (int)budget;
    return s;
}

kv_needs mc_union_needs(const mc_case *c, const kv_method *const *methods, const double *budgets, int n_pairs) {
    kv_needs all = {0};
    for (int i = 0; i < n_pairs; i++) {
        kv_setup s = mc_setup(c, methods[i], budgets[i]);
        char err[256];
        kv_state *st = methods[i]->init(&s, err, sizeof err);
        if (!st) continue;
        methods[i]->free(st);   /* only feasible pairs count */
        kv_needs nd = {0};
        methods[i]->needs(&s, &nd);
        kv_needs_union(&all, &nd);
    }
    return all;
}

int mc_prefill(mc_case *c, const kv_needs *needs, char *err, size_t errlen) {
    if (model_prefill(c->model, c->ids, c->n_pf, needs, &c->pf, err, errlen)) return -1;
    c->have_pf = 1;
    return 0;
}

/* The streaming prefill's consumers: the pairs' caches, and the layers kept for the
 * methods that need the surprisal. */
typedef struct {
    mc_case *c;
    float *keep_K, *keep_V;     /* [L][Hkv][n][d], or NULL when no method needs them */
    double start, said;         /* progress: when the prefill started, when it last spoke */
} stream_ctx;

static void ingest_one(mc_ingested *p, const kv_prefill *layer) {
    if (!p->st || p->failed) return;
    double t0 = kb_now_s();
    if (p->m->ingest(p->st, layer, p->err, sizeof p->err)) p->failed = 1, p->layer = layer->layer;
    p->compress_s += kb_now_s() - t0;
}

static void stream_layer(void *vctx, const kv_prefill *layer) {
    stream_ctx *sc = vctx;
    mc_case *c = sc->c;
    for (int i = 0; i < c->n_pre; i++)
        if (!c->pre[i].m->needs_surprisal) ingest_one(&c->pre[i], layer);
    double now = kb_now_s();
    if (c->progress && now - sc->said >= 15) {   /* an 8B prefill at 8K takes minutes a layer */
        fprintf(stderr, "%s: prefill layer %d/%d done, %.0fs\n", c->progress, layer->layer + 1,
                model_config(c->model)->n_layer, now - sc->start);
        sc->said = now;
    }
    if (sc->keep_K) {
        const kv_model_config *cf = model_config(c->model);
        size_t per = (size_t)layer->n * cf->head_dim, base = (size_t)layer->layer * cf->n_head_kv * per;
        for (int j = 0; j < cf->n_head_kv; j++) {
            memcpy(sc->keep_K + base + j * per, layer->K + j * layer->kv_stride, per * sizeof(float));
            memcpy(sc->keep_V + base + j * per, layer->V + j * layer->kv_stride, per * sizeof(float));
        }
    }
}

int mc_prefill_streamed(mc_case *c, const kv_needs *needs, const kv_method *const *methods, const double *budgets,
                        int n_pairs, char *err, size_t errlen) {
    const kv_model_config *cf = model_config(c->model);
    c->pre = calloc((size_t)n_pairs + 1, sizeof *c->pre);
    if (!c->pre) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->n_pre = n_pairs;
    int keep = 0;
    for (int i = 0; i < n_pairs; i++) {
        mc_ingested *p = &c->pre[i];
        p->m = methods[i];
        p->budget = budgets[i];
        kv_setup s = mc_setup(c, p->m, p->budget);
        p->st = p->m->init(&s, p->err, sizeof p->err);
        keep |= p->st && p->m->needs_surprisal;
    }
    stream_ctx sc = {c, NULL, NULL, kb_now_s(), kb_now_s()};
    size_t kv_n = (size_t)cf->n_layer * cf->n_head_kv * c->n_pf * cf->head_dim;
    if (keep && (!(sc.keep_K = malloc(kv_n * sizeof(float))) || !(sc.keep_V = malloc(kv_n * sizeof(float))))) {
        free(sc.keep_K);
        snprintf(err, errlen, "out of memory for the K/V kept for the methods that need the surprisal");
        return -1;
    }
    int rc = model_prefill_stream(c->model, c->ids, c->n_pf, needs, stream_layer, &sc, &c->pf, err, errlen);
    if (!rc) {
        c->have_pf = 1;
        for (int i = 0; i < n_pairs; i++) c->pf.seconds -= c->pre[i].compress_s;   /* the forward pass alone */
        for (int l = 0; keep && l < cf->n_layer; l++) {   /* the surprisal exists now */
            size_t per = (size_t)c->n_pf * cf->head_dim, base = (size_t)l * cf->n_head_kv * per;
            kv_prefill v = {.layer = l, .n = c->n_pf, .K = sc.keep_K + base, .V = sc.keep_V + base,
                            .kv_stride = per, .surprisal = c->pf.surprisal, .sent_end = c->pf.sent_end};
            for (int i = 0; i < n_pairs; i++)
                if (c->pre[i].m->needs_surprisal) ingest_one(&c->pre[i], &v);
        }
    }
    free(sc.keep_K);
    free(sc.keep_V);
    return rc;
}

void mc_free(mc_case *c) {
    if (c->have_pf) prefill_out_free(&c->pf);
    c->have_pf = 0;
    for (int i = 0; i < c->n_pre; i++)
        if (c->pre[i].st) c->pre[i].m->free(c->pre[i].st);
    free(c->pre);
    c->pre = NULL;
    c->n_pre = 0;
}

/* The cache built for (m, budget) during a streamed prefill, or NULL. */
static mc_ingested *pre_find(mc_case *c, const kv_method *m, double budget) {
    for (int i = 0; i < c->n_pre; i++)
        if (c->pre[i].m == m && c->pre[i].budget == budget && !c->pre[i].taken) return &c->pre[i];
    return NULL;
}

void mc_result_clear(mc_result *res) {
    free(res->output);
    free(res->layer_err);
    free(res->heads);
    free(res->zoom);
    memset(res, 0, sizeof *res);
}

static void set_reason(mc_result *res, const char *status, const char *fmt, const char *a, const char *b) {
    char buf[600];
    snprintf(buf, sizeof buf, fmt, a, b);
    free(res->output);
    res->output = strdup(buf);
    res->r.status = status;
    res->r.output = res->output;
}

/* The generated ids as text (special tokens hidden, as a user would read them). */
static char *ids_text(const kv_tokenizer *t, const int32_t *ids, int n) {
    size_t cap = 1;
    for (int i = 0; i < n; i++) {
        int len = tok_piece(t, ids[i], 0, NULL, 0);
        cap += len > 0 ? (size_t)len : 0;
    }
    char *s = malloc(cap);
    if (s) tok_decode(t, ids, n, s, cap);
    return s;
}

/* 1 if the token's text holds a newline (LongBench samsum stops there). */
int mc_piece_has_newline(const kv_tokenizer *t, int id) {
    char buf[256];
    int len = tok_piece(t, id, 0, buf, sizeof buf);
    return len > 0 && len < (int)sizeof buf && memchr(buf, '\n', (size_t)len) != NULL;
}

/* Greedy choice among the tokens that do not end generation: LongBench's samsum passes
 * min_length = prompt + 1, so HF masks the stop tokens until one token is out. */
int mc_argmax_no_stop(const kv_tokenizer *t, const float *logits, int n, int newline) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (best >= 0 && !(logits[i] > logits[best])) continue;
        if (tok_is_stop(t, i) || (newline && mc_piece_has_newline(t, i))) continue;
        best = i;
    }
    return best >= 0 ? best : model_argmax(logits, n);
}

/* The method's event log (SeKV: its zoom-ins), into the results' zoom table. */
static void copy_zoom(const kv_method *m, const kv_state *st, int L, int H, mc_result *res) {
    size_t n = m->events(st, NULL, 0);
    if (!n) return;
    kv_event *ev = malloc(n * sizeof *ev);
    res->zoom = malloc(n * sizeof *res->zoom);
    if (!ev || !res->zoom) {   /* the events are a bonus; the result stands without them */
        free(ev), free(res->zoom), res->zoom = NULL;
        return;
    }
    size_t got = m->events(st, ev, n);
    n = got < n ? got : n;   /* a method's count is not trusted past the room it was given */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)   /* an event of a layer or head the model lacks is dropped, not stored */
        if (ev[i].step >= 0 && ev[i].layer >= 0 && ev[i].layer < L && ev[i].head >= 0 && ev[i].head < H)
            res->zoom[k++] = (kvdb_zoom){ev[i].step, ev[i].layer, ev[i].head, ev[i].value, ev[i].of};
    res->n_zoom = k;
    free(ev);
}

/* The parameters the method chose for this prompt (SeKV: its fitted alpha), "" if none. */
static void copy_chosen(const kv_method *m, const kv_state *st, mc_result *res) {
    res->chosen[0] = 0;
    m->params_used(st, res->chosen, sizeof res->chosen);
    res->chosen[sizeof res->chosen - 1] = 0;   /* a method's text, ended here whatever it wrote */
}

/* The steady (decode-time) fast-tier bytes: the most held after compression and after
 * every decode step; unlike fast_peak, no prefill transient. */
static void note_decode_peak(const kv_method *m, const kv_state *st, kvdb_result *r) {
    if (!m->memory) return;
    kv_mem mem;
    m->memory(st, &mem);
    if ((int64_t)mem.fast_bytes > r->fast_decode_peak) r->fast_decode_peak = (int64_t)mem.fast_bytes;
}

/* The rows m holds once position pos has joined (pos = n_pf - 1: right after compression)
 * within the budget under the run's decode rule (methods/budget_check.h); 0, or -1 with
 * the reason in why. */
static int within_budget(const mc_case *c, const kv_method *m, const kv_state *st, const kv_setup *s, int pos,
                         char *why, size_t len) {
    char err[400];
    if (!kv_budget_check(m, st, s, pos + 1 - c->n_pf, err, sizeof err)) return 0;
    if (pos < c->n_pf) snprintf(why, len, "over budget after compression: %s", err);
    else snprintf(why, len, "over budget after position %d: %s", pos, err);
    return -1;
}

int mc_feed_question(mc_case *c, const kv_method *m, kv_state *st, const kv_setup *s, float *logits,
                     kvdb_result *peak, char *why, size_t len) {
    for (int pos = c->n_pf; pos < c->n; pos++) {
        int id = c->ids[pos];
        kv_token info = {pos, (float)model_surprisal(c->model, logits, id), model_sent_end(c->model, id)};
        if (model_decode(c->model, m, st, id, pos, &info, logits))
            return snprintf(why, len, "a question token failed in decode"), -1;
        if (peak) note_decode_peak(m, st, peak);
        if (s && within_budget(c, m, st, s, pos, why, len)) return -1;
    }
    return 0;
}

/* One (method, budget) pair through run_once's phases: pair_begin (setup, ingest,
 * question), then generation steps (pair_next picks the token and asks for a decode step;
 * the step itself is the caller's: alone, or in a batch with other pairs), then pair_end
 * (memory, head statistics, events, output, score). */
typedef struct {
    const kv_method *m;
    mc_result *res;
    kv_state *st;
    float *logits;
    int32_t *gen;
    int count, steps, rss_rc;
    kv_token info;              /* the step pair_next asked for: token id at info.pos */
    int id;
    double t0;                  /* the generation loop's start */
    double t_check;             /* time spent checking the budget: not the method's decode time */
    kv_setup s;                 /* the pair's setup, for the budget check */
} pair_run;

/* Frees what the pair holds (its result stays). */
static void pair_drop(pair_run *p) {
    free(p->logits);
    free(p->gen);
    if (p->st) p->m->free(p->st);
    p->logits = NULL, p->gen = NULL, p->st = NULL;
}

/* Setup, ingest and the question tokens. 1: ready to generate; 0: the result is final
 * (refused, infeasible or an error; everything freed). */
static int pair_begin(mc_case *c, const kv_method *m, double budget, mc_result *res, pair_run *p) {
    const kv_model_config *cf = model_config(c->model);
    const int L = cf->n_layer, H = cf->n_head;
    memset(p, 0, sizeof *p);
    p->m = m;
    p->res = res;
    memset(res, 0, sizeof *res);
    kvdb_result *r = &res->r;
    r->method = m->name;
    r->budget = budget;
    r->score = r->rel_err = NAN;
    r->prefill_s = c->pf.seconds;
    r->n_layers = L;
    r->n_heads = H;
    kv_setup s = mc_setup(c, m, budget);
    p->s = s;
    r->params = s.params;
    r->budget_tokens = kv_budget(&s);

    char err[512] = "";
    p->rss_rc = rss_reset_peak();
    mc_ingested *pre = pre_find(c, m, budget);
    if (pre) {   /* built during the streamed prefill: taken over from there */
        p->st = pre->st;
        pre->st = NULL;
        pre->taken = 1;
        snprintf(err, sizeof err, "%s", pre->err);
    } else if (!c->pf.K) {   /* streamed, and this pair's cache was not built (or is used up) */
        set_reason(res, "error", "the streamed prefill holds no layers to ingest again%s%s", "", "");
        return 0;
    } else p->st = m->init(&s, err, sizeof err);
    if (!p->st) {
        set_reason(res, kv_init_refused(err) ? MC_REFUSED : "infeasible", "%s%s", *err ? err : "init refused the setup",
                   "");
        return 0;
    }
    p->logits = malloc((size_t)cf->n_vocab * sizeof *p->logits);
    p->gen = malloc((size_t)(c->max_new > 0 ? c->max_new : 1) * sizeof *p->gen);
    res->heads = calloc((size_t)L * H, sizeof *res->heads);
    if (!p->logits || !p->gen || !res->heads) {
        set_reason(res, "error", "out of memory%s%s", "", "");
        pair_drop(p);
        return 0;
    }

    double t0 = kb_now_s();
    int bad_layer = pre && pre->failed ? pre->layer : -1;   /* streamed: ingested already */
    for (int l = 0; !pre && l < L && bad_layer < 0; l++) {
        kv_prefill pl = prefill_layer(&c->pf, l);
        if (m->ingest(p->st, &pl, err, sizeof err)) bad_layer = l;
    }
    if (bad_layer >= 0) {
        /* A method that finds at ingest that the budget cannot hold what it must keep
         * (SeKV's persistent part, known only once the prompt is segmented) says
         * "infeasible: ..."; that is recorded as infeasible, anything else as an error. */
        int infeasible = !strncmp(err, "infeasible", 10);
        char where[32];
        snprintf(where, sizeof where, "ingest layer %d: ", bad_layer);
        set_reason(res, infeasible ? "infeasible" : "error", "%s%s", where, err);
        pair_drop(p);
        return 0;
    }
    r->compress_s = pre ? pre->compress_s : kb_now_s() - t0;
    note_decode_peak(m, p->st, r);
    if (within_budget(c, m, p->st, &p->s, c->n_pf - 1, err, sizeof err)) {
        set_reason(res, "error", "%s%s", err, "");
        pair_drop(p);
        return 0;
    }
    memcpy(p->logits, c->pf.last_logits, (size_t)cf->n_vocab * sizeof *p->logits);

    /* question_after: the question tokens join the compressed cache through decode steps. */
    t0 = kb_now_s();
    if (mc_feed_question(c, m, p->st, &p->s, p->logits, r, err, sizeof err)) {
        set_reason(res, "error", "%s%s", err, "");
        pair_drop(p);
        return 0;
    }
    res->question_s = kb_now_s() - t0;
    r->prefill_s += res->question_s;
    return 1;
}

/* The next generated token, greedy from the pair's logits: a stop token, a newline where
 * the task stops there, or max_new ends generation (0); else 1 with the decode step that
 * must follow in p->id, p->info. No stop before min_new_tokens tokens. */
static int pair_next(mc_case *c, pair_run *p) {
    const kv_model_config *cf = model_config(c->model);
    const kv_tokenizer *tok = model_tokenizer(c->model);
    if (p->count >= c->max_new) return 0;
    int id = p->count < c->tc->min_new_tokens ? mc_argmax_no_stop(tok, p->logits, cf->n_vocab, c->tc->stop_newline)
                                              : model_argmax(p->logits, cf->n_vocab);
    if (tok_is_stop(tok, id) || (c->tc->stop_newline && mc_piece_has_newline(tok, id))) return 0;
    p->gen[p->count++] = id;
    if (p->count == c->max_new) return 0;
    int pos = c->n + p->count - 1;
    p->id = id;
    p->info = (kv_token){pos, (float)model_surprisal(c->model, p->logits, id), model_sent_end(c->model, id)};
    return 1;
}

/* A decode step failed: the pair's result is an error; everything freed. */
static void pair_decode_failed(pair_run *p) {
    char where[32];
    snprintf(where, sizeof where, "%d", p->info.pos);
    set_reason(p->res, "error", "decode failed at position %s%s", where, "");
    pair_drop(p);
}

/* After a decode step: the most fast-tier bytes held, and the rows held within the budget
 * (the check's time is kept apart from the decode time). 0, or -1: the pair's result is an
 * error and everything is freed. */
static int pair_stepped(mc_case *c, pair_run *p) {
    note_decode_peak(p->m, p->st, &p->res->r);
    char err[512];
    double tc = kb_now_s();
    int over = within_budget(c, p->m, p->st, &p->s, p->info.pos, err, sizeof err);
    p->t_check += kb_now_s() - tc;
    if (over) {
        set_reason(p->res, "error", "%s%s", err, "");
        pair_drop(p);
        return -1;
    }
    p->steps++;
    return 0;
}

/* Generation is over (t1: when it ended): timing, memory, head statistics, events, text, score. */
static void pair_end(mc_case *c, pair_run *p, double t1) {
    const kv_model_config *cf = model_config(c->model);
    const int L = cf->n_layer, H = cf->n_head;
    const kv_method *m = p->m;
    mc_result *res = p->res;
    kvdb_result *r = &res->r;
    r->decode_s = t1 - p->t0 - p->t_check;
    r->decode_tokens = p->steps;
    r->tokens_per_s = p->steps && r->decode_s > 0 ? p->steps / r->decode_s : 0;
    res->n_generated = p->count;

    if (m->memory) m->memory(p->st, &r->mem);
    r->rss_peak = rss_peak_since(p->rss_rc);
    if (m->head_stats)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++) m->head_stats(p->st, l, h, &res->heads[(size_t)l * H + h]);
    r->heads = res->heads;
    copy_zoom(m, p->st, L, H, res);
    copy_chosen(m, p->st, res);

    res->output = ids_text(model_tokenizer(c->model), p->gen, p->count);
    if (!res->output) set_reason(res, "error", "out of memory%s%s", "", "");
    else {
        r->output = res->output;
        r->score = tc_score(c->tc, res->output) / 100.0;
        r->status = isfinite(r->score) ? "ok" : "error";
    }
    pair_drop(p);
}

static void run_once(mc_case *c, const kv_method *m, double budget, mc_result *res) {
    pair_run p;
    if (!pair_begin(c, m, budget, res, &p)) return;
    p.t0 = kb_now_s();
    while (pair_next(c, &p)) {
        if (model_decode(c->model, m, p.st, p.id, p.info.pos, &p.info, p.logits)) {
            pair_decode_failed(&p);
            return;
        }
        if (pair_stepped(c, &p)) return;
    }
    pair_end(c, &p, kb_now_s());
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of x[0..n) (sorts x) and its spread max - min */
static double median_spread(double *x, int n, double *spread) {
    qsort(x, n, sizeof *x, cmp_double);
    *spread = x[n - 1] - x[0];
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void mc_run_method(mc_case *c, const kv_method *m, double budget, mc_result *res) {
    run_once(c, m, budget, res);
    if (!res->r.status || strcmp(res->r.status, "ok")) return;
    int R = c->repeat > 1 ? c->repeat : 1;
    res->r.repeats = R;
    if (R > 1) {
        double *cs = malloc(sizeof(double) * R), *ds = malloc(sizeof(double) * R);
        int n = 0;
        if (cs && ds) {
            cs[n] = res->r.compress_s, ds[n++] = res->r.decode_s;
            for (int k = 1; k < R; k++) {   /* the same work again: only the times are kept */
                mc_result again;
                run_once(c, m, budget, &again);
                if (again.r.status && !strcmp(again.r.status, "ok"))
                    cs[n] = again.r.compress_s, ds[n++] = again.r.decode_s;
                mc_result_clear(&again);
            }
            res->r.repeats = n;
            res->r.compress_s = median_spread(cs, n, &res->r.compress_spread);
            res->r.decode_s = median_spread(ds, n, &res->r.decode_spread);
            int steps = res->r.decode_tokens;
            res->r.tokens_per_s = steps && res->r.decode_s > 0 ? steps / res->r.decode_s : 0;
        }
        free(cs), free(ds);
    }
}

/* The pairs one after another (--batch 0, --repeat > 1): each its own decode steps. */
static void run_pairs_serial(mc_case *c, const kv_method *const *methods, const double *budgets, int n,
                             mc_result *results) {
    for (int i = 0; i < n; i++) mc_run_method(c, methods[i], budgets[i], &results[i]);
}

void mc_run_pairs(mc_case *c, const kv_method *const *methods, const double *budgets, int n, mc_result *results) {
    if (c->one_at_a_time || c->repeat > 1 || n < 2) {
        run_pairs_serial(c, methods, budgets, n, results);
        return;
    }
    pair_run *p = calloc((size_t)n, sizeof *p);
    kv_decode_seq *seq = calloc((size_t)n, sizeof *seq);
    int *who = calloc((size_t)n, sizeof *who), *live = calloc((size_t)n, sizeof *live);
    if (!p || !seq || !who || !live) {
        free(p), free(seq), free(who), free(live);
        run_pairs_serial(c, methods, budgets, n, results);
        return;
    }
    /* setup, ingest and question per pair, in order */
    for (int i = 0; i < n; i++) live[i] = pair_begin(c, methods[i], budgets[i], &results[i], &p[i]);
    /* one greedy generation loop for all: every round, each live pair picks its token (or
     * stops and leaves), then the ones that go on take their decode step together */
    double t0 = kb_now_s();
    for (int i = 0; i < n; i++) p[i].t0 = t0;
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!live[i]) continue;
            if (pair_next(c, &p[i])) {
                seq[k] = (kv_decode_seq){p[i].m, p[i].st, p[i].id, p[i].info.pos, &p[i].info, p[i].logits, NULL, 0, 0};
                who[k++] = i;
            } else {
                pair_end(c, &p[i], kb_now_s());
                live[i] = 0;
            }
        }
        if (!k) break;
        model_decode_batch(c->model, seq, k);
        for (int j = 0; j < k; j++) {
            int i = who[j];
            results[i].attend_s += seq[j].attend_s;
            if (seq[j].rc) {
                pair_decode_failed(&p[i]);
                live[i] = 0;
                continue;
            }
            if (pair_stepped(c, &p[i])) live[i] = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        results[i].batched = 1;
        if (results[i].r.status && !strcmp(results[i].r.status, "ok")) results[i].r.repeats = 1;
    }
    free(p), free(seq), free(who), free(live);
}
