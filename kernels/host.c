/* Host plumbing every layer uses, kept once (see host.h). */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double kb_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *kb_cache_path(const char *leaf, char *buf, size_t len) {
    const char *cache = getenv("KVBENCH_CACHE"), *home = getenv("HOME");
    const char *sep = leaf && *leaf ? "/" : "";
    if (!leaf) leaf = "";
    if (cache && *cache) snprintf(buf, len, "%s%s%s", cache, sep, leaf);
    else snprintf(buf, len, "%s/.cache/kvbench%s%s", home && *home ? home : ".", sep, leaf);
    return buf;
}

char *kb_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n >= 0 && !fseek(f, 0, SEEK_SET) && (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}

void kb_vcomplain(const char *cmd, const char *fmt, va_list ap) {
    fprintf(stderr, "kvbench %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int kb_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}
