/* The engine's private parts: the loaded model's weights, and the forward-pass building
 * blocks (norm, RoPE, SwiGLU, threaded mat-vec, GEMM) shared by prefill and decode. */
#ifndef KV_ENGINE_H
#define KV_ENGINE_H
#include "model.h"

#define KV_MAX_ROPE_PAIRS 512   /* n_rot / 2 at most (head_dim <= 1024) */

/* One 2-D weight: W [rows][cols] (GGUF ne = [cols, rows]); y = W x. */
typedef struct {
    const gguf_tensor *t;   /* quantized, in the mapping: decode reads it with quant_dot,
                               prefill dequantizes it a tile at a time (gemm_xwt) */
    size_t row_bytes;
    int rows, cols;
} weight;

typedef struct {
    float *attn_norm, *ffn_norm;          /* [n_embd] */
    float *bq, *bk, *bv;                  /* qwen2's Q/K/V biases, else NULL */
    weight wq, wk, wv, wo, gate, up, down;
} layer_weights;

struct kv_model {
    gguf_file gf;
    uint64_t content_hash;   /* kv_model_hash of the file's bytes, made by model_load */
    kv_model_config cfg;
    kv_tokenizer *tok;
    int n_rot;               /* rotated dims per head (the rest pass through) */
    int rope_neox;           /* 1: pairs (i, i + n_rot/2) (qwen2); 0: adjacent pairs (llama) */
    double rope_inv_freq[KV_MAX_ROPE_PAIRS];  /* pair i's angle per position, scaling applied
                                                 (rope_setup, once at load) */
    double rope_mscale;      /* cos and sin times this (YaRN's attention factor; else 1) */
    layer_weights *layers;
    float *output_norm;
    weight embd, output;     /* output is a copy of embd when tied */
    int tied;
    float *small;            /* owner of the norms and biases */
    void *owned_weights;     /* a random model's weight rows (a GGUF's live in its mapping) */
    int host_weights_gone;   /* 1: a random model's weights live only on the device now
                                (cuda_model_drop_host_weights); the CPU engine refuses it */
    uint8_t *sent_end;       /* [n_vocab]: 1 where the token's text ends a sentence */
    int prefill_chunk;
    int prefill_no_surprisal; /* 1: prefill's logits only for the last chunk (no method reads the
                                 prompt's surprisal); 0, the default: every position's */
    int q8_activations;      /* 1: decode mat-vecs on 8-bit activations (model_set_f32_activations(m, 0));
                                0, the default: f32 activations, logits as the references */
    float *decode_scratch;   /* engine_forward_token's buffers, allocated on first use */
    int decode_busy;         /* the scratch is in use (a concurrent call allocates its own) */
    void *batch_scratch;     /* engine_forward_batch's buffers, grown to the largest batch */
    size_t batch_scratch_bytes;
    int batch_busy;
};

/* ops.c */
void rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* rope.c: m->rope_inv_freq and rope_mscale from m->cfg.rope, rope_base and n_rot (call
 * once the config is read, before any forward pass); -1 with err ("what is wrong",
 * no path) on parameters that do not make a rope. */
int rope_setup(kv_model *m, char *err, size_t errlen);
/* cs[2i] = mscale cos, cs[2i+1] = mscale sin of pos * rope_inv_freq[i], i < n_rot/2
 * (double inside): the one table prefill, decode and the CUDA backend rotate with. */
void rope_cossin(const kv_model *m, int pos, float *cs);
void rope_rotate(const kv_model *m, float *x, int n_heads, const float *cs);
void silu_mul(float *g, const float *u, int n);           /* g = silu(g) * u */
/* y = W x (+ bias) from the quantized rows, several matrices at once, rows split
 * across kb_parallel_for. With xq (x quantized by quant_q8_act for w's type, or for a
 * type with the same quant_q8_act_block) and a weight type quant_q8_supported, the rows
 * are int8 dot products with xq; else quant_dot on x.
 * add: y += W x instead of y = W x (the residual stream, in place). */
typedef struct q8_block q8_block;
typedef struct {
    const weight *w;
    const float *x;
    float *y;
    const float *bias;
    const void *xq;          /* q8_blocks, or q8k_blocks for the K-quants */
    int add;
} matvec_job;
void matvec_many(const matvec_job *jobs, int n_jobs);
/* gate_up[0].y = silu(gate x) * (up x), gate_up[1].y = up x: both mat-vecs and the SwiGLU
 * in one parallel pass (the two weights have the same rows; neither job adds). */
void matvec_glu(const matvec_job gate_up[2]);
/* The same for nb rows of activations at once: jobs[b * n_jobs + j] is row b's job j (the
 * same weights for every b; gate_up[b * 2 + 0..1] likewise). Each weight chunk is read
 * once for all rows; each row's result is bit-identical to matvec_many / matvec_glu on
 * that row alone. */
void matvec_many_batch(const matvec_job *jobs, int n_jobs, int nb);
void matvec_glu_batch(const matvec_job *gate_up, int nb);
/* Y[n][rows] = X[n][cols] W^T + beta Y (cblas_sgemm on dequantized tiles of W's rows). */
void gemm_xwt(const float *X, int n, const weight *w, float beta, float *Y);
extern int gemm_test_no_scratch;   /* tests: 1 takes the out-of-memory path (a row at a time) */
/* -ln softmax(logits)[id], log-sum-exp in double. */
double logits_surprisal(const float *logits, int n, int id);

/* decode.c: one token through every layer; attention goes through attn(ctx, ...),
 * which receives the post-RoPE q [H][d], k and v [Hkv][d] and writes out [H][d]. */
typedef void (*engine_attn_fn)(void *ctx, int layer, const float *q, const float *k,
                               const float *v, float *out);
int engine_forward_token(kv_model *m, int id, int pos, engine_attn_fn attn, void *ctx,
                         float *logits);
void engine_scratch_free(kv_model *m);   /* model_free's part for decode.c's buffers */

/* decode_batch.c: n sequences one step each, together: every weight matrix is applied
 * once to all n rows (matvec_many_batch), attention is each sequence's own callback
 * (called in sequence order, layer by layer). Each sequence's logits are bit-identical
 * to engine_forward_token with the same arguments. A sequence with an id or position out
 * of range gets rc = -1 and is left out; the others go on. Returns 0 when every rc is 0,
 * else -1 (out of memory, or the host weights gone: every rc is -1). */
typedef struct {
    int id, pos;
    engine_attn_fn attn;
    void *ctx;
    float *logits;       /* [n_vocab] */
    int rc;              /* out */
} engine_seq;
int engine_forward_batch(kv_model *m, engine_seq *seqs, int n);
/* decode.c's layout of one sequence's buffers and its activation quantizer, for decode_batch.c */
size_t engine_scratch_floats(const kv_model *m);
size_t engine_scratch_q8_bytes(const kv_model *m);
const void *engine_quantize_for(const kv_model *m, const float *x, int n, int type, void *xq);
const void *engine_shared_for(const void *xq, int qtype, int type);

#endif
