/* Training SeKV's zoom-in with the base model frozen (reference §8 "Training"): the
 * routing projections W, thresholds tau and the rank gate g_phi are fitted to the
 * teacher's (full attention's) behaviour at mined query positions. Gradients are written
 * by hand; everything runs in double on plain arrays. The model-facing part (prefill,
 * capturing queries, mining) is methods/sekv/train/sekv_teacher.c; the command is train-sekv.
 *
 *   data       sekv_tdoc: one document's fixed inputs, built once (sekv_tdoc.c)
 *   loss       sekv_train_loss: loss and gradient for some of a document's positions
 *   optimiser  AdamW, cosine schedule with linear warm-up, global-norm clipping (sekv_optim.c)
 *
 * The loss, per row = (mined position t, layer l, query head h) of the batch:
 *   student entries (one softmax, sekv_mix_attend's math): every full-resolution token
 *   of [0, t] with logit q.k_i/sqrt d; for each span S VISIBLE at t (entirely before
 *   t - local: gap fix 2, causal at span granularity) either its coarse row
 *   q.kbar/sqrt d + ln|S| + ln(1 - z) (z = 0) or its |S| reconstructed rows
 *   q.k~_i/sqrt d + ln z (z = 1), k~ = U diag(m_K .* s_K) Vt. z = 1[alpha~ > tau]
 *   forward; backward the straight-through gradient of sigmoid((alpha~ - tau)/T), T = 0.1.
 *   Like sekv_mix_attend with hard z, the side a 1e-6 clamp would switch off is left out.
 *   KL_row = sum_i a_i ln(a_i / p_i) over tokens i in [0, t]: a = teacher (full attention),
 *   p = the student's distribution over tokens (a coarse row's probability split evenly
 *   over its |S| tokens, as the ln|S| bias makes it stand for |S| copies). Its gradient
 *   is softmax minus the teacher projected on the entries.
 *   y = coverage target over the visible spans (sekv_coverage of the teacher's span
 *   masses, rho = 0.9); BCE with positive weight w_pos on alpha~ (logit form).
 *
 *   L = mean_rows KL_row
 *     + lambda_zoom   * mean_(row, visible span) BCE(alpha~, y)
 *     + lambda_recon  * mean_(pos, layer, kv head) sum_(visible S, c < r) (1-m_K)^2 s_K^2 + (1-m_V)^2 s_V^2
 *     + lambda_budget(step) * ( mean_rows sum_(visible S) z_STE            (gap fix 3: STE z)
 *                              + beta * mean_(pos, layer, kv head) sum_(visible S, c < r) m_K + m_V )
 *     + lambda_order  * mean_rows CE(teacher span shares, softmax_(visible S) x_S)   [kvbench, off by default]
 * Sums over spans inside a row, means over rows, so the weights do not scale with the
 * batch or the document length (the reference sums recon/budget over the whole batch).
 * lambda_budget(step) ramps linearly from 0 over the first half of training.
 */
#ifndef KV_SEKV_TRAIN_H
#define KV_SEKV_TRAIN_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "../sekv_params.h"
#include "../sekv_spans.h"

/* ---------------------------------------------------------------- parameters (double) */

/* The trainable parameters in double, same arrays and layout as sekv_params (one
 * allocation, in file order starting at W). Also used for gradients and Adam moments. */
typedef struct {
    int L, H, d, R, dp, hidden;
    size_t n;                                 /* total scalars */
    double *W, *tau, *g_w1, *g_b1, *g_w2, *g_b2, *g_w3, *g_b3;
} sekv_tparams;

int sekv_tparams_alloc(sekv_tparams *t, int L, int H, int d, int R);   /* zeroed; 0 or -1 */
void sekv_tparams_free(sekv_tparams *t);
int sekv_tparams_from(sekv_tparams *t, const sekv_params *p);          /* alloc + copy */
void sekv_tparams_to(const sekv_tparams *t, sekv_params *p);           /* same shapes */
void sekv_tparams_zero(sekv_tparams *t);
/* The 8 arrays in file order with their lengths (for checks and reports). */
void sekv_tparams_arrays(const sekv_tparams *t, double *arr[8], size_t len[8]);
extern const char *const sekv_tparam_names[8];

/* ---------------------------------------------------------------- one document's data */

/* Everything the loss needs from one document, computed once from the frozen model:
 * the whole document's segmentation and span factors, and per mined position the
 * queries, the teacher's logits and the query-dependent factor products. */
typedef struct {
    int L, H, Hkv, d, R, n, local;
    int n_spans;
    sekv_span *span;           /* [ns] compressed spans, ascending */
    int32_t *rank;             /* [ns] r = min(|S|, d, R) */
    size_t *u_off;             /* [ns + 1] span s's U inside one (layer, kv head) block */
    float *kbar;               /* [L][Hkv][ns][d] surprisal-weighted mean key */
    float *sK, *sV;            /* [L][Hkv][ns][R] singular values of K_S, V_S (0 beyond r) */
    float *U;                  /* [L][Hkv][u_off[ns]] left factors of K_S, [|S|][r] each */
    int n_pos;
    int32_t *pos;              /* [P] mined positions, ascending */
    int32_t *nvis;             /* [P] spans visible at pos[p] (a prefix of span[]) */
    float *q;                  /* [P][L][H][d] post-RoPE queries */
    size_t *lo_off;            /* [P+1] logit: position p's rows, [L][H][pos+1] */
    float *logit;              /* teacher logits q.k_i/sqrt d, i in [0, pos] */
    size_t *g_off;             /* [P+1] gq: position p's rows, [L][H][G_p], G_p = sum_{s<nvis} r_s */
    float *gq;                 /* (Vt_K[s] q)/sqrt d, components of the visible spans in order */
    size_t *c_off;             /* [P+1] cq and y: position p's rows, [L][H][nvis] */
    float *cq;                 /* q.kbar_s/sqrt d */
    uint8_t *y;                /* coverage targets */
} sekv_tdoc;

/* Builds a document's data. K, V: [L][Hkv][n][d] (kv_prefill_out's layout, post-RoPE);
 * surprisal [n]; seg: the document's segmentation (its spans are the compressed spans);
 * Q: [P][L][H][d] the queries at pos[0..P) (ascending, each in [0, n)); local: a span is
 * visible at t iff start + len <= t - local; rho: coverage level. Factors come from
 * sekv_factorize (rank cap R), coarse keys from sekv_coarse. 0, or -1 with err. */
int sekv_tdoc_build(sekv_tdoc *doc, const float *K, const float *V, const float *surprisal,
                    int n, int L, int Hkv, int d, int H, const sekv_seg *seg, int R, int local,
                    const int32_t *pos, int P, const float *Q, double rho, char *err,
                    size_t errlen);
void sekv_tdoc_free(sekv_tdoc *doc);
size_t sekv_tdoc_bytes(const sekv_tdoc *doc);
/* Cache files: a versioned header, the arrays, a checksum. 0, or -1 with err. */
int sekv_tdoc_save(const sekv_tdoc *doc, const char *path, char *err, size_t errlen);
int sekv_tdoc_load(sekv_tdoc *doc, const char *path, char *err, size_t errlen);

/* Coverage target (reference §8): normalise mass[0..n) by its sum, sort descending (ties:
 * lower index first) and set y = 1 on the smallest prefix whose sum reaches rho; all 0
 * when the total is not positive. */
void sekv_coverage(const double *mass, int n, double rho, uint8_t *y);

/* Mining (reference §8, scaled down): `count` evenly spaced candidates in [1, n-1]
 * (linspace, rounded half to even, duplicates removed); returns how many. */
int sekv_candidates(int n, int count, int32_t *out);
/* The `keep` candidates with the highest score (ties: earlier position), written to out
 * in ascending position order; returns how many. */
int sekv_mine(const int32_t *cand, const double *score, int nc, int keep, int32_t *out);

/* ---------------------------------------------------------------- loss and gradient */

typedef struct {
    double lambda_zoom, lambda_recon, lambda_budget, beta, w_pos, temp;
    /* 0: the z budget is sum_(visible S) z per row, averaged over rows (as written above);
     * 1: averaged over (row, visible span) elements instead, i.e. the expansion rate, on
     *    the BCE's scale (per element the row sum weighs nvis times more than the BCE). */
    int budget_per_span;
    /* 0: the rank gate's two terms as written above (sums over spans and directions of
     *    s^2 and of m: their scale follows the model's key and value norms);
     * 1: means instead: recon = mean_(pos, layer, kv head, visible S) of the share of the
     *    span's K energy plus the share of its V energy the gate drops
     *    (sum_c (1-m_c)^2 s_c^2 / sum_c s_c^2, each in [0, 1]); the m budget = the mean of
     *    (m_K + m_V) / 2 over the same spans and their r directions. Both then sit on the
     *    KL's and BCE's scale for any model [kvbench]. */
    int gate_norm;
    /* Weight of the span-order term [kvbench] (0 = off, the reference's loss): per row, the
     * cross-entropy of softmax over the visible spans of the routing logits x_s against the
     * teacher's span masses (each span's share of the teacher's attention on the visible
     * spans), averaged over rows. The zoom BCE's coverage targets say which spans get some
     * far attention; this term says in which order to expand them, which is what the room
     * B - P rewards (sekv selects spans best-first until the room is full). */
    double lambda_order;
} sekv_loss_cfg;
/* lambda_zoom 1.0, lambda_recon 0.5, lambda_budget 0.1, beta 0.1, w_pos 10, temp 0.1,
 * budget_per_span 0, gate_norm 0, lambda_order 0 */
sekv_loss_cfg sekv_loss_defaults(void);

typedef struct {
    double total, kl, zoom, recon, budget;     /* budget: unweighted, as in L's bracket */
    double order;                              /* span-order cross-entropy, mean over rows */
    double order_floor;                        /* its floor: the teacher shares' entropy, mean over rows */
    double expand;                             /* share of (row, visible span) with z = 1 */
    double pos_rate, recall, precision;        /* y = 1 share; zoomed among y = 1; y = 1 among zoomed */
    double eff_rank;                           /* mean sum_c m_K over visible spans */
    long rows, elems;
} sekv_loss_parts;

/* The straight-through estimator as a function, for gradient checks. mode 1 records,
 * for every (row, visible span) element, the hard z and sigmoid((alpha~ - tau)/T);
 * mode 2 evaluates the surrogate loss, where z = z_rec + sigmoid(...) - sig_rec with
 * z_rec's side (coarse or reconstructed) kept. Its gradient at the recorded point is
 * exactly the STE gradient. Arrays of sekv_tdoc_elems(doc) entries. */
typedef struct {
    int mode;
    uint8_t *zhard;
    double *sig;
} sekv_ste_probe;
size_t sekv_tdoc_elems(const sekv_tdoc *doc);

/* Loss over positions sel[0..n_sel) of doc (indices into doc->pos; NULL = all) with the
 * budget weight lambda_b; grad (optional, same shapes as th) is overwritten with dL/dth.
 * Layers run on kb_parallel_for; the result does not depend on the thread count.
 * Returns 0, or -1 on shape mismatch / out of memory. */
int sekv_train_loss(const sekv_tparams *th, const sekv_tdoc *doc, const int *sel, int n_sel,
                    const sekv_loss_cfg *cfg, double lambda_b, sekv_tparams *grad,
                    sekv_loss_parts *parts, sekv_ste_probe *probe);

/* The same forward, exposed for checks against sekv_spans.h:
 * the rank gate in double (m [R]) and the relevance alpha~ of one (layer, head, span). */
void sekv_tgate(const sekv_tparams *th, const float *s, int r, const float *kbar, double *m);
double sekv_talpha(const sekv_tparams *th, int layer, int head, const float *q,
                   const float *kbar, int len);
/* The student's probabilities of one row (position index p, layer, head) in
 * sekv_mix_attend's entry order (full-resolution tokens ascending, then per visible span
 * its coarse row or its reconstructed rows); z (optional, [nvis]) receives the hard
 * gates. Returns the entry count (-1: out of memory). probs needs pos+1 floats. */
int sekv_train_row_probs(const sekv_tparams *th, const sekv_tdoc *doc, int p, int layer,
                         int head, double *probs, uint8_t *z);

/* ---------------------------------------------------------------- optimiser */

typedef struct {
    double lr, weight_decay, beta1, beta2, eps, warmup_frac, clip;
    int steps;
} sekv_optim_cfg;
/* lr 1e-3, weight decay 0.01, betas 0.9/0.999, eps 1e-8, warm-up 10%, clip 1.0 */
sekv_optim_cfg sekv_optim_defaults(int steps);

/* Learning rate at step s (0-based) of `steps`: linear warm-up over the first
 * floor(warmup_frac * steps) steps ((s+1)/W), then cosine decay to 0. */
double sekv_lr_at(const sekv_optim_cfg *c, int s);
/* lambda_budget at step s: lambda * min(1, s / max(1, floor(steps / 2))). */
double sekv_budget_at(double lambda, int s, int steps);
/* Scales g to global L2 norm <= clip (PyTorch's clip_grad_norm_: factor
 * clip / (norm + 1e-6) when below 1). Returns the norm before clipping. */
double sekv_clip(sekv_tparams *g, double clip);
/* One AdamW step (PyTorch semantics: decoupled decay theta -= lr*wd*theta, then Adam
 * with bias correction) at step number t >= 1; m, v are the moments. */
void sekv_adamw(sekv_tparams *th, const sekv_tparams *g, sekv_tparams *m, sekv_tparams *v,
                const sekv_optim_cfg *c, double lr, int t);

#endif
