/* Byte-level BPE (GPT-2 family): pre-tokenize, map each byte to its token, then merge
 * the adjacent pair of lowest merge rank (ties: leftmost) until none is in the merge
 * table. Pairs are tracked in a heap over a linked list of symbols: O(m log m). */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "tok_pretok.h"
#include "unicode.h"

typedef struct { int32_t id, prev, next; } symbol;

static void try_pair(const kv_tokenizer *t, tok_heap *h, const symbol *sym, int l, int r) {
    if (l < 0 || r < 0) return;
    const tok_merge *m = tok_merge_find(t, sym[l].id, sym[r].id);
    if (m) tok_heap_push(h, (tok_cand){-(double)m->rank, l, r, sym[l].id, sym[r].id});
}

/* Merge one piece of UTF-8 bytes b[0..m). */
static void bpe_piece(const kv_tokenizer *t, const uint8_t *b, int m, symbol *sym, tok_heap *h, tok_out *out) {
    if (t->ignore_merges && m <= 256) {   /* Llama-3: a piece that is a token stays whole */
        char mapped[512];                   /* each byte maps to a 1-2 byte character */
        int k = 0, id = -1;
        for (int i = 0; i < m && k >= 0; i++) {
            int bt = t->byte_tok[b[i]];
            if (bt < 0) { k = -1; break; }
            uint32_t len = t->text_off[bt + 1] - t->text_off[bt];
            memcpy(mapped + k, t->text + t->text_off[bt], len);
            k += (int)len;
        }
        if (k > 0) id = tok_find(t, mapped, (size_t)k);
        if (id >= 0) { tok_push(out, id); return; }
    }
    for (int i = 0; i < m; i++) sym[i] = (symbol){t->byte_tok[b[i]], i - 1, i + 1 < m ? i + 1 : -1};
    h->n = 0;
    for (int i = 0; i + 1 < m; i++) try_pair(t, h, sym, i, i + 1);
    while (h->n) {
        tok_cand c = tok_heap_pop(h);
        symbol *l = &sym[c.left], *r = &sym[c.right];
        /* stale: a side was merged away or grew since this pair was queued */
        if (l->id != c.a || r->id != c.b || l->next != c.right) continue;
        l->id = tok_merge_find(t, c.a, c.b)->result;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        r->id = -2;                          /* dead */
        try_pair(t, h, sym, l->prev, c.left);
        try_pair(t, h, sym, c.left, l->next);
    }
    for (int i = 0; i >= 0 && m > 0; i = sym[i].next) {
        if (sym[i].id >= 0) tok_push(out, sym[i].id);
        else if (t->unk >= 0) tok_push(out, t->unk);   /* a byte with no token */
    }
}

int bpe_encode(const kv_tokenizer *t, const uint8_t *s, size_t n, tok_out *out) {
    /* Code points (bad bytes become U+FFFD), their classes, and the text re-encoded. */
    uint32_t *cp = malloc(n * sizeof *cp);
    uint8_t *cls = malloc(n);
    int *lens = malloc(n * sizeof *lens);
    uint8_t *u = malloc(3 * n + 4);
    int *uoff = malloc((n + 1) * sizeof *uoff);
    symbol *sym = NULL;
    tok_heap h = {NULL, 0};
    int rc = -1, nc = 0;
    if (!cp || !cls || !lens || !u || !uoff) goto done;
    uoff[0] = 0;
    for (size_t p = 0; p < n; nc++) {
        p += uni_decode(s + p, n - p, &cp[nc]);
        uoff[nc + 1] = uoff[nc] + uni_encode(cp[nc], u + uoff[nc]);
    }
    pretok_classify(cp, nc, cls);
    int np = pretok_split(t->pre, cp, cls, nc, lens), longest = 0;
    for (int i = 0, c = 0; i < np; c += lens[i++]) {
        int bytes = uoff[c + lens[i]] - uoff[c];
        if (bytes > longest) longest = bytes;
    }
    sym = malloc((size_t)longest * sizeof *sym);
    h.v = malloc((size_t)3 * longest * sizeof *h.v + 1);
    if (!sym || !h.v) goto done;
    for (int i = 0, c = 0; i < np; c += lens[i++])
        bpe_piece(t, u + uoff[c], uoff[c + lens[i]] - uoff[c], sym, &h, out);
    rc = 0;
done:
    free(cp); free(cls); free(lens); free(u); free(uoff); free(sym); free(h.v);
    return rc;
}
