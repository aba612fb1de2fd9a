/* Tiny test helpers shared by the C tests: checks that count failures, a seeded
 * generator for fresh random inputs, and poisoning of outputs before each call. */
#ifndef KV_CHECK_H
#define KV_CHECK_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        check_count++;                                                          \
        if (!(cond)) {                                                          \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

/* Call at the end of main. */
static inline int check_done(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

/* xorshift64*: fresh inputs every run unless KVBENCH_TEST_SEED is set; the seed is
 * printed so a failure can be replayed. */
static uint64_t test_rng_state;
static inline uint64_t test_seed(void) {
    const char *s = getenv("KVBENCH_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : ((uint64_t)time(NULL) ^ ((uint64_t)clock() << 20));
    if (!seed) seed = 88172645463325252ULL;
    test_rng_state = seed;
    printf("seed %llu (KVBENCH_TEST_SEED to replay)\n", (unsigned long long)seed);
    return seed;
}
/* KVBENCH_TEST_SEED_ONLY=1 (set by `make test-seeds`): leave out a part of the test that
 * does not read the seed (fixed prompts on the shipped model, fixed files): it does the
 * same work for every seed. `make check` runs every part. Prints what it leaves out. */
static inline int test_seed_only(const char *what) {
    const char *s = getenv("KVBENCH_TEST_SEED_ONLY");
    if (!s || strcmp(s, "1")) return 0;
    printf("seed-only: left out %s\n", what);
    return 1;
}
static inline uint64_t test_next(void) {
    test_rng_state ^= test_rng_state >> 12;
    test_rng_state ^= test_rng_state << 25;
    test_rng_state ^= test_rng_state >> 27;
    return test_rng_state * 2685821657736338717ULL;
}
static inline double test_unif(void) { return (test_next() >> 11) * (1.0 / 9007199254740992.0); }
static inline int test_int(int lo, int hi) { return lo + (int)(test_unif() * (hi - lo + 1)); }
static inline float test_normal(void) {
    double u = test_unif() + 1e-12, v = test_unif();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static inline void test_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * test_normal();
}
/* Poison with NaN so an output the code under test forgets to write is caught. */
static inline void test_poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}
static inline double rel_l2(const float *x, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)x[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    if (!(num == num)) return INFINITY;   /* NaN anywhere fails */
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
#endif
