/* Where a text's tokens begin and end, in bytes, so workloads can cut and splice the
 * original text at token boundaries (exact substrings, no decode round trip). */
#ifndef KV_TOKSPAN_H
#define KV_TOKSPAN_H
#include <stddef.h>
#include <stdint.h>
#include "../model/tokenizer.h"

typedef struct {
    int32_t *ids;
    size_t *off;      /* off[i]: first byte of token i; off[n] = length of the text */
    int n;
} tok_spans;

/* Encodes text (no special tokens, no BOS) and maps each token to its bytes by its piece.
 * -1 with a reason in err if the pieces do not spell the text (a tokenizer that
 * normalises text), or on allocation failure. */
int tokspan_encode(const kv_tokenizer *t, const char *text, size_t len, tok_spans *out, char *err,
                   size_t errlen);
void tokspan_free(tok_spans *s);

/* Largest UTF-8 character boundary <= pos in text. */
size_t tokspan_char_floor(const char *text, size_t len, size_t pos);

/* LongBench/InfiniteBench middle truncation: if text has more than max_tokens tokens,
 * keep the bytes of the first max_tokens/2 and of the last max_tokens/2 tokens (cuts moved
 * to UTF-8 character boundaries). Returns a new string; [*cut_lo, *cut_hi) is the removed
 * byte range of the original (equal if nothing was cut); *n_tokens the original count,
 * or -1 for a text so far over the budget that only its head and tail were tokenised
 * (same cuts: see tokspan.c). NULL with err on failure. */
char *tokspan_truncate_middle(const kv_tokenizer *t, const char *text, int max_tokens, size_t *cut_lo,
                              size_t *cut_hi, int *n_tokens, char *err, size_t errlen);
#endif
