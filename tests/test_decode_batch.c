/* Batched decode (model/decode_batch.c): engine_forward_batch's logits for n sequences
 * must be bitwise equal (memcmp) to n engine_forward_token calls with the same token,
 * position and attention, for n in {1, 2, 3, 7, 17, 33}, with f32 and q8 activations, on random
 * models of several shapes and weight types (F32, Q8_0, Q4_0, Q4_K; a chunked vocabulary on
 * the SmolLM2 shape). Also: the random Q4_K model's rows are its f32 weights within a step. The attention callback is a stateless mix of q, k and v that also
 * checks it is called with its own sequence's context, layer after layer. A sequence
 * with a bad id or position is refused alone. The single calls themselves are held to a
 * float64 reference by test_random_model and test_model. */
#include "../model/random_model.h"
#include "../model/engine.h"
#include "../model/quant.h"
#include "../kernels/core.h"
#include "check.h"

typedef struct {
    const kv_model_config *c;
    float mix;           /* this sequence's own weight of q in the output */
    int next_layer;      /* the layer the next call must be for */
    int bad_order;
} mix_ctx;

/* out[h][i] = mix * q[h][i] + k[g(h)][i] * v[g(h)][i]: depends on all three, the
 * sequence and (through q) the layer. */
static void mix_attn(void *vctx, int layer, const float *q, const float *k, const float *v, float *out) {
    mix_ctx *m = vctx;
    if (layer != m->next_layer) m->bad_order = 1;
    m->next_layer = layer + 1 == m->c->n_layer ? 0 : layer + 1;
    int d = m->c->head_dim, g = m->c->n_head / m->c->n_head_kv;
    for (int h = 0; h < m->c->n_head; h++)
        for (int i = 0; i < d; i++) {
            int j = (h / g) * d + i;
            out[h * d + i] = m->mix * q[h * d + i] + k[j] * v[j];
        }
}

static int all_finite(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void one_model(const char *name, int wtype) {
    char err[256];
    kv_model *m = model_load_random_typed(name, test_next() % 1000 + 1, wtype, err, sizeof err);
    CHECK(m != NULL, "%s: %s", name, err);
    if (!m) return;
    const kv_model_config *c = model_config(m);
    const int V = c->n_vocab, sizes[] = {1, 2, 3, 7, 17, 33};   /* 17, 33: past the multi-row kernels' groups of 16 */
    enum { NMAX = 33 };
    float *single = malloc(sizeof(float) * V * NMAX), *batch = malloc(sizeof(float) * V * NMAX);
    for (int act = 0; act < 2; act++) {
        model_set_f32_activations(m, act == 0);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int n = sizes[si];
            engine_seq seq[NMAX];
            mix_ctx ctx[NMAX], ctx1[NMAX];
            for (int b = 0; b < n; b++) {
                ctx[b] = (mix_ctx){c, (float)(0.25 + test_unif()), 0, 0};
                ctx1[b] = ctx[b];
                int id = test_int(0, V - 1), pos = test_int(0, c->n_ctx_train - 1);
                seq[b] = (engine_seq){id, pos, mix_attn, &ctx[b], batch + (size_t)V * b, 12345};
                for (int i = 0; i < V; i++) batch[(size_t)V * b + i] = single[(size_t)V * b + i] = NAN;   /* poison */
                CHECK(engine_forward_token(m, id, pos, mix_attn, &ctx1[b], single + (size_t)V * b) == 0, "single");
            }
            CHECK(engine_forward_batch(m, seq, n) == 0, "%s batch of %d", name, n);
            for (int b = 0; b < n; b++) {
                const float *a = single + (size_t)V * b, *x = batch + (size_t)V * b;
                CHECK(seq[b].rc == 0 && !ctx[b].bad_order && all_finite(x, V), "%s n=%d row %d", name, n, b);
                CHECK(!memcmp(a, x, sizeof(float) * V), "%s (%s, %s activations) n=%d row %d: batched logits differ "
                      "(first %g vs %g)", name, quant_name(wtype < 0 ? 0 : wtype), act ? "q8" : "f32", n, b, x[0], a[0]);
            }
        }
        /* a bad sequence is refused alone: rc -1, its logits untouched, the others exact */
        engine_seq seq[3];
        mix_ctx ctx[3];
        for (int b = 0; b < 3; b++) {
            ctx[b] = (mix_ctx){c, 0.5f + b, 0, 0};
            seq[b] = (engine_seq){test_int(0, V - 1), test_int(0, c->n_ctx_train - 1), mix_attn, &ctx[b],
                                  batch + (size_t)V * b, 7};
            for (int i = 0; i < V; i++) batch[(size_t)V * b + i] = NAN;
        }
        seq[1].id = V;   /* out of range */
        seq[2].pos = act ? -1 : c->n_ctx_train;
        float *bad1 = batch + V, *bad2 = batch + 2 * (size_t)V;
        CHECK(engine_forward_batch(m, seq, 3) == -1, "a bad sequence fails the call's return");
        CHECK(seq[0].rc == 0 && seq[1].rc == -1 && seq[2].rc == -1, "rc %d %d %d", seq[0].rc, seq[1].rc, seq[2].rc);
        CHECK(isnan(bad1[0]) && isnan(bad2[V - 1]), "a refused sequence's logits were written");
        mix_ctx c1 = {c, 0.5f, 0, 0};
        CHECK(engine_forward_token(m, seq[0].id, seq[0].pos, mix_attn, &c1, single) == 0 &&
              !memcmp(single, batch, sizeof(float) * V), "the good sequence beside bad ones differs");
    }
    free(single), free(batch);
    model_free(m);
}

/* random:tiny-k:q4_k holds the f32 model's weights (the same seed draws the same values)
 * within the Q4_K step of each sub-block of 32: one row against the other, in float64. */
static void q4k_close(void) {
    char err[256];
    uint64_t seed = test_next() % 1000 + 1;
    kv_model *f = model_load_random_typed("tiny-k", seed, GGML_F32, err, sizeof err),
             *k = model_load_random_typed("tiny-k", seed, GGML_Q4_K, err, sizeof err);
    CHECK(f && k, "tiny-k: %s", err);
    if (!f || !k) return;
    const weight *wf[] = {&f->layers[1].wq, &f->layers[0].down, &f->embd}, *wk[] = {&k->layers[1].wq, &k->layers[0].down, &k->embd};
    for (int t = 0; t < 3; t++) {
        CHECK(wk[t]->t->type == GGML_Q4_K, "tiny-k:q4_k tensor %d is %s", t, quant_name(wk[t]->t->type));
        int cols = wf[t]->cols, r = test_int(0, wf[t]->rows - 1);
        float *x = (float *)(void *)((uint8_t *)wf[t]->t->data + (size_t)r * wf[t]->row_bytes), *y = malloc(sizeof(float) * cols);
        dequant_row(GGML_Q4_K, (const uint8_t *)wk[t]->t->data + (size_t)r * wk[t]->row_bytes, y, cols);
        int bad = 0;
        for (int j = 0; j < cols; j += 32) {
            double lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) lo = fmin(lo, x[j + l]), hi = fmax(hi, x[j + l]);
            double step = (hi - lo) / 15;   /* the sub-block's step, before 6-bit and f16 rounding */
            for (int l = 0; l < 32; l++) bad += !(fabs((double)y[j + l] - x[j + l]) <= 0.75 * step + 1e-6);
        }
        CHECK(!bad, "tiny-k q4_k tensor %d row %d: %d values off by more than 3/4 of a step", t, r, bad);
        free(y);
    }
    model_free(f), model_free(k);
}

int main(void) {
    test_seed();
    kb_set_threads(2);
    one_model("tiny-llama", GGML_F32);
    one_model("tiny-qwen2", GGML_Q8_0);
    one_model("tiny-llama", GGML_Q4_0);
    one_model("tiny-k", GGML_Q4_K);   /* K-quant rows: f32 dot products (and q8 where an int8 path exists) */
    q4k_close();
    one_model("smollm2-135m", GGML_Q4_0);   /* 30 layers, 49152 vocabulary rows: many tasks and chunks */
    return check_done("test_decode_batch");
}
