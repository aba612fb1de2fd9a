/* Greedy longest-processing-time split: within 4/3 of the best possible makespan, and
 * exactly reproducible on every machine because it sorts by (cost, key) first. */
#include "shard.h"
#include "run_args.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shard_parse(const char *flag, const char *s, shard_spec *out) {
    char *end;
    errno = 0;
    long k = strtol(s, &end, 10);
    if (errno || end == s || *end != '/' || *s == '-' || *s == '+')
        return run_fail("%s '%s': expected K/N, shard K of N counted from 0 (e.g. 0/4 .. 3/4)", flag, s);
    const char *ns = end + 1;
    long n = strtol(ns, &end, 10);
    if (errno || end == ns || *end || *ns == '-' || *ns == '+' || n < 1 || n > 100000)
        return run_fail("%s '%s': N must be an integer in 1..100000", flag, s);
    if (k >= n) return run_fail("%s '%s': K must be in 0..%ld (shards are counted from 0)", flag, s, n - 1);
    out->k = (int)k;
    out->n = (int)n;
    return 0;
}

typedef struct {
    const char *key;
    double cost;
    int i;
} item;

static int by_cost_then_key(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return strcmp(x->key, y->key);
}

int shard_assign(const char *const *keys, const double *cost, int n, int n_shards, int *owner) {
    item *v = malloc(((size_t)n + 1) * sizeof *v);
    double *load = calloc((size_t)n_shards, sizeof *load);
    int *count = calloc((size_t)n_shards, sizeof *count);
    if (!v || !load || !count) {
        free(v), free(load), free(count);
        return -1;
    }
    for (int i = 0; i < n; i++) v[i] = (item){keys[i], cost[i] > 0 ? cost[i] : 0, i};
    qsort(v, (size_t)n, sizeof *v, by_cost_then_key);
    for (int j = 0; j < n; j++) {
        int best = 0;
        for (int s = 1; s < n_shards; s++)
            if (load[s] < load[best] || (load[s] == load[best] && count[s] < count[best])) best = s;
        owner[v[j].i] = best;
        load[best] += v[j].cost;
        count[best]++;
    }
    free(v);
    free(load);
    free(count);
    return 0;
}
