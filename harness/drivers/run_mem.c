#include "run_mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

double run_mem_synthetic(int L, int H, int Hkv, int d, int ctx, int T, int win) {
    double n = (double)ctx + T, f = sizeof(float);
    double kv = (double)L * Hkv * n * d * 2 * f;
    double q = n * H * d * f + 2.0 * L * T * H * d * f;
    double stats = (double)L * H * ctx * f + (double)L * H * (win < ctx ? win : ctx) * ctx * f;
    double workload = 16 * n;   /* surprisal, sentence ends, roles, segments */
    /* A method's cache: K/V rows with a position and a score each, up to twice what it
     * holds (stores grow by doubling), a layer's probability rows, and its per-token
     * bookkeeping (sentences, spans, selections: 256 bytes a token bounds what the
     * methods' small shapes measured, tests/test_run_mem.sh) */
    double method = 2 * (double)L * Hkv * n * (2 * d * f + 4 + 8) + (double)(H / Hkv) * n * f + 256 * n;
    return kv + q + stats + workload + method;
}

double run_mem_physical(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (double)pages * size : 0;
}

/* kB of a /proc/self/status field, or -1 */
static double status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            kb = atof(line + n + 1);
            break;
        }
    fclose(f);
    return kb;
}

/* The cgroup (v2) memory limit of this process, or 0 when none is set or readable. */
static double cgroup_limit(void) {
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f) return 0;
    char buf[64] = "";
    double v = 0;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3)) v = atof(buf);
    fclose(f);
    return v;
}

/* Address space a process needs beyond its cases' data: thread stacks, the allocator's
 * per-thread arenas and the BLAS buffers, which ulimit -v counts although most is never
 * touched. */
#define AS_HEADROOM (512.0 * 1024 * 1024)

double run_mem_limit(char *what, size_t whatlen) {
    double have = run_mem_physical();
    const char *fmt = "this machine's %.1f GiB of memory";
    double cg = cgroup_limit();
    if (cg > 0 && cg < have) have = cg, fmt = "the cgroup's limit of %.1f GiB (memory.max)";
    struct rlimit rl;
    if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY) {
        double vm = status_kb("VmSize");
        double left = (double)rl.rlim_cur - (vm > 0 ? vm * 1024 : 0) - AS_HEADROOM;
        if (left < 0) left = 0;
        if (left < have) have = left, fmt = "the %.1f GiB of address space left under ulimit -v";
    }
    if (!getrlimit(RLIMIT_DATA, &rl) && rl.rlim_cur != RLIM_INFINITY) {
        double data = status_kb("VmData");
        double left = (double)rl.rlim_cur - (data > 0 ? data * 1024 : 0) - AS_HEADROOM;
        if (left < 0) left = 0;
        if (left < have) have = left, fmt = "the %.1f GiB of data size left under ulimit -d";
    }
    snprintf(what, whatlen, fmt, have / (1 << 30));
    return have;
}

int run_mem_check(double need, const char *what, char *err, size_t errlen) {
    char whose[128];
    double have = run_mem_limit(whose, sizeof whose);
    if (have <= 0 && !run_mem_physical()) return 0;   /* unknown */
    if (need <= have) return 0;
    snprintf(err, errlen, "needs about %.1f GiB (%s), more than %s", need / (1 << 30), what, whose);
    return -1;
}
