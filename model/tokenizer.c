/* Tokenizer encoding (special-token partition, then BPE or SentencePiece per span)
 * and decoding. Loading is in tok_load.c, the merge algorithms in tok_bpe.c and
 * tok_spm.c, the pre-tokenizers in tok_pretok.c, chat prompts in tok_chat.c. */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "unicode.h"

/* ---- candidate-merge heap ---- */

static int cand_before(const tok_cand *a, const tok_cand *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

void tok_heap_push(tok_heap *h, tok_cand c) {
    int i = h->n++;
    while (i > 0 && cand_before(&c, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
}

tok_cand tok_heap_pop(tok_heap *h) {
    tok_cand top = h->v[0], last = h->v[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_before(&h->v[c + 1], &h->v[c])) c++;
        if (!cand_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
int tok_is_stop(const kv_tokenizer *t, int id) {
    for (int i = 0; i < t->n_stop; i++)
        if (t->stop[i] == id) return 1;
    return 0;
}

/* ---- encoding ---- */

typedef struct { size_t off, len; int32_t id; } fragment;   /* id -1: plain text */

/* Split the text at occurrences of special-token texts, longest token first (as
 * llama.cpp does). Control and unknown tokens only with parse_special; user-defined
 * tokens always. Returns the fragment count, -1 on allocation failure. */
static int partition(const kv_tokenizer *t, const char *text, size_t len, int parse_special, fragment **out) {
    int n = 1, cap = 16;
    fragment *fr = malloc(cap * sizeof *fr);
    if (!fr) return -1;
    fr[0] = (fragment){0, len, -1};
    for (int k = 0; k < t->n_special; k++) {
        int id = t->special[k];
        if (!parse_special && t->type[id] != TT_USER) continue;
        const char *tt = t->text + t->text_off[id];
        size_t tl = t->text_off[id + 1] - t->text_off[id];
        for (int i = 0; i < n; i++) {
            if (fr[i].id >= 0 || fr[i].len < tl) continue;
            const char *hit = memmem(text + fr[i].off, fr[i].len, tt, tl);
            if (!hit) continue;
            if (n + 2 > cap) {
                cap *= 2;
                fragment *nf = realloc(fr, cap * sizeof *fr);
                if (!nf) { free(fr); return -1; }
                fr = nf;
            }
            size_t at = (size_t)(hit - text), end = fr[i].off + fr[i].len;
            fragment left = {fr[i].off, at - fr[i].off, -1}, right = {at + tl, end - at - tl, -1};
            int add = (left.len > 0) + (right.len > 0);   /* fr[i] becomes the token */
            memmove(fr + i + 1 + add, fr + i + 1, (n - i - 1) * sizeof *fr);
            int j = i;
            if (left.len) fr[j++] = left;
            fr[j] = (fragment){at, tl, id};
            if (right.len) fr[j + 1] = right;
            n += add;
            i = j;      /* continue with the right remainder */
        }
    }
    *out = fr;
    return n;
}

int tok_encode(const kv_tokenizer *t, const char *text, size_t len, int parse_special,
               int32_t *ids, int cap) {
    if (len > (size_t)1 << 28) return -1;
    fragment *fr;
    int nf = partition(t, text, len, parse_special, &fr);
    if (nf < 0) return -1;
    tok_out out = {ids, ids ? cap : 0, 0};
    int prev_special = 1, rc = 0;
    for (int i = 0; i < nf && !rc; i++) {
        if (fr[i].id >= 0) {
            tok_push(&out, fr[i].id);
            prev_special = 1;
            continue;
        }
        if (!fr[i].len) continue;
        const uint8_t *s = (const uint8_t *)text + fr[i].off;
        int prefix = t->add_space_prefix && prev_special;
        /* tokenizers' Metaspace with prepend_scheme "first": only the text's start, and
         * not when it already starts with a space */
        if (t->add_space_prefix == 2) prefix = fr[i].off == 0 && s[0] != ' ';
        rc = t->kind == TOK_BPE ? bpe_encode(t, s, fr[i].len, &out) : spm_encode(t, s, fr[i].len, prefix, &out);
        prev_special = 0;
    }
    free(fr);
    return rc ? -1 : out.n;
}

/* ---- decoding ---- */

int tok_piece(const kv_tokenizer *t, int id, int show_special, char *buf, int cap) {
    if (id < 0 || id >= t->n_vocab) return -1;
    if (t->type[id] == TT_CONTROL && !show_special) {
        if (cap > 0) buf[0] = 0;
        return 0;
    }
    int n = (int)(t->piece_off[id + 1] - t->piece_off[id]);
    if (cap > 0) {
        int m = n < cap ? n : cap;
        memcpy(buf, t->piece + t->piece_off[id], m);
        if (n < cap) buf[n] = 0;
    }
    return n;
}

/* Bytes of a complete-character prefix of s[0..n): an incomplete trailing UTF-8
 * sequence (at most 3 bytes) is left out. */
static int complete_prefix(const char *s, int n) {
    for (int back = 1; back <= 3 && back <= n; back++) {
        uint8_t b = (uint8_t)s[n - back];
        if ((b & 0xC0) == 0x80) continue;
        return uni_seq_len(b) > back ? n - back : n;
    }
    return n;
}

/* SentencePiece text starts with the space the encoder added: drop it. */
static int strips_space(const kv_tokenizer *t, const int32_t *ids, int n, int i) {
    if (t->kind != TOK_SPM || !t->add_space_prefix) return 0;
    int first = n > 0 && ids[0] == t->bos ? 1 : 0;
    return i == first;
}

int tok_decode(const kv_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap) {
    if (cap == 0) return 0;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->n_vocab || t->type[id] == TT_CONTROL) continue;
        const char *p = t->piece + t->piece_off[id];
        size_t m = t->piece_off[id + 1] - t->piece_off[id];
        if (strips_space(t, ids, n, i) && m && p[0] == ' ') { p++; m--; }
        if (len + m > cap - 1) {
            memcpy(buf + len, p, cap - 1 - len);
            len = (size_t)complete_prefix(buf, (int)(cap - 1));
            break;
        }
        memcpy(buf + len, p, m);
        len += m;
    }
    buf[len] = 0;
    return (int)len;
}

void tok_stream_init(tok_stream *s) { memset(s, 0, sizeof *s); }

int tok_stream_next(const kv_tokenizer *t, tok_stream *s, int id, int show_special, char *buf, int cap) {
    int m = tok_piece(t, id, show_special, NULL, 0);
    if (m < 0) return 0;
    if (s->n + m > cap) return -1;
    memcpy(buf, s->pend, s->n);
    tok_piece(t, id, show_special, buf + s->n, m);
    int total = s->n + m, keep = total - complete_prefix(buf, total);
    memcpy(s->pend, buf + total - keep, keep);
    s->n = keep;
    return total - keep;
}

int tok_stream_flush(tok_stream *s, char *buf, int cap) {
    if (s->n > cap) return -1;
    memcpy(buf, s->pend, s->n);
    int n = s->n;
    s->n = 0;
    return n;
}
