/* Prefill: the whole prompt layer by layer. Within a layer, token chunks run the
 * projections as GEMMs on tiles of 64-512 rows of the weights, dequantized as they are used (no
 * f32 copy of the model), then causal attention for the chunk's queries over every key so
 * far (kb_get()->prefill), then Wo and the FFN. The final norm and the output matrix give
 * every position's logits, kept only as surprisal. model_prefill keeps every layer's K/V
 * and statistics; model_prefill_stream holds one layer at a time and hands each to its
 * consumer as soon as it is done. With the CUDA backend selected (make CUDA=1), the
 * forward pass runs on the device instead (cuda_model.cu). */
#include "engine.h"
#include "quant.h"
#include "../kernels/core.h"
#include "../kernels/host.h"
#ifdef KB_CUDA
#include "cuda_model.h"
#endif
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run fn(ctx, row) for row in [0, n), rows sliced over the worker threads. */
typedef void (*row_fn)(void *ctx, int row);
typedef struct { row_fn fn; void *ctx; int n, tasks; } rows_ctx;

static void rows_task(void *v, int t) {
    const rows_ctx *r = v;
    for (int i = (int)((long)r->n * t / r->tasks); i < (int)((long)r->n * (t + 1) / r->tasks); i++)
        r->fn(r->ctx, i);
}

static void parallel_rows(int n, row_fn fn, void *ctx) {
    rows_ctx r = {fn, ctx, n, kb_threads() * 2};
    if (r.tasks > n) r.tasks = n;
    if (r.tasks <= 1) {
        for (int i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    kb_parallel_for(r.tasks, rows_task, &r);
}

/* ---- one prefill ---- */

typedef struct {
    kv_model *m;
    const layer_weights *w;
    kv_prefill_out *out;
    int n, layer, c0;                 /* this chunk starts at token c0 */
    int slot;                         /* where layer's K/V and statistics go in out: layer, or 0
                                         when streaming (one layer held at a time) */
    float *X, *H, *Q, *Kt, *Vt, *G, *U, *logits;
    const float *rope;                /* [n][n_rot] cos/sin per position */
    const int32_t *ids;
} pf_ctx;

static void norm_attn_row(void *v, int i) {
    pf_ctx *c = v;
    int E = c->m->cfg.n_embd;
    rmsnorm(c->H + (size_t)i * E, c->X + (size_t)(c->c0 + i) * E, c->w->attn_norm, E, c->m->cfg.norm_eps);
}

static void norm_ffn_row(void *v, int i) {
    pf_ctx *c = v;
    int E = c->m->cfg.n_embd;
    rmsnorm(c->H + (size_t)i * E, c->X + (size_t)(c->c0 + i) * E, c->w->ffn_norm, E, c->m->cfg.norm_eps);
}

static void norm_out_row(void *v, int i) {
    pf_ctx *c = v;
    int E = c->m->cfg.n_embd;
    rmsnorm(c->H + (size_t)i * E, c->X + (size_t)(c->c0 + i) * E, c->m->output_norm, E, c->m->cfg.norm_eps);
}

static void add_bias(float *y, const float *b, int n) {
    if (b)
        for (int i = 0; i < n; i++) y[i] += b[i];
}

/* Biases, RoPE at the token's position, and K/V into the prefill's per-head layout. */
static void qkv_row(void *v, int i) {
    pf_ctx *c = v;
    const kv_model_config *cf = &c->m->cfg;
    int d = cf->head_dim, qd = cf->n_head * d, kvd = cf->n_head_kv * d, t = c->c0 + i;
    float *q = c->Q + (size_t)i * qd, *k = c->Kt + (size_t)i * kvd, *vv = c->Vt + (size_t)i * kvd;
    add_bias(q, c->w->bq, qd);
    add_bias(k, c->w->bk, kvd);
    add_bias(vv, c->w->bv, kvd);
    int qr = c->out->q_rows, first = c->n - qr;
    if (c->out->Q && t >= first)   /* kv_needs.queries: the pre-RoPE query rows */
        for (int h = 0; h < cf->n_head; h++)
            memcpy(c->out->Q + (((size_t)c->slot * cf->n_head + h) * qr + (t - first)) * d, q + (size_t)h * d,
                   d * sizeof(float));
    const float *cs = c->rope + (size_t)t * c->m->n_rot;
    rope_rotate(c->m, q, cf->n_head, cs);
    rope_rotate(c->m, k, cf->n_head_kv, cs);
    size_t n = (size_t)c->n, base = (size_t)c->slot * cf->n_head_kv * n * d;
    for (int j = 0; j < cf->n_head_kv; j++) {
        memcpy(c->out->K + base + (j * n + t) * d, k + j * d, d * sizeof(float));
        memcpy(c->out->V + base + (j * n + t) * d, vv + j * d, d * sizeof(float));
    }
}

static void silu_row(void *v, int i) {
    pf_ctx *c = v;
    int f = c->m->cfg.n_ff;
    silu_mul(c->G + (size_t)i * f, c->U + (size_t)i * f, f);
}

static void surprisal_row(void *v, int i) {
    pf_ctx *c = v;
    int t = c->c0 + i, nv = c->m->cfg.n_vocab;
    const float *row = c->logits + (size_t)i * nv;
    if (t + 1 < c->n) c->out->surprisal[t + 1] = (float)logits_surprisal(row, nv, c->ids[t + 1]);
    else memcpy(c->out->last_logits, row, nv * sizeof(float));
}

static void layer_chunk(pf_ctx *c, int cn, int win) {
    const kv_model_config *cf = &c->m->cfg;
    const layer_weights *w = c->w;
    int E = cf->n_embd, H = cf->n_head, d = cf->head_dim;
    size_t n = (size_t)c->n;
    float *X = c->X + (size_t)c->c0 * E;
    parallel_rows(cn, norm_attn_row, c);
    gemm_xwt(c->H, cn, &w->wq, 0.0f, c->Q);
    gemm_xwt(c->H, cn, &w->wk, 0.0f, c->Kt);
    gemm_xwt(c->H, cn, &w->wv, 0.0f, c->Vt);
    parallel_rows(cn, qkv_row, c);

    size_t kv_off = (size_t)c->slot * cf->n_head_kv * n * d;
    kb_prefill_args a = {
        .H = H, .Hkv = cf->n_head_kv, .d = d, .t0 = c->c0, .m = cn, .Q = c->Q,
        .K = c->out->K + kv_off, .V = c->out->V + kv_off, .kv_stride = n * d,
        .out = c->G,   /* the attention output borrows G, free until the FFN */
        .col_mass = c->out->col_mass ? c->out->col_mass + (size_t)c->slot * H * n : NULL,
        .mass_ld = n,
        .win_probs = win ? c->out->win_probs + (size_t)c->slot * H * win * n : NULL,
        .win = win, .win_start = c->n - win, .win_ld = n,
    };
    kb_get()->prefill(&a);
    gemm_xwt(c->G, cn, &w->wo, 1.0f, X);

    parallel_rows(cn, norm_ffn_row, c);
    gemm_xwt(c->H, cn, &w->gate, 0.0f, c->G);
    gemm_xwt(c->H, cn, &w->up, 0.0f, c->U);
    parallel_rows(cn, silu_row, c);
    gemm_xwt(c->G, cn, &w->down, 1.0f, X);
}

void prefill_out_free(kv_prefill_out *p) {
    free(p->K);
    free(p->V);
    free(p->col_mass);
    free(p->win_probs);
    free(p->Q);
    free(p->Wo);
    free(p->surprisal);
    free(p->sent_end);
    free(p->last_logits);
    memset(p, 0, sizeof *p);
}

kv_prefill prefill_layer(const kv_prefill_out *p, int layer) {
    size_t n = (size_t)p->n, d = (size_t)p->head_dim;
    kv_prefill v = {
        .layer = layer, .n = p->n,
        .K = p->K + (size_t)layer * p->n_head_kv * n * d,
        .V = p->V + (size_t)layer * p->n_head_kv * n * d,
        .kv_stride = n * d,
        .col_mass = p->col_mass ? p->col_mass + (size_t)layer * p->n_head * n : NULL,
        .win_probs = p->win_probs ? p->win_probs + (size_t)layer * p->n_head * p->win * n : NULL,
        .win = p->win,
        .Q = p->Q ? p->Q + (size_t)layer * p->n_head * p->q_rows * d : NULL,
        .q_stride = (size_t)p->q_rows * d,
        .q_rows = p->Q ? p->q_rows : 0,
        .rope = p->Q ? &p->rope : NULL,
        .Wo = p->Wo ? p->Wo + (size_t)layer * p->wo_rows * p->n_head * d : NULL,
        .embd = p->Wo ? p->wo_rows : 0,
        .surprisal = p->surprisal,
        .sent_end = p->sent_end,
    };
    return v;
}

#ifdef KB_CUDA
/* The layers of a prefill already held whole (the CUDA path) handed to on_layer one by
 * one as a streamed prefill would, then dropped. */
static void stream_held(kv_prefill_out *out, kv_layer_fn on_layer, void *ctx) {
    for (int l = 0; l < out->n_layer; l++) {
        kv_prefill p = prefill_layer(out, l);
        p.surprisal = NULL;
        on_layer(ctx, &p);
    }
    free(out->K), free(out->V), free(out->col_mass), free(out->win_probs), free(out->Q), free(out->Wo);
    out->K = out->V = out->col_mass = out->win_probs = out->Q = out->Wo = NULL;
}
#endif

int model_prefill(kv_model *m, const int32_t *ids, int n, const kv_needs *needs,
                  kv_prefill_out *out, char *err, size_t errlen) {
    return model_prefill_stream(m, ids, n, needs, NULL, NULL, out, err, errlen);
}

int model_prefill_stream(kv_model *m, const int32_t *ids, int n, const kv_needs *needs, kv_layer_fn on_layer,
                         void *ctx, kv_prefill_out *out, char *err, size_t errlen) {
    const kv_model_config *cf = &m->cfg;
    memset(out, 0, sizeof *out);
    if (n < 1) {
        snprintf(err, errlen, "empty prompt");
        return -1;
    }
    if (n > cf->n_ctx_train) {
        snprintf(err, errlen, "prompt of %d tokens is beyond the model's context of %d%s", n, cf->n_ctx_train,
                 model_ctx_note(cf));
        return -1;
    }
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= cf->n_vocab) {
            snprintf(err, errlen, "token id %d at position %d is outside the vocabulary of %d",
                     ids[t], t, cf->n_vocab);
            return -1;
        }
#ifdef KB_CUDA
    if (cuda_model_selected()) {
        if (cuda_model_prefill(m, ids, n, needs, out, err, errlen)) return -1;
        if (on_layer) stream_held(out, on_layer, ctx);
        return 0;
    }
#endif
    if (m->host_weights_gone) {
        snprintf(err, errlen, "%s: the host copy of the weights was freed after the upload to the device", m->gf.path);
        return -1;
    }
    double t_start = kb_now_s();
    openblas_set_num_threads(1);   /* GEMMs are split over kb_parallel_for instead */

    int L = cf->n_layer, H = cf->n_head, E = cf->n_embd, d = cf->head_dim, nv = cf->n_vocab;
    int qd = H * d, kvd = cf->n_head_kv * d, C = m->prefill_chunk < n ? m->prefill_chunk : n;
    int CL = C < 256 ? C : 256;   /* rows of logits at a time: 256 x 49152 floats = 48 MB */
    int win = needs && needs->window > 0 ? (needs->window < n ? needs->window : n) : 0;
    int held = on_layer ? 1 : L;   /* layers whose K/V and statistics are held at once */
    size_t kv_n = (size_t)held * cf->n_head_kv * n * d;
    out->n = n;
    out->n_layer = L;
    out->n_head = H;
    out->n_head_kv = cf->n_head_kv;
    out->head_dim = d;
    out->win = win;
    out->K = malloc(kv_n * sizeof(float));
    out->V = malloc(kv_n * sizeof(float));
    out->surprisal = malloc((size_t)n * sizeof(float));
    out->sent_end = malloc((size_t)n);
    out->last_logits = malloc((size_t)nv * sizeof(float));
    if (needs && needs->col_mass) out->col_mass = calloc((size_t)held * H * n, sizeof(float));
    if (win) out->win_probs = calloc((size_t)held * H * win * n, sizeof(float));
    out->rope = (kv_rope){.n_rot = m->n_rot, .neox = m->rope_neox, .inv_freq = m->rope_inv_freq,
                          .mscale = m->rope_mscale};
    out->wo_rows = E;
    if (needs && needs->queries > 0) {
        out->q_rows = needs->queries < n ? needs->queries : n;
        out->Q = malloc((size_t)held * H * out->q_rows * d * sizeof(float));
    }
    if (needs && needs->wo) out->Wo = malloc((size_t)held * E * qd * sizeof(float));
    int gw = cf->n_ff > qd ? cf->n_ff : qd;   /* G also holds the attention output */
    size_t layers_fl = (size_t)n * E + (size_t)C * (E + qd + 2 * kvd + gw + cf->n_ff);
    size_t logits_fl = (size_t)n * E + (size_t)CL * (E + nv);
    float *buf = malloc((layers_fl > logits_fl ? layers_fl : logits_fl) * sizeof(float));
    float *rope = malloc((size_t)n * m->n_rot * sizeof(float));
    if (!out->K || !out->V || !out->surprisal || !out->sent_end || !out->last_logits || !buf || !rope ||
        (needs && needs->col_mass && !out->col_mass) || (win && !out->win_probs) ||
        (out->q_rows && !out->Q) || (needs && needs->wo && !out->Wo)) {
        free(buf);
        free(rope);
        prefill_out_free(out);
        snprintf(err, errlen, "out of memory for a prefill of %d tokens", n);
        return -1;
    }
    pf_ctx c = {.m = m, .out = out, .n = n, .rope = rope, .ids = ids};
    c.X = buf;
    c.H = c.X + (size_t)n * E;
    c.Q = c.H + (size_t)C * E;
    c.Kt = c.Q + (size_t)C * qd;
    c.Vt = c.Kt + (size_t)C * kvd;
    c.G = c.Vt + (size_t)C * kvd;
    c.U = c.G + (size_t)C * gw;
    for (int t = 0; t < n; t++) {
        rope_cossin(m, t, rope + (size_t)t * m->n_rot);
        dequant_row(m->embd.t->type, (const uint8_t *)m->embd.t->data + (size_t)ids[t] * m->embd.row_bytes,
                    c.X + (size_t)t * E, E);
        out->sent_end[t] = m->sent_end[ids[t]];
    }
    for (int l = 0; l < L; l++) {
        c.layer = l;
        c.slot = on_layer ? 0 : l;
        c.w = &m->layers[l];
        if (on_layer && l > 0) {   /* the column mass accumulates over chunks: start from 0 */
            if (out->col_mass) memset(out->col_mass, 0, (size_t)H * n * sizeof(float));
            if (win) memset(out->win_probs, 0, (size_t)H * win * n * sizeof(float));
        }
        if (out->Wo) {   /* kv_needs.wo: the layer's output projection as f32 */
            const weight *wo = &c.w->wo;
            for (int r = 0; r < wo->rows; r++)
                dequant_row(wo->t->type, (const uint8_t *)wo->t->data + (size_t)r * wo->row_bytes,
                            out->Wo + ((size_t)c.slot * E + r) * qd, qd);
        }
        for (c.c0 = 0; c.c0 < n; c.c0 += C) layer_chunk(&c, n - c.c0 < C ? n - c.c0 : C, win);
        if (on_layer) {   /* the layer to its consumers; its buffers are the next layer's */
            kv_prefill p = prefill_layer(out, 0);
            p.layer = l;
            p.surprisal = NULL;
            on_layer(ctx, &p);
        }
    }
    if (on_layer) {
        free(out->K), free(out->V), free(out->col_mass), free(out->win_probs), free(out->Q), free(out->Wo);
        out->K = out->V = out->col_mass = out->win_probs = out->Q = out->Wo = NULL;
    }
    /* every position's logits, CL rows at a time, into surprisal of the next token; without
     * the surprisal only the last chunk, the same GEMM call as with it (the same last logits) */
    c.logits = c.H + (size_t)CL * E;
    out->surprisal[0] = 0.0f;
    int first = m->prefill_no_surprisal ? (n - 1) / CL * CL : 0;
    for (int t = 1; t <= first; t++) out->surprisal[t] = NAN;
    for (c.c0 = first; c.c0 < n; c.c0 += CL) {
        int cn = n - c.c0 < CL ? n - c.c0 : CL;
        parallel_rows(cn, norm_out_row, &c);
        gemm_xwt(c.H, cn, &m->output, 0.0f, c.logits);
        parallel_rows(cn, surprisal_row, &c);
    }
    free(buf);
    free(rope);
    out->seconds = kb_now_s() - t_start;
    return 0;
}
