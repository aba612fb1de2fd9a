/* Tokenizers from GGUF metadata: GPT-2 byte-level BPE (SmolLM2, Llama-3, Qwen2) and
 * SentencePiece-style BPE (Llama-2, Mistral). */
#ifndef KV_TOKENIZER_H
#define KV_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "gguf.h"

typedef struct kv_tokenizer kv_tokenizer;

kv_tokenizer *tok_load(const gguf_file *f, char *err, size_t errlen);
void tok_free(kv_tokenizer *t);
int tok_vocab(const kv_tokenizer *t);
int tok_bos(const kv_tokenizer *t);
int tok_eos(const kv_tokenizer *t);
int tok_add_bos(const kv_tokenizer *t);
/* 1 if generation should stop at this id (eos, and the model family's other end ids). */
int tok_is_stop(const kv_tokenizer *t, int id);

/* Encode UTF-8 text. parse_special: control/user-defined token texts in the text become
 * their ids. Returns the token count (may exceed cap: call again with a bigger buffer),
 * or -1 on allocation failure. Adds no BOS/EOS. */
int tok_encode(const kv_tokenizer *t, const char *text, size_t len, int parse_special,
               int32_t *ids, int cap);
/* Bytes of one token's text (control tokens give "" unless show_special). */
int tok_piece(const kv_tokenizer *t, int id, int show_special, char *buf, int cap);
/* Decode a whole sequence into buf (NUL-terminated, truncated at cap); returns length. */
int tok_decode(const kv_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap);

/* The model's chat template applied to one user message (with the family's default
 * system turn), ending with the assistant generation prompt. Caller frees. */
char *tok_chat_prompt(const kv_tokenizer *t, const char *system, const char *user);

#endif
