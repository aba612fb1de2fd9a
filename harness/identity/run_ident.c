#include "run_ident.h"
#include "../../kernels/host.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int check_one(const kv_method *m, const method_params *mp, const kv_setup *shape, char *err, size_t errlen) {
    kv_setup s = *shape;
    s.params = mparams_get(mp, m);
    char why[512] = "";
    kv_state *st = m->init(&s, why, sizeof why);
    if (!st) {   /* the reason, naming the method ("sekv: rank must be 8, 32 or 64") */
        int named = !strncmp(why, m->name, strlen(m->name)) && why[strlen(m->name)] == ':';
        const char *from = kv_method_origin(m);
        char who[300] = "";   /* no --params for it: its defaults (or its plugin) are to blame, not --params */
        if (!s.params) snprintf(who, sizeof who, "method %s%s%s, with its default parameters: ", m->name,
                                from ? " from " : "", from ? from : "");
        snprintf(err, errlen, "%s%s%s%s", s.params ? "--params: " : who, named || !s.params ? "" : m->name,
                 named || !s.params ? "" : ": ", *why ? why : "init refused the setup");
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

int run_ident_trained(const method_params *mp, const kv_setup *shape, run_trained *out, int cap) {
    int n = 0;
    for (int i = 0; i < kv_method_count() && n < cap; i++) {
        const kv_method *m = kv_method_at(i);
        kv_setup s = *shape;
        s.params = mparams_get(mp, m);
        char path[4096];
        if (!m->trained_file(&s, path, sizeof path)) continue;
        run_trained *t = &out[n++];
        t->method = m->name;
        snprintf(t->hex, sizeof t->hex, "%s", !strcmp(path, "?") ? "?" : "none");
        if (!*path || !strcmp(path, "?")) continue;
        size_t len;
        char *buf = kb_read_file(path, &len);   /* the bytes the method just loaded (and checked) */
        if (buf) sha256_hex(buf, len, t->hex);
        else if (errno != ENOENT) snprintf(t->hex, sizeof t->hex, "?");
        free(buf);
    }
    return n;
}
