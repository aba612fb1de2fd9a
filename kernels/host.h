/* Host plumbing every layer uses, kept once: the monotonic clock, the cache directory
 * (where the model, the corpus, the haystack and the measured bandwidth live), reading a
 * whole file, and a strict integer parse for command-line flags (kernels/host.c). */
#ifndef KB_HOST_H
#define KB_HOST_H
#include <stdarg.h>
#include <stddef.h>

/* Seconds on the monotonic clock (for durations only). */
double kb_now_s(void);

/* $KVBENCH_CACHE/leaf when KVBENCH_CACHE is set and not empty, else
 * $HOME/.cache/kvbench/leaf (./.cache/kvbench/leaf without HOME), written into buf;
 * returns buf. leaf "" gives the directory itself. */
const char *kb_cache_path(const char *leaf, char *buf, size_t len);

/* The whole file at path, NUL-terminated, its length (without the NUL) in *len; NULL when
 * it cannot be opened or read, or on no memory (errno tells which). The caller frees. */
char *kb_read_file(const char *path, size_t *len);

/* One line on stderr, "kvbench CMD: message" (fmt with ap); the commands' error
 * messages all go through it. */
void kb_vcomplain(const char *cmd, const char *fmt, va_list ap);

/* A whole decimal integer s in lo..hi into *out: 0, or -1 (out unchanged) when s is empty,
 * has anything after the digits, overflows or lies outside the range. */
int kb_parse_long(const char *s, long lo, long hi, long *out);

#endif
