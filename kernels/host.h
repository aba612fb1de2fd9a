/* Host plumbing every layer uses, kept once: the monotonic clock, the cache directory
 * (where the model, the corpus, the haystack and the measured bandwidth live), reading a
 * whole file, and a strict integer parse for command-line flags (kernels/host.c). */
#ifndef KB_HOST_H
#define KB_HOST_H
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Seconds on the monotonic clock (for durations only). */
double kb_now_s(void);

/* $KVBENCH_CACHE/leaf when KVBENCH_CACHE is set and not empty, else
 * $HOME/.cache/kvbench/leaf (./.cache/kvbench/leaf without HOME), written into buf;
 * returns buf. leaf "" gives the directory itself. */
const char *kb_cache_path(const char *leaf, char *buf, size_t len);

/* Size caps for the files kvbench reads whole (a /dev/zero or a huge file is refused with a
 * message, never read until memory runs out). */
#define KB_CAP_DEFAULT ((size_t)1 << 30)      /* kb_read_file: 1 GiB */
#define KB_CAP_JSON ((size_t)256 << 20)       /* config.json, tokenizer.json, an index: 256 MiB */

/* The regular file at path opened read-only: a FIFO, a device or a directory is refused
 * without blocking (opened O_NONBLOCK, then fstat), and so is one larger than cap bytes.
 * The descriptor (its size in *size), or -1 with why ("cannot open: No such file or
 * directory", "not a regular file (a FIFO)", "is 300 MiB, larger than the 256 MiB kvbench
 * reads") and errno (the open's, EINVAL for not regular, EFBIG for too large). */
int kb_open_regular(const char *path, size_t cap, size_t *size, char *why, size_t whylen);
/* The same as a stdio stream ("rb"). */
FILE *kb_fopen_regular(const char *path, size_t cap, char *why, size_t whylen);

/* The whole regular file at path (at most cap bytes), NUL-terminated, its length (without
 * the NUL) in *len; NULL with why (as kb_open_regular, or "read error", "out of memory")
 * and errno. The caller frees. */
char *kb_read_file_capped(const char *path, size_t cap, size_t *len, char *why, size_t whylen);
/* kb_read_file_capped with KB_CAP_DEFAULT, errno telling why on NULL. */
char *kb_read_file(const char *path, size_t *len);

/* One line on stderr, "kvbench CMD: message" (fmt with ap); the commands' error
 * messages all go through it. */
void kb_vcomplain(const char *cmd, const char *fmt, va_list ap);

/* A whole decimal integer s in lo..hi into *out: 0, or -1 (out unchanged) when s is empty,
 * has anything after the digits, overflows or lies outside the range. */
int kb_parse_long(const char *s, long lo, long hi, long *out);

#endif
