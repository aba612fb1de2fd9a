/* Attention kernel benchmark (run by `make bench`).
 *
 * Decode: g = 4 query heads per kv head, d = 128, over 32K and 128K-token contexts;
 * reports K/V bytes read per second next to a memcpy of a buffer of the same size,
 * split over the same threads, measured in the same run (ratio = decode / memcpy); on the
 * CPU also over bf16 and f16 rows (--kv-type), whose bytes are half.
 * Prefill: causal attention over a 4K prompt, GFLOP/s counting 4*d flops per
 * (query head, query, visible key) pair. Each figure is the median of --reps runs.
 * With --backend cuda the host-pointer calls above include the copies to and from the
 * device; the same shapes are then timed device-resident (kb_cuda_*_dev, CUDA events),
 * decode bandwidth next to a device-to-device cudaMemcpy measured in the same run
 * (counting its bytes read plus written), and the backend's peak device memory. */
#include "../kernels/core.h"
#ifdef KB_CUDA
#include "../kernels/cuda_backend.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *x, int n) {
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static float *alloc_random(size_t n, uint64_t seed) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_decode: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((seed >> 40) * (1.0 / 16777216.0) - 0.5);
    }
    return p;
}

typedef struct { char *dst; const char *src; size_t bytes, chunk; } copy_job;
static void copy_chunk(void *ctx, int i) {
    const copy_job *c = ctx;
    size_t off = (size_t)i * c->chunk, n = c->bytes - off < c->chunk ? c->bytes - off : c->chunk;
    memcpy(c->dst + off, c->src + off, n);
}
/* Seconds for one parallel memcpy of `bytes`. */
static double time_memcpy(char *dst, const char *src, size_t bytes) {
    copy_job c = {dst, src, bytes, 1 << 22};
    double t = now();
    kb_parallel_for((int)((bytes + c.chunk - 1) / c.chunk), copy_chunk, &c);
    return now() - t;
}

static void bench_decode(const kb_backend *be, int ctx, int Hkv, int reps, int type) {
    const int g = 4, d = 128;
    size_t per_head = (size_t)ctx * d, es = (size_t)kb_kvtype_bytes(type);
    float *Kf = alloc_random(per_head * Hkv, 1), *Vf = alloc_random(per_head * Hkv, 2);
    float *q = alloc_random((size_t)Hkv * g * d, 3), *out = malloc(sizeof(float) * Hkv * g * d);
    size_t bytes = 2 * per_head * Hkv * es;
    char *K = malloc(bytes / 2), *V = malloc(bytes / 2);   /* rows in the type */
    if (!K || !V) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    kb_kv_put(type, K, Kf, (int)(per_head * Hkv)), kb_kv_put(type, V, Vf, (int)(per_head * Hkv));
    free(Kf), free(Vf);
    char *dst = malloc(bytes);
    if (!out || !dst) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    double td[64], tm[64];
    for (int r = -1; r < reps; r++) {   /* r = -1 warms up */
        double t = now();
        for (int j = 0; j < Hkv; j++) {
            kb_decode_args a = {g, d, ctx, q + (size_t)j * g * d, K + j * per_head * es, V + j * per_head * es, NULL,
                                NULL, out + (size_t)j * g * d, NULL, type};
            be->decode(&a);
        }
        t = now() - t;
        double m = time_memcpy(dst, (const char *)K, bytes / 2) + time_memcpy(dst + bytes / 2, (const char *)V, bytes / 2);
        if (r >= 0) td[r] = t, tm[r] = m;
    }
    double t = median(td, reps), m = median(tm, reps);
    printf("decode   %-5s %-4s ctx %6d  Hkv %d g %d d %d  %7.1f MiB  %8.3f ms  %7.2f GB/s   memcpy %7.2f GB/s   "
           "ratio %.2f\n", be->name, kb_kvtype_name(type), ctx, Hkv, g, d, bytes / 1048576.0, t * 1e3, bytes / t / 1e9,
           bytes / m / 1e9, m / t);
    free(K); free(V); free(q); free(out); free(dst);
}

static void bench_prefill(const kb_backend *be, int m, int H, int Hkv, int d, int reps) {
    float *Q = alloc_random((size_t)m * H * d, 4), *K = alloc_random((size_t)m * Hkv * d, 5);
    float *V = alloc_random((size_t)m * Hkv * d, 6), *out = malloc(sizeof(float) * m * H * d);
    if (!out) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    kb_prefill_args a = {.H = H, .Hkv = Hkv, .d = d, .t0 = 0, .m = m, .Q = Q, .K = K, .V = V,
                         .kv_stride = (size_t)m * d, .out = out};
    double ts[64];
    for (int r = -1; r < reps; r++) {
        double t = now();
        be->prefill(&a);
        if (r >= 0) ts[r] = now() - t;
    }
    double t = median(ts, reps);
    double flops = 4.0 * d * H * ((double)m * (m + 1) / 2);
    printf("prefill  %-5s m %6d  H %d Hkv %d d %d  %8.1f ms  %7.1f GFLOP/s\n", be->name, m, H, Hkv, d, t * 1e3,
           flops / t / 1e9);
    free(Q); free(K); free(V); free(out);
}

#ifdef KB_CUDA
static void *device_copy(const float *host, size_t n) {
    void *d = kb_cuda_malloc(n * sizeof(float), "benchmark input");
    if (!d || kb_cuda_copy_h2d_async(d, host, n * sizeof(float)) || kb_cuda_copy_wait()) {
        fprintf(stderr, "bench_decode: device copy of %zu floats failed\n", n);
        exit(1);
    }
    return d;
}

/* Decode with K and V already on the device: Hkv calls per timed run, as above. */
static void bench_decode_dev(int ctx, int Hkv, int reps) {
    const int g = 4, d = 128;
    size_t per_head = (size_t)ctx * d, bytes = 2 * per_head * Hkv * sizeof(float);
    float *K = alloc_random(per_head * Hkv, 1), *V = alloc_random(per_head * Hkv, 2), *q = alloc_random((size_t)Hkv * g * d, 3);
    float *dK = device_copy(K, per_head * Hkv), *dV = device_copy(V, per_head * Hkv), *dq = device_copy(q, (size_t)Hkv * g * d);
    float *dout = kb_cuda_malloc(sizeof(float) * Hkv * g * d, "benchmark output");
    kb_cuda_timer *tm = kb_cuda_timer_new();
    if (!dout || !tm) exit(1);
    double ts[64];
    for (int r = -1; r < reps; r++) {
        if (kb_cuda_timer_start(tm)) exit(1);
        for (int j = 0; j < Hkv; j++) {
            kb_decode_args a = {g, d, ctx, dq + (size_t)j * g * d, dK + j * per_head, dV + j * per_head, NULL, NULL,
                                dout + (size_t)j * g * d, NULL, KB_F32};
            if (kb_cuda_decode_dev(&a)) exit(1);
        }
        double ms = kb_cuda_timer_stop(tm);
        if (ms < 0 || kb_cuda_sync()) exit(1);
        if (r >= 0) ts[r] = ms * 1e-3;
    }
    double t = median(ts, reps), copy = kb_cuda_d2d_gbps(bytes, reps);
    printf("decode-dev cuda  ctx %6d  Hkv %d g %d d %d  %7.1f MiB  %8.4f ms  %7.1f GB/s   d2d-copy %7.1f GB/s   fraction %.2f\n",
           ctx, Hkv, g, d, bytes / 1048576.0, t * 1e3, bytes / t / 1e9, copy, copy > 0 ? bytes / t / 1e9 / copy : 0.0);
    kb_cuda_timer_free(tm);
    kb_cuda_free(dK); kb_cuda_free(dV); kb_cuda_free(dq); kb_cuda_free(dout);
    free(K); free(V); free(q);
}

/* Causal prefill with everything on the device, H2O column mass on and off. */
static void bench_prefill_dev(int m, int H, int Hkv, int d, int reps) {
    float *Q = alloc_random((size_t)m * H * d, 4), *K = alloc_random((size_t)m * Hkv * d, 5), *V = alloc_random((size_t)m * Hkv * d, 6);
    float *dQ = device_copy(Q, (size_t)m * H * d), *dK = device_copy(K, (size_t)m * Hkv * d), *dV = device_copy(V, (size_t)m * Hkv * d);
    float *dout = kb_cuda_malloc(sizeof(float) * m * H * d, "benchmark output");
    float *dmass = kb_cuda_malloc(sizeof(float) * H * m, "benchmark column mass");
    kb_cuda_timer *tm = kb_cuda_timer_new();
    if (!dout || !dmass || !tm) exit(1);
    for (int mass = 0; mass < 2; mass++) {
        kb_prefill_args a = {.H = H, .Hkv = Hkv, .d = d, .t0 = 0, .m = m, .Q = dQ, .K = dK, .V = dV,
                             .kv_stride = (size_t)m * d, .out = dout, .col_mass = mass ? dmass : NULL, .mass_ld = (size_t)m};
        double ts[64];
        for (int r = -1; r < reps; r++) {
            if (kb_cuda_timer_start(tm) || kb_cuda_prefill_dev(&a)) exit(1);
            double ms = kb_cuda_timer_stop(tm);
            if (ms < 0 || kb_cuda_sync()) exit(1);
            if (r >= 0) ts[r] = ms * 1e-3;
        }
        double t = median(ts, reps), flops = 4.0 * d * H * ((double)m * (m + 1) / 2);
        printf("prefill-dev cuda m %6d  H %d Hkv %d d %d  %8.2f ms  %7.1f GFLOP/s%s\n", m, H, Hkv, d, t * 1e3,
               flops / t / 1e9, mass ? "  (with col_mass; flops of the forward pass only)" : "");
    }
    kb_cuda_timer_free(tm);
    kb_cuda_free(dQ); kb_cuda_free(dK); kb_cuda_free(dV); kb_cuda_free(dout); kb_cuda_free(dmass);
    free(Q); free(K); free(V);
}
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_decode [--backend cpu|cuda] [--threads N] [--reps N] [--quick]\n"
            "  Decode attention bandwidth (32K and 128K tokens, d=128, g=4, 2 kv heads) against a\n"
            "  same-size memcpy, and causal prefill GFLOP/s at 4K tokens. Medians of --reps runs\n"
            "  (default 5). --quick: 32K decode and 2K prefill only. With --backend cuda the host\n"
            "  calls include the copies; the same shapes then run device-resident (CUDA events),\n"
            "  decode next to a device-to-device copy, and the peak device memory is printed.\n");
}

int main(int argc, char **argv) {
    const char *backend = "cpu";
    int threads = 0, reps = 5, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
            if (threads < 1) {
                fprintf(stderr, "bench_decode: --threads wants a positive integer, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 64) {
                fprintf(stderr, "bench_decode: --reps wants 1..64, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else {
            fprintf(stderr, "bench_decode: unknown or incomplete argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    const char *why = NULL;
    if (kb_select(backend, &why) != 0) {
        fprintf(stderr, "bench_decode: --backend %s: %s\n", backend, why ? why : "unavailable");
        return 1;
    }
    if (threads) kb_set_threads(threads);
    const kb_backend *be = kb_get();
    printf("backend %s, %d threads, median of %d runs\n", be->name, kb_threads(), reps);
    /* 16-bit rows: the CPU kernel (the CUDA backend hands them to it) */
    for (int type = KB_F32; type <= (be == kb_cpu() ? KB_BF16 : KB_F32); type++) {
        bench_decode(be, 32768, 2, reps, type);
        if (!quick) bench_decode(be, 131072, 2, reps, type);
    }
    bench_prefill(be, quick ? 2048 : 4096, 9, 3, 64, reps);
    if (!quick) bench_prefill(be, 4096, 8, 2, 128, reps);
#ifdef KB_CUDA
    if (!strcmp(be->name, "cuda")) {
        kb_cuda_mem_reset_peak();
        bench_decode_dev(32768, 2, reps);
        if (!quick) bench_decode_dev(131072, 2, reps);
        bench_prefill_dev(quick ? 2048 : 4096, 9, 3, 64, reps);
        if (!quick) bench_prefill_dev(4096, 8, 2, 128, reps);
        size_t peak = 0, fr = 0, tot = 0;
        if (kb_cuda_mem_stats(NULL, &peak, &fr, &tot) == 0)
            printf("gpu-memory cuda  backend allocator peak %.1f MiB; device in use %.1f of %.1f MiB (cudaMemGetInfo)\n",
                   peak / 1048576.0, (tot - fr) / 1048576.0, tot / 1048576.0);
    }
#endif
    return 0;
}
