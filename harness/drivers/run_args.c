#include "run_args.h"
#include "../../model/model.h"
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

int run_split_flag(const run_flag_syntax *syn, int argc, char **argv, int *i, char *flag, size_t cap,
                   const char **val) {
    const char *a = argv[*i], *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if (len >= cap) return syn->unknown(a);
    memcpy(flag, a, len);
    flag[len] = 0;
    for (int k = 0; k < syn->n_bare; k++)
        if (!strcmp(flag, syn->bare[k])) {
            if (eq) return run_fail("%s takes no value", flag);
            *val = NULL;
            return 0;
        }
    if (eq) *val = eq + 1;
    else if (*i + 1 < argc) *val = argv[++*i];
    else if (!run_flag_documented(syn->usage, flag)) return syn->unknown(flag);
    else return run_fail("%s needs a value", flag);
    return 0;
}

int run_parse_seed(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v > WL_SPLIT_SEED_MAX)
        return run_fail("%s '%s': expected an integer in 0..%llu", flag, s, (unsigned long long)WL_SPLIT_SEED_MAX);
    *out = v;
    return 0;
}

int run_parse_split(const char *flag, const char *s, wl_split *out) {
    if (wl_split_parse(s, out)) return run_fail("%s '%s': expected dev or test", flag, s);
    return 0;
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

int run_add_method(const char *flag, const char *s, const kv_method **list, int *n, int cap) {
    int all = !strcmp(s, "all");
    const kv_method *one = all ? NULL : kv_method_find(s);
    if (!all && !one) {
        char valid[1024] = "";
        for (int i = 0; i < kv_method_count(); i++) {
            size_t len = strlen(valid);
            snprintf(valid + len, sizeof valid - len, "%s%s", i ? ", " : "", kv_method_at(i)->name);
        }
        return run_fail("%s: unknown method '%s' (valid: all, %s)", flag, s, valid);
    }
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        if (!all && m != one) continue;
        int dup = 0;
        for (int k = 0; k < *n; k++) dup |= list[k] == m;
        if (dup) continue;
        if (*n == cap) return run_fail("%s: more than %d methods", flag, cap);
        list[(*n)++] = m;
    }
    return 0;
}

int run_add_budget(const char *flag, const char *s, double *list, int *n, int cap) {
    double v = 0;
    if (run_parse_double(s, &v) || v <= 0 || (v > 1 && (v != floor(v) || v > 1e9)))
        return run_fail("%s '%s': expected a fraction in (0,1] or a token count (integer > 1)", flag, s);
    for (int i = 0; i < *n; i++)
        if (list[i] == v) return 0;
    if (*n == cap) return run_fail("%s: more than %d budgets", flag, cap);
    list[(*n)++] = v;
    return 0;
}

int run_flag_documented(void (*usage)(FILE *), const char *flag) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return 0;
    usage(f);
    fclose(f);
    int found = 0;
    size_t L = strlen(flag);
    for (const char *p = text; p && !found && (p = strstr(p, flag)); p += L)
        found = p > text && (p[-1] == ' ' || p[-1] == ',') && (p[L] == ' ' || p[L] == ',' || p[L] == '\n');
    free(text);
    return found;
}

int run_parse_kv_type(const char *flag, const char *s, int *out) {
    if (kb_kvtype_parse(s, out)) return run_fail("%s '%s': expected f32, f16 or bf16", flag, s);
    return 0;
}

int run_parse_activations(const char *flag, const char *s, int *q8) {
    if (!model_activations_parse(s, q8)) return 0;
    return run_fail("%s '%s': expected f32 or q8", flag, s);
}

int run_kv_type_backend(int *kv_type, const char *backend) {
    if (*kv_type < 0) *kv_type = backend && !strcmp(backend, "cuda") ? KB_BF16 : KB_F32;
    return 0;
}
