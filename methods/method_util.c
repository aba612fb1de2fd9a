#include "method.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kv_budget(const kv_setup *s) {
    if (s->budget_tokens > 0) return s->budget_tokens;
    int b = (int)floor(s->budget_frac * s->n_prompt);
    return b < 1 ? 1 : b;
}

int kv_check_type(const kv_setup *s, const char *name, char *err, size_t errlen) {
    if (s->kv_type == KB_F32 || s->kv_type == KB_F16 || s->kv_type == KB_BF16) return 0;
    snprintf(err, errlen, "%s: unknown K/V element type %d (f32, f16 or bf16)", name, s->kv_type);
    return -1;
}

static const kv_param *find_param(const kv_method *m, const char *key, size_t len) {
    for (const kv_param *p = m->params; p && p->name; p++)
        if (strlen(p->name) == len && strncmp(p->name, key, len) == 0) return p;
    return NULL;
}

int kv_param_check(const kv_method *m, const char *params, char *err, size_t errlen) {
    const char *s = params;
    while (s && *s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (!eq || eq == s) {
            snprintf(err, errlen, "%s: parameter '%.*s' is not key=value", m->name, (int)len, s);
            return -1;
        }
        if (!find_param(m, s, (size_t)(eq - s))) {
            snprintf(err, errlen, "%s: unknown parameter '%.*s' (see kvbench methods)", m->name,
                     (int)(eq - s), s);
            return -1;
        }
        s = end ? end + 1 : NULL;
    }
    return 0;
}

/* The value of key in a "k=v,k=v" list (the last one given), copied to buf; 1 if found. */
static int list_value(const char *list, const char *key, char *buf, size_t buflen) {
    size_t klen = strlen(key);
    int found = 0;
    for (const char *s = list; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > klen && strncmp(s, key, klen) == 0 && s[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen >= buflen) vlen = buflen - 1;
            memcpy(buf, s + klen + 1, vlen);
            buf[vlen] = 0;
            found = 1;
        }
        s = end ? end + 1 : NULL;
    }
    return found;
}

/* Test hook (tests/test_run_ident.sh): KVBENCH_TEST_DEFAULTS="method:k=v,k=v;method2:k=v"
 * replaces declared defaults, exactly as an edit of the method's source would, so a
 * test can show that a changed default starts a new run. Unset in normal use. */
static int default_override(const kv_method *m, const char *key, char *buf, size_t buflen) {
    const char *env = getenv("KVBENCH_TEST_DEFAULTS");
    size_t nl = strlen(m->name);
    for (const char *s = env; s && *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > nl && strncmp(s, m->name, nl) == 0 && s[nl] == ':') {
            char list[512];
            snprintf(list, sizeof list, "%.*s", (int)(len - nl - 1), s + nl + 1);
            if (list_value(list, key, buf, buflen)) return 1;
        }
        s = end ? end + 1 : NULL;
    }
    return 0;
}

const char *kv_decode_name(int rule) { return rule == KV_DECODE_HOLD ? "hold" : "append"; }

int kv_decode_parse(const char *s, int *out) {
    if (s && !strcmp(s, "append")) *out = KV_DECODE_APPEND;
    else if (s && !strcmp(s, "hold")) *out = KV_DECODE_HOLD;
    else return -1;
    return 0;
}

/* The declared range of key, if any: the value must be in [lo, hi] or equal `special`. */
static int in_range(const kv_method *m, const char *key, double v, char *err, size_t errlen) {
    for (const kv_range *r = m->ranges; r && r->name; r++) {
        if (strcmp(r->name, key)) continue;
        if ((v >= r->lo && v <= r->hi) || v == r->special) return 0;
        char extra[48] = "";
        if (!isnan(r->special)) snprintf(extra, sizeof extra, " or %g", r->special);
        snprintf(err, errlen, "%s: parameter %s=%g is out of range [%g, %g]%s", m->name, key, v, r->lo, r->hi,
                 extra);
        return -1;
    }
    return 0;
}

int kv_param_text(const kv_method *m, const char *params, const char *key, char *buf, size_t buflen,
                  char *err, size_t errlen) {
    const kv_param *p = find_param(m, key, strlen(key));
    if (!p) {
        snprintf(err, errlen, "%s: internal error: no parameter '%s'", m->name, key);
        return -1;
    }
    if (!default_override(m, key, buf, buflen)) snprintf(buf, buflen, "%s", p->deflt);
    list_value(params, key, buf, buflen);
    return 0;
}

int kv_param_int(const kv_method *m, const char *params, const char *key, int *out, char *err,
                 size_t errlen) {
    char buf[64];
    if (kv_param_text(m, params, key, buf, sizeof buf, err, errlen)) return -1;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || end == buf || *end || v < -1000000000L || v > 1000000000L) {
        snprintf(err, errlen, "%s: parameter %s='%s' is not an integer", m->name, key, buf);
        return -1;
    }
    if (in_range(m, key, (double)v, err, errlen)) return -1;
    *out = (int)v;
    return 0;
}

int kv_param_double(const kv_method *m, const char *params, const char *key, double *out,
                    char *err, size_t errlen) {
    char buf[64];
    if (kv_param_text(m, params, key, buf, sizeof buf, err, errlen)) return -1;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || end == buf || *end || !isfinite(v)) {
        snprintf(err, errlen, "%s: parameter %s='%s' is not a number", m->name, key, buf);
        return -1;
    }
    if (in_range(m, key, v, err, errlen)) return -1;
    *out = v;
    return 0;
}

int kv_init_refused(const char *err) {
    return strncmp(err, "infeasible", 10) && !strstr(err, "out of memory");
}

void kv_needs_union(kv_needs *all, const kv_needs *one) {
    all->col_mass |= one->col_mass;
    if (one->window > all->window) all->window = one->window;
    if (one->queries > all->queries) all->queries = one->queries;
    all->wo |= one->wo;
}
