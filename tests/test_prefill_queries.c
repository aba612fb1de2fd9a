/* Door version 4's model members from the CPU prefill (model/prefill.c), on random models
 * (llama: adjacent-pair RoPE; qwen2: halves and Q biases; f32 and q8_0 weights):
 *   - kv_prefill.Q, the pre-RoPE queries of the last q_rows tokens, turned by kv_prefill.rope
 *     as method.h defines it (in double, here), give the prefill's own window attention rows:
 *     softmax(q k / sqrt(d)) over the prefill's post-RoPE keys equals win_probs (which the
 *     forward pass computed from the queries it rotated itself);
 *   - kv_prefill.Wo is the layer's output projection: Wo x equals quant_dot on the stored
 *     (quantized) rows for a random x;
 *   - streamed and whole prefills hand the same Q and Wo; nothing asked, nothing given. */
#include <math.h>
#include "../model/random_model.h"
#include "../model/engine.h"
#include "../model/quant.h"
#include "check.h"

typedef struct {
    const kv_model *m;
    const kv_prefill_out *whole;
    int next, bad;
    double worst_p, worst_wo;
} qcheck;

static void rotate(const kv_rope *r, double *x, int pos) {
    for (int i = 0; i < r->n_rot / 2; i++) {
        int a = r->neox ? i : 2 * i, b = r->neox ? i + r->n_rot / 2 : 2 * i + 1;
        double th = pos * r->inv_freq[i], c = cos(th) * r->mscale, s = sin(th) * r->mscale;
        double xa = x[a], xb = x[b];
        x[a] = c * xa - s * xb, x[b] = s * xa + c * xb;
    }
}

static void on_layer(void *ctx, const kv_prefill *p) {
    qcheck *qc = ctx;
    const kv_model_config *c = model_config(qc->m);
    int H = c->n_head, Hkv = c->n_head_kv, d = c->head_dim, n = p->n, g = H / Hkv, E = c->n_embd;
    kv_prefill w = prefill_layer(qc->whole, p->layer);
    if (!p->Q || !p->Wo || !p->rope || p->q_rows != w.q_rows || p->embd != E || p->layer != qc->next++) {
        qc->bad++;
        return;
    }
    for (int h = 0; h < H; h++)   /* streamed == whole */
        if (memcmp(p->Q + h * p->q_stride, w.Q + h * w.q_stride, (size_t)p->q_rows * d * sizeof(float))) qc->bad++;
    if (memcmp(p->Wo, w.Wo, (size_t)E * H * d * sizeof(float))) qc->bad++;
    double *q = malloc((size_t)d * sizeof *q), *z = malloc((size_t)n * sizeof *z);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < p->win; i++) {   /* window row i: token n - win + i */
            int t = n - p->win + i, r = t - (n - p->q_rows);
            if (r < 0) continue;
            for (int a = 0; a < d; a++) q[a] = p->Q[h * p->q_stride + (size_t)r * d + a];
            rotate(p->rope, q, t);
            const float *K = p->K + (size_t)(h / g) * p->kv_stride;
            double mx = -INFINITY, sum = 0;
            for (int u = 0; u <= t; u++) {
                double dot = 0;
                for (int a = 0; a < d; a++) dot += q[a] * K[(size_t)u * d + a];
                z[u] = dot / sqrt((double)d);
                mx = z[u] > mx ? z[u] : mx;
            }
            for (int u = 0; u <= t; u++) sum += (z[u] = exp(z[u] - mx));
            for (int u = 0; u <= t; u++) {
                double e = fabs(z[u] / sum - p->win_probs[((size_t)h * p->win + i) * n + u]);
                if (!(e <= qc->worst_p)) qc->worst_p = e;
            }
        }
    /* Wo x against the quantized rows */
    const weight *wo = &qc->m->layers[p->layer].wo;
    float *x = malloc((size_t)H * d * sizeof *x);
    test_fill(x, (size_t)H * d, 1.0f);
    for (int e = 0; e < E; e++) {
        double y = 0;
        for (int a = 0; a < H * d; a++) y += (double)p->Wo[(size_t)e * H * d + a] * x[a];
        float ref = quant_dot(wo->t->type, (const uint8_t *)wo->t->data + (size_t)e * wo->row_bytes, x, H * d);
        double err = fabs(y - ref) / (1 + fabs(ref));
        if (!(err <= qc->worst_wo)) qc->worst_wo = err;
    }
    free(q), free(z), free(x);
}

static void test_model(const char *spec, int n, int chunk, int rows, int win) {
    char err[256];
    kv_model *m = model_load_random_spec(spec, err, sizeof err);
    CHECK(m != NULL, "%s: %s", spec, err);
    if (!m) return;
    model_set_prefill_chunk(m, chunk);
    const kv_model_config *c = model_config(m);
    int32_t *ids = malloc(sizeof *ids * n);
    for (int t = 0; t < n; t++) ids[t] = (int32_t)(test_next() % (uint64_t)c->n_vocab);
    kv_needs none = {0}, needs = {.window = win, .queries = rows, .wo = 1};
    kv_prefill_out whole, plain, streamed;
    CHECK(model_prefill(m, ids, n, &none, &plain, err, sizeof err) == 0, "%s: prefill: %s", spec, err);
    kv_prefill v = prefill_layer(&plain, 0);
    CHECK(!plain.Q && !plain.Wo && !v.Q && !v.Wo && !v.rope && !v.q_rows && !v.embd, "%s: Q or Wo given unasked", spec);
    prefill_out_free(&plain);
    CHECK(model_prefill(m, ids, n, &needs, &whole, err, sizeof err) == 0, "%s: prefill: %s", spec, err);
    CHECK(whole.q_rows == (rows < n ? rows : n), "%s: %d query rows for %d asked of %d", spec, whole.q_rows, rows, n);
    qcheck qc = {m, &whole, 0, 0, 0, 0};
    CHECK(model_prefill_stream(m, ids, n, &needs, on_layer, &qc, &streamed, err, sizeof err) == 0, "%s: stream: %s",
          spec, err);
    CHECK(!qc.bad && qc.next == c->n_layer, "%s: Q/Wo missing or the streamed ones differ (%d, %d layers)", spec, qc.bad,
          qc.next);
    CHECK(qc.worst_p < 2e-5, "%s, n %d: the door's Q turned by its rope is off the prefill's attention by %.3g", spec,
          n, qc.worst_p);
    CHECK(qc.worst_wo < 1e-4, "%s: Wo x off quant_dot by %.3g", spec, qc.worst_wo);
    CHECK(!streamed.Q && !streamed.Wo, "%s: the streamed output kept Q or Wo", spec);
    printf("%-28s n %3d rows %3d: attention from Q off by %.2g, Wo x by %.2g\n", spec, n, whole.q_rows, qc.worst_p,
           qc.worst_wo);
    prefill_out_free(&whole);
    prefill_out_free(&streamed);
    free(ids);
    model_free(m);
}

int main(void) {
    test_seed();
    test_model("random:tiny-llama:7", 90, 32, 20, 8);
    test_model("random:tiny-qwen2:9", 77, 512, 200, 16);
    test_model("random:tiny-qwen2:10:q8_0", 60, 24, 60, 12);
    return check_done("test_prefill_queries");
}
