/* Shared by the Hugging Face directory loader's files (hf_load.c, hf_config.c,
 * hf_tok.c): reading a JSON file of the directory, field access with messages that
 * name the file and the field. */
#ifndef KV_HF_INTERNAL_H
#define KV_HF_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "gguf_meta.h"
#include "../kernels/jsonl.h"

/* What config.json says that the weights and tokenizer steps need. */
typedef struct {
    char arch[16];                 /* "llama" or "qwen2" */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    int tied, attn_bias;
    int bos, eos;                  /* config.json's ids, -1 if absent */
    /* llama3 rope scaling: rope_freqs is generated from these (llama3 != 0) */
    int llama3;
    double l3_factor, l3_low, l3_high, l3_orig_ctx, rope_theta;
} hf_config;

/* "DIR/NAME: message" into err; returns -1. */
int hf_fail(char *err, size_t errlen, const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* DIR/NAME parsed into *v. 1 if absent and optional (v untouched), 0 read, -1 error. */
int hf_read_json(const char *dir, const char *name, int optional, json_value *v, char **text, size_t *len,
                 char *err, size_t errlen);
/* The member's number if it is one: 1 found, 0 absent or null, -1 another type. */
int hf_num(const json_value *obj, const char *key, double *out);
/* A string member (borrowed), or NULL. */
const char *hf_str(const json_value *obj, const char *key);

/* config.json: the model's shape and rope into g (the keys convert_hf_to_gguf writes). */
int hf_config_read(const char *dir, gguf_meta *g, hf_config *c, char *err, size_t errlen);
/* tokenizer.json + tokenizer_config.json into g's tokenizer.ggml.* keys. check_only: the same
 * checks and errors, but without the token arrays (padded out to vocab_size, which can be
 * millions of placeholders), for a caller that fails anyway. */
int hf_tok_read(const char *dir, gguf_meta *g, const hf_config *c, int check_only, char *err, size_t errlen);

#endif
