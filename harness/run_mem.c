#include "run_mem.h"
#include <stdio.h>
#include <unistd.h>

double run_mem_synthetic(int L, int H, int Hkv, int d, int ctx, int T, int win) {
    double n = (double)ctx + T, f = sizeof(float);
    double kv = (double)L * Hkv * n * d * 2 * f;
    double q = n * H * d * f + 2.0 * L * T * H * d * f;
    double stats = (double)L * H * ctx * f + (double)L * H * (win < ctx ? win : ctx) * ctx * f;
    return 2 * kv + q + stats;
}

double run_mem_physical(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (double)pages * size : 0;
}

int run_mem_check(double need, const char *what, char *err, size_t errlen) {
    double have = run_mem_physical();
    if (have <= 0 || need <= have) return 0;
    snprintf(err, errlen, "needs about %.1f GiB (%s), more than this machine's %.1f GiB of memory", need / (1 << 30),
             what, have / (1 << 30));
    return -1;
}
