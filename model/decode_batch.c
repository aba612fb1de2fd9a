/* Batched decode: n sequences (each its own token, position, attention and logits) take
 * one step together, so each weight matrix is read once per step for all of them instead
 * of once per sequence. Per sequence the work is engine_forward_token's, step for step:
 * the same norms, the same activation quantization, the same matvec_rows calls on the
 * same rows (matvec_many_batch), so the logits are bit-identical to n single calls. The
 * per-step wrapper through methods (model_decode_batch) is here too; with the CUDA backend
 * selected it decodes one sequence at a time. */
#include "engine.h"
#include "quant.h"
#include "quant_q8.h"
#include "../kernels/host.h"
#ifdef KB_CUDA
#include "cuda_model.h"
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One sequence's buffers, laid out as engine_forward_token's, plus its own q8 blocks. */
typedef struct {
    float *x, *h, *q, *att, *k, *v, *g, *u, *cs;
    void *xq;   /* the activations' 8-bit blocks, in the layout of the weights' type */
} seq_bufs;

int engine_forward_batch(kv_model *m, engine_seq *seqs, int n) {
    const kv_model_config *c = &m->cfg;
    int live = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        int ok = seqs[i].id >= 0 && seqs[i].id < c->n_vocab && seqs[i].pos >= 0 && seqs[i].pos < c->n_ctx_train;
        seqs[i].rc = ok ? 0 : -1;
        live += ok, bad += !ok;
    }
    if (!live) return n ? -1 : 0;
    if (m->host_weights_gone) {
        fprintf(stderr, "%s: the host copy of the weights was freed after the upload to the device\n", m->gf.path);
        for (int i = 0; i < n; i++) seqs[i].rc = -1;
        return -1;
    }
    int E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    size_t nfl = engine_scratch_floats(m);
    size_t per = nfl * sizeof(float) + engine_scratch_q8_bytes(m);
    per = (per + 63) / 64 * 64;
    /* live sequences' buffers, then the jobs (7 per sequence and layer, reused) and the
     * index of each live sequence */
    size_t bytes = (size_t)live * (per + sizeof(seq_bufs) + 3 * sizeof(matvec_job) + sizeof(int));
    int mine = !__atomic_exchange_n(&m->batch_busy, 1, __ATOMIC_ACQUIRE);
    void *mem = NULL;
    if (mine && m->batch_scratch_bytes >= bytes) mem = m->batch_scratch;
    else if (mine) {
        free(m->batch_scratch);
        m->batch_scratch = mem = malloc(bytes);
        m->batch_scratch_bytes = mem ? bytes : 0;
    } else mem = malloc(bytes);
    if (!mem) {
        if (mine) __atomic_store_n(&m->batch_busy, 0, __ATOMIC_RELEASE);
        for (int i = 0; i < n; i++) seqs[i].rc = -1;
        return -1;
    }
    char *base = mem;
    seq_bufs *sb = (seq_bufs *)(void *)(base + (size_t)live * per);
    matvec_job *jobs = (matvec_job *)(void *)(sb + live);
    int *who = (int *)(void *)(jobs + 3 * (size_t)live);
    for (int i = 0, b = 0; i < n; i++) {
        if (seqs[i].rc) continue;
        float *f = (float *)(void *)(base + (size_t)b * per);
        seq_bufs *s = &sb[b];
        s->x = f, s->h = s->x + E, s->q = s->h + E, s->att = s->q + qd, s->k = s->att + qd, s->v = s->k + kvd;
        s->g = s->v + kvd, s->u = s->g + c->n_ff, s->cs = s->u + c->n_ff;
        s->xq = f + nfl;
        who[b++] = i;
    }
    const int nb = live;
    for (int b = 0; b < nb; b++) {
        const engine_seq *sq = &seqs[who[b]];
        dequant_row(m->embd.t->type, (const uint8_t *)m->embd.t->data + (size_t)sq->id * m->embd.row_bytes, sb[b].x, E);
        rope_cossin(m, sq->pos, sb[b].cs);
    }
    for (int l = 0; l < c->n_layer; l++) {
        const layer_weights *w = &m->layers[l];
        for (int b = 0; b < nb; b++) {
            seq_bufs *s = &sb[b];
            rmsnorm(s->h, s->x, w->attn_norm, E, c->norm_eps);
            int tq = w->wq.t->type;
            const void *hq = engine_quantize_for(m, s->h, E, tq, s->xq);
            matvec_job *jb = jobs + (size_t)b * 3;
            jb[0] = (matvec_job){&w->wq, s->h, s->q, w->bq, hq, 0};
            jb[1] = (matvec_job){&w->wk, s->h, s->k, w->bk, engine_shared_for(hq, tq, w->wk.t->type), 0};
            jb[2] = (matvec_job){&w->wv, s->h, s->v, w->bv, engine_shared_for(hq, tq, w->wv.t->type), 0};
        }
        matvec_many_batch(jobs, 3, nb);
        for (int b = 0; b < nb; b++) {
            seq_bufs *s = &sb[b];
            const engine_seq *sq = &seqs[who[b]];
            rope_rotate(m, s->q, c->n_head, s->cs);
            rope_rotate(m, s->k, c->n_head_kv, s->cs);
            sq->attn(sq->ctx, l, s->q, s->k, s->v, s->att);
            jobs[b] = (matvec_job){&w->wo, s->att, s->x, NULL, engine_quantize_for(m, s->att, qd, w->wo.t->type, s->xq), 1};
        }
        matvec_many_batch(jobs, 1, nb);   /* x += Wo att */

        for (int b = 0; b < nb; b++) {
            seq_bufs *s = &sb[b];
            rmsnorm(s->h, s->x, w->ffn_norm, E, c->norm_eps);
            const void *hq = engine_quantize_for(m, s->h, E, w->gate.t->type, s->xq);
            jobs[2 * b] = (matvec_job){&w->gate, s->h, s->g, NULL, hq, 0};
            jobs[2 * b + 1] = (matvec_job){&w->up, s->h, s->u, NULL, engine_shared_for(hq, w->gate.t->type, w->up.t->type), 0};
        }
        matvec_glu_batch(jobs, nb);   /* g = silu(gate h) * (up h) */
        for (int b = 0; b < nb; b++) {
            seq_bufs *s = &sb[b];
            jobs[b] = (matvec_job){&w->down, s->g, s->x, NULL, engine_quantize_for(m, s->g, c->n_ff, w->down.t->type, s->xq), 1};
        }
        matvec_many_batch(jobs, 1, nb);   /* x += W g */
    }
    for (int b = 0; b < nb; b++) {
        seq_bufs *s = &sb[b];
        rmsnorm(s->h, s->x, m->output_norm, E, c->norm_eps);
        jobs[b] = (matvec_job){&m->output, s->h, seqs[who[b]].logits, NULL,
                               engine_quantize_for(m, s->h, E, m->output.t->type, s->xq), 0};
    }
    matvec_many_batch(jobs, 1, nb);
    if (mine) __atomic_store_n(&m->batch_busy, 0, __ATOMIC_RELEASE);
    else free(mem);
    return bad ? -1 : 0;
}

/* ---- through methods ---- */

typedef struct {
    kv_decode_seq *s;
    kv_token deflt;
    int width;
} batch_attn_ctx;

static void batch_attn(void *vctx, int layer, const float *q, const float *k, const float *v, float *out) {
    batch_attn_ctx *c = vctx;
    kv_decode_seq *s = c->s;
    double t0 = kb_now_s();
    s->meth->append(s->st, layer, k, v, s->info ? s->info : &c->deflt);
    s->meth->attend(s->st, layer, q, out);
    s->attend_s += kb_now_s() - t0;
    if (s->tap) memcpy(s->tap + (size_t)layer * c->width, out, (size_t)c->width * sizeof *out);
}

int model_decode_batch(kv_model *m, kv_decode_seq *seqs, int n) {
    const kv_model_config *cf = &m->cfg;
    int width = cf->n_head * cf->head_dim;
#ifdef KB_CUDA
    if (cuda_model_selected()) {   /* the device decodes one sequence at a time */
        int bad = 0;
        for (int i = 0; i < n; i++) {
            kv_decode_seq *s = &seqs[i];
            for (size_t j = 0; s->tap && j < (size_t)cf->n_layer * width; j++) s->tap[j] = NAN;
            double t0 = kb_now_s();
            s->rc = cuda_model_decode(m, s->meth, s->st, s->id, s->pos, s->info, s->logits);
            s->attend_s += kb_now_s() - t0;   /* attention is not timed apart there: the whole step */
            bad |= s->rc;
        }
        return bad ? -1 : 0;
    }
#endif
    if (n <= 0) return 0;
    batch_attn_ctx *ctx = malloc((size_t)n * sizeof *ctx);
    engine_seq *es = malloc((size_t)n * sizeof *es);
    if (!ctx || !es) {
        free(ctx), free(es);
        for (int i = 0; i < n; i++) seqs[i].rc = -1;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        ctx[i] = (batch_attn_ctx){&seqs[i], {seqs[i].pos, 0.0f, 0}, width};
        es[i] = (engine_seq){seqs[i].id, seqs[i].pos, batch_attn, &ctx[i], seqs[i].logits, 0};
    }
    int rc = engine_forward_batch(m, es, n);
    for (int i = 0; i < n; i++) seqs[i].rc = es[i].rc;
    free(ctx), free(es);
    return rc;
}
