/* Random-weight models (model/random_model.c): a preset's published shape and parameter
 * count, the weights' scale, determinism per seed, the byte tokenizer, a 64-token prefill
 * and 4 decode steps without NaN whose first step agrees with a prefill of the longer
 * prompt, and one-line errors for bad names. Attention in decode is written here (float64). */
#include "../model/random_model.h"
#include "../model/engine.h"
#include "../model/quant.h"
#include "../workloads/tokspan.h"
#include "check.h"

/* The engine's decode attention over a full cache: [L][Hkv][cap][d]. */
typedef struct {
    const kv_model_config *c;
    float *K, *V;
    int cap, pos;
} full_cache;

static void cache_attn(void *ctx, int layer, const float *q, const float *k, const float *v, float *out) {
    full_cache *fc = ctx;
    int d = fc->c->head_dim, Hkv = fc->c->n_head_kv, g = fc->c->n_head / Hkv, n = fc->pos + 1;
    size_t lay = (size_t)layer * Hkv * fc->cap * d;
    for (int j = 0; j < Hkv; j++) {
        memcpy(fc->K + lay + ((size_t)j * fc->cap + fc->pos) * d, k + j * d, d * sizeof(float));
        memcpy(fc->V + lay + ((size_t)j * fc->cap + fc->pos) * d, v + j * d, d * sizeof(float));
    }
    double *s = malloc((size_t)n * sizeof *s);
    for (int h = 0; h < fc->c->n_head; h++) {
        const float *Kh = fc->K + lay + (size_t)(h / g) * fc->cap * d, *Vh = fc->V + lay + (size_t)(h / g) * fc->cap * d;
        double mx = -INFINITY, z = 0;
        for (int t = 0; t < n; t++) {
            double dot = 0;
            for (int i = 0; i < d; i++) dot += (double)q[h * d + i] * Kh[(size_t)t * d + i];
            s[t] = dot / sqrt((double)d);
            if (s[t] > mx) mx = s[t];
        }
        for (int t = 0; t < n; t++) z += (s[t] = exp(s[t] - mx));
        for (int i = 0; i < d; i++) {
            double o = 0;
            for (int t = 0; t < n; t++) o += s[t] / z * Vh[(size_t)t * d + i];
            out[h * d + i] = (float)o;
        }
    }
    free(s);
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void test_quantized(uint64_t seed, const kv_model *f32m);

static void test_errors(void) {
    char err[256] = "";
    CHECK(!model_load_random("nope", 1, err, sizeof err) && strstr(err, "random:nope") && strstr(err, "smollm2-135m"),
          "unknown preset: got '%s'", err);
    CHECK(!model_load_random_spec("random:smollm2-135m:x1", err, sizeof err) && strstr(err, "seed"),
          "bad seed: got '%s'", err);
    CHECK(!model_load_random_spec("random:smollm2-135m:-3", err, sizeof err) && strstr(err, "seed"),
          "negative seed: got '%s'", err);
    const char *const *names = random_model_presets();
    int n = 0;
    while (names[n]) n++;
    CHECK(n == 6, "%d presets, expected 6", n);

    /* Llama-3.2-1B's config.json, and Meta's published 1,235,814,400 parameters (tied
     * embeddings), counted here from the shape */
    kv_model_config c;
    int tied = 0;
    CHECK(random_model_shape("llama3.2-1b", &c, &tied) == 0, "no llama3.2-1b shape");
    CHECK(c.n_layer == 16 && c.n_embd == 2048 && c.n_head == 32 && c.n_head_kv == 8 && c.head_dim == 64 &&
              c.n_ff == 8192 && c.n_vocab == 128256 && c.rope_base == 500000.0f && tied,
          "llama3.2-1b shape");
    /* the long-context presets' RoPE scaling, as their config.json has it */
    kv_model_config r;
    CHECK(random_model_shape("llama3.1-8b", &r, NULL) == 0 && r.rope.type == KV_ROPE_LLAMA3 && r.rope.factor == 8 &&
              r.rope.low_freq_factor == 1 && r.rope.high_freq_factor == 4 && r.rope.orig_ctx == 8192 &&
              r.n_ctx_train == 131072 && r.rope_base == 500000.0f,
          "llama3.1-8b rope scaling");
    CHECK(random_model_shape("qwen2.5-7b", &r, NULL) == 0 && r.rope.type == KV_ROPE_YARN && r.rope.factor == 4 &&
              r.rope.orig_ctx == 32768 && r.n_ctx_train == 131072 && !strcmp(r.arch, "qwen2"),
          "qwen2.5-7b yarn scaling");
    int64_t E = c.n_embd, per_layer = E * c.n_head * c.head_dim * 2 + E * c.n_head_kv * c.head_dim * 2 + 3 * E * c.n_ff + 2 * E;
    CHECK(E * c.n_vocab + c.n_layer * per_layer + E == 1235814400LL, "llama3.2-1b: %lld parameters from its shape",
          (long long)(E * c.n_vocab + c.n_layer * per_layer + E));
}

static void test_smollm2(void) {
    char err[256];
    uint64_t seed = test_next() % 1000000;
    kv_model *m = model_load_random("smollm2-135m", seed, err, sizeof err);
    CHECK(m != NULL, "load: %s", err);
    if (!m) return;
    model_set_f32_activations(m, 1);   /* decode is held to prefill's f32 below (quantized presets too) */
    const kv_model_config *c = model_config(m);
    /* SmolLM2-135M's config.json; 134,515,008 parameters with tied embeddings */
    CHECK(c->n_layer == 30 && c->n_embd == 576 && c->n_head == 9 && c->n_head_kv == 3 && c->head_dim == 64 &&
              c->n_ff == 1536 && c->n_vocab == 49152 && c->rope_base == 100000.0f && !strcmp(c->arch, "llama"),
          "smollm2-135m shape");
    CHECK(c->n_params == 134515008, "smollm2-135m has %lld parameters", (long long)c->n_params);

    /* scale: projections have standard deviation 1/sqrt(fan-in) */
    const weight *wq = &m->layers[7].wq;
    CHECK(wq->t->type == GGML_F32 && wq->row_bytes == (size_t)wq->cols * 4, "smollm2-135m's weights are F32");
    const float *wq7 = wq->t->data;
    double ss = 0;
    size_t nw = (size_t)wq->rows * wq->cols;
    for (size_t i = 0; i < nw; i++) ss += (double)wq7[i] * wq7[i];
    double sd = sqrt(ss / nw) * sqrt((double)wq->cols);
    CHECK(fabs(sd - 1) < 0.02, "layer 7 wq: std * sqrt(cols) = %.4f, expected 1", sd);

    /* determinism per seed */
    kv_model *m2 = model_load_random_spec(seed ? "random:smollm2-135m:0" : "random:smollm2-135m:1", err, sizeof err);
    CHECK(m2 && memcmp(m2->layers[0].wq.t->data, m->layers[0].wq.t->data, 4096) != 0, "another seed gave the same weights");
    model_free(m2);
    char spec[64];
    snprintf(spec, sizeof spec, "random:smollm2-135m:%llu", (unsigned long long)seed);
    m2 = model_load_random_spec(spec, err, sizeof err);
    size_t total = 0;
    for (int l = 0; l < 30; l++) total += 3538944;
    total += (size_t)49152 * 576;
    CHECK(m2 && memcmp(m2->owned_weights, m->owned_weights, total * sizeof(float)) == 0 &&
              memcmp(m2->layers[29].ffn_norm, m->layers[29].ffn_norm, 576 * sizeof(float)) == 0 &&
              memcmp(m2->output_norm, m->output_norm, 576 * sizeof(float)) == 0,
          "the same seed gave different weights");
    model_free(m2);

    /* the byte tokenizer */
    const kv_tokenizer *tok = model_tokenizer(m);
    int32_t ids[8];
    int n = tok_encode(tok, "Hi.", 3, 0, ids, 8);
    CHECK(n == 3 && ids[0] == 'H' && ids[1] == 'i' && ids[2] == '.', "encode 'Hi.' gave %d ids", n);
    char text[16];
    tok_decode(tok, ids, n, text, sizeof text);
    CHECK(!strcmp(text, "Hi."), "decode gave '%s'", text);
    CHECK(model_sent_end(m, '.') == 1 && model_sent_end(m, 'H') == 0, "sentence ends");
    /* spaces: one token (U+2581) that spells " ", so text workloads map tokens to bytes */
    const char *spaced = "a b  \xC3\xA9 c.";
    tok_spans sp;
    char serr[256] = "";
    int rc = tokspan_encode(tok, spaced, strlen(spaced), &sp, serr, sizeof serr);
    CHECK(rc == 0, "tokspan_encode of '%s': %s", spaced, serr);
    if (rc == 0) {
        int spaces = 0, ok = sp.n == (int)strlen(spaced) && sp.off[sp.n] == strlen(spaced);
        for (int i = 0; ok && i < sp.n; i++) {
            spaces += sp.ids[i] == 256;
            ok = (spaced[sp.off[i]] == ' ') == (sp.ids[i] == 256) && sp.off[i] == (size_t)i;
        }
        CHECK(ok && spaces == 4, "'%s': %d tokens, %d spaces (want one token a byte, 4 spaces)", spaced, sp.n, spaces);
        tok_decode(tok, sp.ids, sp.n, text, sizeof text);
        CHECK(!strcmp(text, spaced), "decode of the spaced text gave '%s'", text);
        tokspan_free(&sp);
    }
    CHECK(!tok_is_stop(tok, 0) && tok_vocab(tok) == 49152, "no stop tokens, full vocabulary");

    /* prefill 64 tokens, then 4 decode steps through a full cache */
    int T = 64, steps = 4, V = c->n_vocab, L = c->n_layer, H = c->n_head, Hkv = c->n_head_kv, d = c->head_dim;
    int32_t prompt[65];
    for (int t = 0; t < T + 1; t++) prompt[t] = (int32_t)(test_next() % (uint64_t)V);
    kv_needs needs = {.col_mass = 1, .window = 8};
    kv_prefill_out pf, pf65;
    CHECK(model_prefill(m, prompt, T, &needs, &pf, err, sizeof err) == 0, "prefill: %s", err);
    size_t kvn = (size_t)L * Hkv * T * d;
    CHECK(all_finite(pf.K, kvn) && all_finite(pf.V, kvn) && all_finite(pf.last_logits, V) &&
              all_finite(pf.surprisal, T) && all_finite(pf.col_mass, (size_t)L * H * T) &&
              all_finite(pf.win_probs, (size_t)L * H * 8 * T),
          "prefill produced NaN or inf");
    /* every query's probabilities sum to 1: column mass sums to T per head, window rows to 1 */
    double worst = 0;
    for (int lh = 0; lh < L * H; lh++) {
        double sum = 0;
        for (int t = 0; t < T; t++) sum += pf.col_mass[(size_t)lh * T + t];
        worst = fmax(worst, fabs(sum - T) / T);
        for (int w = 0; w < 8; w++) {
            double rs = 0;
            for (int t = 0; t < T; t++) rs += pf.win_probs[((size_t)lh * 8 + w) * T + t];
            worst = fmax(worst, fabs(rs - 1));
        }
    }
    CHECK(worst < 1e-5, "attention rows do not sum to 1 (off by %.3g)", worst);

    full_cache fc = {c, NULL, NULL, T + steps, 0};
    fc.K = malloc(sizeof(float) * L * Hkv * fc.cap * d);
    fc.V = malloc(sizeof(float) * L * Hkv * fc.cap * d);
    for (int l = 0; l < L; l++)
        for (int j = 0; j < Hkv; j++) {
            size_t dst = ((size_t)l * Hkv + j) * fc.cap * d, src = ((size_t)l * Hkv + j) * T * d;
            memcpy(fc.K + dst, pf.K + src, sizeof(float) * T * d);
            memcpy(fc.V + dst, pf.V + src, sizeof(float) * T * d);
        }
    float *logits = malloc(sizeof(float) * V);
    int ok = 1, id = prompt[T];
    for (int s = 0; s < steps; s++) {
        fc.pos = T + s;
        ok &= engine_forward_token(m, id, fc.pos, cache_attn, &fc, logits) == 0 && all_finite(logits, V);
        if (s == 0) {   /* the first step sees the 65-token prompt */
            CHECK(model_prefill(m, prompt, T + 1, NULL, &pf65, err, sizeof err) == 0, "prefill 65: %s", err);
            double num = 0, den = 0;
            for (int i = 0; i < V; i++) {
                num += ((double)logits[i] - pf65.last_logits[i]) * ((double)logits[i] - pf65.last_logits[i]);
                den += (double)pf65.last_logits[i] * pf65.last_logits[i];
            }
            CHECK(sqrt(num / den) < 1e-4, "decode step vs prefill of the longer prompt: logits rel err %.3g",
                  sqrt(num / den));
            prefill_out_free(&pf65);
        }
        id = model_argmax(logits, V);
    }
    CHECK(ok, "decode steps failed or produced NaN");
    free(logits);
    free(fc.K);
    free(fc.V);
    prefill_out_free(&pf);
    test_quantized(seed, m);
    model_free(m);
}

/* random:NAME:SEED:TYPE: the same f32 draws, quantized (ggml's rounding, checked in
 * test_gemm_tiles); deterministic; the type and seed in either order; a prefill runs. */
static void test_quantized(uint64_t seed, const kv_model *f32m) {
    const int types[2] = {GGML_Q8_0, GGML_Q4_0};
    const char *names[2] = {"q8_0", "Q4_0"};
    for (int k = 0; k < 2; k++) {
        char spec[96], spec2[96], err[256];
        snprintf(spec, sizeof spec, "random:smollm2-135m:%llu:%s", (unsigned long long)seed, names[k]);
        snprintf(spec2, sizeof spec2, "random:smollm2-135m:%s:%llu", names[k], (unsigned long long)seed);
        kv_model *q = model_load_random_spec(spec, err, sizeof err), *q2 = model_load_random_spec(spec2, err, sizeof err);
        CHECK(q && q2, "%s: %s", spec, err);
        if (!q || !q2) {
            model_free(q), model_free(q2);
            continue;
        }
        const weight *w = &q->layers[3].down, *wf = &f32m->layers[3].down;
        CHECK(w->t->type == types[k] && w->row_bytes == quant_row_bytes(types[k], w->cols), "%s: type %s", spec,
              quant_name(w->t->type));
        size_t bytes = 0;
        for (int l = 0; l < 30; l++) bytes += 3538944 / 32 * (k ? 18 : 34);
        bytes += (size_t)49152 * 576 / 32 * (k ? 18 : 34);
        CHECK(memcmp(q->owned_weights, q2->owned_weights, bytes) == 0, "%s and %s differ", spec, spec2);
        /* every dequantized row against the F32 model's: within the block's step */
        float *row = malloc(sizeof(float) * w->cols);
        double worst = 0;
        for (int r = 0; r < w->rows; r += 37) {
            dequant_row(w->t->type, (const uint8_t *)w->t->data + w->row_bytes * r, row, w->cols);
            const float *ref = (const float *)wf->t->data + (size_t)r * w->cols;
            for (int b = 0; b < w->cols; b += 32) {
                double amax = 0;
                for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(ref[b + j]));
                double step = k ? amax / 8 : amax / 127;
                for (int j = 0; j < 32; j++) worst = fmax(worst, fabs(row[b + j] - ref[b + j]) / step);
            }
        }
        free(row);
        CHECK(worst < 1.01, "%s: dequantized weights off the f32 draws by %.3f steps", spec, worst);
        int32_t ids[16];
        for (int t = 0; t < 16; t++) ids[t] = (int32_t)(test_next() % 49152);
        kv_prefill_out pf;
        CHECK(model_prefill(q, ids, 16, NULL, &pf, err, sizeof err) == 0 && all_finite(pf.last_logits, 49152),
              "%s: prefill: %s", spec, err);
        prefill_out_free(&pf);
        model_free(q), model_free(q2);
    }
    char err[256] = "";
    CHECK(!model_load_random_spec("random:smollm2-135m:q3_k", err, sizeof err) && strstr(err, "q3_k"),
          "an unknown type: got '%s'", err);
    CHECK(!model_load_random_spec("random:smollm2-135m:q8_0:q4_0", err, sizeof err) && strstr(err, "q4_0"),
          "two types: got '%s'", err);
    CHECK(!model_load_random_spec("random:smollm2-135m:1:2", err, sizeof err) && strstr(err, "'2'"),
          "two seeds: got '%s'", err);
}

int main(void) {
    test_seed();
    test_errors();
    test_smollm2();
    return check_done("test_random_model");
}
