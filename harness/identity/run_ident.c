#include "run_ident.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../methods/sekv/sekv.h"
#include "../../workloads/sha256.h"

int run_ident_methods(const method_params *mp, char *buf, size_t n) {
    size_t k = 0;
    char err[256], val[512];
    buf[0] = 0;
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        const char *over = mparams_get(mp, m);
        k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s:", i ? "|" : "", m->name);
        int j = 0;
        for (const kv_param *p = m->params; p && p->name; p++, j++) {
            if (kv_param_text(m, over, p->name, val, sizeof val, err, sizeof err)) snprintf(val, sizeof val, "?");
            k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s=%s", j ? "," : "", p->name, val);
        }
    }
    return k < n ? 0 : -1;
}

int kv_init_refused(const char *err) {
    return strncmp(err, "infeasible", 10) && !strstr(err, "out of memory");
}

static int check_one(const kv_method *m, const method_params *mp, const kv_setup *shape, char *err, size_t errlen) {
    kv_setup s = *shape;
    s.params = mparams_get(mp, m);
    char why[512] = "";
    kv_state *st = m->init(&s, why, sizeof why);
    if (!st) {   /* the reason, naming the method ("sekv: rank must be 8, 32 or 64") */
        int named = !strncmp(why, m->name, strlen(m->name)) && why[strlen(m->name)] == ':';
        snprintf(err, errlen, "--params: %s%s%s", named ? "" : m->name, named ? "" : ": ", *why ? why : "refused");
        return -1;
    }
    m->free(st);
    return 0;
}

int run_check_methods(const kv_method *const *methods, int n, const method_params *mp, const kv_setup *shape,
                      char *err, size_t errlen) {
    for (int i = 0; i < n; i++)
        if (check_one(methods[i], mp, shape, err, errlen)) return -1;
    for (int i = 0; i < mp->n; i++) {
        int done = 0;   /* each method once (a params file is read once here) */
        for (int k = 0; k < n && !done; k++) done = methods[k] == mp->m[i];
        if (!done && check_one(mp->m[i], mp, shape, err, errlen)) return -1;
    }
    return 0;
}

void run_ident_sekv_params(const method_params *mp, const kv_setup *shape, char hex[65]) {
    kv_setup s = *shape;
    s.params = mparams_get(mp, &kv_sekv);
    char why[512];
    kv_state *st = kv_sekv.init(&s, why, sizeof why);
    snprintf(hex, 65, "%s", st ? "none" : "?");
    const char *path = st ? sekv_params_path(st) : "";
    FILE *f = *path ? fopen(path, "rb") : NULL;
    if (f) {   /* the bytes sekv just loaded (checked there: magic, checksum, model hash) */
        char *buf = NULL;
        long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
        if (n >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
            sha256_hex(buf, (size_t)n, hex);
        else snprintf(hex, 65, "?");
        free(buf);
        fclose(f);
    }
    if (st) kv_sekv.free(st);
}
