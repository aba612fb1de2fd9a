/* The text workloads' own seeded PRNG (splitmix64): same seed, same prompts, on any
 * platform and libc. */
#ifndef KV_WL_RNG_H
#define KV_WL_RNG_H
#include <stdint.h>
#include <string.h>

typedef struct { uint64_t s; } wl_rng;

static inline uint64_t wl_next(wl_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
/* Uniform in [0, n), n > 0 (rejection keeps it unbiased). */
static inline uint64_t wl_below(wl_rng *r, uint64_t n) {
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
    do x = wl_next(r); while (x >= lim);
    return x % n;
}
static inline double wl_unif(wl_rng *r) { return (double)(wl_next(r) >> 11) * (1.0 / 9007199254740992.0); }
/* A stream keyed by a seed and a few integers and a name. */
static inline wl_rng wl_stream(uint64_t seed, const char *name, uint64_t a, uint64_t b) {
    wl_rng r = {seed};
    uint64_t h = 1469598103934665603ULL;                    /* FNV-1a of the name */
    for (const char *p = name; p && *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    r.s ^= wl_next(&r) ^ h;
    r.s ^= wl_next(&r) ^ (a * 0xD6E8FEB86659FD93ULL);
    r.s ^= wl_next(&r) ^ (b * 0xA0761D6478BD642FULL);
    wl_next(&r);
    return r;
}
/* Fisher-Yates on n elements of size sz. */
static inline void wl_shuffle(wl_rng *r, void *base, int n, size_t sz) {
    unsigned char *a = base, tmp[64];
    for (int i = n - 1; i > 0; i--) {
        int j = (int)wl_below(r, (uint64_t)i + 1);
        if (j == i) continue;
        for (size_t off = 0; off < sz; off += sizeof tmp) {
            size_t k = sz - off < sizeof tmp ? sz - off : sizeof tmp;
            memcpy(tmp, a + (size_t)i * sz + off, k);
            memcpy(a + (size_t)i * sz + off, a + (size_t)j * sz + off, k);
            memcpy(a + (size_t)j * sz + off, tmp, k);
        }
    }
}
#endif
