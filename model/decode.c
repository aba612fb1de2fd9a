/* One token through every layer, reading the quantized weights row by row
 * (mat-vecs split across threads); attention is the caller's: a method, or the
 * plain loop of generate.c. With the CUDA backend selected, model_decode runs the dense
 * part on the device (cuda_model.cu); engine_forward_token stays on the CPU. */
#include "engine.h"
#include "quant.h"
#ifdef KB_CUDA
#include "cuda_model.h"
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int engine_forward_token(kv_model *m, int id, int pos, engine_attn_fn attn, void *ctx,
                         float *logits) {
    const kv_model_config *c = &m->cfg;
    if (id < 0 || id >= c->n_vocab || pos < 0 || pos >= c->n_ctx_train) return -1;
    if (m->host_weights_gone) {
        fprintf(stderr, "%s: the host copy of the weights was freed after the upload to the device\n", m->gf.path);
        return -1;
    }
    int E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    size_t nfl = (size_t)3 * E + 2 * (size_t)qd + 2 * (size_t)kvd + 2 * (size_t)c->n_ff + m->n_rot;
    float *buf = malloc(nfl * sizeof(float));
    if (!buf) return -1;
    float *x = buf, *h = x + E, *o = h + E, *q = o + E, *att = q + qd, *k = att + qd,
          *v = k + kvd, *g = v + kvd, *u = g + c->n_ff, *cs = u + c->n_ff;

    dequant_row(m->embd.t->type, (const uint8_t *)m->embd.t->data + (size_t)id * m->embd.row_bytes, x, E);
    rope_cossin(m, pos, cs);
    for (int l = 0; l < c->n_layer; l++) {
        const layer_weights *w = &m->layers[l];
        rmsnorm(h, x, w->attn_norm, E, c->norm_eps);
        matvec_job qkv[3] = {{&w->wq, h, q, w->bq}, {&w->wk, h, k, w->bk}, {&w->wv, h, v, w->bv}};
        matvec_many(qkv, 3);
        rope_rotate(m, q, c->n_head, cs);
        rope_rotate(m, k, c->n_head_kv, cs);
        attn(ctx, l, q, k, v, att);
        matvec_job wo = {&w->wo, att, o, NULL};
        matvec_many(&wo, 1);
        for (int i = 0; i < E; i++) x[i] += o[i];

        rmsnorm(h, x, w->ffn_norm, E, c->norm_eps);
        matvec_job gu[2] = {{&w->gate, h, g, NULL}, {&w->up, h, u, NULL}};
        matvec_many(gu, 2);
        silu_mul(g, u, c->n_ff);
        matvec_job down = {&w->down, g, o, NULL};
        matvec_many(&down, 1);
        for (int i = 0; i < E; i++) x[i] += o[i];
    }
    rmsnorm(h, x, m->output_norm, E, c->norm_eps);
    matvec_job out = {&m->output, h, logits, NULL};
    matvec_many(&out, 1);
    free(buf);
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
