/* A growable byte string for building prompts: append, printf, take. Out-of-memory is
 * sticky (oom set, further appends ignored) so callers check once at the end. */
#ifndef KV_STRBUF_H
#define KV_STRBUF_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *p; size_t n, cap; int oom; } strbuf;

static inline int sb_reserve(strbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) { b->oom = 1; return -1; }
    b->p = np;
    b->cap = cap;
    return 0;
}
static inline void sb_putn(strbuf *b, const char *s, size_t n) {
    if (sb_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static inline void sb_puts(strbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }
static inline void sb_putc(strbuf *b, char c) { sb_putn(b, &c, 1); }
static inline void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0 || sb_reserve(b, (size_t)k)) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}
/* The NUL-terminated string (caller frees; "" when nothing was appended), or NULL after
 * an allocation failure. */
static inline char *sb_take(strbuf *b) {
    if (!b->oom && sb_reserve(b, 0) == 0) {
        char *p = b->p;
        p[b->n] = 0;                  /* the first reserve of an empty buffer wrote none */
        *b = (strbuf){0};
        return p;
    }
    free(b->p);
    *b = (strbuf){0};
    return NULL;
}
static inline void sb_free(strbuf *b) { free(b->p); *b = (strbuf){0}; }
#endif
