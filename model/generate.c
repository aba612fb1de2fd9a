/* Greedy generation two ways: through a method (prefill, ingest, append/attend per
 * step), and plainly, with the engine's own full cache and attention loop, which is
 * the yardstick FullKV-through-the-method-interface must match token for token. */
#include "engine.h"
#include "../kernels/host.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plain: the engine's own cache, one straightforward softmax per head ---- */

typedef struct {
    const kv_model_config *c;
    float *K, *V;          /* [L][Hkv][cap][d] */
    int cap, pos;
    float *scores;         /* [cap] */
} plain_cache;

static void plain_attn(void *vctx, int layer, const float *q, const float *k, const float *v,
                       float *out) {
    plain_cache *pc = vctx;
    int d = pc->c->head_dim, Hkv = pc->c->n_head_kv, g = pc->c->n_head / Hkv, n = pc->pos + 1;
    size_t lay = (size_t)layer * Hkv * pc->cap * d;
    for (int j = 0; j < Hkv; j++) {
        memcpy(pc->K + lay + ((size_t)j * pc->cap + pc->pos) * d, k + j * d, d * sizeof(float));
        memcpy(pc->V + lay + ((size_t)j * pc->cap + pc->pos) * d, v + j * d, d * sizeof(float));
    }
    float scale = 1.0f / sqrtf((float)d);
    for (int h = 0; h < pc->c->n_head; h++) {
        const float *qh = q + h * d;
        const float *Kh = pc->K + lay + (size_t)(h / g) * pc->cap * d, *Vh = pc->V + lay + (size_t)(h / g) * pc->cap * d;
        float mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++) {
            float s = 0;
            for (int i = 0; i < d; i++) s += qh[i] * Kh[(size_t)t * d + i];
            pc->scores[t] = s * scale;
            if (pc->scores[t] > mx) mx = pc->scores[t];
        }
        for (int t = 0; t < n; t++) sum += pc->scores[t] = expf(pc->scores[t] - mx);
        float *o = out + h * d;
        memset(o, 0, d * sizeof(float));
        for (int t = 0; t < n; t++) {
            float p = pc->scores[t] / sum;
            for (int i = 0; i < d; i++) o[i] += p * Vh[(size_t)t * d + i];
        }
    }
}

/* The streamed prefill's layer into the plain cache. */
static void plain_layer(void *vctx, const kv_prefill *p) {
    plain_cache *pc = vctx;
    int d = pc->c->head_dim, Hkv = pc->c->n_head_kv;
    for (int j = 0; j < Hkv; j++) {
        size_t dst = ((size_t)p->layer * Hkv + j) * pc->cap * d;
        memcpy(pc->K + dst, p->K + j * p->kv_stride, (size_t)p->n * d * sizeof(float));
        memcpy(pc->V + dst, p->V + j * p->kv_stride, (size_t)p->n * d * sizeof(float));
    }
}

/* model_prefill_stream (model_prefill when on_layer is NULL) computing the prompt's
 * surprisal only if `surprisal`; the model's own setting is restored after. */
static int prefill_with(kv_model *m, int surprisal, const int32_t *ids, int n, const kv_needs *needs,
                        kv_layer_fn on_layer, void *ctx, kv_prefill_out *out, char *err, size_t errlen) {
    int was = m->prefill_no_surprisal;
    m->prefill_no_surprisal = !surprisal;
    int rc = model_prefill_stream(m, ids, n, needs, on_layer, ctx, out, err, errlen);
    m->prefill_no_surprisal = was;
    return rc;
}

int model_generate_plain(kv_model *m, const int32_t *prompt, int n, int max_new,
                         int32_t *out, kv_gen_stats *stats, char *err, size_t errlen) {
    const kv_model_config *c = &m->cfg;
    kv_gen_stats st0;
    if (!stats) stats = &st0;
    memset(stats, 0, sizeof *stats);
    kv_needs none = {0};
    kv_prefill_out pf;
    memset(&pf, 0, sizeof pf);
    if (n < 1 || n > c->n_ctx_train) return model_prefill(m, prompt, n, &none, &pf, err, errlen) ? -1 : -1;
    if (max_new > c->n_ctx_train - n) max_new = c->n_ctx_train - n;
    plain_cache pc = {.c = c, .cap = n + max_new, .pos = n};
    size_t per_layer = (size_t)c->n_head_kv * pc.cap * c->head_dim;
    pc.K = malloc(per_layer * c->n_layer * sizeof(float));
    pc.V = malloc(per_layer * c->n_layer * sizeof(float));
    pc.scores = malloc((size_t)pc.cap * sizeof(float));
    float *logits = malloc((size_t)c->n_vocab * sizeof(float));
    int count = -1;
    if (!pc.K || !pc.V || !pc.scores || !logits) {
        snprintf(err, errlen, "out of memory for a plain cache of %d tokens", pc.cap);
        goto done;
    }
    /* each layer's K/V straight into the cache as the prefill computes it */
    if (prefill_with(m, 0, prompt, n, &none, plain_layer, &pc, &pf, err, errlen)) goto done;
    stats->n_prompt = n;
    stats->prefill_s = pf.seconds;
    memcpy(logits, pf.last_logits, (size_t)c->n_vocab * sizeof(float));
    double t0 = kb_now_s();
    count = 0;
    while (count < max_new) {
        int id = model_argmax(logits, c->n_vocab);
        if (tok_is_stop(m->tok, id)) break;
        out[count++] = id;
        if (count == max_new) break;
        pc.pos = n + count - 1;
        if (engine_forward_token(m, id, pc.pos, plain_attn, &pc, logits)) {
            snprintf(err, errlen, "decode failed at position %d", pc.pos);
            count = -1;
            break;
        }
        stats->n_steps++;
    }
    stats->n_new = count > 0 ? count : 0;
    stats->decode_s = kb_now_s() - t0;
done:
    free(pc.K);
    free(pc.V);
    free(pc.scores);
    free(logits);
    prefill_out_free(&pf);
    return count;
}

/* ---- through a method ---- */

/* The layer-streaming prefill's consumer: one method, ingesting each layer at once. */
typedef struct {
    const kv_method *meth;
    kv_state *st;
    int failed;
    char err[256];
} gen_stream;

static void gen_layer(void *ctx, const kv_prefill *p) {
    gen_stream *g = ctx;
    if (!g->failed && g->meth->ingest(g->st, p, g->err, sizeof g->err)) g->failed = 1;
}

int model_generate_method(kv_model *m, const kv_method *meth, const kv_setup *setup,
                          const int32_t *prompt, int n, int max_new, int32_t *out,
                          void (*on_token)(void *ctx, int id), void *ctx,
                          kv_gen_stats *stats, char *err, size_t errlen) {
    const kv_model_config *c = &m->cfg;
    kv_gen_stats st0;
    if (!stats) stats = &st0;
    memset(stats, 0, sizeof *stats);
    if (n >= c->n_ctx_train) {
        snprintf(err, errlen, "prompt of %d tokens is beyond the model's context of %d%s", n, c->n_ctx_train,
                 model_ctx_note(c));
        return -1;
    }
    if (max_new > c->n_ctx_train - n) max_new = c->n_ctx_train - n;
    kv_setup s = *setup;
    s.n_layers = c->n_layer;
    s.n_heads = c->n_head;
    s.n_kv_heads = c->n_head_kv;
    s.head_dim = c->head_dim;
    s.n_prompt = n;
    s.max_decode = max_new;
    if (!s.model_hash) s.model_hash = m->content_hash;   /* the model file's identity */
    char merr[256];
    kv_state *st = meth->init(&s, merr, sizeof merr);
    if (!st) {
        snprintf(err, errlen, "%s: %s", meth->name, merr);
        return -1;
    }
    kv_needs needs = {0};
    if (meth->needs) meth->needs(&s, &needs);   /* meth may be a bare table (not registered) */
    kv_prefill_out pf;
    float *logits = malloc((size_t)c->n_vocab * sizeof(float));
    int count = -1;
    if (!logits) {
        snprintf(err, errlen, "out of memory");
        meth->free(st);
        return -1;
    }
    gen_stream gs = {meth, st, 0, ""};
    /* every layer ingested as it is computed, unless the method reads the surprisal at
     * ingest: then the whole prefill first */
    int streamed = !meth->needs_surprisal;
    if (prefill_with(m, meth->needs_surprisal, prompt, n, &needs, streamed ? gen_layer : NULL, streamed ? &gs : NULL,
                     &pf, err, errlen))
        goto done_nopf;
    stats->n_prompt = n;
    stats->prefill_s = pf.seconds;   /* streamed: the ingest is inside it */
    double t0 = kb_now_s();
    for (int l = 0; !streamed && l < c->n_layer && !gs.failed; l++) {
        kv_prefill p = prefill_layer(&pf, l);
        if (meth->ingest(st, &p, gs.err, sizeof gs.err)) gs.failed = 1;
    }
    if (gs.failed) {
        snprintf(err, errlen, "%s: %s", meth->name, gs.err);
        goto done;
    }
    stats->prefill_s += kb_now_s() - t0;
    memcpy(logits, pf.last_logits, (size_t)c->n_vocab * sizeof(float));
    t0 = kb_now_s();
    count = 0;
    while (count < max_new) {
        int id = model_argmax(logits, c->n_vocab);
        if (tok_is_stop(m->tok, id)) break;
        out[count++] = id;
        if (on_token) on_token(ctx, id);
        if (count == max_new) break;
        kv_token info = {n + count - 1, (float)model_surprisal(m, logits, id), model_sent_end(m, id)};
        if (model_decode(m, meth, st, id, info.pos, &info, logits)) {
            snprintf(err, errlen, "decode failed at position %d", info.pos);
            count = -1;
            break;
        }
        stats->n_steps++;
    }
    stats->n_new = count > 0 ? count : 0;
    stats->decode_s = kb_now_s() - t0;
    if (meth->memory) meth->memory(st, &stats->mem);
done:
    prefill_out_free(&pf);
done_nopf:
    free(logits);
    meth->free(st);
    return count;
}
