/* FullKV: keep every prompt and decoded row; exact attention. The accuracy and memory
 * reference (reference §1). The budget is validated but not used. */
#include "cacheset.h"
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_fullkv;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
};

static const kv_param params[] = {{NULL, NULL, NULL}};

static kv_state *fullkv_init(const kv_setup *s, char *err, size_t errlen) {
    if (kv_param_check(&kv_fullkv, s->params, err, errlen)) return NULL;
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "fullkv: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 0, s->n_prompt + s->max_decode, "fullkv", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

static int fullkv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    if (cs_begin_layer(&st->cs, p, "fullkv", err, errlen)) return -1;
    int32_t *all = malloc((size_t)p->n * sizeof *all);
    if (!all) {
        snprintf(err, errlen, "fullkv: out of memory");
        return -1;
    }
    for (int t = 0; t < p->n; t++) all[t] = t;
    int rc = 0;
    for (int j = 0; j < st->cs.Hkv && !rc; j++) rc = cs_load(&st->cs, p, j, all, p->n, NULL);
    free(all);
    if (rc) snprintf(err, errlen, "fullkv: out of memory loading layer %d", p->layer);
    return rc;
}

static void fullkv_append(kv_state *st, int layer, const float *k, const float *v,
                          const kv_token *t) {
    int d = st->cs.d;
    for (int j = 0; j < st->cs.Hkv; j++)
        cs_push(&st->cs, cs_slot(&st->cs, layer, j), k + (size_t)j * d, v + (size_t)j * d, t->pos, 0);
}

const kv_method kv_fullkv = {
    KV_METHOD_HEAD,
    .name = "fullkv",
    .summary = "keep every token (exact attention; the reference)",
    .params = params,
    .keeps_all = 1,
    .init = fullkv_init,
    .ingest = fullkv_ingest,
    .append = fullkv_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};
