/* harness/drivers/fidelity.c on the real model (SmolLM2, `make model`) and a fresh random prompt:
 *  - FullKV's reference tokens are the plain engine's greedy tokens (model_generate_plain,
 *    its own cache, no method plumbing);
 *  - FullKV against itself: KL 0, top-1 1 and every layer's attention error 0, exactly;
 *  - FullKV's answer NLL equals the NLL from independent prefills of prompt + answer
 *    prefix (the GEMM path, log-softmax in float64 here), to 2e-3 relative;
 *  - a compressing method (SnapKV, 32 tokens): KL and top-1 recomputed here in float64
 *    from a fresh cache fed the same tokens; KL > 0, layer errors finite and positive;
 *  - outputs start poisoned (NaN / garbage counts) so a metric left unset is caught. */
#include <unistd.h>
#include "../harness/drivers/fidelity.h"
#include "check.h"

static double logsoftmax_at(const float *x, int n, int id) {
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return (double)x[id] - mx - log(s);
}

static double kl64(const float *p, const float *q, int n) {
    double kl = 0, mp = p[0], mq = q[0], sp = 0, sq = 0;
    for (int i = 1; i < n; i++) mp = p[i] > mp ? p[i] : mp, mq = q[i] > mq ? q[i] : mq;
    for (int i = 0; i < n; i++) sp += exp((double)p[i] - mp), sq += exp((double)q[i] - mq);
    for (int i = 0; i < n; i++) {
        double lp = p[i] - mp - log(sp), lq = q[i] - mq - log(sq);
        kl += exp(lp) * (lp - lq);
    }
    return kl;
}

static void poison(mc_result *res) {
    memset(res, 0, sizeof *res);
    res->r.ans_nll = res->r.kl = res->r.top1 = res->r.rel_err = NAN;
    res->r.ans_tokens = res->r.fid_steps = -7;
}

int main(void) {
    const char *path = model_default_path();
    if (access(path, R_OK)) {
        printf("SKIP: no model at %s (make model)\n", path);
        return 0;
    }
    test_seed();
    char err[512];
    kv_model *m = model_load(path, err, sizeof err);
    CHECK(m != NULL, "%s", err);
    if (!m) return check_done("test_fidelity");
    /* f32 activations: the answer NLL is compared with the prefill's f32 GEMMs to 2e-3;
     * the default 8-bit activations move it by ~1e-2 (model_ref.py --q8 on the logits) */
    model_set_f32_activations(m, 1);
    const kv_model_config *cf = model_config(m);
    const int V = cf->n_vocab, L = cf->n_layer;
    int n = test_int(120, 220);
    int32_t *ids = malloc(sizeof *ids * (n + 64));
    for (int i = 0; i < n; i++) ids[i] = test_int(300, 20000);   /* ordinary tokens */
    tc_case tc;
    tc_case_init(&tc);
    tc.reference = strdup("The best thing to do in San Francisco is eat a sandwich in the park.");
    mc_case c = {.model = m, .tc = &tc, .ids = ids, .n = n, .n_context = n, .max_new = 12, .n_pf = n};
    const kv_method *full = kv_method_find("fullkv"), *snap = kv_method_find("snapkv");
    const kv_method *ms[2] = {full, snap};
    double bs[2] = {1, 32};
    kv_needs needs = mc_union_needs(&c, ms, bs, 2);
    CHECK(mc_prefill(&c, &needs, err, sizeof err) == 0, "prefill: %s", err);
    fid_ref ref;
    CHECK(fid_ref_build(&c, 8, &ref, err, sizeof err) == 0, "reference: %s", err);
    CHECK(ref.k > 0 && ref.k <= 8 && ref.n_ans > 5 && ref.n_ans <= 12, "k %d, answer tokens %d", ref.k, ref.n_ans);

    /* the reference tokens: the plain engine's greedy answer */
    int32_t plain[16];
    int np = model_generate_plain(m, ids, n, 8, plain, NULL, err, sizeof err);
    CHECK(np >= ref.k, "plain generation: %d tokens (%s)", np, err);
    for (int s = 0; s < ref.k && s < np; s++) CHECK(plain[s] == ref.tok[s], "step %d: plain %d, reference %d", s, plain[s], ref.tok[s]);

    /* FullKV against itself */
    mc_result res;
    poison(&res);
    fid_measure(&c, full, 1, &ref, &res);
    CHECK(res.r.fid_steps == ref.k && res.r.kl == 0 && res.r.top1 == 1 && res.r.rel_err == 0,
          "fullkv vs itself: steps %d, kl %g, top1 %g, err %g", res.r.fid_steps, res.r.kl, res.r.top1, res.r.rel_err);
    for (int l = 0; res.layer_err && l < L; l++) CHECK(res.layer_err[l] == 0, "layer %d error %g", l, res.layer_err[l]);
    CHECK(res.layer_err != NULL && res.r.layer_err == res.layer_err, "per-layer errors recorded");
    /* its answer NLL against prefills of prompt + answer prefix */
    double want = 0;
    for (int i = 0; i < ref.n_ans; i++) {
        kv_prefill_out pf;
        kv_needs none = {0};
        ids[n + i] = 0;
        if (i) ids[n + i - 1] = ref.ans[i - 1];
        if (model_prefill(m, ids, n + i, &none, &pf, err, sizeof err)) {
            CHECK(0, "prefill %d: %s", i, err);
            break;
        }
        want -= logsoftmax_at(pf.last_logits, V, ref.ans[i]);
        prefill_out_free(&pf);
    }
    want /= ref.n_ans;
    CHECK(res.r.ans_tokens == ref.n_ans && fabs(res.r.ans_nll - want) <= 2e-3 * want, "answer NLL %.6f, prefills %.6f",
          res.r.ans_nll, want);
    mc_result_clear(&res);

    /* SnapKV at 32 tokens, recomputed here */
    poison(&res);
    fid_measure(&c, snap, 32, &ref, &res);
    kv_setup s = mc_setup(&c, snap, 32);
    kv_state *st = snap->init(&s, err, sizeof err);
    CHECK(st != NULL, "snapkv init: %s", err);
    float *logits = malloc(sizeof *logits * V);
    double kl = 0;
    int agree = 0;
    for (int l = 0; st && l < L; l++) {
        kv_prefill p = prefill_layer(&c.pf, l);
        CHECK(snap->ingest(st, &p, err, sizeof err) == 0, "ingest: %s", err);
    }
    memcpy(logits, c.pf.last_logits, sizeof *logits * V);
    for (int t = 0; st && t < ref.k; t++) {
        int id = ref.tok[t], pos = n + t;
        kv_token info = {pos, (float)model_surprisal(m, logits, id), model_sent_end(m, id)};
        CHECK(model_decode(m, snap, st, id, pos, &info, logits) == 0, "decode %d", t);
        kl += kl64(ref.logp + (size_t)V * t, logits, V);
        agree += model_argmax(logits, V) == model_argmax(ref.logp + (size_t)V * t, V);
    }
    if (st) snap->free(st);
    kl /= ref.k;
    CHECK(res.r.fid_steps == ref.k && fabs(res.r.kl - kl) <= 1e-9 * kl && kl > 0, "snapkv KL %.12g, here %.12g", res.r.kl,
          kl);
    CHECK(res.r.top1 == (double)agree / ref.k, "snapkv top-1 %g, here %d/%d", res.r.top1, agree, ref.k);
    int finite = res.layer_err != NULL, positive = 0;
    for (int l = 0; res.layer_err && l < L; l++)
        finite &= isfinite(res.layer_err[l]) && res.layer_err[l] >= 0, positive += res.layer_err[l] > 0;
    CHECK(finite && positive > L / 2, "snapkv layer errors: finite %d, positive %d of %d", finite, positive, L);
    CHECK(res.r.ans_tokens == ref.n_ans && isfinite(res.r.ans_nll) && res.r.ans_nll > 0, "snapkv answer NLL %g",
          res.r.ans_nll);
    printf("fullkv answer NLL %.4f; snapkv@32: NLL %.4f, KL %.4f, top-1 %.2f, mean layer error %.4f\n", want,
           res.r.ans_nll, res.r.kl, res.r.top1, res.r.rel_err);
    mc_result_clear(&res);
    free(logits);
    fid_ref_free(&ref);
    mc_free(&c);
    tc_case_free(&tc);
    free(ids);
    model_free(m);
    return check_done("test_fidelity");
}
