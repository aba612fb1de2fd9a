/* SeKV's trainable parameters (the base model stays frozen) and their file format.
 *
 *   W    [L][H][dp][d]   routing projections, one per (layer, query head)
 *   tau  [L][H]          zoom thresholds on the relevance probability
 *   rank gate g_phi, one MLP shared by all layers and heads:
 *        input [R + d] = [s / s_1 padded to R ; kbar / |kbar|] -> hidden -> GELU -> hidden
 *        -> GELU -> R -> sigmoid, masked beyond the span's rank r.
 *        g_w1 [hidden][R+d], g_b1 [hidden], g_w2 [hidden][hidden], g_b2 [hidden],
 *        g_w3 [R][hidden], g_b3 [R]
 * File: a versioned header (magic "SEKVPAR1", version, model hash, shapes, trained flag,
 * training steps) followed by the float arrays in the order above and a checksum
 * (layout in sekv_params.c). In memory every array lives in ONE allocation starting at
 * W, in the order above: W[0 .. sekv_params_count(p)) is the flat trainable vector
 * (handy for an optimizer); sekv_params_free frees it.
 * Load errors name the file and say which check failed: "bad magic", "wrong version",
 * "truncated", "checksum mismatch", "shape mismatch", "model hash mismatch".
 */
#ifndef KV_SEKV_PARAMS_H
#define KV_SEKV_PARAMS_H
#include <stddef.h>
#include <stdint.h>

#define SEKV_TAU_UNTRAINED 0.05   /* every head's zoom threshold before training */

enum { SEKV_DPRIME = 32, SEKV_HIDDEN = 64, SEKV_RMAX = 64 };

typedef struct {
    int n_layers, n_heads, head_dim;
    int rank_cap;            /* R: 8, 32 (default) or 64 */
    int dp, hidden;          /* routing dim d' (32), gate hidden width (64) */
    uint64_t model_hash;     /* sekv_model_hash() of the model trained on; 0 = untrained/synthetic */
    int trained;             /* 0 = initial values (untrained) */
    int train_steps;
    float *W, *tau;
    float *g_w1, *g_b1, *g_w2, *g_b2, *g_w3, *g_b3;
} sekv_params;

/* Initial (untrained) values, deterministic for a seed: W scaled random Gaussian
 * (a random projection that preserves dot products in expectation), tau = 0.05, the
 * gate biased open (sigmoid(b3) ~ 0.95) so an untrained gate keeps all components.
 * Returns 0 or -1 (out of memory / bad shape, err filled). */
int sekv_params_init(sekv_params *p, int n_layers, int n_heads, int head_dim, int rank_cap,
                     uint64_t seed, char *err, size_t errlen);
void sekv_params_free(sekv_params *p);
size_t sekv_params_count(const sekv_params *p);          /* trainable scalars */
int sekv_params_save(const sekv_params *p, const char *path, char *err, size_t errlen);
/* 0 if sekv_params_save could write path (its directory takes the temporary file next
 * to it); else -1 with "PATH: cannot write there: reason". Nothing is left behind. */
int sekv_params_check_writable(const char *path, char *err, size_t errlen);
/* Loads and validates (magic, version, sizes, checksum); if expect_hash != 0 the file's
 * model hash must match ("params.bin was trained for another model"). */
int sekv_params_load(sekv_params *p, const char *path, uint64_t expect_hash, char *err,
                     size_t errlen);
/* FNV-1a 64 over a model file's bytes (the identity a params file is tied to). */
uint64_t sekv_model_hash(const void *bytes, size_t n);
/* 0 if p was made for this model shape, else -1 with "PATH: shape mismatch: ..." in err. */
int sekv_params_check_shape(const sekv_params *p, const char *path, int n_layers, int n_heads,
                            int head_dim, char *err, size_t errlen);

#endif
