/* Token byte spans and middle truncation (see tokspan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokspan.h"

int tokspan_encode(const kv_tokenizer *t, const char *text, size_t len, tok_spans *out, char *err,
                   size_t errlen) {
    memset(out, 0, sizeof *out);
    int n = tok_encode(t, text, len, 0, NULL, 0);
    if (n < 0) { snprintf(err, errlen, "tokenizer: out of memory"); return -1; }
    out->ids = malloc(((size_t)n + 1) * sizeof *out->ids);
    out->off = malloc(((size_t)n + 1) * sizeof *out->off);
    if (!out->ids || !out->off || tok_encode(t, text, len, 0, out->ids, n) != n) {
        tokspan_free(out);
        snprintf(err, errlen, "tokenizer: out of memory");
        return -1;
    }
    out->n = n;
    size_t pos = 0;
    char small[256];
    for (int i = 0; i < n; i++) {
        out->off[i] = pos;
        int L = tok_piece(t, out->ids[i], 0, small, sizeof small);
        char *piece = small;
        if (L >= (int)sizeof small) {
            piece = malloc((size_t)L + 1);
            if (!piece) { tokspan_free(out); snprintf(err, errlen, "tokenizer: out of memory"); return -1; }
            tok_piece(t, out->ids[i], 0, piece, L + 1);
        }
        const char *p = piece;
        if (i == 0 && L > 0 && p[0] == ' ' && (len == 0 || text[0] != ' ')) { p++; L--; }  /* SentencePiece's added space */
        int ok = L >= 0 && pos + (size_t)L <= len && !memcmp(text + pos, p, (size_t)L);
        if (piece != small) free(piece);
        if (!ok) {
            snprintf(err, errlen, "tokenizer: token %d does not spell the text at byte %zu (normalising tokenizer?)", i, pos);
            tokspan_free(out);
            return -1;
        }
        pos += (size_t)L;
    }
    if (pos != len) {
        snprintf(err, errlen, "tokenizer: tokens spell %zu of %zu bytes", pos, len);
        tokspan_free(out);
        return -1;
    }
    out->off[n] = len;
    return 0;
}

void tokspan_free(tok_spans *s) {
    free(s->ids);
    free(s->off);
    memset(s, 0, sizeof *s);
}

size_t tokspan_char_floor(const char *text, size_t len, size_t pos) {
    if (pos >= len) return len;
    while (pos > 0 && ((unsigned char)text[pos] & 0xC0) == 0x80) pos--;
    return pos;
}

/* The longest piece of the vocabulary, in bytes (at least 1). */
static size_t max_piece_bytes(const kv_tokenizer *t) {
    char buf[8];
    int best = 1;
    for (int id = 0; id < tok_vocab(t); id++) {
        int L = tok_piece(t, id, 0, buf, sizeof buf);
        if (L > best) best = L;
    }
    return (size_t)best;
}

/* Smallest UTF-8 character boundary >= pos in text. */
static size_t char_ceil(const char *text, size_t len, size_t pos) {
    while (pos < len && ((unsigned char)text[pos] & 0xC0) == 0x80) pos++;
    return pos;
}

/* Tokens kept beyond the half on each side of a pre-cut: the pre-tokens at the cut are
 * tokenised differently, those far from it never. */
enum { PRECUT_MARGIN = 512 };

char *tokspan_truncate_middle(const kv_tokenizer *t, const char *text, int max_tokens, size_t *cut_lo,
                              size_t *cut_hi, int *n_tokens, char *err, size_t errlen) {
    size_t len = strlen(text);
    tok_spans s;
    *cut_lo = *cut_hi = len;
    /* A text far over the budget: tokenise only a head and a tail that surely hold the
     * first and last max_tokens/2 tokens (no token is longer than the vocabulary's longest
     * piece), not megabytes that would be cut away. */
    size_t side = max_tokens > 0 ? ((size_t)max_tokens / 2 + PRECUT_MARGIN) * max_piece_bytes(t) : 0;
    if (max_tokens > 0 && len > 2 * side) {
        int half = max_tokens / 2;
        size_t head = tokspan_char_floor(text, len, side), tail = char_ceil(text, len, len - side);
        if (tokspan_encode(t, text, head, &s, err, errlen)) return NULL;
        *cut_lo = tokspan_char_floor(text, len, s.off[half]);
        tokspan_free(&s);
        if (tokspan_encode(t, text + tail, len - tail, &s, err, errlen)) return NULL;
        *cut_hi = tail + s.off[s.n - half];
        tokspan_free(&s);
        *cut_hi = tokspan_char_floor(text, len, *cut_hi);
        *n_tokens = -1;
    } else {
        if (tokspan_encode(t, text, len, &s, err, errlen)) return NULL;
        *n_tokens = s.n;
        if (max_tokens > 0 && s.n > max_tokens) {
            int half = max_tokens / 2;
            *cut_lo = tokspan_char_floor(text, len, s.off[half]);
            *cut_hi = tokspan_char_floor(text, len, s.off[s.n - half]);
        }
        tokspan_free(&s);
    }
    if (*cut_hi < *cut_lo) *cut_hi = *cut_lo;
    size_t keep = len - (*cut_hi - *cut_lo);
    char *r = malloc(keep + 1);
    if (!r) { snprintf(err, errlen, "out of memory"); return NULL; }
    memcpy(r, text, *cut_lo);
    memcpy(r + *cut_lo, text + *cut_hi, len - *cut_hi);
    r[keep] = 0;
    return r;
}
