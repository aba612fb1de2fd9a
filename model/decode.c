/* One token through every layer, reading the quantized weights row by row
 * (mat-vecs split across threads); attention is the caller's: a method, or the
 * plain loop of generate.c. With the CUDA backend selected, model_decode runs the dense
 * part on the device (cuda_model.cu); engine_forward_token stays on the CPU. */
#include "engine.h"
#include "quant.h"
#include "quant_q8.h"
#ifdef KB_CUDA
#include "cuda_model.h"
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The per-token buffers: floats first, then the 8-bit blocks of the largest mat-vec input. */
static size_t scratch_floats(const kv_model_config *c, int n_rot) {
    size_t qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_head_kv * c->head_dim;
    return 2 * (size_t)c->n_embd + 2 * qd + 2 * kvd + 2 * (size_t)c->n_ff + (size_t)n_rot + 16;
}
static size_t scratch_q8_bytes(const kv_model_config *c) {
    size_t qd = (size_t)c->n_head * c->head_dim, n = (size_t)c->n_embd;
    n = qd > n ? qd : n;
    n = (size_t)c->n_ff > n ? (size_t)c->n_ff : n;
    return quant_q8_act_bytes((int64_t)n);
}

/* x quantized into xq for weights of type, or NULL: f32 activations asked for, a type
 * without an int8 path, or a length that is not whole blocks of the type's layout. */
static const void *quantize_for(const kv_model *m, const float *x, int n, int type, void *xq) {
    int block = quant_q8_act_block(type);
    if (!m->q8_activations || !block || n % block) return NULL;
    return quant_q8_act(type, x, n, xq);
}

/* xq, quantized for weights of type qtype, for a job on weights of type: NULL (f32 for
 * that job) where the two read different block layouts (Q4_K beside Q5_0, say). */
static const void *shared_for(const void *xq, int qtype, int type) {
    return xq && quant_q8_act_block(type) == quant_q8_act_block(qtype) ? xq : NULL;
}

void engine_scratch_free(kv_model *m) {
    free(m->decode_scratch);
    m->decode_scratch = NULL;
    free(m->batch_scratch);
    m->batch_scratch = NULL;
    m->batch_scratch_bytes = 0;
}

size_t engine_scratch_floats(const kv_model *m) { return scratch_floats(&m->cfg, m->n_rot); }
size_t engine_scratch_q8_bytes(const kv_model *m) { return scratch_q8_bytes(&m->cfg); }
const void *engine_quantize_for(const kv_model *m, const float *x, int n, int type, void *xq) {
    return quantize_for(m, x, n, type, xq);
}
const void *engine_shared_for(const void *xq, int qtype, int type) { return shared_for(xq, qtype, type); }

int engine_forward_token(kv_model *m, int id, int pos, engine_attn_fn attn, void *ctx,
                         float *logits) {
    const kv_model_config *c = &m->cfg;
    if (id < 0 || id >= c->n_vocab || pos < 0 || pos >= c->n_ctx_train) return -1;
    if (m->host_weights_gone) {
        fprintf(stderr, "%s: the host copy of the weights was freed after the upload to the device\n", m->gf.path);
        return -1;
    }
    int E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    size_t nfl = scratch_floats(c, m->n_rot), bytes = nfl * sizeof(float) + scratch_q8_bytes(c);
    /* one allocation per model, reused by every token; a second caller while it is in
     * use (another thread, or a method decoding inside attn) gets its own */
    int mine = !__atomic_exchange_n(&m->decode_busy, 1, __ATOMIC_ACQUIRE);
    float *buf = mine ? m->decode_scratch : NULL;
    if (!buf) {
        buf = malloc(bytes);
        if (!buf) {
            if (mine) __atomic_store_n(&m->decode_busy, 0, __ATOMIC_RELEASE);
            return -1;
        }
        if (mine) m->decode_scratch = buf;
    }
    float *x = buf, *h = x + E, *q = h + E, *att = q + qd, *k = att + qd, *v = k + kvd, *g = v + kvd,
          *u = g + c->n_ff, *cs = u + c->n_ff;
    void *xq = buf + nfl;   /* nfl keeps it 4-byte aligned, all the blocks need */

    dequant_row(m->embd.t->type, (const uint8_t *)m->embd.t->data + (size_t)id * m->embd.row_bytes, x, E);
    rope_cossin(m, pos, cs);
    for (int l = 0; l < c->n_layer; l++) {
        const layer_weights *w = &m->layers[l];
        /* Q, K and V in one parallel pass over one quantized input (quantized for wq's type;
         * K or V of a type with another block layout falls back to f32 for its job) */
        rmsnorm(h, x, w->attn_norm, E, c->norm_eps);
        int tq = w->wq.t->type;
        const void *hq = quantize_for(m, h, E, tq, xq);
        matvec_job qkv[3] = {{&w->wq, h, q, w->bq, hq, 0},
                             {&w->wk, h, k, w->bk, shared_for(hq, tq, w->wk.t->type), 0},
                             {&w->wv, h, v, w->bv, shared_for(hq, tq, w->wv.t->type), 0}};
        matvec_many(qkv, 3);
        rope_rotate(m, q, c->n_head, cs);
        rope_rotate(m, k, c->n_head_kv, cs);
        attn(ctx, l, q, k, v, att);
        matvec_job wo = {&w->wo, att, x, NULL, quantize_for(m, att, qd, w->wo.t->type, xq), 1};   /* x += Wo att */
        matvec_many(&wo, 1);

        rmsnorm(h, x, w->ffn_norm, E, c->norm_eps);
        hq = quantize_for(m, h, E, w->gate.t->type, xq);
        matvec_job gu[2] = {{&w->gate, h, g, NULL, hq, 0},
                            {&w->up, h, u, NULL, shared_for(hq, w->gate.t->type, w->up.t->type), 0}};
        matvec_glu(gu);   /* g = silu(gate h) * (up h) */
        matvec_job down = {&w->down, g, x, NULL, quantize_for(m, g, c->n_ff, w->down.t->type, xq), 1};   /* x += W g */
        matvec_many(&down, 1);
    }
    rmsnorm(h, x, m->output_norm, E, c->norm_eps);
    matvec_job out = {&m->output, h, logits, NULL, quantize_for(m, h, E, m->output.t->type, xq), 0};
    matvec_many(&out, 1);
    if (mine) __atomic_store_n(&m->decode_busy, 0, __ATOMIC_RELEASE);
    else free(buf);
    return 0;
}

typedef struct {
    const kv_method *meth;
    kv_state *st;
    const kv_token *info;
    float *tap;      /* [n_layer][width] or NULL */
    int width;
} method_attn_ctx;

static void method_attn(void *vctx, int layer, const float *q, const float *k, const float *v,
                        float *out) {
    method_attn_ctx *c = vctx;
    c->meth->append(c->st, layer, k, v, c->info);
    c->meth->attend(c->st, layer, q, out);
    if (c->tap) memcpy(c->tap + (size_t)layer * c->width, out, (size_t)c->width * sizeof *out);
}

int model_decode(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos,
                 const kv_token *info, float *logits) {
#ifdef KB_CUDA
    if (cuda_model_selected()) return cuda_model_decode(m, meth, st, id, pos, info, logits);
#endif
    kv_token deflt = {pos, 0.0f, 0};
    method_attn_ctx c = {meth, st, info ? info : &deflt, NULL, 0};
    return engine_forward_token(m, id, pos, method_attn, &c, logits);
}

int model_decode_tap(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos,
                     const kv_token *info, float *logits, float *attn) {
    const kv_model_config *cf = &m->cfg;
    int width = cf->n_head * cf->head_dim;
#ifdef KB_CUDA
    if (cuda_model_selected()) {
        for (size_t i = 0; attn && i < (size_t)cf->n_layer * width; i++) attn[i] = NAN;
        return cuda_model_decode(m, meth, st, id, pos, info, logits);
    }
#endif
    kv_token deflt = {pos, 0.0f, 0};
    method_attn_ctx c = {meth, st, info ? info : &deflt, attn, width};
    return engine_forward_token(m, id, pos, method_attn, &c, logits);
}
