/* --split for the generated workloads (synthetic, RULER, NIAH): dev for anything tuned,
 * test (the default) for reported numbers. The two never share a generator seed: a
 * workload seeds its generator with wl_split_seed(seed, split) = 2*seed + split. */
#ifndef KV_SPLIT_H
#define KV_SPLIT_H
#include <stdint.h>
#include <string.h>

typedef enum { WL_SPLIT_TEST = 0, WL_SPLIT_DEV = 1 } wl_split;

/* Seeds above this would wrap in wl_split_seed. */
#define WL_SPLIT_SEED_MAX (UINT64_MAX / 2)

static inline const char *wl_split_name(wl_split s) { return s == WL_SPLIT_DEV ? "dev" : "test"; }
/* "dev" or "test"; 0, or -1 if neither. */
static inline int wl_split_parse(const char *s, wl_split *out) {
    if (!strcmp(s, "test")) *out = WL_SPLIT_TEST;
    else if (!strcmp(s, "dev")) *out = WL_SPLIT_DEV;
    else return -1;
    return 0;
}
static inline uint64_t wl_split_seed(uint64_t seed, wl_split s) { return 2 * seed + (uint64_t)s; }
#endif
