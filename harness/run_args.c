#include "run_args.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int run_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvbench run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

int run_parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return run_fail("%s '%s': expected an integer in %d..%d", flag, s, lo, hi);
    *out = (int)v;
    return 0;
}

int run_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int run_each_item(const char *flag, const char *list, int (*item)(const char *flag, const char *s, void *ctx),
                  void *ctx) {
    if (!*list) return run_fail("%s: empty list", flag);
    char buf[4096];
    if (strlen(list) >= sizeof buf) return run_fail("%s: list too long", flag);
    strcpy(buf, list);
    char *s = buf;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma) *comma = 0;
        if (!*s) return run_fail("%s '%s': empty item in the list", flag, list);
        if (item(flag, s, ctx)) return -1;
        if (!comma) return 0;
        s = comma + 1;
    }
}
