/* Python str semantics on UTF-8 for the text metrics (see pystr.h). */
#include <stdlib.h>
#include <string.h>
#include "pystr.h"

static int in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

int py_isspace(uint32_t cp) { return in_ranges(py_space_ranges, py_space_ranges_n, cp); }
int py_isword(uint32_t cp) { return in_ranges(py_word_ranges, py_word_ranges_n, cp); }
int py_isdecimal(uint32_t cp) { return in_ranges(py_decimal_ranges, py_decimal_ranges_n, cp); }

int py_decode(const char *str, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return c ? 1 : 0; }
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    uint32_t v = c & (0x3F >> (len - 1 > 0 ? len - 1 : 0));
    int ok = len > 0;
    for (int i = 1; ok && i < len; i++) {
        ok = (s[i] & 0xC0) == 0x80;                     /* also stops at the NUL */
        v = (v << 6) | (s[i] & 0x3F);
    }
    /* overlong 3/4-byte forms, surrogates and values past U+10FFFF are invalid, as in Python */
    if (ok && ((len == 3 && (v < 0x800 || (v >= 0xD800 && v < 0xE000))) || (len == 4 && (v < 0x10000 || v > 0x10FFFF))))
        ok = 0;
    if (!ok) { *cp = 0xDC00 + c; return 1; }
    *cp = v;
    return len;
}

int py_space_len(const char *s) {
    uint32_t cp;
    int n = py_decode(s, &cp);
    return n && py_isspace(cp) ? n : 0;
}

int py_decimal_len(const char *s) {
    uint32_t cp;
    int n = py_decode(s, &cp);
    return n && py_isdecimal(cp) ? n : 0;
}

int py_encode(uint32_t cp, char *o) {
    unsigned char *u = (unsigned char *)o;
    if (cp < 0x80 || (cp >= 0xDC80 && cp <= 0xDCFF)) { u[0] = (unsigned char)(cp < 0x80 ? cp : cp - 0xDC00); return 1; }
    if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | cp >> 6); u[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12); u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | cp >> 18); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Lowercase of one code point through the runs (binary search on first). */
static uint32_t lower1(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    int lo = 0, hi = py_lower_runs_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const py_lower_run *r = &py_lower_runs[mid];
        if (cp < r->first) hi = mid - 1;
        else if (cp > r->last) lo = mid + 1;
        else return (cp - r->first) % (uint32_t)r->stride ? cp : (uint32_t)((int32_t)cp + r->delta);
    }
    return cp;
}

static int cased(uint32_t cp) { return in_ranges(py_cased_ranges, py_cased_ranges_n, cp); }
static int ignorable(uint32_t cp) { return in_ranges(py_ignorable_ranges, py_ignorable_ranges_n, cp); }

/* CPython's final-sigma rule for the capital sigma at v[i]: a cased letter before it and
 * none after it, case-ignorable code points skipped on both sides. */
static int final_sigma(const uint32_t *v, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && ignorable(v[j - 1])) j--;
    if (j == 0 || !cased(v[j - 1])) return 0;
    for (j = i + 1; j < n && ignorable(v[j]); j++) {}
    return j == n || !cased(v[j]);
}

char *py_lower(const char *s) {
    size_t len = strlen(s), n = 0;
    uint32_t *v = malloc((len + 1) * sizeof *v);
    char *out = malloc(2 * len + 1);                    /* U+0130 (2 bytes) lowers to 3 bytes */
    if (!v || !out) { free(v); free(out); return NULL; }
    for (size_t i = 0; i < len;) i += (size_t)py_decode(s + i, &v[n++]);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = v[i];
        if (cp == 0x3A3) { k += (size_t)py_encode(final_sigma(v, n, i) ? 0x3C2 : 0x3C3, out + k); continue; }
        int multi = -1;
        for (int m = 0; m < py_lower_multi_n && cp >= 0x80; m++)
            if (py_lower_multi[m][0] == cp) multi = m;
        if (multi >= 0) {
            k += (size_t)py_encode(py_lower_multi[multi][1], out + k);
            k += (size_t)py_encode(py_lower_multi[multi][2], out + k);
        } else {
            k += (size_t)py_encode(lower1(cp), out + k);
        }
    }
    out[k] = 0;
    free(v);
    return out;
}

char *py_strip(const char *s) {
    int k;
    while ((k = py_space_len(s)) > 0) s += k;
    size_t n = 0;                                       /* end of the last non-space code point */
    for (size_t i = 0; s[i];) {
        uint32_t cp;
        int len = py_decode(s + i, &cp);
        i += (size_t)len;
        if (!py_isspace(cp)) n = i;
    }
    char *r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = 0; }
    return r;
}

int py_split(char *s, char ***out) {
    size_t n = strlen(s);
    char **t = malloc((n / 2 + 2) * sizeof *t);
    if (!t) return -1;
    int k = 0;
    for (size_t i = 0; i < n;) {
        int w;
        while ((w = py_space_len(s + i)) > 0) { memset(s + i, 0, (size_t)w); i += (size_t)w; }
        if (i >= n) break;
        t[k++] = s + i;
        while (i < n && !py_space_len(s + i)) { uint32_t cp; i += (size_t)py_decode(s + i, &cp); }
    }
    *out = t;
    return k;
}
