#include "method_params.h"
#include <stdio.h>
#include <string.h>

/* How often key is set in "k=v,k=v". */
static int key_count(const char *p, const char *key) {
    int n = 0;
    size_t kl = strlen(key);
    for (const char *s = p; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        n += !strncmp(s, key, kl) && s[kl] == '=';
    return n;
}

/* Removes the items of "k=v,k=v" (in place) whose value is the key's default, so that a
 * setting equal to the default is recorded, and identified, as the default. */
static void drop_defaults(const kv_method *m, char *p) {
    char out[256] = "", key[64], dflt[256], err[128];
    size_t k = 0;
    for (char *s = p; *s;) {
        char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        size_t kl = (size_t)(eq - s);
        snprintf(key, sizeof key, "%.*s", (int)kl, s);
        int same = kl < sizeof key && key_count(p, key) == 1 &&
                   kv_param_text(m, NULL, key, dflt, sizeof dflt, err, sizeof err) == 0 &&
                   strlen(dflt) == len - kl - 1 && !strncmp(dflt, eq + 1, len - kl - 1);
        if (!same) k += (size_t)snprintf(out + k, sizeof out - k, "%s%.*s", k ? "," : "", (int)len, s);
        if (!end) break;
        s = end + 1;
    }
    strcpy(p, out);
}

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
        drop_defaults(m, mp->p[mp->n]);
        if (mp->p[mp->n][0]) mp->n++;   /* nothing but defaults: the method's defaults */
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
