/* The method interface: every KV-cache policy is one `const kv_method` in its own file,
 * registered in registry.c. The caller (synthetic driver or model engine) does the
 * prefill once, hands each layer's post-RoPE K/V and the statistics the method asked
 * for to ingest(), then for every decoded token and layer calls append() with the
 * token's k/v and attend() with its query.
 *
 * Storage rule: KV is stored once per kv head (never expanded per query head), in the
 * setup's element type (kv_type: every method pays the same), and memory() reports bytes
 * actually resident, not masked entries.
 */
#ifndef KV_METHOD_H
#define KV_METHOD_H
#include <stddef.h>
#include <stdint.h>
#include "../kernels/kvtype.h"

/* What happens to the cache while decoding (kvbench run --decode), the same for every
 * method of a run:
 *   APPEND (default; what the papers' reference code does): the prompt is compressed to
 *     the budget once; decoded (and --question-after) tokens join at full resolution and
 *     are never evicted, folded or merged. Methods whose paper evicts while decoding
 *     (kv_method.evicts_decoding: StreamingLLM, H2O) keep doing so: that is their method.
 *   HOLD: every method keeps its fast-tier rows within the budget at every step, by its
 *     own rule (SnapKV family: evict the lowest score; SeKV: fold into spans; SentenceKV:
 *     B rows in its working set). */
typedef enum { KV_DECODE_APPEND = 0, KV_DECODE_HOLD = 1 } kv_decode_rule;

/* "append" / "hold"; kv_decode_parse returns 0 and sets *out, or -1 for anything else. */
const char *kv_decode_name(int rule);
int kv_decode_parse(const char *s, int *out);

typedef struct {
    int n_layers, n_heads, n_kv_heads, head_dim;
    int n_prompt;          /* tokens ingested at prefill (the compressed part) */
    int max_decode;        /* decode tokens that may follow (capacity hint) */
    double budget_frac;    /* in (0,1]: keep max(1, floor(frac * n_prompt)) per layer per kv head */
    int budget_tokens;     /* > 0: absolute count instead (budget_frac is then 0) */
    int kv_type;           /* element type of the stored K/V rows (kernels/kvtype.h: KB_F32 = 0,
                              KB_F16, KB_BF16); memory() counts kb_kvtype_bytes(kv_type) per
                              element, auxiliary f32 state at 4 bytes */
    const char *params;    /* "key=value,key=value" overrides of the method's defaults, or NULL */
    uint64_t model_hash;   /* the model file's identity (sekv_model_hash of its bytes), 0 = unknown;
                              lets a method use state trained for this model (SeKV's params) */
    int decode_rule;       /* kv_decode_rule (0 = append) */
} kv_setup;

/* Statistics a method asks the prefill for. */
typedef struct {
    int col_mass;          /* cumulative attention column sums over all prompt queries (H2O) */
    int window;            /* > 0: probability rows of the last `window` prompt queries (SnapKV) */
} kv_needs;

/* One layer's prefill, as handed to ingest(). */
typedef struct {
    int layer, n;               /* n = n_prompt */
    const float *K, *V;         /* kv head j, token t at K + j*kv_stride + t*d; post-RoPE */
    size_t kv_stride;
    const float *col_mass;      /* [H][n] if asked for, else NULL */
    const float *win_probs;     /* [H][win][n] if asked for: rows for queries n-win .. n-1 */
    int win;                    /* rows provided; >= what the method asked (use the last ones) */
    const float *surprisal;     /* [n], -ln p(x_t | x_<t), surprisal[0] = 0; NULL while the
                                   prefill streams (known after its last layer: a method
                                   that reads it sets kv_method.needs_surprisal) */
    const uint8_t *sent_end;    /* [n], 1 where the token's text ends a sentence (.!? or blank line) */
} kv_prefill;

/* A decoded token joining the cache. */
typedef struct {
    int pos;                    /* absolute position (n_prompt + step) */
    float surprisal;
    int sent_end;
} kv_token;

typedef struct {
    size_t fast_bytes, fast_peak;     /* resident on the fast tier (GPU): K/V rows + aux state */
    size_t fast_aux_bytes;            /* of fast_bytes: auxiliary state (sentence vectors, summaries) */
    size_t slow_bytes, slow_peak;     /* resident on the slow tier (host) */
    long   fast_tokens;               /* K/V rows resident on the fast tier, all layers and kv heads */
} kv_mem;

/* Per (layer, query head) counters, for the results database. */
typedef struct {
    double kept;        /* K/V rows this head attends over at the last step */
    double events;      /* method-specific events so far (evictions, zoom-ins, retrievals) */
} kv_headstat;

typedef struct {
    const char *name, *deflt, *help;
} kv_param;

/* A numeric parameter's valid range, enforced by kv_param_int/kv_param_double (and listed
 * by kvbench methods). `special` is one more accepted value outside [lo, hi] (for example
 * -1 = automatic), NAN when none. */
typedef struct {
    const char *name;
    double lo, hi, special;
} kv_range;

typedef struct kv_state kv_state;

typedef struct kv_method {
    const char *name;
    const char *summary;
    const kv_param *params;                /* terminated by {NULL} */
    const kv_range *ranges;                /* terminated by {NULL}; NULL or partial: unchecked */
    int evicts_decoding;                   /* 1: the paper's policy evicts while decoding, so it
                                              does so under --decode append too (default params) */
    int keeps_all;                         /* 1: ignores the budget and keeps every token (FullKV,
                                              the reference) */
    int layer_budgets;                     /* 1: per-layer budgets summing to L*B (PyramidKV): B
                                              holds on the mean over layers, not in each layer */
    int needs_surprisal;                   /* 1: ingest reads the prompt's surprisal, which exists
                                              only after the whole forward pass (SeKV): the driver
                                              keeps every layer's K/V for it until then, while the
                                              other methods ingest each layer as it is computed */
    /* Returns NULL and writes a one-line reason to err on bad params/budget. */
    kv_state *(*init)(const kv_setup *s, char *err, size_t errlen);
    void (*needs)(const kv_state *st, kv_needs *out);
    /* Called once per layer, in layer order. Returns 0, or -1 with err filled. */
    int (*ingest)(kv_state *st, const kv_prefill *p, char *err, size_t errlen);
    /* k, v: [Hkv][d] of the new token (post-RoPE). */
    void (*append)(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);
    /* q: [H][d] -> out: [H][d]. May evict afterwards (decode-time policies). */
    void (*attend)(kv_state *st, int layer, const float *q, float *out);
    void (*memory)(const kv_state *st, kv_mem *out);
    void (*head_stats)(const kv_state *st, int layer, int head, kv_headstat *out);
    /* Rows of (layer, kv head): returns the K/V rows resident on the fast tier now (what
     * memory() counts in fast_tokens); when pos is not NULL, also writes the positions of
     * the full-resolution token rows held on either tier, ascending, at most cap, and
     * their count to *npos. For the conformance test and accounting checks. */
    int  (*rows)(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos);
    void (*free)(kv_state *st);
} kv_method;

/* Registry (registry.c). */
int kv_method_count(void);
const kv_method *kv_method_at(int i);
const kv_method *kv_method_find(const char *name);   /* case-insensitive; NULL if unknown */

/* Helpers shared by methods (method_util.c). */
/* Budget in tokens per layer per kv head: max(1, floor(frac*n)) or the absolute count. */
int kv_budget(const kv_setup *s);
/* 0 when s->kv_type is a known element type, else -1 with "NAME: ..." in err. */
int kv_check_type(const kv_setup *s, const char *name, char *err, size_t errlen);
/* Look up key in "k=v,k=v" params, falling back to the method's declared default.
 * Returns 0 and stores the value, or -1 (err filled) when the value does not parse
 * or a key in params is not one of the method's parameters. */
int kv_param_int(const kv_method *m, const char *params, const char *key, int *out, char *err, size_t errlen);
int kv_param_double(const kv_method *m, const char *params, const char *key, double *out, char *err, size_t errlen);
int kv_param_check(const kv_method *m, const char *params, char *err, size_t errlen);
/* The value text of key as the method will read it: from params if given there, else the
 * declared default (which the test hook KVBENCH_TEST_DEFAULTS may replace). 0, or -1 if
 * key is not one of the method's parameters. */
int kv_param_text(const kv_method *m, const char *params, const char *key, char *buf, size_t buflen,
                  char *err, size_t errlen);

#endif
