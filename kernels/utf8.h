/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
 * for text the tokenizer must map back to its bytes exactly. */
#ifndef KV_UTF8_H
#define KV_UTF8_H
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0..n), n >= 1, or 0. */
static inline int utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > n) return 0;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int j = 1; j < len; j++) {
        if ((s[j] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[j] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  /* overlong, surrogate */
    return len;
}

/* Offset of the first byte of s[0..n) that does not start valid UTF-8, or n. */
static inline size_t utf8_invalid_at(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { i++; continue; }
        int L = utf8_len((const unsigned char *)s + i, n - i);
        if (!L) return i;
        i += (size_t)L;
    }
    return n;
}
#endif
