#include "paper_rows.h"
#include <stdio.h>
#include <string.h>

static int has_kind(const kv_paper *p, int kind) {
    for (const kv_claim *c = p->claims; c->id; c++)
        if (kind < 0 || c->kind == kind) return 1;
    return 0;
}

int pr_methods(int kind, const char **out, int cap) {
    int n = 0;
    for (int i = 0; i < kv_method_count() && n < cap; i++)
        if (has_kind(kv_method_at(i)->paper, kind)) out[n++] = kv_method_at(i)->name;
    return n;
}

int pr_names(int kind, char *buf, size_t len) {
    const char *m[64];
    int n = pr_methods(kind, m, 64);
    size_t k = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", !i ? "" : i + 1 < n ? ", " : " or ", m[i]);
    return n;
}

const kv_method *pr_primary(void) {
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        if (!has_kind(m->paper, -1)) continue;
        int first = 1;
        for (int k = 0; k < i && first; k++) first = kv_method_at(k)->paper != m->paper;
        if (first) return m;
    }
    return NULL;
}
