/* Pre-tokenizers of the byte-level BPE tokenizers: split a code point span into the
 * pieces BPE merges within (llama.cpp's hand-written equivalents of the HF regexes). */
#ifndef KV_TOK_PRETOK_H
#define KV_TOK_PRETOK_H
#include <stddef.h>
#include <stdint.h>

enum tok_pre {
    PRE_GPT2,     /* GPT-2 regex only */
    PRE_SMOLLM,   /* every \p{N} its own piece, then the GPT-2 regex (starcoder family) */
    PRE_LLAMA3,   /* Llama-3 regex (\p{N}{1,3}) */
    PRE_QWEN2,    /* Llama-3 regex with single-digit numbers */
};

/* The pre-tokenizer of a tokenizer.ggml.pre value, or -1 if unknown. */
int pretok_from_name(const char *name, size_t len);

/* Code point classes, one per code point of the span. */
enum { CLS_LETTER = 1, CLS_NUMBER = 2, CLS_SPACE = 3, CLS_OTHER = 4 };
void pretok_classify(const uint32_t *cp, int n, uint8_t *cls);

/* Splits cp[0..n) (classes cls) into pieces; writes each piece's length in code points
 * to lens (room for n) and returns the number of pieces. */
int pretok_split(int pre, const uint32_t *cp, const uint8_t *cls, int n, int *lens);

#endif
