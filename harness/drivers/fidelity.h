/* Graded fidelity of a method's cache against FullKV, per case: signals that still move
 * when a small model cannot answer.
 *
 *   answer NLL  mean -ln p of the reference answer's tokens (tc reference, else its first
 *               answer; at most FID_MAX_ANSWER tokens), teacher-forced through the method's
 *               compressed cache; the same tokens for every method
 *   KL, top-1   FullKV's own greedy answer, its first K steps teacher-forced through the
 *               method: mean KL(FullKV || method) of the next-token distributions, and the
 *               share of steps whose argmax agrees. The first answer token comes from the
 *               shared (uncompressed) prefill, so the steps compared are the K after it.
 *   layer error per layer, ||attn_method - attn_FullKV|| / ||attn_FullKV|| of the attention
 *               output on those K steps, averaged over steps
 *
 * Cost, per case: K decode steps of FullKV for the reference; per result: two more
 * compressions of the prefill (each teacher-forced pass starts from a fresh cache) and
 * K + (answer tokens - 1) decode steps. */
#ifndef KV_FIDELITY_H
#define KV_FIDELITY_H
#include "model_case.h"

enum { FID_MAX_ANSWER = 64 };

typedef struct fid_ref {
    int k;              /* steps compared (< K when FullKV stops earlier) */
    int32_t *tok;       /* [k]: FullKV's greedy tokens g0 .. g(k-1), fed in turn */
    float *logp;        /* [k][n_vocab]: FullKV's log-softmax after feeding g0 .. g(s) */
    float *attn;        /* [k][n_layer][n_head * head_dim]: FullKV's attention outputs */
    int32_t *ans;       /* the reference answer's tokens */
    int n_ans;
} fid_ref;

/* FullKV's reference for case c over K steps. 0, or -1 with err. */
int fid_ref_build(mc_case *c, int K, fid_ref *ref, char *err, size_t errlen);
void fid_ref_free(fid_ref *ref);

/* Measures method m at budget against ref into res->r (ans_nll, kl, top1, rel_err) and
 * res->layer_err. A method that cannot be set up again leaves them unset. */
void fid_measure(mc_case *c, const kv_method *m, double budget, const fid_ref *ref, mc_result *res);
/* The same for n pairs at once, res[j] for (methods[j], budgets[j]): their teacher-forced
 * steps go through model_decode_batch together (the same metrics as fid_measure on each).
 * Pairs whose result is not ok are left alone. */
void fid_measure_pairs(mc_case *c, const kv_method *const *methods, const double *budgets, const fid_ref *ref,
                       mc_result *res, int n);

#endif
