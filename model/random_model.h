/* Models with seeded random weights in the shapes of known checkpoints, for memory and
 * speed measurements at real sizes without a GGUF file ("--model random:NAME").
 *
 * The weights are f32, held once: the f32 copy the prefill GEMMs use is also the
 * "quantized" row data (type F32) that decode's mat-vecs read, so a model costs 4 bytes
 * per parameter (llama3-8b: about 32 GB). Values: projections uniform with standard
 * deviation 1/sqrt(fan-in), norms near 1, qwen2 biases small; every row from its own
 * stream seeded by (seed, tensor, row), so the weights do not depend on the thread count.
 * The tokenizer is byte-level (token b < 256 is byte b; SentencePiece-style encoding, so
 * a space encodes as the three bytes of U+2581); it has no BOS, EOS or stop tokens. */
#ifndef KV_RANDOM_MODEL_H
#define KV_RANDOM_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "model.h"

/* name: a preset (see random_model_presets). NULL with "random:NAME: what is wrong" in err. */
kv_model *model_load_random(const char *name, uint64_t seed, char *err, size_t errlen);

/* "random:NAME" or "random:NAME:SEED" (seed default 1), as model_load receives it. */
kv_model *model_load_random_spec(const char *spec, char *err, size_t errlen);

/* The preset names, NULL-terminated: smollm2-135m, llama3-8b, mistral-7b, qwen2.5-7b.
 * Two test-only shapes load too but are not listed: tiny-llama, tiny-qwen2. */
const char *const *random_model_presets(void);

/* The shapes of preset `name` (test-only ones included) without building the model
 * (kvbench sim); *tied (or NULL): 1 when the output matrix is the embedding. 0, or -1 for
 * an unknown name. */
int random_model_shape(const char *name, kv_model_config *out, int *tied);

#endif
