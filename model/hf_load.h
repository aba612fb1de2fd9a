/* Hugging Face checkpoint directories (config.json, model.safetensors or shards with
 * model.safetensors.index.json, tokenizer.json, tokenizer_config.json) presented as the
 * gguf_file llama.cpp's convert_hf_to_gguf.py would have written: the same metadata keys
 * and values, the same tensor names, shapes and types (llama's Q/K rows permuted to
 * adjacent-pair rope, llama3 scaling as the rope_freqs tensor). The weights stay in the
 * mapped safetensors files (only the permuted Q/K rows are copied), and model.c loads
 * the result exactly as it loads a GGUF. */
#ifndef KV_HF_LOAD_H
#define KV_HF_LOAD_H
#include <stddef.h>
#include "gguf.h"

int hf_is_dir(const char *path);
/* 0, or -1 with "DIR/FILE: what is wrong (the field)" in err. The metadata key
 * kvbench.hf.content_hash holds a hash of every file read (the JSON files and all weight
 * files), so the hash of the metadata (kv_model_hash of base/size, as for a GGUF)
 * is the checkpoint's identity. */
int hf_open(gguf_file *f, const char *dir, char *err, size_t errlen);
/* Only tokenizer.json and tokenizer_config.json of DIR, as a gguf_file with the
 * tokenizer.ggml.* keys (for tok_load; tests compare it with the tokenizers package). */
int hf_open_tokenizer(gguf_file *f, const char *dir, char *err, size_t errlen);
/* kvbench info's size line for a directory hf_open made ("12.3 MB in 2 safetensors files
 * (Hugging Face directory)") into buf; 0 if f is not one (a GGUF). */
int hf_describe(const gguf_file *f, char *buf, size_t n);
/* A GGUF file or a Hugging Face directory. */
int model_file_open(gguf_file *f, const char *path, char *err, size_t errlen);
/* The same for readers of shapes and metadata only (kvbench sim): a directory's llama
 * Q/K rows are left as transformers stores them (no copies); the hash is the same. */
int model_file_open_shapes(gguf_file *f, const char *path, char *err, size_t errlen);

#endif
