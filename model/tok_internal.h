/* Internals shared by the tokenizer's files (tok_load.c, tokenizer.c, tok_bpe.c, tok_spm.c,
 * tok_chat.c). Not part of the public API. */
#ifndef KV_TOK_INTERNAL_H
#define KV_TOK_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer.h"

enum { TOK_BPE, TOK_SPM };
/* tokenizer.ggml.token_type values */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct { uint64_t key; int32_t rank, result; } tok_merge;   /* key = left << 32 | right */

struct kv_tokenizer {
    int kind, pre, n_vocab;
    int bos, eos, unk, add_bos, ignore_merges;
    int add_space_prefix;   /* SPM: 1 before each text; 2 tokenizers' Metaspace "first" (tokenizer.c) */
    char *text;  uint32_t *text_off;    /* token i's vocab text: text[text_off[i] .. text_off[i+1]) */
    char *piece; uint32_t *piece_off;   /* the bytes token i decodes to (when it prints) */
    uint8_t *type;
    float *score;                       /* SPM merge priorities */
    int32_t *map; uint32_t map_mask;    /* open addressing: text -> id (-1 empty) */
    tok_merge *merges; uint32_t merge_mask;   /* BPE: (left, right) -> rank, merged id */
    int32_t byte_tok[256];              /* BPE: the byte's mapped character; SPM: <0xXX>; -1 */
    int32_t *special; int n_special;    /* control/user-defined/unknown ids, longest text first */
    int32_t *stop; int n_stop;
    char *chat_template;                /* NUL-terminated, or NULL */
};

/* Where encoded ids go: counts past cap so the caller learns the size it needs. */
typedef struct { int32_t *ids; int cap, n; } tok_out;
static inline void tok_push(tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

int tok_find(const kv_tokenizer *t, const char *s, size_t n);      /* id or -1 */
const tok_merge *tok_merge_find(const kv_tokenizer *t, int32_t left, int32_t right);

/* Encode one span of plain text (no special tokens in it); 0 or -1 (out of memory). */
int bpe_encode(const kv_tokenizer *t, const uint8_t *s, size_t n, tok_out *out);
int spm_encode(const kv_tokenizer *t, const uint8_t *s, size_t n, int space_prefix, tok_out *out);

/* A max-heap of candidate merges: larger key first, ties to the leftmost (smaller left). */
typedef struct { double key; int32_t left, right, a, b; } tok_cand;
typedef struct { tok_cand *v; int n; } tok_heap;
void tok_heap_push(tok_heap *h, tok_cand c);
tok_cand tok_heap_pop(tok_heap *h);

#endif
