/* StreamingLLM (reference §2): the first S tokens (attention sinks) plus the W most
 * recent, with original positions (no re-rotation; kvpress's form). Prefill keeps
 * [0, S) and [n-W, n); each decoded token is appended and, past S+W rows, the oldest
 * non-sink row is dropped. Default W = B - S; when the budget is below S+1 the sinks
 * shrink to B-1 so the cache still holds B rows with at least one recent one. */
#include "cacheset.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_streamingllm;

struct kv_state {
    kv_cacheset cs;     /* first: kv_a_store relies on it */
    int sinks, window;  /* effective S and W */
};

static const kv_param params[] = {
    {"sinks", "4", "attention-sink tokens kept from the start of the prompt"},
    {"window", "0", "recent tokens kept; 0 = budget - sinks (sinks + window must fit the budget)"},
    {NULL, NULL, NULL},
};

static kv_state *streaming_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_streamingllm;
    int sinks, window;
    if (kv_param_check(m, s->params, err, errlen) ||
        kv_param_int(m, s->params, "sinks", &sinks, err, errlen) ||
        kv_param_int(m, s->params, "window", &window, err, errlen))
        return NULL;
    if (sinks < 0 || window < 0) {
        snprintf(err, errlen, "streamingllm: sinks=%d and window=%d must be >= 0", sinks, window);
        return NULL;
    }
    kv_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "streamingllm: out of memory");
        return NULL;
    }
    if (cs_init(&st->cs, s, 0, 1, "streamingllm", err, errlen)) {
        free(st);
        return NULL;
    }
    int B = st->cs.budget;
    if (window == 0) {
        if (sinks > B - 1) sinks = B - 1;
        window = B - sinks;
    } else if (sinks + window > B) {
        snprintf(err, errlen, "streamingllm: sinks=%d + window=%d exceed the budget of %d tokens",
                 sinks, window, B);
        cs_free(&st->cs);
        free(st);
        return NULL;
    }
    st->sinks = sinks;
    st->window = window;
    return st;
}

static int streaming_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    if (cs_begin_layer(&st->cs, p, "streamingllm", err, errlen)) return -1;
    int n = p->n, nk = 0;
    int32_t *keep = malloc((size_t)n * sizeof *keep);
    if (!keep) {
        snprintf(err, errlen, "streamingllm: out of memory");
        return -1;
    }
    for (int t = 0; t < n; t++)
        if (t < st->sinks || t >= n - st->window) keep[nk++] = t;
    int rc = 0;
    for (int j = 0; j < st->cs.Hkv && !rc; j++) rc = cs_load(&st->cs, p, j, keep, nk, NULL);
    free(keep);
    if (rc) snprintf(err, errlen, "streamingllm: out of memory loading layer %d", p->layer);
    return rc;
}

static void streaming_append(kv_state *st, int layer, const float *k, const float *v,
                             const kv_token *t) {
    int d = st->cs.d;
    for (int j = 0; j < st->cs.Hkv; j++) {
        kv_slot *s = cs_slot(&st->cs, layer, j);
        cs_push(&st->cs, s, k + (size_t)j * d, v + (size_t)j * d, t->pos, 0);
        /* rows stay in position order and [0, S) are the sinks */
        if (s->kv.n > st->sinks + st->window) cs_remove(&st->cs, s, st->sinks);
    }
}

static const kv_range ranges[] = {{"sinks", 0, 1e9, NAN}, {"window", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

const kv_method kv_streamingllm = {
    KV_METHOD_HEAD,
    .name = "streamingllm",
    .summary = "attention sinks + rolling recent window, evicting every decode step under both --decode "
               "rules (the paper's policy)",
    .params = params,
    .ranges = ranges,
    .evicts_decoding = 1,
    .init = streaming_init,
    .ingest = streaming_ingest,
    .append = streaming_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};
