/* Models with seeded random weights in the shapes of known checkpoints, for memory and
 * speed measurements at real sizes without a GGUF file ("--model random:NAME").
 *
 * The 2-D weights are generated directly in one type, held once, read by decode's
 * mat-vecs and dequantized tile by tile by prefill like a GGUF's: Q4_0 by default for the
 * 1-8B presets (llama3-8b: 4.5 GB, 0.5625 bytes per weight), F32 for smollm2-135m and the
 * test shapes; "random:NAME:q8_0" (or f32, q4_0, q4_k) picks another (q4_k: rows must be
 * multiples of 256, as in the test shape tiny-k; encoded by random_model.c's own simple
 * scale choice, not ggml's). Values: projections
 * uniform with standard deviation 1/sqrt(fan-in), drawn in f32 and then quantized with
 * ggml's reference rounding, norms near 1 (f32), qwen2 biases small; every row from its
 * own stream seeded by (seed, tensor, row), so the weights do not depend on the thread
 * count, and the same seed gives the same f32 values under every type.
 * The tokenizer is byte-level (token b < 256 is byte b; SentencePiece-style encoding, so
 * a space encodes as the three bytes of U+2581); it has no BOS, EOS or stop tokens. */
#ifndef KV_RANDOM_MODEL_H
#define KV_RANDOM_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "model.h"

/* name: a preset (see random_model_presets), in its default weight type. NULL with
 * "random:NAME: what is wrong" in err. */
kv_model *model_load_random(const char *name, uint64_t seed, char *err, size_t errlen);
/* The same with the weight type: GGML_F32, GGML_Q8_0, GGML_Q4_0, GGML_Q4_K, or -1 for the preset's. */
kv_model *model_load_random_typed(const char *name, uint64_t seed, int wtype, char *err, size_t errlen);

/* "random:NAME[:SEED][:TYPE]" (seed default 1; TYPE f32, q8_0, q4_0 or q4_k, default the
 * preset's), as model_load receives it. */
kv_model *model_load_random_spec(const char *spec, char *err, size_t errlen);

/* The preset names, NULL-terminated: smollm2-135m, llama3.2-1b, llama3-8b, llama3.1-8b
 * (llama3 RoPE scaling, 128K), mistral-7b, qwen2.5-7b (YaRN factor 4 on 32K, 128K).
 * Three test-only shapes load too but are not listed: tiny-llama, tiny-qwen2, tiny-k. */
const char *const *random_model_presets(void);

/* The shapes of preset `name` (test-only ones included) without building the model
 * (kvbench sim); *tied (or NULL): 1 when the output matrix is the embedding. 0, or -1 for
 * an unknown name. */
int random_model_shape(const char *name, kv_model_config *out, int *tied);

#endif
