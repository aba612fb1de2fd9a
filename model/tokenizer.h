/* Tokenizers from GGUF metadata: GPT-2 byte-level BPE (SmolLM2, Llama-3, Qwen2) and
 * SentencePiece-style BPE (Llama-2, Mistral). Behaviour follows llama.cpp. */
#ifndef KV_TOKENIZER_H
#define KV_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "gguf.h"

typedef struct kv_tokenizer kv_tokenizer;

/* NULL with "PATH: what is wrong" in err (unsupported tokenizer.ggml.model or .pre
 * named, malformed arrays, ids outside the vocabulary). */
kv_tokenizer *tok_load(const gguf_file *f, char *err, size_t errlen);
void tok_free(kv_tokenizer *t);
int tok_vocab(const kv_tokenizer *t);
int tok_bos(const kv_tokenizer *t);
int tok_eos(const kv_tokenizer *t);
int tok_add_bos(const kv_tokenizer *t);
/* 1 if generation should stop at this id (eos, and the model family's other end ids). */
int tok_is_stop(const kv_tokenizer *t, int id);

/* Encode UTF-8 text. parse_special: control/user-defined token texts in the text become
 * their ids (as in llama.cpp, user-defined ones do even without parse_special).
 * Returns the token count (may exceed cap: call again with a bigger buffer),
 * or -1 on allocation failure. Adds no BOS/EOS. Invalid UTF-8 (BPE): each bad byte
 * is encoded as U+FFFD; SentencePiece passes bytes through as <0xXX> tokens. */
int tok_encode(const kv_tokenizer *t, const char *text, size_t len, int parse_special,
               int32_t *ids, int cap);
/* Bytes of one token's text (control tokens give "" unless show_special). Returns the
 * piece's full length (-1 for an id outside the vocabulary); copies at most cap bytes,
 * NUL-terminated when it fits. */
int tok_piece(const kv_tokenizer *t, int id, int show_special, char *buf, int cap);
/* Decode a whole sequence into buf (NUL-terminated, truncated at cap); returns length. */
int tok_decode(const kv_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap);

/* Incremental decoding for generation: bytes are handed out only once they complete a
 * UTF-8 character (a token may end inside one). next returns the bytes written to buf,
 * -1 if cap (need: tok_piece length + 3) is too small; flush hands out what is left. */
typedef struct { char pend[4]; int n; } tok_stream;
void tok_stream_init(tok_stream *s);
int tok_stream_next(const kv_tokenizer *t, tok_stream *s, int id, int show_special, char *buf, int cap);
int tok_stream_flush(tok_stream *s, char *buf, int cap);

/* The model's chat template applied to one user message (with the family's default
 * system turn), ending with the assistant generation prompt. Caller frees. */
char *tok_chat_prompt(const kv_tokenizer *t, const char *system, const char *user);

#endif
