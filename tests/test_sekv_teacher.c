/* SeKV teacher data on the real model (methods/sekv/train/sekv_teacher.h): the capture method's
 * decode equals the engine's own exact attention (fullkv over a prefill of [0, t)), its
 * far share follows the window, and a document's training data holds the best-scoring
 * candidates with their captured queries and teacher logits q.k/sqrt(d). */
#include "../methods/sekv/train/sekv_teacher.h"
#include "../methods/method.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static const char *words[] = {"the", "river", "carried", "old", "boats", "past", "a", "quiet", "town", "where",
                              "engineers", "measured", "every", "bridge", "twice", "before", "winter", "came"};

int main(void) {
    const char *path = model_default_path();
    char err[512];
    if (access(path, R_OK)) {
        fprintf(stderr, "test_sekv_teacher: no model at %s: run `make model` (or set KVBENCH_MODEL)\n", path);
        return 1;
    }
    test_seed();
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "test_sekv_teacher: %s\n", err);
        return 1;
    }
    /* f32 activations: the capture's decode is held to fullkv's at f32 tolerance, and
     * with 8-bit activations a 1e-7 difference can flip one rounding (~1e-2 in logits) */
    model_set_f32_activations(m, 1);
    const kv_model_config *c = model_config(m);
    int L = c->n_layer, H = c->n_head, d = c->head_dim, V = c->n_vocab;
    /* fresh text: random words with numbers */
    char text[8192];
    size_t len = 0;
    for (int i = 0; i < 160; i++)
        len += i % 9 == 8 ? (size_t)snprintf(text + len, sizeof text - len, "%d. ", test_int(10, 9999))
                          : (size_t)snprintf(text + len, sizeof text - len, "%s ", words[test_int(0, 17)]);
    int32_t ids[1024];
    int n = tok_encode(model_tokenizer(m), text, len, 0, ids, 1024);
    CHECK(n > 100 && n < 1024, "tokens: %d", n);
    if (n > 200) n = 200;

    kv_needs none = {0};
    kv_prefill_out pn, pt;
    int t = test_int(n / 2, n - 1);
    CHECK(model_prefill(m, ids, n, &none, &pn, err, sizeof err) == 0, "prefill: %s", err);
    CHECK(model_prefill(m, ids, t, &none, &pt, err, sizeof err) == 0, "prefill: %s", err);

    /* reference: fullkv over a prefill of exactly [0, t), then decode token t */
    const kv_method *full = kv_method_find("fullkv");
    kv_setup su = {.n_layers = L, .n_heads = H, .n_kv_heads = c->n_head_kv, .head_dim = d, .n_prompt = t,
                   .max_decode = 2, .budget_frac = 1.0};
    kv_state *st = full->init(&su, err, sizeof err);
    for (int l = 0; l < L && st; l++) {
        kv_prefill lp = prefill_layer(&pt, l);
        full->ingest(st, &lp, err, sizeof err);
    }
    float *ref = malloc((size_t)V * 4), *got = malloc((size_t)V * 4), *q = malloc((size_t)L * H * d * 4);
    kv_token info = {t, pt.surprisal[t - 1], 0};
    CHECK(st && model_decode(m, full, st, ids[t], t, &info, ref) == 0, "fullkv decode");
    double far;
    test_poison(got, (size_t)V);
    test_poison(q, (size_t)L * H * d);
    CHECK(sekv_teacher_capture(m, &pn, ids, t, 16, q, got, &far) == 0, "capture");
    double *refd = malloc((size_t)V * 8);
    for (int i = 0; i < V; i++) refd[i] = ref[i];
    double e = rel_l2(got, refd, (size_t)V);
    CHECK(e < 2e-4, "capture's logits equal fullkv's at position %d (rel L2 %.2e)", t, e);
    CHECK(model_argmax(got, V) == model_argmax(ref, V), "same next token");
    int qok = 1;
    for (size_t i = 0; i < (size_t)L * H * d; i++) qok &= isfinite(q[i]);
    CHECK(qok, "every layer's queries captured");
    CHECK(far > 0 && far < 1, "far share %g in (0, 1)", far);
    double f0, fall;
    sekv_teacher_capture(m, &pn, ids, t, 0, q, got, &f0);
    sekv_teacher_capture(m, &pn, ids, t, t, q, got, &fall);
    CHECK(fabs(f0 - 1) < 1e-9 && fall == 0, "window 0 -> share 1 (%g), window t -> 0 (%g)", f0, fall);

    /* a document's data: the best candidates, their queries and teacher logits */
    sekv_teacher_cfg tc = sekv_teacher_defaults();
    tc.candidates = 8, tc.keep = 3, tc.window = 24, tc.local = 8, tc.l_min = 3, tc.l_max = 16, tc.rank = 8;
    sekv_tdoc doc;
    sekv_teacher_stats ts;
    CHECK(sekv_teacher_doc(m, ids, n, &tc, &doc, &ts, err, sizeof err) == 0, "teacher doc: %s", err);
    int32_t cand[8], want[8];
    double score[8];
    int nc = sekv_candidates(n, 8, cand);
    float *qc = malloc((size_t)nc * L * H * d * 4);
    for (int k = 0; k < nc; k++) sekv_teacher_capture(m, &pn, ids, cand[k], 24, qc + (size_t)k * L * H * d, got, &score[k]);
    int nk = sekv_mine(cand, score, nc, 3, want);
    int same = doc.n_pos == nk, qsame = 1, lok = 1;
    for (int p = 0; p < nk && same; p++) {
        same &= doc.pos[p] == want[p];
        int k = 0;
        while (cand[k] != want[p]) k++;
        qsame &= !memcmp(doc.q + (size_t)p * L * H * d, qc + (size_t)k * L * H * d, (size_t)L * H * d * 4);
        /* teacher logits of one random (layer, head, key) */
        int l = test_int(0, L - 1), h = test_int(0, H - 1), i = test_int(0, doc.pos[p]), j = h / (H / c->n_head_kv);
        const float *qq = doc.q + (((size_t)p * L + l) * H + h) * d;
        const float *kk = pn.K + (((size_t)l * c->n_head_kv + j) * n + i) * d;
        double dot = 0;
        for (int x = 0; x < d; x++) dot += (double)qq[x] * kk[x];
        float lo = doc.logit[doc.lo_off[p] + ((size_t)l * H + h) * (doc.pos[p] + 1) + i];
        lok &= fabs(lo - dot / sqrt((double)d)) < 1e-4 * (1 + fabs(dot));
    }
    CHECK(same, "mined positions are the best-scoring candidates");
    CHECK(qsame, "stored queries are the captured ones");
    CHECK(lok, "stored teacher logits are q.k/sqrt(d)");
    CHECK(ts.n_cand == nc && ts.n_kept == nk && ts.n_spans == doc.n_spans, "stats");
    printf("position %d: rel L2 %.2e, far share %.3f; doc: %d spans, kept %d of %d\n", t, e, far, doc.n_spans, nk, nc);

    sekv_tdoc_free(&doc);
    free(ref), free(got), free(q), free(refd), free(qc);
    full->free(st);
    prefill_out_free(&pn), prefill_out_free(&pt);
    model_free(m);
    /* The per-document alpha fit (--alpha fit): on fresh heavy-tailed surprisal, the
     * fitted alpha is on the grid, its P fits p_max*floor(b*n), and the grid point below
     * it does not fit (brute force with sekv_segment_ex); when none fits, the largest. */
    for (int rep = 0; rep < 20; rep++) {
        int nn = test_int(300, 3000);
        float *surp = malloc((size_t)nn * sizeof *surp);
        for (int i = 0; i < nn; i++) {
            float z = test_normal();
            surp[i] = 2.0f + fabsf(z) * (test_unif() < 0.1 ? 4.0f : 1.0f);
        }
        sekv_teacher_cfg fc = sekv_teacher_defaults();
        fc.fit_budget = (double[]){0.05, 0.1, 0.2, 0.4}[test_int(0, 3)];
        fc.local = test_int(0, 1) ? 32 : 0;
        int cap = (int)floor(fc.p_max * floor(fc.fit_budget * nn));
        sekv_seg sg;
        double a = -1;
        int fit = sekv_teacher_fit(surp, nn, &fc, &sg, &a);
        CHECK(fit >= 0, "fit failed");
        double k = (a - fc.grid_lo) / fc.grid_step;
        CHECK(fabs(k - nearbyint(k)) < 1e-9 && a >= fc.grid_lo && a <= fc.grid_hi + 1e-9, "alpha %g off the grid", a);
        if (fit == 1) {
            CHECK(sekv_seg_persistent(&sg) <= cap, "P %d > cap %d at alpha %g", sekv_seg_persistent(&sg), cap, a);
            if (a > fc.grid_lo + 1e-9) {
                sekv_seg lo;
                CHECK(sekv_segment_ex(surp, nn, a - fc.grid_step, fc.l_min, fc.l_max, 0, fc.sinks, fc.local, &lo) == 0,
                      "segment");
                CHECK(sekv_seg_persistent(&lo) > cap, "alpha %g fits too (P %d <= %d): not the smallest",
                      a - fc.grid_step, sekv_seg_persistent(&lo), cap);
                sekv_seg_free(&lo);
            }
        } else {
            CHECK(fabs(a - fc.grid_hi) < 1e-9 && sekv_seg_persistent(&sg) > cap, "no fit: alpha %g, P %d, cap %d", a,
                  sekv_seg_persistent(&sg), cap);
        }
        sekv_seg_free(&sg);
        free(surp);
    }
    return check_done("test_sekv_teacher");
}
