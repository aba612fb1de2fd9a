/* SeKV building blocks as pure functions over plain arrays (reference §8). The method
 * (sekv.c) and the trainer (sekv_train.c) both use these, so what is trained is what runs.
 * All matrices are row-major; a "row" is one token's d floats. Nothing here keeps state.
 *
 *   segmentation      sekv_segment / sekv_segment_ex           (sekv_spans.c)
 *   coarse entry      sekv_coarse                               (sekv_spans.c)
 *   low-rank factors  sekv_factorize / sekv_reconstruct         (sekv_spans.c)
 *   rank gate MLP     sekv_gate_forward, sekv_gelu(_grad)       (sekv_route.c)
 *   routing           sekv_route_query / _key / _score          (sekv_route.c)
 *   attention         sekv_mix_attend: one query head, mixed resolution (sekv_route.c)
 */
#ifndef KV_SEKV_SPANS_H
#define KV_SEKV_SPANS_H
#include <stddef.h>
#include <stdint.h>
#include "sekv_params.h"

/* ---------------------------------------------------------------- segmentation */

typedef struct {
    int32_t start, len;         /* tokens start .. start+len-1 */
} sekv_span;

/* l_max meaning "no cap": spans are the maximal runs between anchors (the paper). */
#define SEKV_LMAX_NONE (1 << 20)

/* Token kinds in a segmentation. */
enum {
    SEKV_SPAN = 0,      /* inside a compressed span */
    SEKV_ANCHOR = 1,    /* surprisal anchor H_t > mu + alpha*sigma, or token 0 */
    SEKV_FORCED = 2,    /* sink or local-window token (sekv_segment_ex) */
    SEKV_SHORT = 3,     /* in a run shorter than l_min: kept at full resolution */
};

typedef struct {
    int n;
    uint8_t *kind;          /* [n] SEKV_SPAN / ANCHOR / FORCED / SHORT */
    sekv_span *span;        /* [n_spans] compressed spans, ascending, disjoint */
    int n_spans;
    int n_anchors, n_forced, n_short;   /* token counts of each full-resolution kind */
    double mu, sigma, threshold;        /* threshold = mu + alpha*sigma (fixed chunk: unused) */
} sekv_seg;

/* Segments n tokens by surprisal (reference §8, gap fix 6):
 *  - mu, sigma: mean and POPULATION std of surprisal[0..n) (double precision);
 *  - anchors: token 0 always, and every t with surprisal[t] > mu + alpha*sigma;
 *  - runs: maximal runs of non-anchor tokens. A run of m > l_max tokens is split into
 *    k = ceil(m / l_max) balanced pieces, the first m % k of length floor(m/k)+1 and the
 *    rest floor(m/k) (so pieces stay near l_max instead of leaving a tiny remainder);
 *  - a piece shorter than l_min is kept at full resolution (SEKV_SHORT), others are spans.
 * fixed_chunk > 0 (the fixed-chunk ablation): surprisal is ignored; token 0 is the only
 * anchor and tokens 1.. are cut into consecutive pieces of fixed_chunk (the last may be
 * shorter; shorter than l_min -> SEKV_SHORT). l_max is not applied then.
 * Requires n >= 1, l_min >= 1, l_max >= 1 (l_max >= l_min for spans to exist).
 * Returns 0, or -1 (bad arguments / out of memory); out is then zeroed. */
int sekv_segment(const float *surprisal, int n, double alpha, int l_min, int l_max,
                 int fixed_chunk, sekv_seg *out);
/* As sekv_segment, but tokens [0, sinks) and [n - local, n) are SEKV_FORCED (full
 * resolution) and split runs like anchors do; mu and sigma still cover all n tokens.
 * A forced token that is also an anchor counts as SEKV_FORCED. */
int sekv_segment_ex(const float *surprisal, int n, double alpha, int l_min, int l_max,
                    int fixed_chunk, int sinks, int local, sekv_seg *out);
/* The fixed-chunk ablation at the same anchors budget (claim C8): as many anchors as
 * sekv_segment_ex finds with these settings (its count, mu, sigma and threshold are kept),
 * but placed evenly instead of at surprisal peaks: the tokens between the sinks and the
 * local window are cut into that many chunks of equal length (+-1), each opening with
 * its one full-resolution token (token 0 the first when there are no sinks); the rest
 * of each chunk is its span (l_min and l_max as above). 0 or -1 as sekv_segment. */
int sekv_segment_even(const float *surprisal, int n, double alpha, int l_min, int l_max, int sinks,
                      int local, sekv_seg *out);
void sekv_seg_free(sekv_seg *s);
/* Persistent rows a segmentation costs per layer per kv head: full-resolution tokens
 * plus one coarse row per span. */
static inline int sekv_seg_persistent(const sekv_seg *s) {
    return s->n_anchors + s->n_forced + s->n_short + s->n_spans;
}
/* Splits a run of m tokens into balanced pieces of at most l_max (rule above); writes
 * the piece lengths to len (capacity ceil(m/l_max)) and returns their count. */
int sekv_split_run(int m, int l_max, int *len);

/* ---------------------------------------------------------------- coarse entry */

/* kbar = sum_t w_t K[t], vbar likewise, over len rows of d floats, with surprisal weights
 * w_t = H_t / sum H (negative surprisal counts as 0); uniform 1/len when the sum is 0 or
 * H is NULL.
 * w (optional, [len]) receives the weights (the trainer needs them). Sums in double. */
void sekv_coarse(const float *K, const float *V, const float *H, int len, int d, float *kbar,
                 float *vbar, float *w);

/* ---------------------------------------------------------------- low-rank factors */

/* Truncated SVD of one span's rows, A [len][d] ~= U diag(s) Vt, rank r = min(len, d, R),
 * computed by sekv_svd below (exact SVD, signs fixed). The arrays point into caller
 * memory buf of sekv_factor_floats(len, d, R) floats: U [len][r], s [r] (descending),
 * Vt [r][d]. */
typedef struct {
    int len, d, r;
    float *U, *s, *Vt;
} sekv_factor;

static inline int sekv_factor_rank(int len, int d, int R) {
    int r = len < d ? len : d;
    return r < R ? r : R;
}
static inline size_t sekv_factor_floats(int len, int d, int R) {
    size_t r = (size_t)sekv_factor_rank(len, d, R);
    return (size_t)len * r + r + r * (size_t)d;
}
/* The slow tier of one span (per kv head) holds whichever is smaller: its K and V factors
 * at rank cap R, or its len x d rows of K and V. 1 when the rows are (no larger). */
static inline int sekv_store_rows(int len, int d, int R) {
    return (size_t)len * d <= sekv_factor_floats(len, d, R);
}
/* Floats the slow tier holds for one span, K and V together. */
static inline size_t sekv_store_floats(int len, int d, int R) {
    return 2 * (sekv_store_rows(len, d, R) ? (size_t)len * d : sekv_factor_floats(len, d, R));
}
/* R <= SEKV_RMAX. Returns 0, or -1 (bad shape, out of memory, or NaN/Inf in A). */
int sekv_factorize(const float *A, int len, int d, int R, float *buf, sekv_factor *f);
/* The exact truncated SVD behind sekv_factorize (sekv_svd.c), with the kb_backend svd
 * contract: A [len][d] ~= U diag(S) Vt, U [len][r], S [r] descending, Vt [r][d], r <=
 * min(len, d); each row of Vt has its largest-magnitude entry positive. Computed in
 * double through the Gram matrix of the smaller side (only the r vectors asked for are
 * formed); plain C, so thread safe and the same on every backend. 0, or -1 (bad shape,
 * out of memory, NaN/Inf in A). */
int sekv_svd(const float *A, int len, int d, int r, float *U, float *S, float *Vt);
/* out [len][d] = U diag(m .* s) Vt; m [r] is the gate (NULL = all ones). Float sums of
 * r <= 64 terms (the hot loop of decode). */
void sekv_reconstruct(const sekv_factor *f, const float *m, float *out);

/* ---------------------------------------------------------------- rank gate */

/* Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), and its derivative. */
float sekv_gelu(float x);
float sekv_gelu_grad(float x);

/* Floats in the gate's forward cache (see sekv_gate_forward). */
static inline size_t sekv_gate_work_floats(const sekv_params *p) {
    return (size_t)(p->rank_cap + p->head_dim) + 4 * (size_t)p->hidden + (size_t)p->rank_cap;
}
/* The rank gate g_phi of one factor (shared by all layers and heads):
 *   x  = [s_i / s_1 for i < r, 0 for r <= i < R ; kbar / |kbar|]   (0 where s_1 or |kbar| is 0)
 *   a1 = g_w1 x + g_b1,  h1 = gelu(a1)        [hidden]
 *   a2 = g_w2 h1 + g_b2, h2 = gelu(a2)        [hidden]
 *   z3 = g_w3 h2 + g_b3, m_i = sigmoid(z3_i) for i < r, 0 beyond   [R]
 * s [r] are the factor's singular values (K's or V's own), kbar [d] the span's coarse key
 * (the key context for both). m receives R floats. work (NULL to skip) receives the
 * forward cache for backprop, in this order: x [R+d], a1, h1, a2, h2 [hidden each], z3 [R]. */
void sekv_gate_forward(const sekv_params *p, const float *s, int r, const float *kbar, float *m,
                       float *work);

/* ---------------------------------------------------------------- routing */

/* qhat [dp] = W q, W [dp][d] (= p->W + ((layer*H + head)*dp*d)); not normalised. */
void sekv_route_query(const float *W, const float *q, int d, int dp, float *qhat);
/* khat [dp] = W kbar / |W kbar| (0 if the norm is 0). */
void sekv_route_key(const float *W, const float *kbar, int d, int dp, float *khat);
/* Relevance alpha~ = sigmoid(qhat . khat / sqrt(dp) + ln len). */
float sekv_route_score(const float *qhat, const float *khat, int dp, int len);
/* Its logit, qhat . khat / sqrt(dp) + ln len: what decode ranks spans by, since alpha~
 * rounds to 1.0f for logits past ~17 and would tie there. */
float sekv_route_logit(const float *qhat, const float *khat, int dp, int len);

/* ---------------------------------------------------------------- attention */

/* Mixed-resolution attention of ONE query head (reference §8), one softmax over
 *   - nf full-resolution rows Kf/Vf [nf][d], bias 0;
 *   - per span s with gate z[s] in [0,1]:
 *       the coarse row (kbar[s], vbar[s]) with bias ln len[s] + ln max(1 - z, 1e-6),
 *         included when z[s] < 1;
 *       its len[s] reconstructed rows Kr[s], Vr[s] [len][d] with bias ln max(z, 1e-6),
 *         included when z[s] > 0 (Kr[s], Vr[s] may be NULL when z[s] == 0).
 * Hard z (0/1) gives exactly the inference path: a span is seen coarse or expanded, never
 * both (the reference's 1e-6 clamp weight is dropped rather than attended). Fractional z
 * (the trainer's soft gate) includes both with the log-gate biases. Logits q.k/sqrt(d) +
 * bias, softmax and weighted sum in double.
 * out [d]. probs (optional) receives one probability per included entry, in entry order:
 * the nf full rows, then for each span in order its coarse row (if included) followed by
 * its reconstructed rows (if included). Returns the entry count, i.e. probs' length
 * (-1 when out of memory).  */
typedef struct {
    int d;
    const float *q;                        /* [d] */
    int nf;
    const float *Kf, *Vf;                  /* [nf][d] */
    int ns;
    const int32_t *len;                    /* [ns] span lengths */
    const float *kbar, *vbar;              /* [ns][d] */
    const float *z;                        /* [ns] in [0,1] */
    const float *const *Kr, *const *Vr;    /* [ns] pointers to [len[s]][d], or NULL entries */
    float *out;                            /* [d] */
    float *probs;                          /* optional */
} sekv_mix_args;
int sekv_mix_attend(const sekv_mix_args *a);

#endif
