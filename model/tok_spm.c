/* SentencePiece-style BPE (Llama-2, Mistral), llama.cpp's algorithm: spaces become
 * U+2581, the text starts as one symbol per UTF-8 character, and the adjacent pair
 * whose concatenation is a token with the highest score merges first (ties: leftmost).
 * Symbols left without a token fall back to <0xXX> byte tokens. With merges (a
 * tokenizer.json's), the pair with the lowest merge rank merges first instead. */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "unicode.h"

typedef struct { int32_t start, n, prev, next; } symbol;   /* n == 0: merged away */

static void try_pair(const kv_tokenizer *t, tok_heap *h, const char *s, const symbol *sym, int l, int r) {
    if (l < 0 || r < 0) return;
    int size = sym[l].n + sym[r].n;
    if (t->merges) {   /* merges from a tokenizer.json: the lower rank first */
        int a = tok_find(t, s + sym[l].start, (size_t)sym[l].n), b = tok_find(t, s + sym[r].start, (size_t)sym[r].n);
        const tok_merge *m = a >= 0 && b >= 0 ? tok_merge_find(t, a, b) : NULL;
        if (m) tok_heap_push(h, (tok_cand){-(double)m->rank, l, r, size, 0});
        return;
    }
    int id = tok_find(t, s + sym[l].start, (size_t)size);
    if (id >= 0) tok_heap_push(h, (tok_cand){t->score[id], l, r, size, 0});
}

int spm_encode(const kv_tokenizer *t, const uint8_t *text, size_t len, int space_prefix, tok_out *out) {
    size_t cap = 3 * (len + 1);
    char *s = malloc(cap);
    symbol *sym = malloc((len + 1) * sizeof *sym);
    tok_heap h = {malloc(3 * (len + 1) * sizeof(tok_cand)), 0};
    int rc = -1;
    if (!s || !sym || !h.v) goto done;
    size_t n = 0;
    if (space_prefix) { memcpy(s, "\xE2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(s + n, "\xE2\x96\x81", 3); n += 3; }
        else s[n++] = (char)text[i];
    }
    int ns = 0;
    for (size_t p = 0; p < n; ns++) {
        size_t k = (size_t)uni_seq_len((uint8_t)s[p]);
        if (k > n - p) k = n - p;
        sym[ns] = (symbol){(int32_t)p, (int32_t)k, ns - 1, p + k < n ? ns + 1 : -1};
        p += k;
    }
    for (int i = 0; i + 1 < ns; i++) try_pair(t, &h, s, sym, i, i + 1);
    while (h.n) {
        tok_cand c = tok_heap_pop(&h);
        symbol *l = &sym[c.left], *r = &sym[c.right];
        /* stale: a side was merged away or grew since this pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != c.a) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        try_pair(t, &h, s, sym, l->prev, c.left);
        try_pair(t, &h, s, sym, c.left, l->next);
    }
    for (int i = 0; i >= 0 && ns > 0; i = sym[i].next) {
        int id = tok_find(t, s + sym[i].start, (size_t)sym[i].n);
        if (id >= 0) { tok_push(out, id); continue; }
        for (int j = 0; j < sym[i].n; j++) {
            int b = t->byte_tok[(uint8_t)s[sym[i].start + j]];
            if (b < 0) b = t->unk;
            if (b >= 0) tok_push(out, b);
        }
    }
    rc = 0;
done:
    free(s); free(sym); free(h.v);
    return rc;
}
