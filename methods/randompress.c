/* randompress (kvpress's RandomPress, kvpress/presses/random_press.py at NVIDIA/kvpress
 * 8bb29b9; named after the class as knormpress is, since a method named "random" would
 * claim every random_* identifier outside methods/, tests/test_method_names.sh): every (layer, kv head, prompt row) draws an independent uniform score and the
 * top B are kept: a baseline that knows nothing. kvpress draws with torch.rand (seed
 * None: unseeded); here the draw is a hash of (seed, layer, kv head, row) (splitmix64), so
 * a run is reproducible and the same under every kv_type, but the rows differ from
 * torch's stream: only the distribution is kvpress's. */
#include "scorer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern const kv_method kv_randompress;

struct kv_state {
    kv_cacheset cs;     /* first: the scorer base and the door members rely on it */
    int seed, sinks;
};

static const kv_param params[] = {
    {"seed", "0", "seed of the draw (kvpress: None, unseeded; the scores are a hash of seed, layer, kv head, row)"},
    {"sinks", "0", "first prompt tokens always kept (0 = kvpress's RandomPress)"},
    {NULL, NULL, NULL},
};
static const kv_range ranges[] = {{"seed", 0, 2147483647, NAN}, {"sinks", 0, 1e9, NAN}, {NULL, 0, 0, 0}};

static kv_state *random_init(const kv_setup *s, char *err, size_t errlen) {
    kv_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "randompress: out of memory"), NULL;
    if (kv_param_check(&kv_randompress, s->params, err, errlen) ||
        kv_param_int(&kv_randompress, s->params, "seed", &st->seed, err, errlen) ||
        kv_param_int(&kv_randompress, s->params, "sinks", &st->sinks, err, errlen) ||
        (st->seed < 0 && snprintf(err, errlen, "randompress: seed=%d must be >= 0", st->seed)) ||
        (st->sinks < 0 && snprintf(err, errlen, "randompress: sinks=%d must be >= 0", st->sinks)) ||
        cs_init(&st->cs, s, 1, 1, "randompress", err, errlen)) {
        free(st);
        return NULL;
    }
    return st;
}

/* splitmix64's finaliser. */
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from the top 24 bits (exact in a float). */
static float kv_random_score(int seed, int layer, int kv_head, int t) {
    uint64_t h = mix64(mix64(mix64((uint64_t)(uint32_t)seed) ^ (uint64_t)(uint32_t)layer) ^
                       ((uint64_t)(uint32_t)kv_head << 32 | (uint32_t)t));
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

static void random_score(const kv_state *st, const kv_prefill *p, int j, float *score) {
    for (int t = 0; t < p->n; t++) score[t] = kv_random_score(st->seed, p->layer, j, t);
}

static int random_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    return scorer_ingest(st, p, st->sinks, random_score, "randompress", err, errlen);
}

const kv_method kv_randompress = {
    KV_METHOD_HEAD,
    .name = "randompress",
    .summary = "B prompt tokens drawn at random per layer and kv head (seeded); kvpress's RandomPress (kvpress "
               "8bb29b9), prompt compressed once",
    .params = params,
    .ranges = ranges,
    .init = random_init,
    .ingest = random_ingest,
    .append = cs_door_append,
    KV_CACHESET_DOOR,
    .free = cs_door_free,
};
