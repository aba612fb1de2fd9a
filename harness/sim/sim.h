/* kvbench sim: memory by tier and decode latency at paper scale, computed by running each
 * method's own code on synthetic inputs of the full context length (see sim.c).
 *
 *   sim_shape.c   the model's shapes and weight bytes (GGUF metadata or a random: preset)
 *   sim_input.c   synthetic K/V, prefill statistics and the surprisal stream of one layer
 *   sim_method.c  one method x budget over those layers: ingest, decode, memory, scaled
 *   sim_cost.c    what the methods do not hold: weights, activations, the engine's memory
 *                 model, and the per-token latency model
 *   sim_measure.c the measured tables sim_input draws from (kvbench sim --measure-inputs) */
#ifndef KV_SIM_H
#define KV_SIM_H
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "../../methods/method.h"
#include "../../model/model.h"

/* ------------------------------------------------ the model's shapes */
typedef struct {
    kv_model_config cfg;
    int tied;                  /* output matrix = embedding */
    double n_params;
    double file_weight_bytes;  /* GGUF: the tensors' stored bytes; random preset: 0 */
    double random_weight_bytes;/* random preset: what model_load_random holds (matrices in the
                                  spec's type, default Q4_0 above 1e9 parameters else F32;
                                  norms and biases f32); GGUF: 0 */
    uint64_t model_hash;       /* GGUF: kv_model_hash of the file (SeKV's trained params); preset: 0 */
    int is_random;
    char spec[512];
} sim_shape;

/* spec: a GGUF path (only its metadata and tensor table are read) or random:PRESET.
 * 0, or -1 with "SPEC: what is wrong" in err. */
int sim_shape_open(const char *spec, sim_shape *s, char *err, size_t errlen);

/* ------------------------------------------------ synthetic inputs */
/* The measured tables (sim_stats_table.c, written by kvbench sim --measure-inputs). */
typedef struct {
    const char *source;        /* model and text they were measured on, and the command */
    int n;                     /* tokens of the surprisal stream */
    const float *surprisal;    /* [n] nats, -ln p(x_t | x_<t) of the default model */
    const uint8_t *sent_end;   /* [n] */
    int d;                     /* head_dim of the spectra */
    const float *k_spec, *v_spec;  /* [d] singular values^2 share of the centred rows, descending */
    float k_var, v_var;        /* mean per-element variance of the rows */
    float k_mean_rms, v_mean_rms;  /* rms of the mean row (a head's offset) */
} sim_stats;
const sim_stats *sim_stats_default(void);
/* Measures those tables (sim_measure.c): `chunks` chunks of `tokens` tokens of the corpus
 * through the model, written to out as C source. 0, or -1 with err. */
int sim_measure_inputs(const char *model_path, const char *corpus, int chunks, int tokens, FILE *out, char *err,
                       size_t errlen);

/* One layer's synthetic prefill, as a method's ingest sees it. */
typedef struct {
    int n, Hkv, H, d, win;
    float *K, *V;              /* [Hkv][n][d] */
    float *col_mass;           /* [H][n] or NULL */
    float *win_probs;          /* [H][win][n] or NULL */
    float *Q;                  /* [H][q_rows][d] Gaussian queries, if asked (kv_needs.queries), or NULL */
    int q_rows;
    float *Wo;                 /* [H*d][H*d] N(0, 1/(H d)), if asked (kv_needs.wo), or NULL */
} sim_layer;

/* Fills the stream of n tokens: blocks of the measured surprisal stream at seeded offsets
 * (block bootstrap: local structure and span lengths kept). */
void sim_stream(const sim_stats *st, int n, uint64_t seed, float *surprisal, uint8_t *sent_end);
/* Allocates and fills layer `layer` (seeded by seed and layer): K, V Gaussian rows with the
 * measured per-head offset and spectrum (resampled to d); col_mass and win_probs random
 * positive, each probability row normalised over its causal prefix. 0, or -1 (memory). */
int sim_layer_make(sim_layer *ly, const sim_stats *st, int n, int H, int Hkv, int d, const kv_needs *needs,
                   int layer, uint64_t seed);
void sim_layer_free(sim_layer *ly);
/* Decode step `step`'s q [H][d], k and v [Hkv][d] of layer `layer`: the distributions of
 * that layer's prompt rows (same offsets and axes). */
void sim_token(const sim_stats *st, int layer, int H, int Hkv, int d, uint64_t seed, uint64_t step, float *q,
               float *k, float *v);
/* Bytes one layer's inputs take (K, V and the statistics), f32. */
double sim_layer_bytes(int n, int H, int Hkv, int d, const kv_needs *needs);

/* ------------------------------------------------ one method x budget */
typedef struct {
    int n_layers_model;        /* L */
    int measured;              /* layers run through the method's code */
    int batched;               /* 1: every layer ran (per-layer schedule), in batches of `measured` */
    const char *status;        /* "ok", "infeasible", "error" */
    char why[512];
    kv_mem mem;                /* at the end, for all L layers (scaled when measured < L) */
    double fast_prefill_peak;  /* fast-tier peak over the prefill (with the transient layer) */
    double fast_decode_peak;   /* steady: most fast-tier bytes from the end of compression on */
    double fast_kv_read;       /* K/V bytes one decode token reads on the fast tier (last step) */
    double slow_read;          /* bytes moved from the slow tier per decode token (rebuilds) */
    int budget_tokens;
    char params[768];
    double seconds;            /* time spent in the method's code */
} sim_result;

typedef struct {
    const sim_shape *shape;
    const sim_stats *stats;
    int ctx, decode, elem_bytes, kv_type, decode_rule;   /* kv_type: kb_kvtype, elem_bytes its size */
    uint64_t seed;
    const char *params;        /* the method's --params, or NULL */
    const sim_layer *layers;   /* [n_layers_made] synthetic layers, shared by every method */
    int n_layers_made;         /* layers held at once (--layers, memory) */
    const float *surprisal;    /* [ctx] */
    const uint8_t *sent_end;
} sim_case;

/* Runs m at budget on the case; fills r. 0, or -1 on a configuration error (r->why). */
int sim_method_run(const sim_case *c, const kv_method *m, double budget, sim_result *r);

/* ------------------------------------------------ costs outside the methods */
/* Every term of a total, named, in bytes. */
typedef struct {
    double weights;            /* model weights on the fast tier (--weights type) */
    double act_decode;         /* activations of one decode step */
    double act_prefill;        /* activations of the chunked prefill at its peak */
    double stats;              /* prefill statistics of one layer (window probs, column mass) */
} sim_other;
/* weight_bytes: bytes per parameter (2 bf16, 4 f32) or 0 = as stored in the GGUF file. */
void sim_other_bytes(const sim_shape *s, int ctx, double weight_bytes, int act_bytes, int chunk,
                     const kv_needs *needs, sim_other *o);

/* The CPU engine's own process memory for one case of `kvbench run` (model/): each term
 * named so it can follow the engine when it changes (sim_cost.c says which code each
 * term stands for). Two peaks: over the shared prefill (cases.rss_peak) and over one
 * method's compression and decode (results.rss_peak), which the prefill's outputs are
 * still resident under. */
typedef struct {
    double runtime;            /* binary, libraries, OpenBLAS and SQLite buffers: a constant */
    double weights_mapped;     /* the GGUF file mapped, every page read (random model: its f32 weights) */
    double tiles;              /* the prefill GEMMs' dequantized weight tiles (model/ops.c gemm_xwt) */
    double kv_held;            /* the prefill's f32 K/V held at once ([Hkv][n][d] x 2 per layer):
                                  every layer when kept whole or when a method needs the
                                  surprisal (SeKV), else the one layer being streamed */
    double stats;              /* col_mass [H][n] and win_probs [H][win][n] per layer held, when asked */
    double act_prefill;        /* the prefill's work buffer (residual stream, one chunk's projections
                                  and MLP, or 256 tokens' logits) and RoPE table; freed after it */
    double method;             /* the method's resident rows and state at its peak, both tiers */
    double methods_all;        /* streamed: every method of the case's stores, built together */
    double peak_prefill, peak_method;
} sim_engine_mem;
/* streamed: the run's prefill streamed layer by layer (config "prefill":"streamed");
 * methods_all / late: the summed stores of every method of the case / of those that ingest
 * only after the last layer (kv_method.needs_surprisal); any_late: such a method is in the case. */
void sim_engine_memory(const kv_model_config *c, double weight_bytes, int n, const kv_needs *needs,
                       double method_bytes, int streamed, double methods_all, double late, int any_late,
                       sim_engine_mem *out);
/* kvbench sim --check-run DB: the engine memory model against every result's measured
 * peak RSS in a run's results file; prints both and the error. 0, or -1 with err. */
int sim_check_run(const char *db_path, char *err, size_t errlen);

/* Bandwidths in bytes/s and where each came from. */
typedef struct {
    double host, device, pcie;
    char host_src[640], device_src[160], pcie_src[160];
} sim_bw;
/* Host: --bw-host (GB/s, > 0), else the file `make bench` writes (~/.cache/kvbench/membw.tsv:
 * the best read figure), else 0 (unknown). Device and PCIe: --bw-device / --bw-pcie (GB/s,
 * e.g. from a tests/gpu/check.sh run's bandwidth lines), else the H200's published figures,
 * labelled as such. */
void sim_bw_get(double bw_host_flag, double bw_device_flag, double bw_pcie_flag, sim_bw *bw);
/* Decode ms/token: (weights + fast-tier KV read) / bandwidth, plus the slow tier's
 * bytes over PCIe. tier 0: the CPU (everything at host bandwidth); 1: the GPU. */
double sim_latency_ms(const sim_bw *bw, int gpu, double weights, double kv_read, double slow_read);

#endif
