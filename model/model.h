/* The built-in inference engine for Llama-family GGUF models (llama, qwen2). */
#ifndef KV_MODEL_H
#define KV_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "gguf.h"
#include "tokenizer.h"
#include "../kernels/method_types.h"   /* the method door's types */

/* RoPE frequency scaling as a loader found it (GGUF metadata and rope_freqs tensor, or a
 * Hugging Face config.json's rope_scaling); rope_setup (model/rope.c) turns it, once at
 * load, into the one frequency table every path (prefill, decode, CPU, CUDA) uses.
 * Each field names the transformers rope_scaling key it holds. */
typedef enum {
    KV_ROPE_NONE = 0,   /* plain RoPE (freq_factors may still divide the frequencies) */
    KV_ROPE_LINEAR,     /* "linear": every frequency / factor */
    KV_ROPE_LLAMA3,     /* "llama3": low frequencies / factor, a smooth band, high ones kept */
    KV_ROPE_YARN        /* "yarn": NTK-by-parts ramp between interpolation and extrapolation,
                           cos and sin times attn_factor */
} kv_rope_type;

typedef struct {
    kv_rope_type type;
    double factor;             /* "factor" (linear, llama3, yarn) */
    double low_freq_factor;    /* "low_freq_factor" (llama3; 1 in Llama-3.1) */
    double high_freq_factor;   /* "high_freq_factor" (llama3; 4 in Llama-3.1) */
    int orig_ctx;              /* "original_max_position_embeddings" (llama3, yarn) */
    double attn_factor;        /* yarn: the multiplier of cos and sin, transformers' final
                                  "attention_factor" (a config.json reader: that key as given,
                                  else get_mscale(factor, mscale) / get_mscale(factor,
                                  mscale_all_dim) when both are set; a GGUF: attn_factor times
                                  get_mscale(factor), as llama.cpp); 0: 0.1 ln(factor) + 1.
                                  No field for "truncate": false must be refused */
    double beta_fast, beta_slow;   /* yarn: "beta_fast", "beta_slow"; 0: 32 and 1 */
    float *freq_factors;       /* [n_freq_factors = n_rot/2]: per-pair frequency divisors
                                  (GGUF rope_freqs, as convert_hf_to_gguf.py writes llama3),
                                  or NULL; owned by the model (freed by model_free) */
    int n_freq_factors;
} kv_rope_scaling;

double rope_yarn_mscale(double factor);        /* transformers' get_mscale(factor) */
/* The largest rope scaling values a model file may state (GGUF keys and config.json alike;
 * real checkpoints use factors up to 64 and attention factors near 1): past these a value
 * is a mistake, refused by its key rather than turned into infinite or zero frequencies. */
#define KV_ROPE_FACTOR_MAX 1024.0
#define KV_ROPE_BETA_MAX 1024.0
#define KV_ROPE_ATTN_FACTOR_MAX 16.0
const char *rope_type_name(kv_rope_type t);    /* "none", "linear", "llama3", "yarn" */

typedef struct {
    char arch[32];            /* "llama" or "qwen2" */
    char name[128];
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    float rope_base, norm_eps;
    int has_qkv_bias;
    int64_t n_params;
    kv_rope_scaling rope;     /* RoPE scaling; all zero: none */
    int sliding_window;       /* attention window the file declares (0: none); the engine
                                 has no window mask, so a loader caps n_ctx_train at it,
                                 where the mask changes nothing (model/rope.c) */
    int n_ctx_file;           /* the context the file declares, before that cap */
} kv_model_config;

typedef struct kv_model kv_model;

/* Load weights and tokenizer; NULL with "PATH: what is wrong" in err. */
kv_model *model_load(const char *path, char *err, size_t errlen);
void model_free(kv_model *m);
const kv_model_config *model_config(const kv_model *m);
const kv_tokenizer *model_tokenizer(const kv_model *m);
const gguf_file *model_gguf(const kv_model *m);
/* The model file's identity (kv_setup.model_hash; kernels/model_hash.h), computed once when
 * the model is made (model_load; a random model, by its constructor). */
uint64_t model_content_hash(const kv_model *m);
/* A loader's last step on the context: n_ctx_file = n_ctx_train, then n_ctx_train capped at
 * sliding_window (positions inside the window see every earlier token, so no mask is
 * needed there; past it the engine refuses rather than attend without the window). */
void model_cap_sliding_window(kv_model_config *c);
/* "" or a note for "beyond the model's context" messages when the cap above set it. */
const char *model_ctx_note(const kv_model_config *c);
/* The default model path: $KVBENCH_MODEL, else the cache file `make model` writes. */
const char *model_default_path(void);
/* A short name (smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b; model/model_names.c)
 * -> the cached file its `make` target writes, in buf. Anything else (a path, random:SPEC,
 * a file that exists under a short name) comes back as given. A short name not yet
 * downloaded: NULL with err "NAME: not downloaded (no PATH); `make TARGET` fetches it, or
 * pass --model PATH". model_load calls it, so every --model takes the short names. */
const char *model_resolve_name(const char *name, char *buf, size_t len, char *err, size_t errlen);
/* The short names, ", "-separated, for help texts. */
const char *model_short_names(void);

/* The result of one prefill, shared by every method of a case: all layers' post-RoPE
 * K/V and the statistics asked for. */
typedef struct {
    int n;                     /* prompt tokens */
    int n_layer, n_head_kv, head_dim, n_head;
    float *K, *V;              /* layer l, kv head j, token t: K + (l*n_head_kv + j)*n*d + t*d */
    float *col_mass;           /* [L][H][n] if asked, else NULL */
    float *win_probs;          /* [L][H][win][n] if asked, else NULL */
    int win;
    float *Q;                  /* [L][H][q_rows][d]: pre-RoPE queries of the last q_rows tokens if
                                  asked (kv_needs.queries), else NULL */
    int q_rows;
    float *Wo;                 /* [L][n_embd][n_head*d]: the output projections, dequantized, if
                                  asked (kv_needs.wo), else NULL */
    kv_rope rope;              /* the model's RoPE, for kv_prefill.rope */
    int wo_rows;             /* Wo's rows (n_embd) */
    float *surprisal;          /* [n], surprisal[0] = 0 */
    uint8_t *sent_end;         /* [n] */
    float *last_logits;        /* [n_vocab]: logits after the last prompt token */
    double seconds;
} kv_prefill_out;

/* Prefill tokens[0..n) layer by layer; fills out (free with prefill_out_free).
 * needs: union of the statistics the methods of the case asked for.
 * Returns 0, or -1 with err (e.g. context beyond the model). */
int model_prefill(kv_model *m, const int32_t *ids, int n, const kv_needs *needs,
                  kv_prefill_out *out, char *err, size_t errlen);
void prefill_out_free(kv_prefill_out *p);
/* Layer-streaming prefill: the same forward pass, but only one layer's K/V and statistics
 * exist at a time; after each layer on_layer(ctx, view) gets it (view->surprisal is NULL:
 * the prompt's surprisal exists only after the last layer) and must take what it keeps
 * before returning. On return out holds surprisal, sent_end and last_logits, and no K/V
 * or statistics (prefill_layer on it is not valid). On the CUDA backend the device's
 * whole prefill is handed over layer by layer the same way. */
typedef void (*kv_layer_fn)(void *ctx, const kv_prefill *layer);
int model_prefill_stream(kv_model *m, const int32_t *ids, int n, const kv_needs *needs, kv_layer_fn on_layer,
                         void *ctx, kv_prefill_out *out, char *err, size_t errlen);
/* The kv_prefill view of one layer, to hand to a method's ingest(). */
kv_prefill prefill_layer(const kv_prefill_out *p, int layer);

/* One decode step through a method: feeds token id at position pos, every layer's
 * attention going through meth/st (append then attend). logits: [n_vocab]. */
int model_decode(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos,
                 const kv_token *info, float *logits);
/* The same, also copying each layer's attention output into attn [n_layer][n_head *
 * head_dim] (the fidelity metrics compare it with FullKV's). On the CUDA backend the
 * dense part runs on the device and attn is filled with NaN (not observed there). */
int model_decode_tap(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos,
                     const kv_token *info, float *logits, float *attn);
/* One sequence of a batched decode step (model_decode_batch). */
typedef struct {
    const kv_method *meth;
    kv_state *st;
    int id, pos;
    const kv_token *info;       /* or NULL: {pos, 0, 0} */
    float *logits;              /* [n_vocab], out */
    float *tap;                 /* [n_layer][n_head * head_dim] or NULL, as model_decode_tap's attn */
    double attend_s;            /* += this step's append + attend time (the method's own) */
    int rc;                     /* out: 0, or -1 (this sequence failed; the others went on) */
} kv_decode_seq;
/* n model_decode(_tap) steps at once, one per sequence, each through its own method and
 * cache: each weight matrix is read once for all of them. Every sequence's logits (and
 * tap) are bit-identical to its own model_decode_tap call. 0, or -1 if any rc is -1. */
int model_decode_batch(kv_model *m, kv_decode_seq *seqs, int n);


/* Greedy generation through a method: prefill with the method's needs, ingest every
 * layer, then decode until a stop token or max_new tokens. setup supplies the budget,
 * params and kv_type; the model's shape, n_prompt and max_decode are filled in here.
 * on_token (optional) sees each new id as it is chosen (for streaming).
 * Returns the number of ids written to out, or -1 with err. */
typedef struct {
    int n_prompt, n_new;
    int n_steps;                /* decode forward passes (n_new, or n_new - 1 at max_new) */
    double prefill_s, decode_s; /* prefill_s includes the method's ingest */
    kv_mem mem;                 /* the method's memory after the last step */
} kv_gen_stats;
/* Plain generation with the engine's own full cache (no method plumbing), greedy.
 * Writes up to max_new ids to out; returns the count, or -1. stats (optional): counts
 * and timings as for model_generate_method (mem stays zero). */
int model_generate_plain(kv_model *m, const int32_t *prompt, int n, int max_new,
                         int32_t *out, kv_gen_stats *stats, char *err, size_t errlen);
int model_generate_method(kv_model *m, const kv_method *meth, const kv_setup *setup,
                          const int32_t *prompt, int n, int max_new, int32_t *out,
                          void (*on_token)(void *ctx, int id), void *ctx,
                          kv_gen_stats *stats, char *err, size_t errlen);

/* Small helpers for callers that run their own decode loop. */
int model_argmax(const float *logits, int n);                 /* first index of the max */
double model_surprisal(const kv_model *m, const float *logits, int id);  /* -ln softmax[id] */
int model_sent_end(const kv_model *m, int id);                /* the sent_end rule for one token */
/* Tokens per prefill chunk (GEMM rows and attention queries at a time); 0 = default 512. */
void model_set_prefill_chunk(kv_model *m, int chunk);
/* 1 (the default): prefill computes every position's logits for the prompt's surprisal.
 * 0: only the last chunk's (the last logits, bit for bit the same; surprisal[t] is NaN
 * before that chunk): for a case where no method reads the surprisal
 * (kv_method.needs_surprisal), about a quarter of Qwen2.5-0.5B's prefill at 4K (its
 * output matrix is 136 M of its 494 M parameters). The CUDA prefill always computes it. */
void model_set_prefill_surprisal(kv_model *m, int on);
/* Decode mat-vecs: 1 (the default) keeps f32 activations, so logits stay equal to the
 * references' (transformers within 2e-6); 0 quantizes each input vector to 8 bits per
 * block of 32 and uses int8 dot products for Q4_0/Q4_1/Q8_0 weights, as llama.cpp does:
 * faster, logits move by about 1e-2 relative (kvbench run/generate --activations q8). */
void model_set_f32_activations(kv_model *m, int on);
/* "f32" -> 0, "q8" -> 1 into *q8 (the --activations flag); 0, or -1 for anything else. */
int model_activations_parse(const char *s, int *q8);

#endif
