/* Pre-tokenizers, written out by hand (no regex engine); see model-format.md 5.4.
 * Positions outside the current piece have no class, so no rule looks across it. */
#include "tok_pretok.h"
#include <string.h>
#include "unicode.h"

static const struct { const char *name; int pre; } pre_names[] = {
    {"default", PRE_GPT2}, {"gpt2", PRE_GPT2}, {"gpt-2", PRE_GPT2}, {"phi-2", PRE_GPT2},
    {"smollm", PRE_SMOLLM}, {"starcoder", PRE_SMOLLM}, {"refact", PRE_SMOLLM},
    {"command-r", PRE_SMOLLM}, {"codeshell", PRE_SMOLLM}, {"exaone", PRE_SMOLLM},
    {"minerva-7b", PRE_SMOLLM},
    {"llama3", PRE_LLAMA3}, {"llama-v3", PRE_LLAMA3}, {"llama-bpe", PRE_LLAMA3},
    {"falcon3", PRE_LLAMA3},
    {"qwen2", PRE_QWEN2}, {"deepseek-r1-qwen", PRE_QWEN2},
};

int pretok_from_name(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++)
        if (strlen(pre_names[i].name) == len && !memcmp(pre_names[i].name, name, len))
            return pre_names[i].pre;
    return -1;
}

void pretok_classify(const uint32_t *cp, int n, uint8_t *cls) {
    for (int i = 0; i < n; i++)
        cls[i] = uni_is_letter(cp[i]) ? CLS_LETTER : uni_is_number(cp[i]) ? CLS_NUMBER
               : uni_is_space(cp[i]) ? CLS_SPACE : CLS_OTHER;
}

static int lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? (int)c + 32 : (int)c; }

/* 's 't 'm 'd (2 code points) or 're 've 'll (3); 0 if none. */
static int contraction(const uint32_t *c, int p, int end, int fold) {
    if (c[p] != '\'' || p + 1 >= end) return 0;
    int a = fold ? lower_ascii(c[p + 1]) : (int)c[p + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (p + 2 >= end) return 0;
    int b = fold ? lower_ascii(c[p + 2]) : (int)c[p + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S) then \s+ (llama.cpp acts as if the GPT-2 regex ended with |\s+):
 * a run followed by more text leaves its last code point to prefix the next piece. */
static int space_run(const uint8_t *k, int p, int end) {
    int w = 0;
    while (p + w < end && k[p + w] == CLS_SPACE) w++;
    if (w > 1 && p + w < end) return p + w - 1;
    return w ? p + w : p + 1;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static int gpt2_next(const uint32_t *c, const uint8_t *k, int p, int end) {
    int m = contraction(c, p, end, 0);
    if (m) return p + m;
    int sp = c[p] == ' ';
    int k2 = sp ? (p + 1 < end ? k[p + 1] : 0) : k[p];
    if (k2 == CLS_LETTER || k2 == CLS_NUMBER || k2 == CLS_OTHER) {
        int r = p + sp;
        while (r < end && k[r] == k2) r++;
        return r;
    }
    return space_run(k, p, end);
}

static int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static int llama3_next(const uint32_t *c, const uint8_t *k, int p, int end, int max_digits) {
    int m = contraction(c, p, end, 1);
    if (m) return p + m;
    if (!is_crlf(c[p]) && k[p] != CLS_NUMBER &&
        (k[p] == CLS_LETTER || (p + 1 < end && k[p + 1] == CLS_LETTER))) {
        int r = p + 1;
        while (r < end && k[r] == CLS_LETTER) r++;
        return r;
    }
    if (k[p] == CLS_NUMBER) {
        int r = p;
        while (r < end && k[r] == CLS_NUMBER && r - p < max_digits) r++;
        return r;
    }
    int sp = c[p] == ' ';
    if ((sp ? (p + 1 < end ? k[p + 1] : 0) : k[p]) == CLS_OTHER) {
        int r = p + sp;
        while (r < end && k[r] == CLS_OTHER) r++;
        while (r < end && is_crlf(c[r])) r++;
        return r;
    }
    int last_nl = -1;   /* \s*[\r\n]+ : up to the run's last \r or \n */
    for (int r = p; r < end && k[r] == CLS_SPACE; r++)
        if (is_crlf(c[r])) last_nl = r + 1;
    if (last_nl >= 0) return last_nl;
    return space_run(k, p, end);
}

static int split_span(int pre, const uint32_t *c, const uint8_t *k, int lo, int hi, int *lens) {
    int n = 0;
    for (int p = lo; p < hi;) {
        int e = pre == PRE_LLAMA3 ? llama3_next(c, k, p, hi, 3)
              : pre == PRE_QWEN2  ? llama3_next(c, k, p, hi, 1)
                                  : gpt2_next(c, k, p, hi);
        lens[n++] = e - p;
        p = e;
    }
    return n;
}

int pretok_split(int pre, const uint32_t *c, const uint8_t *k, int n, int *lens) {
    if (pre != PRE_SMOLLM) return split_span(pre, c, k, 0, n, lens);
    /* R1 \p{N}: each number its own piece; R2 runs on the text between them. */
    int np = 0, lo = 0;
    for (int p = 0; p <= n; p++) {
        if (p < n && k[p] != CLS_NUMBER) continue;
        np += split_span(PRE_GPT2, c, k, lo, p, lens + np);
        if (p < n) lens[np++] = 1;
        lo = p + 1;
    }
    return np;
}
