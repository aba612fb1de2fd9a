/* The layer-streaming prefill (model_prefill_stream) against the whole one (model_prefill)
 * on random models (llama and qwen2 layouts, group sizes 3 and 4), several chunk sizes:
 * every layer arrives once, in order, with bit-identical K, V, column mass and window rows,
 * no surprisal yet (it exists only after the last layer), and the same surprisal, sentence
 * ends and last logits at the end; the streamed output holds no K/V. A prefill without the
 * prompt's surprisal gives the same K/V, statistics and last logits. And the plain
 * generation, which streams into its own cache, gives the ids of a cache filled from the
 * whole prefill (the yardstick FullKV must match). */
#include "../model/random_model.h"
#include "../model/engine.h"
#include "check.h"
#include <math.h>

typedef struct {
    const kv_prefill_out *whole;
    int next, bad, win;
    char why[256];
} stream_check;

static int same(const float *a, const float *b, size_t n) { return (!a && !b) || (a && b && !memcmp(a, b, n * sizeof(float))); }

static void on_layer(void *ctx, const kv_prefill *p) {
    stream_check *sc = ctx;
    kv_prefill w = prefill_layer(sc->whole, sc->next);
    const kv_prefill_out *o = sc->whole;
    size_t kv = (size_t)o->n * o->head_dim;
    int ok = p->layer == sc->next && p->n == o->n && p->win == o->win && !p->surprisal && p->sent_end;
    for (int j = 0; ok && j < o->n_head_kv; j++)
        ok = same(p->K + j * p->kv_stride, w.K + j * w.kv_stride, kv) && same(p->V + j * p->kv_stride, w.V + j * w.kv_stride, kv);
    ok = ok && same(p->col_mass, w.col_mass, (size_t)o->n_head * o->n) &&
         same(p->win_probs, w.win_probs, (size_t)o->n_head * o->win * o->n);
    if (!ok && !sc->bad) snprintf(sc->why, sizeof sc->why, "layer %d (expected %d) differs from the whole prefill's", p->layer, sc->next);
    sc->bad |= !ok;
    sc->next++;
}

static void test_model(const char *spec, int n, int chunk, int col_mass, int win) {
    char err[256];
    kv_model *m = model_load_random_spec(spec, err, sizeof err);
    CHECK(m != NULL, "%s: %s", spec, err);
    if (!m) return;
    model_set_prefill_chunk(m, chunk);
    const kv_model_config *c = model_config(m);
    int32_t *ids = malloc(sizeof *ids * n);
    for (int t = 0; t < n; t++) ids[t] = (int32_t)(test_next() % (uint64_t)c->n_vocab);
    kv_needs needs = {.col_mass = col_mass, .window = win};
    kv_prefill_out whole, streamed;
    CHECK(model_prefill(m, ids, n, &needs, &whole, err, sizeof err) == 0, "%s: prefill: %s", spec, err);
    stream_check sc = {&whole, 0, 0, win, ""};
    CHECK(model_prefill_stream(m, ids, n, &needs, on_layer, &sc, &streamed, err, sizeof err) == 0, "%s: stream: %s", spec, err);
    CHECK(!sc.bad, "%s, n %d, chunk %d: %s", spec, n, chunk, sc.why);
    CHECK(sc.next == c->n_layer, "%s: %d layers streamed, the model has %d", spec, sc.next, c->n_layer);
    CHECK(!streamed.K && !streamed.V && !streamed.col_mass && !streamed.win_probs, "%s: the streamed output kept K/V", spec);
    CHECK(same(streamed.surprisal, whole.surprisal, n) && !memcmp(streamed.sent_end, whole.sent_end, n) &&
              same(streamed.last_logits, whole.last_logits, c->n_vocab),
          "%s: surprisal, sentence ends or last logits differ", spec);
    /* without the prompt's surprisal (no method reads it): the same K/V, statistics and last
     * logits bit for bit; surprisal only in the last chunk of logits, NaN before it */
    kv_prefill_out quick;
    model_set_prefill_surprisal(m, 0);
    CHECK(model_prefill(m, ids, n, &needs, &quick, err, sizeof err) == 0, "%s: prefill without surprisal: %s", spec, err);
    model_set_prefill_surprisal(m, 1);
    size_t kvn = (size_t)c->n_layer * c->n_head_kv * n * c->head_dim;
    CHECK(same(quick.K, whole.K, kvn) && same(quick.V, whole.V, kvn) &&
              same(quick.col_mass, whole.col_mass, (size_t)c->n_layer * c->n_head * n) &&
              same(quick.win_probs, whole.win_probs, (size_t)c->n_layer * c->n_head * whole.win * n) &&
              same(quick.last_logits, whole.last_logits, c->n_vocab) && !memcmp(quick.sent_end, whole.sent_end, n),
          "%s, n %d, chunk %d: the prefill without surprisal changed K/V, statistics or last logits", spec, n, chunk);
    int cl = chunk < n ? chunk : n;   /* prefill.c's CL: rows of logits per GEMM, at most 256 */
    if (cl > 256) cl = 256;
    int first = (n - 1) / cl * cl, bad_t = -1;
    for (int t = 0; t < n && bad_t < 0; t++)
        if (t >= 1 && t <= first ? !isnan(quick.surprisal[t]) : quick.surprisal[t] != whole.surprisal[t]) bad_t = t;
    CHECK(bad_t < 0, "%s, n %d, chunk %d: surprisal[%d] without surprisal is %g (the whole prefill's %g; NaN up to %d)", spec,
          n, chunk, bad_t, bad_t < 0 ? 0.0 : quick.surprisal[bad_t], bad_t < 0 ? 0.0 : whole.surprisal[bad_t], first);
    prefill_out_free(&quick);
    prefill_out_free(&whole);
    prefill_out_free(&streamed);

    /* plain generation (streams into its cache) against a cache filled from the whole prefill:
     * FullKV through the method interface, which ingests the same K/V */
    int32_t a[6], b[6];
    int na = model_generate_plain(m, ids, n, 6, a, NULL, err, sizeof err);
    extern const kv_method kv_fullkv;
    kv_setup s = {.budget_frac = 1.0};
    int nb = model_generate_method(m, &kv_fullkv, &s, ids, n, 6, b, NULL, NULL, NULL, err, sizeof err);
    CHECK(na == 6 && nb == 6 && !memcmp(a, b, sizeof a), "%s: plain and FullKV generations differ (%d, %d ids)", spec, na, nb);
    free(ids);
    model_free(m);
}

int main(void) {
    test_seed();
    test_model("random:tiny-llama:7", 150, 64, 1, 8);
    test_model("random:tiny-llama:8", 33, 512, 0, 0);
    test_model("random:tiny-qwen2:9", 97, 40, 1, 0);
    test_model("random:tiny-qwen2:10:q8_0", 70, 512, 0, 16);
    return check_done("test_prefill_stream");
}
