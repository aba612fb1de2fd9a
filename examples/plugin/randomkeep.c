/* randomkeep: a method from outside the tree, built against an installed kvbench
 * (make install PREFIX=...; see docs/write-a-method.md). Each kv head keeps its first
 * `sinks` prompt rows plus B - sinks of the rest drawn at random (kvpress's RandomPress,
 * the floor every method should beat): the draw is a hash of (seed, layer, kv head,
 * position), so two runs keep the same rows. A method of the scorer family: its scoring
 * function plus its table; the scorer base and the cache set do the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "methods/scorer.h"

static const kv_method randomkeep;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int sinks, seed;
};

static const kv_param params[] = {
    {"sinks", "4", "first prompt tokens always kept"},
    {"seed", "1", "the draw's seed"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {{"sinks", 0, 1e9, NAN}, {"seed", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

static kv_state *rk_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "randomkeep: out of memory"), NULL;
    if (kv_param_check(&randomkeep, s->params, err, errlen) ||
        kv_param_int(&randomkeep, s->params, "sinks", &st->sinks, err, errlen) ||
        kv_param_int(&randomkeep, s->params, "seed", &st->seed, err, errlen) ||
        ((st->sinks < 0 || st->seed < 0) &&
         snprintf(err, errlen, "randomkeep: sinks=%d and seed=%d must be >= 0", st->sinks, st->seed)) ||
        cs_init(&st->cs, s, 1, 1, "randomkeep", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

/* splitmix64 of (seed, layer, kv head, position): a uniform score in [0, 1). */
static void rk_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    for (int t = 0; t < p->n; t++) {
        uint64_t z = ((uint64_t)st->seed << 48) ^ ((uint64_t)p->layer << 32) ^ ((uint64_t)j << 24) ^ (uint64_t)t;
        z += 0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        score[t] = (float)((z ^ (z >> 31)) >> 40) / (float)(1 << 24);
    }
}

static int rk_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return scorer_ingest(st, p, st->sinks, rk_score, "randomkeep", err, errlen);
}

static const kv_method randomkeep = {
    KV_METHOD_HEAD,
    .name = "randomkeep",
    .summary = "first 4 tokens + a seeded random draw of the rest (kvpress's RandomPress; a plugin example)",
    .params = params,
    .ranges = ranges,
    .init = rk_init,
    .ingest = rk_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};

/* The one symbol kvbench looks for (KV_PLUGIN_SYMBOL). */
const kv_method *const *kvbench_methods(int *n) {
    static const kv_method *const all[] = {&randomkeep};
    *n = 1;
    return all;
}
