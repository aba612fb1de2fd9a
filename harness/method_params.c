#include "method_params.h"
#include <stdio.h>
#include <string.h>

int mparams_parse(method_params *mp, const char *spec, char *err, size_t errlen) {
    memset(mp, 0, sizeof *mp);
    for (const char *s = spec; s && *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        if (!colon || colon == s) {
            snprintf(err, errlen, "--params '%.*s': expected METHOD:key=value[,key=value]", (int)len, s);
            return -1;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(colon - s), s);
        const kv_method *m = kv_method_find(name);
        if (!m) {
            snprintf(err, errlen, "--params: unknown method '%s' (see kvbench methods)", name);
            return -1;
        }
        if (mparams_get(mp, m)) {
            snprintf(err, errlen, "--params: method '%s' given twice", m->name);
            return -1;
        }
        size_t plen = len - (size_t)(colon + 1 - s);
        if (mp->n == MPARAMS_MAX || plen >= sizeof mp->p[0]) {
            snprintf(err, errlen, "--params: too many methods or too long");
            return -1;
        }
        mp->m[mp->n] = m;
        memcpy(mp->p[mp->n], colon + 1, plen);
        mp->p[mp->n][plen] = 0;
        if (kv_param_check(m, mp->p[mp->n], err, errlen)) return -1;
        mp->n++;
        s = end ? end + 1 : NULL;
    }
    return 0;
}

const char *mparams_get(const method_params *mp, const kv_method *m) {
    for (int i = 0; mp && i < mp->n; i++)
        if (mp->m[i] == m) return mp->p[i];
    return NULL;
}

void mparams_canon(const method_params *mp, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < mp->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s:%s", i ? ";" : "", mp->m[i]->name, mp->p[i]);
}
