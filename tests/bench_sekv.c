/* SeKV timing on an 8K prompt with SmolLM2-135M's attention shape (9 heads, 3 kv heads,
 * d = 64): ingest per layer (segmentation, coarse rows, SVD factors) and decode
 * (append + routing + reconstruction + attention) per layer, at two budgets. */
#include "check.h"
#include "../kernels/core.h"
#include "../methods/sekv/sekv.h"
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(void) {
    test_seed();
    enum { L = 2, H = 9, HKV = 3, D = 64, N = 8192, STEPS = 32 };
    size_t stride = (size_t)(N + STEPS) * D, kv = (size_t)L * HKV * stride;
    float *K = malloc(kv * sizeof *K), *V = malloc(kv * sizeof *V), *surp = malloc((N + STEPS) * sizeof *surp);
    float *q = malloc(H * D * sizeof *q), *out = malloc(H * D * sizeof *out), kk[HKV * D], vv[HKV * D];
    test_fill(K, kv, 1), test_fill(V, kv, 1);
    for (int t = 0; t < N + STEPS; t++) surp[t] = (float)(-log(test_unif() + 1e-9) * (test_unif() < 0.1 ? 4 : 1));
    const char *cfg[][2] = {{"10%", "zoom=1"}, {"20%", "zoom=1"}, {"20%", "zoom=0"}, {"20%", "tau=0"}};
    double fr[] = {0.10, 0.20, 0.20, 0.20};
    for (int c = 0; c < 4; c++) {
        kv_setup su = {.n_layers = L, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .n_prompt = N,
                       .max_decode = STEPS, .budget_frac = fr[c], .kv_type = KB_BF16, .params = cfg[c][1]};
        char err[256], desc[256];
        kv_state *st = kv_sekv.init(&su, err, sizeof err);
        if (!st) { fprintf(stderr, "%s\n", err); return 1; }
        double t0 = now();
        int rc = 0;
        for (int l = 0; l < L && !rc; l++) {
            kv_prefill p = {.layer = l, .n = N, .K = K + (size_t)l * HKV * stride, .V = V + (size_t)l * HKV * stride,
                            .kv_stride = stride, .surprisal = surp};
            rc = kv_sekv.ingest(st, &p, err, sizeof err);
        }
        double t1 = now();
        if (rc) { printf("budget %s %s: %s\n", cfg[c][0], cfg[c][1], err); kv_sekv.free(st); continue; }
        for (int s = 0; s < STEPS; s++)
            for (int l = 0; l < L; l++) {
                for (int j = 0; j < HKV; j++) {
                    memcpy(kk + j * D, K + ((size_t)l * HKV + j) * stride + (size_t)(N + s) * D, sizeof(float) * D);
                    memcpy(vv + j * D, V + ((size_t)l * HKV + j) * stride + (size_t)(N + s) * D, sizeof(float) * D);
                }
                kv_token tok = {N + s, surp[N + s], 0};
                test_fill(q, H * D, 1.5f);
                kv_sekv.append(st, l, kk, vv, &tok);
                kv_sekv.attend(st, l, q, out);
            }
        double t2 = now();
        kv_mem m;
        kv_sekv.memory(st, &m);
        kv_headstat hs;
        double ev = 0;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++) kv_sekv.head_stats(st, l, h, &hs), ev += hs.events;
        sekv_describe(st, desc, sizeof desc);
        printf("budget %s %-7s threads %d: ingest %.1f ms/layer, decode %.3f ms/layer/step, %.1f zooms/head/step,"
               " fast %zu KB (aux %zu), slow %zu KB\n  %s\n", cfg[c][0], cfg[c][1], kb_threads(),
               1e3 * (t1 - t0) / L, 1e3 * (t2 - t1) / (L * STEPS), ev / (L * H * STEPS), m.fast_bytes >> 10,
               m.fast_aux_bytes >> 10, m.slow_bytes >> 10, desc);
        kv_sekv.free(st);
    }
    free(K), free(V), free(surp), free(q), free(out);
    return 0;
}
