/* Tokenizer loading from GGUF metadata: vocabulary, token types and scores, merges,
 * the lookup tables (text -> id, pair -> merge), the bytes each token prints, special
 * tokens and stop ids. Encoding and decoding are in tokenizer.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "tok_pretok.h"
#include "unicode.h"

/* ---- hashing ---- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;                      /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_u64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return (uint32_t)(x ^ (x >> 33));
}

static uint32_t table_size(int n) {
    uint32_t s = 16;
    while (s < 2u * (uint32_t)n) s *= 2;
    return s;
}

int tok_find(const kv_tokenizer *t, const char *s, size_t n) {
    for (uint32_t h = hash_bytes(s, n) & t->map_mask;; h = (h + 1) & t->map_mask) {
        int32_t id = t->map[h];
        if (id < 0) return -1;
        if (t->text_off[id + 1] - t->text_off[id] == n && !memcmp(t->text + t->text_off[id], s, n))
            return id;
    }
}

const tok_merge *tok_merge_find(const kv_tokenizer *t, int32_t left, int32_t right) {
    if (!t->merges) return NULL;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t h = hash_u64(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        if (t->merges[h].rank < 0) return NULL;
        if (t->merges[h].key == key) return &t->merges[h];
    }
}

/* ---- loading ---- */

static int fail(char *err, size_t errlen, const gguf_file *f, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", f->path, msg);
    return -1;
}

/* GPT-2 byte <-> code point map: printable bytes keep their value, the other 68 take
 * U+0100.. in byte order. */
static void gpt2_byte_map(uint32_t cp_of[256]) {
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = keep ? (uint32_t)b : (uint32_t)next++;
    }
}

/* Numeric array metadata of n_vocab elements; NULL if absent, errors if malformed. */
static const uint8_t *vocab_array(const gguf_file *f, const char *key, int type, int n,
                                  int *bad, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return NULL;
    if (kv->type != GGUF_ARRAY || kv->arr_type != type || kv->arr_n != (uint64_t)n) {
        *bad = fail(err, errlen, f, "%s: expected an array of %d %s", key, n,
                    type == GGUF_F32 ? "float32" : "int32");
        return NULL;
    }
    return kv->data;
}

static int opt_id(const gguf_file *f, const char *key, int n_vocab, int *id, char *err, size_t errlen) {
    int64_t v;
    if (!gguf_find(f, key)) return 0;
    if (gguf_get_int(f, key, &v)) return fail(err, errlen, f, "%s: not an integer", key);
    if (v == -1 || v == 0xFFFFFFFFLL) { *id = -1; return 0; }   /* "none" */
    if (v < 0 || v >= n_vocab) return fail(err, errlen, f, "%s = %lld is outside the vocabulary of %d", key, (long long)v, n_vocab);
    *id = (int)v;
    return 0;
}

static int opt_bool(const gguf_file *f, const char *key, int *out) {
    const gguf_kv *kv = gguf_find(f, key);
    int64_t v;
    if (kv && kv->type == GGUF_BOOL) *out = kv->data[0] != 0;
    else if (kv && !gguf_get_int(f, key, &v)) *out = v != 0;
    return 0;
}

static int load_vocab(kv_tokenizer *t, const gguf_file *f, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.tokens");
    if (!kv) return fail(err, errlen, f, "tokenizer.ggml.tokens is missing");
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || kv->arr_n == 0 || kv->arr_n > (1u << 30))
        return fail(err, errlen, f, "tokenizer.ggml.tokens: expected a non-empty string array");
    int n = t->n_vocab = (int)kv->arr_n;
    size_t total = 0;
    gguf_str s;
    for (int i = 0; i < n; i++) {
        if (gguf_arr_str(f, kv, (uint64_t)i, &s)) return fail(err, errlen, f, "tokenizer.ggml.tokens[%d] is unreadable", i);
        total += s.len;
    }
    if (total >= UINT32_MAX) return fail(err, errlen, f, "tokenizer.ggml.tokens: vocabulary text too large");
    t->text = malloc(total + 1);
    t->piece = malloc(total + 1);
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    t->piece_off = malloc((n + 1) * sizeof *t->piece_off);
    t->type = malloc(n);
    t->map_mask = table_size(n) - 1;
    t->map = malloc((t->map_mask + 1) * sizeof *t->map);
    if (!t->text || !t->piece || !t->text_off || !t->piece_off || !t->type || !t->map)
        return fail(err, errlen, f, "out of memory for the vocabulary");
    uint32_t off = 0;
    for (int i = 0; i < n; i++) {
        gguf_arr_str(f, kv, (uint64_t)i, &s);
        t->text_off[i] = off;
        memcpy(t->text + off, s.ptr, s.len);
        off += (uint32_t)s.len;
    }
    t->text_off[n] = off;

    int bad = 0;
    const uint8_t *types = vocab_array(f, "tokenizer.ggml.token_type", GGUF_I32, n, &bad, err, errlen);
    const uint8_t *scores = vocab_array(f, "tokenizer.ggml.scores", GGUF_F32, n, &bad, err, errlen);
    if (bad) return -1;
    for (int i = 0; i < n; i++) {
        int32_t ty = TT_NORMAL;
        if (types) memcpy(&ty, types + 4 * (size_t)i, 4);
        t->type[i] = ty >= TT_NORMAL && ty <= TT_BYTE ? (uint8_t)ty : TT_UNUSED;
    }
    if (t->kind == TOK_SPM) {
        t->score = calloc(n, sizeof *t->score);
        if (!t->score) return fail(err, errlen, f, "out of memory for the scores");
        if (scores) memcpy(t->score, scores, (size_t)n * 4);
    }

    /* text -> id; the first of duplicate texts wins */
    memset(t->map, 0xFF, (t->map_mask + 1) * sizeof *t->map);
    for (int i = 0; i < n; i++) {
        const char *p = t->text + t->text_off[i];
        size_t len = t->text_off[i + 1] - t->text_off[i];
        if (tok_find(t, p, len) >= 0) continue;
        uint32_t h = hash_bytes(p, len) & t->map_mask;
        while (t->map[h] >= 0) h = (h + 1) & t->map_mask;
        t->map[h] = i;
    }
    return 0;
}

static int hexval(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes each token prints (tok_piece without show_special). */
static void build_pieces(kv_tokenizer *t) {
    uint32_t cp_of[256];
    int16_t byte_of[0x144];
    gpt2_byte_map(cp_of);
    memset(byte_of, 0xFF, sizeof byte_of);
    for (int b = 0; b < 256; b++) byte_of[cp_of[b]] = (int16_t)b;
    uint32_t off = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        const uint8_t *s = (const uint8_t *)t->text + t->text_off[i];
        size_t n = t->text_off[i + 1] - t->text_off[i];
        char *o = t->piece + off;
        size_t m = 0;
        int ty = t->type[i];
        if (ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_USER) {
            memcpy(o, s, n);        /* raw text (control only prints with show_special) */
            m = n;
        } else if (ty == TT_NORMAL && t->kind == TOK_BPE) {
            for (size_t p = 0; p < n;) {
                uint32_t cp;
                int k = uni_decode(s + p, n - p, &cp);
                if (cp < 0x144 && byte_of[cp] >= 0) o[m++] = (char)byte_of[cp];
                else { memcpy(o + m, s + p, k); m += k; }   /* not a mapped byte: keep as is */
                p += k;
            }
        } else if (ty == TT_NORMAL) {                       /* SPM: U+2581 is a space */
            for (size_t p = 0; p < n; p++) {
                if (p + 2 < n && s[p] == 0xE2 && s[p + 1] == 0x96 && s[p + 2] == 0x81) { o[m++] = ' '; p += 2; }
                else o[m++] = (char)s[p];
            }
        } else if (ty == TT_BYTE && t->kind == TOK_SPM) {       /* <0xXX> */
            int ok = n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>';
            int hi = ok ? hexval(s[3]) : -1, lo = ok ? hexval(s[4]) : -1;
            if (hi >= 0 && lo >= 0) o[m++] = (char)(hi * 16 + lo);
        }
        t->piece_off[i] = off;
        off += (uint32_t)m;
    }
    t->piece_off[t->n_vocab] = off;
}

static int load_merges(kv_tokenizer *t, const gguf_file *f, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.merges");
    if (!kv) return fail(err, errlen, f, "tokenizer.ggml.merges is missing (required for gpt2 tokenizers)");
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || kv->arr_n > (1u << 30))
        return fail(err, errlen, f, "tokenizer.ggml.merges: expected a string array");
    int n = (int)kv->arr_n;
    t->merge_mask = table_size(n) - 1;
    t->merges = malloc((t->merge_mask + 1) * sizeof *t->merges);
    char *buf = NULL;
    size_t bufcap = 0;
    if (!t->merges) return fail(err, errlen, f, "out of memory for the merges");
    for (uint32_t i = 0; i <= t->merge_mask; i++) t->merges[i].rank = -1;
    for (int r = 0; r < n; r++) {
        gguf_str s;
        if (gguf_arr_str(f, kv, (uint64_t)r, &s)) { free(buf); return fail(err, errlen, f, "tokenizer.ggml.merges[%d] is unreadable", r); }
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) { free(buf); return fail(err, errlen, f, "tokenizer.ggml.merges[%d] has no space separating the pair", r); }
        size_t nl = (size_t)(sp - s.ptr), nr = s.len - nl - 1;
        if (nl + nr > bufcap) {
            bufcap = 2 * (nl + nr);
            char *nb = realloc(buf, bufcap);
            if (!nb) { free(buf); return fail(err, errlen, f, "out of memory for the merges"); }
            buf = nb;
        }
        memcpy(buf, s.ptr, nl);
        memcpy(buf + nl, sp + 1, nr);
        /* A pair whose parts or result are not tokens can never apply here: skip it. */
        int l = tok_find(t, s.ptr, nl), rr = tok_find(t, sp + 1, nr), res = tok_find(t, buf, nl + nr);
        if (l < 0 || rr < 0 || res < 0) continue;
        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rr;
        uint32_t h = hash_u64(key) & t->merge_mask;
        while (t->merges[h].rank >= 0 && t->merges[h].key != key) h = (h + 1) & t->merge_mask;
        if (t->merges[h].rank >= 0) continue;              /* duplicate: the lower rank stays */
        t->merges[h] = (tok_merge){key, r, res};
    }
    free(buf);
    return 0;
}

static int cmp_special(const void *a, const void *b, void *tp) {
    const kv_tokenizer *t = tp;
    int x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->text_off[x + 1] - t->text_off[x], ly = t->text_off[y + 1] - t->text_off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x - y;
}

/* The ids that end generation: eos, plus any end-of-turn/end-of-text marker the
 * vocabulary has (<|endoftext|> for SmolLM2, <|eot_id|> for Llama-3, <|im_end|>...). */
static int build_stops(kv_tokenizer *t) {
    static const char *ends[] = {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>",
                                 "<|end_of_text|>", "<|end|>", "<end_of_turn>", "<|EOT|>"};
    int cap = 1 + (int)(sizeof ends / sizeof ends[0]);
    t->stop = malloc(cap * sizeof *t->stop);
    if (!t->stop) return -1;
    if (t->eos >= 0) t->stop[t->n_stop++] = t->eos;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        int id = tok_find(t, ends[i], strlen(ends[i]));
        if (id >= 0 && id != t->eos) t->stop[t->n_stop++] = id;
    }
    return 0;
}

kv_tokenizer *tok_load(const gguf_file *f, char *err, size_t errlen) {
    kv_tokenizer *t = calloc(1, sizeof *t);
    gguf_str s;
    if (!t) { fail(err, errlen, f, "out of memory"); return NULL; }
    t->bos = t->eos = t->unk = -1;
    if (gguf_get_str(f, "tokenizer.ggml.model", &s)) { fail(err, errlen, f, "tokenizer.ggml.model is missing or not a string"); goto bad; }
    if (s.len == 4 && !memcmp(s.ptr, "gpt2", 4)) t->kind = TOK_BPE;
    else if (s.len == 5 && !memcmp(s.ptr, "llama", 5)) t->kind = TOK_SPM;
    else {
        fail(err, errlen, f, "tokenizer.ggml.model '%.*s' is not supported (gpt2 or llama)", (int)(s.len > 64 ? 64 : s.len), s.ptr);
        goto bad;
    }
    if (t->kind == TOK_BPE) {
        const char *name = "default";
        size_t len = 7;
        if (gguf_find(f, "tokenizer.ggml.pre")) {
            if (gguf_get_str(f, "tokenizer.ggml.pre", &s)) { fail(err, errlen, f, "tokenizer.ggml.pre is not a string"); goto bad; }
            name = s.ptr;
            len = s.len;
        }
        t->pre = pretok_from_name(name, len);
        if (t->pre < 0) {
            fail(err, errlen, f, "tokenizer.ggml.pre '%.*s' is not supported (known: smollm and the starcoder family, "
                 "gpt2/default, llama3/llama-bpe, qwen2)", (int)(len > 64 ? 64 : len), name);
            goto bad;
        }
        t->ignore_merges = t->add_bos = t->pre == PRE_LLAMA3;
    } else {
        t->add_bos = t->add_space_prefix = 1;
        t->bos = 1; t->eos = 2; t->unk = 0;
    }
    if (load_vocab(t, f, err, errlen)) goto bad;
    if (t->kind == TOK_SPM && t->n_vocab < 3) t->bos = t->eos = t->unk = -1;
    if (opt_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err, errlen) ||
        opt_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err, errlen) ||
        opt_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err, errlen))
        goto bad;
    opt_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos);
    if (t->kind == TOK_SPM) opt_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    int first = 0;   /* a tokenizer.json's Metaspace, prepend_scheme "first" (hf_tok.c) */
    opt_bool(f, "kvbench.tokenizer.prefix_first_only", &first);
    if (t->kind == TOK_SPM && t->add_space_prefix && first) t->add_space_prefix = 2;
    /* SentencePiece-style vocabularies from a tokenizer.json carry merges (hf_tok.c):
     * then the pair ranks decide, as in tokenizers; a GGUF's scores otherwise */
    if ((t->kind == TOK_BPE || gguf_find(f, "tokenizer.ggml.merges")) && load_merges(t, f, err, errlen)) goto bad;
    build_pieces(t);

    uint32_t cp_of[256];
    gpt2_byte_map(cp_of);
    for (int b = 0; b < 256; b++) {
        char tmp[8];
        int n = t->kind == TOK_BPE ? uni_encode(cp_of[b], (uint8_t *)tmp) : snprintf(tmp, sizeof tmp, "<0x%02X>", b);
        t->byte_tok[b] = tok_find(t, tmp, (size_t)n);
    }

    t->special = malloc(t->n_vocab * sizeof *t->special);
    if (!t->special || build_stops(t)) { fail(err, errlen, f, "out of memory"); goto bad; }
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER || t->type[i] == TT_UNKNOWN) &&
            t->text_off[i + 1] > t->text_off[i])
            t->special[t->n_special++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);

    if (gguf_find(f, "tokenizer.chat_template")) {
        if (gguf_get_str(f, "tokenizer.chat_template", &s)) { fail(err, errlen, f, "tokenizer.chat_template is not a string"); goto bad; }
        t->chat_template = malloc(s.len + 1);
        if (!t->chat_template) { fail(err, errlen, f, "out of memory"); goto bad; }
        memcpy(t->chat_template, s.ptr, s.len);
        t->chat_template[s.len] = 0;
    }
    return t;
bad:
    tok_free(t);
    return NULL;
}

void tok_free(kv_tokenizer *t) {
    if (!t) return;
    free(t->text); free(t->text_off); free(t->piece); free(t->piece_off); free(t->type);
    free(t->score); free(t->map); free(t->merges); free(t->special); free(t->stop);
    free(t->chat_template);
    free(t);
}

int tok_vocab(const kv_tokenizer *t) { return t->n_vocab; }
int tok_bos(const kv_tokenizer *t) { return t->bos; }
int tok_eos(const kv_tokenizer *t) { return t->eos; }
int tok_add_bos(const kv_tokenizer *t) { return t->add_bos; }
