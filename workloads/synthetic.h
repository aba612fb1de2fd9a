/* A seeded synthetic workload: per-layer, per-head Q/K/V streams shaped like a real
 * model's on a needle-in-a-haystack prompt, without a model.
 *
 * The prompt (ctx tokens) is
 *   [sinks][haystack: topic segments, needle spans planted inside][question]
 * followed by n_decode decode tokens. Per layer and kv head:
 *   - sink tokens (the first few) have a large key along a sink direction s that every
 *     query carries a component of, and small values;
 *   - a haystack token of segment S has key Bk_S (mu_S + c_t) + A_pos*pos(t) + noise and
 *     value Bv_S (mu_S + c_t) + noise: rank-4 topic bases, a per-segment mean mu_S, a
 *     per-token coefficient c_t, and a slowly rotating positional component pos(t);
 *   - a needle span is a short run of tokens; its middle token is the needle: key N_KEY*dir_i,
 *     value a distinctive vector of norm N_VAL (larger than any haystack value);
 *   - surprisal (log-normal, high at topic-segment starts) and sentence ends (every 15..30
 *     tokens and at segment ends) ignore the needles, unless oracle_hints plants them;
 *   - local heads query along their segment's mean key direction plus pos(t) plus the
 *     sink direction, so they attend to the sinks and the recent segment;
 *   - retrieval heads (one per kv group, layers >= 1) behave like local heads, except
 *     on question tokens and in the retrieval phase of decoding, where they query the
 *     asked needle's key direction.
 * Positional, topic and needle-key directions are orthogonal to the sink direction s,
 * so sink attention is set by the query's sink component alone.
 *
 * Variants: single (one needle), multikey (n_needles needle-shaped keys sharing a common
 * direction, cosine 0.6, each with its own value; one is asked), multivalue (n_needles
 * needles whose keys share one direction, cosine 0.8, the question asks them all and the
 * retrieval phase asks each in turn).
 *
 * Retrieval phase: the last n_phase decode steps, preceded by a sentence end so the
 * answer is a sentence of its own. single/multikey: 2 steps, both query the asked needle,
 * the last one is scored. multivalue: n_needles + 1 steps, the first queries the shared
 * direction, then step k queries needle k-1 and is scored against it.
 *
 * Determinism: all randomness comes from splitmix64 streams keyed by (seed, purpose,
 * layer, head), so a layer can be generated alone and any thread count gives the same
 * bytes. */
#ifndef KV_SYNTHETIC_H
#define KV_SYNTHETIC_H
#include <stddef.h>
#include <stdint.h>

enum { SYN_MAX_NEEDLES = 16, SYN_RANK = 4, SYN_N_HAY = 64 };

typedef enum { SYN_SINGLE = 0, SYN_MULTIKEY = 1, SYN_MULTIVALUE = 2 } syn_kind;

/* "single", "multikey", "multivalue" */
const char *syn_kind_name(syn_kind k);
/* Accepts the variant names and the workload names synthetic-niah, synthetic-multikey,
 * synthetic-multivalue. 0, or -1 if unknown. */
int syn_kind_parse(const char *s, syn_kind *out);

typedef struct {
    int n_layers, n_heads, n_kv_heads, head_dim;
    int ctx, n_decode;
    double depth;          /* in [0,1]: where the (first) needle sits in the haystack */
    syn_kind kind;
    int n_needles;         /* multikey / multivalue (single uses 1) */
    uint64_t seed;
    int oracle_hints;      /* 0 (default): surprisal and sentence ends are drawn without regard to
                              the needles. 1 (an ablation): needle spans are sentences of their
                              own, surprising at their start (~6.5) and at the needle (~7.5) */
} syn_config;

/* n_layers 4, H 8, Hkv 2, d 64, ctx 4096, n_decode 8, depth 0.5, single, 4 needles, seed 1,
 * no oracle hints. */
void syn_defaults(syn_config *c);
/* 0, or -1 with a one-line reason (shape, ctx too small for the layout, decode too short). */
int syn_check(const syn_config *c, char *err, size_t errlen);

/* Token roles. */
enum { SYN_ROLE_SINK, SYN_ROLE_HAY, SYN_ROLE_NEEDLE_SPAN, SYN_ROLE_NEEDLE, SYN_ROLE_QUESTION,
       SYN_ROLE_DECODE };

typedef struct {
    syn_config cfg;
    int n_total;               /* ctx + n_decode */
    int n_sink;                /* sink tokens [0, n_sink) */
    int q_start;               /* question tokens [q_start, ctx) */
    int span_len;              /* tokens per needle span */
    int n_needles;
    int needle_pos[SYN_MAX_NEEDLES];    /* the needle (key/value) token of needle i */
    int span_start[SYN_MAX_NEEDLES];
    int asked;                 /* single/multikey: the needle the question asks */
    int n_phase;               /* decode steps of the retrieval phase (the last ones) */
    /* Per token [n_total]. */
    float *surprisal;          /* -ln p, surprisal[0] = 0 */
    uint8_t *sent_end;
    uint8_t *role;
    int32_t *segment;          /* topic segment of the token (needle spans keep the one they cut) */
    int n_segments;
    int32_t *seg_start;        /* [n_segments + 1]; segment 0 holds the sinks */
    uint8_t *retrieval;        /* [n_layers][n_heads]: 1 for a retrieval head */
    int hay[SYN_N_HAY];        /* haystack positions whose values are the distractor sample */
    int n_hay;
} syn_workload;

syn_workload *syn_create(const syn_config *c, char *err, size_t errlen);
void syn_free(syn_workload *w);

/* One layer's tensors for all n_total tokens:
 *   Q [n_total][H][d]; K, V: kv head j, token t at K + j*kv_stride + t*d
 *   (kv_stride >= n_total * d). Deterministic in (seed, layer). */
void syn_layer(const syn_workload *w, int layer, float *Q, float *K, float *V, size_t kv_stride);

/* Wo [rows][cols] of a layer, for methods that ask for the output projection
 * (kv_needs.wo): N(0, 1/cols) entries, deterministic in (seed, layer). */
void syn_wo(const syn_workload *w, int layer, float *Wo, int rows, int cols);

/* The needle asked at decode step s (0-based), or -1 if step s is not scored. */
int syn_scored_needle(const syn_workload *w, int step);

/* 1 if o is strictly nearer (L2) to target than to every one of the n rows of
 * distract ([n][d]), else 0. */
int syn_nearest(const float *o, const float *target, const float *distract, int n, int d);

/* Retrieval score of attention outputs out [n_layers][n_decode][H][d] (the per-layer
 * V arrays as syn_layer wrote them). A probe is (layer, retrieval head h, scored step s)
 * asking needle i; it is a hit when out[l][s][h] is nearer (L2) the value of needle i
 * (V at needle_pos[i], kv head h/g) than every distractor: the values of the other
 * needles and of the n_hay haystack sample positions, same layer and kv head.
 * single/multikey: one scored step, so the score is the fraction of retrieval heads
 * that retrieve the needle. multivalue: every needle has its own step, so the score is
 * the fraction of (needle, retrieval head) pairs retrieved, i.e. the mean fraction of
 * the needle values each retrieval head recovers. Returns hits / probes in [0,1]. */
double syn_score(const syn_workload *w, const float *const *V, size_t kv_stride, const float *out,
                 int *hits, int *probes);

/* err[l] = ||out_l - ref_l|| / ||ref_l||, L2 over all decode steps and heads of layer l
 * (out, ref: [n_layers][n_decode][H][d]). Returns the mean over layers. */
double syn_layer_errors(const syn_workload *w, const float *out, const float *ref, double *err);

#endif
