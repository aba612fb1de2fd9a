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

void fid_measure(mc_case *c, const kv_method *m, double budget, const fid_ref *ref, mc_result *res) {
    const kv_model_config *cf = model_config(c->model);
    const int V = cf->n_vocab, L = cf->n_layer, W = cf->n_head * cf->head_dim;
    kvdb_result *r = &res->r;
    float *logits = malloc(sizeof *logits * V), *attn = malloc(sizeof *attn * (size_t)L * W);
    double *lerr = calloc((size_t)L, sizeof *lerr);
    int *lcount = calloc((size_t)L, sizeof *lcount);
    if (!logits || !attn || !lerr || !lcount) goto done;
    /* KL, top-1 and per-layer error on FullKV's greedy answer */
    kv_state *st = ref->k > 0 ? fresh_state(c, m, budget, logits) : NULL;
    if (st) {
        double kl = 0;
        int agree = 0, s = 0;
        for (; s < ref->k; s++) {
            if (feed(c, m, st, ref->tok[s], c->n + s, logits, attn)) break;
            const float *full = ref->logp + (size_t)V * s;
            kl += kl_logits(full, logits, V);
            agree += model_argmax(logits, V) == model_argmax(full, V);
            const float *fa = ref->attn + (size_t)L * W * s;
            for (int l = 0; l < L; l++) {
                double num = 0, den = 0;
                for (int i = 0; i < W; i++) {
                    double d = (double)attn[(size_t)l * W + i] - fa[(size_t)l * W + i];
                    num += d * d, den += (double)fa[(size_t)l * W + i] * fa[(size_t)l * W + i];
                }
                if (den > 0 && isfinite(num)) lerr[l] += sqrt(num / den), lcount[l]++;
            }
        }
        m->free(st);
        if (s == ref->k) {
            r->fid_steps = s;
            r->kl = kl / s;
            r->top1 = (double)agree / s;
            double sum = 0;
            int nl = 0;
            for (int l = 0; l < L; l++) {
                lerr[l] = lcount[l] ? lerr[l] / lcount[l] : NAN;
                if (lcount[l]) sum += lerr[l], nl++;
            }
            if (nl) {
                r->rel_err = sum / nl;
                res->layer_err = lerr, lerr = NULL;
                r->layer_err = res->layer_err;
            }
        }
    }
    /* NLL of the reference answer, teacher-forced */
    st = ref->n_ans > 0 ? fresh_state(c, m, budget, logits) : NULL;
    if (st) {
        double nll = 0;
        int i = 0;
        for (; i < ref->n_ans; i++) {
            if (i > 0 && feed(c, m, st, ref->ans[i - 1], c->n + i - 1, logits, NULL)) break;
            nll += model_surprisal(c->model, logits, ref->ans[i]);
        }
        m->free(st);
        if (i == ref->n_ans) r->ans_tokens = i, r->ans_nll = nll / i;
    }
done:
    free(logits), free(attn), free(lerr), free(lcount);
}
