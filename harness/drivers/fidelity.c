/* Graded fidelity against FullKV: answer NLL, KL and top-1 agreement on FullKV's greedy
 * answer, per-layer attention error. See fidelity.h. Log-softmax, KL and norms in double;
 * FullKV's logits are kept as the model wrote them, so FullKV against itself gives 0. */
#include "fidelity.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fid_ref_free(fid_ref *ref) {
    free(ref->tok), free(ref->logp), free(ref->attn), free(ref->ans);
    memset(ref, 0, sizeof *ref);
}

/* log-sum-exp of logits[0..n) in double */
static double lse(const float *x, int n) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

/* KL(P || Q) of two logit vectors, in nats. */
static double kl_logits(const float *p, const float *q, int n) {
    double lp = lse(p, n), lq = lse(q, n), kl = 0;
    for (int i = 0; i < n; i++) {
        double a = p[i] - lp;
        kl += exp(a) * (a - (q[i] - lq));
    }
    return kl > 0 ? kl : 0;   /* rounding can leave -1e-17 */
}

/* A fresh cache for m: init, ingest every layer of the shared prefill, the question
 * tokens (question_after). logits: the prefill's, then after the question. NULL on any
 * failure (the main run has already recorded why). */
static kv_state *fresh_state(mc_case *c, const kv_method *m, double budget, float *logits) {
    if (!c->pf.K) return NULL;   /* a streamed prefill: no layers to ingest again */
    kv_setup s = mc_setup(c, m, budget);
    char err[512];
    kv_state *st = m->init(&s, err, sizeof err);
    if (!st) return NULL;
    for (int l = 0; l < model_config(c->model)->n_layer; l++) {
        kv_prefill p = prefill_layer(&c->pf, l);
        if (m->ingest(st, &p, err, sizeof err)) {
            m->free(st);
            return NULL;
        }
    }
    memcpy(logits, c->pf.last_logits, (size_t)model_config(c->model)->n_vocab * sizeof *logits);
    if (mc_feed_question(c, m, st, NULL, logits, NULL, err, sizeof err)) {
        m->free(st);
        return NULL;
    }
    return st;
}

static int feed(mc_case *c, const kv_method *m, kv_state *st, int id, int pos, float *logits, float *attn) {
    kv_token info = {pos, (float)model_surprisal(c->model, logits, id), model_sent_end(c->model, id)};
    return model_decode_tap(c->model, m, st, id, pos, &info, logits, attn);
}

int fid_ref_build(mc_case *c, int K, fid_ref *ref, char *err, size_t errlen) {
    const kv_model_config *cf = model_config(c->model);
    const kv_tokenizer *tok = model_tokenizer(c->model);
    const size_t V = cf->n_vocab, A = (size_t)cf->n_layer * cf->n_head * cf->head_dim;
    memset(ref, 0, sizeof *ref);
    if (K > c->max_new) K = c->max_new;   /* the caches were sized for max_new decode steps */
    /* the reference answer's tokens */
    const char *text = c->tc->reference ? c->tc->reference : c->tc->n_answers ? c->tc->answers[0] : NULL;
    if (text && *text) {
        int n = tok_encode(tok, text, strlen(text), 0, NULL, 0);
        if (n > 0) {
            ref->ans = malloc(sizeof *ref->ans * n);
            if (!ref->ans) goto oom;
            tok_encode(tok, text, strlen(text), 0, ref->ans, n);
            ref->n_ans = n;
            int cap = c->max_new < FID_MAX_ANSWER ? c->max_new : FID_MAX_ANSWER;
            if (ref->n_ans > cap) ref->n_ans = cap;
        }
    }
    if (K <= 0) return 0;
    ref->tok = malloc(sizeof *ref->tok * K);
    ref->logp = malloc(sizeof *ref->logp * V * K);
    ref->attn = malloc(sizeof *ref->attn * A * K);
    float *logits = malloc(sizeof *logits * V);
    if (!ref->tok || !ref->logp || !ref->attn || !logits) {
        free(logits);
        goto oom;
    }
    const kv_method *full = kv_method_reference();
    kv_state *st = full ? fresh_state(c, full, 1.0, logits) : NULL;
    if (!st) {
        free(logits);
        snprintf(err, errlen, "fidelity: FullKV cannot hold this case");
        fid_ref_free(ref);
        return -1;
    }
    for (int s = 0; s < K; s++) {
        int id = model_argmax(logits, (int)V);
        if (tok_is_stop(tok, id)) break;
        if (feed(c, full, st, id, c->n + s, logits, ref->attn + A * s)) {
            snprintf(err, errlen, "fidelity: FullKV decode failed at step %d", s);
            full->free(st);
            free(logits);
            fid_ref_free(ref);
            return -1;
        }
        ref->tok[s] = id;
        memcpy(ref->logp + V * s, logits, V * sizeof *logits);
        ref->k = s + 1;
    }
    full->free(st);
    free(logits);
    return 0;
oom:
    fid_ref_free(ref);
    snprintf(err, errlen, "fidelity: out of memory");
    return -1;
}

/* One result's fidelity measurement in progress: the KL / top-1 / layer-error pass on
 * FullKV's greedy tokens, then the NLL pass on the reference answer. */
typedef struct {
    const kv_method *m;
    double budget;
    mc_result *res;
    kv_state *st;
    float *logits, *attn;
    double *lerr, kl, nll;
    int *lcount, agree, s, failed;
} fid_pair;

static int pair_alloc(fid_pair *p, const kv_model_config *cf) {
    p->logits = malloc(sizeof *p->logits * cf->n_vocab);
    p->attn = malloc(sizeof *p->attn * (size_t)cf->n_layer * cf->n_head * cf->head_dim);
    p->lerr = calloc((size_t)cf->n_layer, sizeof *p->lerr);
    p->lcount = calloc((size_t)cf->n_layer, sizeof *p->lcount);
    return p->logits && p->attn && p->lerr && p->lcount ? 0 : -1;
}

static void pair_free(fid_pair *p) {
    if (p->st) p->m->free(p->st);
    free(p->logits), free(p->attn), free(p->lerr), free(p->lcount);
}

/* Step s of the KL pass done (p->logits, p->attn after feeding ref->tok[s]): its terms. */
static void kl_step(fid_pair *p, const fid_ref *ref, int V, int L, int W) {
    const float *full = ref->logp + (size_t)V * p->s;
    p->kl += kl_logits(full, p->logits, V);
    p->agree += model_argmax(p->logits, V) == model_argmax(full, V);
    const float *fa = ref->attn + (size_t)L * W * p->s;
    for (int l = 0; l < L; l++) {
        double num = 0, den = 0;
        for (int i = 0; i < W; i++) {
            double d = (double)p->attn[(size_t)l * W + i] - fa[(size_t)l * W + i];
            num += d * d, den += (double)fa[(size_t)l * W + i] * fa[(size_t)l * W + i];
        }
        if (den > 0 && isfinite(num)) p->lerr[l] += sqrt(num / den), p->lcount[l]++;
    }
    p->s++;
}

/* The KL pass over: the metrics when every step ran. */
static void kl_finish(fid_pair *p, const fid_ref *ref, int L) {
    kvdb_result *r = &p->res->r;
    if (p->s != ref->k) return;
    r->fid_steps = p->s;
    r->kl = p->kl / p->s;
    r->top1 = (double)p->agree / p->s;
    double sum = 0;
    int nl = 0;
    for (int l = 0; l < L; l++) {
        p->lerr[l] = p->lcount[l] ? p->lerr[l] / p->lcount[l] : NAN;
        if (p->lcount[l]) sum += p->lerr[l], nl++;
    }
    if (nl) {
        r->rel_err = sum / nl;
        p->res->layer_err = p->lerr, p->lerr = NULL;
        r->layer_err = p->res->layer_err;
    }
}

void fid_measure(mc_case *c, const kv_method *m, double budget, const fid_ref *ref, mc_result *res) {
    const kv_model_config *cf = model_config(c->model);
    const int V = cf->n_vocab, L = cf->n_layer, W = cf->n_head * cf->head_dim;
    kvdb_result *r = &res->r;
    fid_pair p = {.m = m, .budget = budget, .res = res};
    if (pair_alloc(&p, cf)) goto done;
    /* KL, top-1 and per-layer error on FullKV's greedy answer */
    p.st = ref->k > 0 ? fresh_state(c, m, budget, p.logits) : NULL;
    if (p.st) {
        while (p.s < ref->k && !feed(c, m, p.st, ref->tok[p.s], c->n + p.s, p.logits, p.attn)) kl_step(&p, ref, V, L, W);
        m->free(p.st);
        p.st = NULL;
        kl_finish(&p, ref, L);
    }
    /* NLL of the reference answer, teacher-forced */
    p.st = ref->n_ans > 0 ? fresh_state(c, m, budget, p.logits) : NULL;
    if (p.st) {
        double nll = 0;
        int i = 0;
        for (; i < ref->n_ans; i++) {
            if (i > 0 && feed(c, m, p.st, ref->ans[i - 1], c->n + i - 1, p.logits, NULL)) break;
            nll += model_surprisal(c->model, p.logits, ref->ans[i]);
        }
        m->free(p.st);
        p.st = NULL;
        if (i == ref->n_ans) r->ans_tokens = i, r->ans_nll = nll / i;
    }
done:
    pair_free(&p);
}

/* One teacher-forced step for every pair still in the pass (failed == 0): pair j feeds
 * tok(j) at pos, tapping the attention when tap is set; a pair whose step fails leaves
 * the pass. */
static void step_pairs(mc_case *c, fid_pair *p, int n, const int32_t *tok, int pos, int tap, kv_decode_seq *seq,
                       kv_token *info, int *who) {
    int k = 0;
    for (int j = 0; j < n; j++) {
        if (!p[j].st || p[j].failed) continue;
        info[k] = (kv_token){pos, (float)model_surprisal(c->model, p[j].logits, tok[j]), model_sent_end(c->model, tok[j])};
        seq[k] = (kv_decode_seq){p[j].m, p[j].st, tok[j], pos, &info[k], p[j].logits, tap ? p[j].attn : NULL, 0, 0};
        who[k++] = j;
    }
    if (!k) return;
    model_decode_batch(c->model, seq, k);
    for (int i = 0; i < k; i++) p[who[i]].failed |= seq[i].rc != 0;
}

static int is_ok(const mc_result *r) { return r->r.status && !strcmp(r->r.status, "ok"); }

void fid_measure_pairs(mc_case *c, const kv_method *const *methods, const double *budgets, const fid_ref *ref,
                       mc_result *res, int n) {
    const kv_model_config *cf = model_config(c->model);
    const int V = cf->n_vocab, L = cf->n_layer, W = cf->n_head * cf->head_dim;
    fid_pair *p = calloc((size_t)n, sizeof *p);
    kv_decode_seq *seq = calloc((size_t)n, sizeof *seq);
    kv_token *info = calloc((size_t)n, sizeof *info);
    int32_t *tok = calloc((size_t)n, sizeof *tok);
    int *who = calloc((size_t)n, sizeof *who), ok = p && seq && info && tok && who;
    for (int j = 0; ok && j < n; j++) {
        p[j] = (fid_pair){.m = methods[j], .budget = budgets[j], .res = &res[j]};
        ok = !pair_alloc(&p[j], cf);
    }
    if (!ok) {   /* out of memory here: one at a time */
        for (int j = 0; p && j < n; j++) pair_free(&p[j]);
        free(p), free(seq), free(info), free(tok), free(who);
        for (int j = 0; j < n; j++)
            if (is_ok(&res[j])) fid_measure(c, methods[j], budgets[j], ref, &res[j]);
        return;
    }
    /* KL, top-1 and per-layer error: every pair fed FullKV's greedy tokens, step by step together */
    for (int j = 0; ref->k > 0 && j < n; j++)
        if (is_ok(&res[j])) p[j].st = fresh_state(c, p[j].m, p[j].budget, p[j].logits);
    for (int s = 0; s < ref->k; s++) {
        for (int j = 0; j < n; j++) tok[j] = ref->tok[s];
        step_pairs(c, p, n, tok, c->n + s, 1, seq, info, who);
        for (int j = 0; j < n; j++)
            if (p[j].st && !p[j].failed) kl_step(&p[j], ref, V, L, W);
    }
    for (int j = 0; j < n; j++) {
        if (!p[j].st) continue;
        p[j].m->free(p[j].st);
        p[j].st = NULL;
        kl_finish(&p[j], ref, L);
        p[j].failed = 0;
    }
    /* NLL of the reference answer, teacher-forced, together */
    for (int j = 0; ref->n_ans > 0 && j < n; j++)
        if (is_ok(&res[j])) p[j].st = fresh_state(c, p[j].m, p[j].budget, p[j].logits);
    for (int i = 0; i < ref->n_ans; i++) {
        if (i > 0) {
            for (int j = 0; j < n; j++) tok[j] = ref->ans[i - 1];
            step_pairs(c, p, n, tok, c->n + i - 1, 0, seq, info, who);
        }
        for (int j = 0; j < n; j++)
            if (p[j].st && !p[j].failed) p[j].nll += model_surprisal(c->model, p[j].logits, ref->ans[i]);
    }
    for (int j = 0; j < n; j++) {
        if (p[j].st && !p[j].failed) res[j].r.ans_tokens = ref->n_ans, res[j].r.ans_nll = p[j].nll / ref->n_ans;
        pair_free(&p[j]);
    }
    free(p), free(seq), free(info), free(tok), free(who);
}
