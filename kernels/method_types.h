/* The method interface, the one door between a KV-cache method and the rest of kvbench:
 * every policy is one `const kv_method` table, built in (its own file in methods/, one
 * line in registry.c) or loaded from a plugin (--plugin FILE.so, KV_PLUGIN_SYMBOL). The
 * table is versioned (KV_METHOD_ABI, checked on registration) and every member says below
 * whether it is required or optional; the registry fills the optional ones' defaults once
 * (kv_method_resolve), so code that takes a method from the registry (kv_method_at/find)
 * calls any member without a NULL check. Nothing outside methods/ asks a method by name.
 *
 * The caller (synthetic driver, model engine, simulator) does the prefill once, hands
 * each layer's post-RoPE K/V and the statistics the method asked for (needs) to ingest(),
 * then for every decoded token and layer calls append() with the token's k/v and
 * attend() with its query.
 *
 * Storage rule: KV is stored once per kv head (never expanded per query head), in the
 * setup's element type (kv_type: every method pays the same), and memory() reports bytes
 * actually resident, not masked entries.
 *
 * These are the door's types alone, on the ground floor (the model engine drives a method
 * through them); the registry and the helpers behind the door are methods/method.h.
 * A new method: docs/write-a-method.md. */
#ifndef KV_METHOD_TYPES_H
#define KV_METHOD_TYPES_H
#include <stddef.h>
#include <stdint.h>
#include "kvtype.h"
#include "model_hash.h"   /* kv_model_hash: kv_setup.model_hash */

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
    uint64_t model_hash;   /* the model file's identity (kv_model_hash of its bytes), 0 = unknown;
                              lets a method use state trained for this model (SeKV's params) */
    int decode_rule;       /* kv_decode_rule (0 = append) */
} kv_setup;

/* Statistics a method asks the prefill for. A driver zeroes the whole struct before
 * needs() and reads only what it knows, so a table of an older version (whose needs()
 * writes fewer members) asks for nothing new. */
typedef struct {
    int col_mass;          /* cumulative attention column sums over all prompt queries (H2O) */
    int window;            /* > 0: probability rows of the last `window` prompt queries (SnapKV) */
    /* Version 4 (the door's model members: kv_prefill.Q, rope, Wo). */
    int queries;           /* > 0: the pre-RoPE queries of the last `queries` prompt tokens, and the
                              model's RoPE (ExpectedAttention's statistics, ThinK's window) */
    int wo;                /* 1: the layer's output projection Wo (CriticalKV's ||Wo v|| term) */
} kv_needs;

/* Version 4: the RoPE the model applies, for a method that rotates pre-RoPE queries itself.
 * Pair i (i < n_rot/2) of a head's channels, (a, b) = (i, i + n_rot/2) when neox else
 * (2i, 2i+1), turns by pos * inv_freq[i] with cos and sin scaled by mscale:
 *   x'_a = mscale (cos x_a - sin x_b),  x'_b = mscale (sin x_a + cos x_b);
 * channels from n_rot to head_dim pass through. */
typedef struct {
    int n_rot;
    int neox;                   /* 1: halves (Qwen2, Hugging Face's rotate_half); 0: adjacent pairs */
    const double *inv_freq;     /* [n_rot/2] */
    double mscale;              /* 1 unless the scaling has an attention factor (YaRN) */
} kv_rope;

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
    /* Version 4: what kv_needs.queries and kv_needs.wo ask for; NULL/0 when not asked, or when
     * the driver cannot supply them (a method then fails its ingest with a line, no crash). */
    const float *Q;             /* pre-RoPE queries (biases applied) of tokens n-q_rows .. n-1:
                                   query head h, row i (token n-q_rows+i) at Q + h*q_stride + i*d */
    size_t q_stride;            /* >= q_rows * d */
    int q_rows;                 /* rows provided: min(asked, n) */
    const kv_rope *rope;        /* with Q */
    const float *Wo;            /* [embd][H*d]: the layer's output projection (out = Wo . attn),
                                   row-major as Hugging Face's o_proj.weight */
    int embd;                   /* Wo's rows (the model's hidden size) */
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

/* One entry of a method's event log (SeKV: a zoom-in, value = spans expanded for the
 * head at that step). step counts attend() calls on the layer, from 0. */
typedef struct {
    int32_t step, layer, head, value;
    int32_t of;   /* what value is out of (SeKV: the compressed spans the head could expand), 0 = unknown */
} kv_event;

/* A command a method brings to the command line (kvbench NAME ...): its tools beside it.
 * fn gets argv[0] = NAME and returns the exit status (2 for bad input). */
typedef struct {
    const char *name;   /* [a-z0-9-], unique among every command */
    const char *help;   /* one line for `kvbench --help` */
    int (*fn)(int argc, char **argv);
} kv_command;

/* What a method's paper reports, for `kvbench report --table paper` and the memory
 * figure: the claims a run can test, judged for every method whose table points at the
 * same kv_paper (its rows, in registry order; the first is the primary row), and the
 * GPU memory the paper prints. Names in it (baselines, memory points) are other methods'
 * names as the registry spells them. */
typedef enum {
    KV_CLAIM_BEST,       /* the row above every baseline at `budget` (NIAH cells) */
    KV_CLAIM_MARGIN,     /* the row above the method `other` at `budget` */
    KV_CLAIM_DROP,       /* the row with the one setting `other` ("zoom=0") lower; other = "KEY=" (a
                            trailing '='): one claim per value of KEY in the file */
    KV_CLAIM_RANK,       /* the setting `other` ("rank=8") lower, `other2` ("rank=64") adds less */
    KV_CLAIM_SATURATE,   /* from `budget`/2 to `budget` adds more than from `budget` to 2*`budget` */
    KV_CLAIM_WORKLOADS,  /* KV_CLAIM_BEST on each workload of the file, over its cases */
    KV_CLAIM_ZOOM        /* from the event log: sparse (half the heads below 0.05 events per chance),
                            in few heads (the top 10% take 30%), more in middle/late layers */
} kv_claim_kind;

typedef struct {
    const char *id, *claim, *paper;   /* "C3", what the paper says, its figure ("91.17 (best)") */
    int kind;                         /* kv_claim_kind */
    double budget;
    const char *other, *other2;       /* see kv_claim_kind; NULL when unused */
} kv_claim;

typedef struct {
    const char *method;   /* whose memory (this method's name, or a baseline's) */
    int ctx;              /* tokens */
    double gb;            /* GPU memory as the paper prints it (GB, weights included) */
} kv_paper_mem;

typedef struct {
    const char *title;               /* the method as the paper's prose names it ("SeKV") */
    const char *intro;               /* the claims table's opening paragraph (Markdown) */
    const char *const *baselines;    /* the compressed methods the paper compares with; NULL-terminated */
    const kv_claim *claims;          /* terminated by {NULL} */
    const char *each_workload;       /* KV_CLAIM_WORKLOADS: the per-workload claim's text */
    const char *uncapped;            /* the primary row's setting that runs past the budget ("uncapped=1"):
                                        its claims again and an iso-memory view; NULL = none */
    const char *uncapped_intro;      /* the uncapped claims' opening paragraph (Markdown) */
    const char *memory_model;        /* the backbone of the memory points ("llama3-8b"; matched in the
                                        run's model name) */
    const char *memory_label;        /* how a figure names it ("Llama-3-8B, GPU") */
    const kv_paper_mem *memory;      /* terminated by {NULL} */
} kv_paper;

/* The door's version. A table records the version it was built against (abi) and its
 * size; the registry accepts 1 <= abi <= KV_METHOD_ABI and exactly that version's size,
 * copies the table into a zeroed full one and fills the defaults of every optional member
 * it lacks (kv_method_resolve). Members are only ever appended, and KV_METHOD_ABI grows
 * by one with each batch. Every table starts with KV_METHOD_HEAD. Version 1: the members
 * up to trained_params; version 2 adds commands, trained_file and paper; version 3 adds
 * head_budgets; version 4 adds helpers, and the model members of kv_needs (queries, wo) and
 * kv_prefill (Q, q_rows, rope, Wo, embd): a driver zeroes kv_needs before needs(), so a
 * version-3 table asks for none of them; version 5 adds key_channels. */
#define KV_METHOD_ABI 5

/* The helper structs' version, apart from the door's. A method built on the helpers
 * compiles their structs into its own code: it allocates a kv_cacheset, reads c->budget
 * and s->kv.n, fills a kb_decode_args. Those layouts are kv_store (methods/kvstore.h),
 * kv_slot and kv_cacheset (methods/cacheset.h, the scorer base's too), kb_prefill_args and
 * kb_decode_args (kernels/core.h). KV_HELPERS_VERSION grows by one whenever one of them
 * changes (methods/helpers_version.c pins their sizes to it, so a change that forgets to
 * does not build). KV_METHOD_HEAD records it in the table (kv_method.helpers) and the
 * registry refuses a table of another helpers version: a plugin built against other
 * layouts is named and refused when it loads, rather than reading past a struct. A table
 * of ABI 1 to 3 predates the member and was built against version 1. */
#define KV_HELPERS_VERSION 1

#define KV_METHOD_HEAD .abi = KV_METHOD_ABI, .size = sizeof(kv_method), .helpers = KV_HELPERS_VERSION

/* R = required (the registry refuses a table without it); O = optional, its default in
 * brackets (filled in by kv_method_resolve, so a caller of a registered method never
 * checks for NULL). */
typedef struct kv_method {
    int abi;                               /* R: KV_METHOD_ABI the table was built against */
    unsigned size;                         /* R: sizeof(kv_method) it was built with */
    const char *name;                      /* R: unique (case-insensitive), [a-z0-9_.-] */
    const char *summary;                   /* O: one line for `kvbench methods` [""] */
    const kv_param *params;                /* O: terminated by {NULL} [none] */
    const kv_range *ranges;                /* O: terminated by {NULL}; partial: unchecked [none] */
    int evicts_decoding;                   /* O: 1: the paper's policy evicts while decoding, so it
                                              does so under --decode append too (default params) */
    int keeps_all;                         /* O: 1: ignores the budget and keeps every token (FullKV,
                                              the reference: run once per case, not per budget) */
    int layer_budgets;                     /* O: 1: per-layer budgets summing to L*B (PyramidKV): B
                                              holds on the mean over layers, not in each layer */
    int needs_surprisal;                   /* O: 1: ingest reads the prompt's surprisal, which exists
                                              only after the whole forward pass (SeKV): the driver
                                              keeps every layer's K/V for it until then, while the
                                              other methods ingest each layer as it is computed */
    /* R: returns NULL and writes a one-line reason starting with the method's name to err
     * on bad params/budget ("infeasible..." when the setup cannot be served). */
    kv_state *(*init)(const kv_setup *s, char *err, size_t errlen);
    /* O: the prefill statistics this setup will read [none]. From the setup alone, so a
     * driver can size the prefill (and its memory check) before any state exists; with
     * bad params it may report anything (init refuses them). */
    void (*needs)(const kv_setup *s, kv_needs *out);
    /* R: called once per layer, in layer order. Returns 0, or -1 with err filled. */
    int (*ingest)(kv_state *st, const kv_prefill *p, char *err, size_t errlen);
    /* R: k, v: [Hkv][d] of the new token (post-RoPE). */
    void (*append)(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);
    /* R: q: [H][d] -> out: [H][d]. May evict afterwards (decode-time policies). */
    void (*attend)(kv_state *st, int layer, const float *q, float *out);
    /* R: bytes resident now and at the peak (see kv_mem). */
    void (*memory)(const kv_state *st, kv_mem *out);
    /* O: per (layer, query head) counters for the results [zeros]. */
    void (*head_stats)(const kv_state *st, int layer, int head, kv_headstat *out);
    /* R: rows of (layer, kv head): returns the K/V rows resident on the fast tier now (what
     * memory() counts in fast_tokens); when pos is not NULL, also writes the positions of
     * the full-resolution token rows held on either tier, ascending, at most cap, and
     * their count to *npos. For the conformance checks and accounting. */
    int  (*rows)(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos);
    /* R: frees the state (NULL is a no-op). */
    void (*free)(kv_state *st);
    /* O: K/V rows the last decode step of `layer` read up from the slow tier, all kv heads
     * together (an upper bound where exact is costly): the simulator's slow-tier traffic [0]. */
    double (*slow_rows)(const kv_state *st, int layer);
    /* O: the parameters the state runs with as "key=value,..." that reproduce it when given
     * back (values an automatic fit chose after ingest included), for the results' params
     * column; "" = the params given [""]. */
    void (*params_used)(const kv_state *st, char *buf, size_t len);
    /* O: the event log so far (valid until the next attend()): writes up to cap events to
     * out (out may be NULL) and returns how many there are [0]. */
    size_t (*events)(const kv_state *st, kv_event *out, size_t cap);
    /* O: one line for logs about what the state chose (thresholds, spans, trained state) [""]. */
    void (*describe)(const kv_state *st, char *buf, size_t len);
    /* O: trainable parameters a setup of this shape carries (0 = none), and a short
     * breakdown in detail ("" if none), for `kvbench methods` [0]. */
    size_t (*trained_params)(const kv_setup *s, char *detail, size_t len);
    /* Version 2 (the members below; a version-1 table gets their defaults). */
    /* O: commands the method brings (kvbench NAME ...), terminated by {NULL} [none]. */
    const kv_command *commands;
    /* O: the file of trained state a state of this setup loads: writes its path to path
     * ("" = it found none, "?" = init refused the setup) and returns 1; returns 0 when the
     * method never loads one [0]. For the run identity: the file's sha256 joins the run key
     * as NAME_params_sha256, so results of other trained state never resume into a run. */
    int (*trained_file)(const kv_setup *s, char *path, size_t len);
    /* O: the method's paper, for the report and plots (see kv_paper) [an empty one: no
     * claims, no baselines, no memory points, title ""]. */
    const kv_paper *paper;
    /* Version 3 (a version-2 table gets its default). */
    /* O: 1: the budget holds on the sum over a layer's kv heads (Hkv * B rows), the rows per
     * kv head vary (AdaKV's head-adaptive allocation); the conformance checks then bound
     * each layer's sum, not each kv head [0: B per layer and kv head]. */
    int head_budgets;
    /* Version 4 (a version-3 table is built against helpers version 1). */
    /* R (KV_METHOD_HEAD sets it): KV_HELPERS_VERSION of the helper structs the table's code
     * was compiled with; the registry refuses another. */
    int helpers;
    /* Version 5 (a version-4 table gets its default). */
    /* O: for a method that prunes key channels (ThinK): the channels each prompt row of (layer,
     * kv head) keeps in its key; returns their count and, when chan is not NULL, writes their
     * indices ascending to chan (room for head_dim). Such a row holds count + head_dim elements
     * (the key narrowed, the value whole); decoded rows hold 2 head_dim. attend() reads a prompt
     * row's key over these channels alone, and rows() lists narrowed rows among its positions
     * (they are still one token each): the budget check and conformance count their bytes by
     * position (< n_prompt: narrowed) [-1: every channel, every row 2 head_dim]. */
    int (*key_channels)(const kv_state *st, int layer, int kv_head, int32_t *chan);
    /* Version 6 members go here, after this line: only ever append. */
} kv_method;

/* A plugin (a shared object loaded with --plugin FILE.so) exports this function: it sets *n
 * and returns its n method tables, which the registry checks and adds after the built-in
 * ones. Its tables and their functions must outlive the process (static storage). */
#define KV_PLUGIN_SYMBOL "kvbench_methods"
typedef const kv_method *const *(*kv_plugin_fn)(int *n);

/* Size of a version-1 table: the members up to trained_params. */
#define KV_METHOD_SIZE_V1 (offsetof(kv_method, trained_params) + sizeof(void *))
/* Size of a version-2 table: the members up to paper. */
#define KV_METHOD_SIZE_V2 (offsetof(kv_method, paper) + sizeof(void *))
/* Size of a version-3 table: the members up to head_budgets, and the padding after it (a
 * version-3 table's sizeof was this rounded up to kv_method's alignment; the version-4
 * member helpers sits in that padding, so versions 3 and 4 have one size). */
#define KV_METHOD_SIZE_V3 \
    ((offsetof(kv_method, head_budgets) + sizeof(int) + _Alignof(kv_method) - 1) / _Alignof(kv_method) * \
     _Alignof(kv_method))
/* Size of a version-4 table: the members up to helpers, and the padding after it. */
#define KV_METHOD_SIZE_V4 offsetof(kv_method, key_channels)
/* Size of a version-5 table. */
#define KV_METHOD_SIZE_V5 sizeof(kv_method)

#endif
