/* Host memory bandwidth: read (a sum over a buffer far larger than the caches) and copy
 * (memcpy), with 1 and 2 threads, best of several passes. Writes the figures to
 * ~/.cache/kvbench/membw.tsv ("read|copy THREADS GBps" per line), where kvbench sim's
 * latency model reads the host bandwidth (`kvbench sim --bw-host` overrides it). On a
 * shared machine the figures move with the load: the best pass is kept. */
#include "../kernels/host.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BYTES (256u << 20)   /* per thread: far beyond any cache */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    double *src, *dst;
    size_t n;
    int copy;
    double sum;
} job;

static void *work(void *arg) {
    job *j = arg;
    if (j->copy) {
        memcpy(j->dst, j->src, j->n * sizeof *j->src);
        j->sum = j->dst[j->n / 2];
    } else {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i + 3 < j->n; i += 4) s0 += j->src[i], s1 += j->src[i + 1], s2 += j->src[i + 2], s3 += j->src[i + 3];
        j->sum = s0 + s1 + s2 + s3;
    }
    return NULL;
}

/* GB/s of the best of `passes` (copy counts the bytes read and the bytes written). */
static double measure(job *jobs, int threads, int copy, int passes) {
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        pthread_t t[8];
        double t0 = now();
        for (int i = 0; i < threads; i++) jobs[i].copy = copy, pthread_create(&t[i], NULL, work, &jobs[i]);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (double)threads * BYTES * (copy ? 2 : 1) / best / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("usage: bench_membw   (host read and copy bandwidth, 1 and 2 threads; writes ~/.cache/kvbench/membw.tsv)\n");
        return strcmp(argv[1], "--help") ? 2 : 0;
    }
    job jobs[2];
    for (int i = 0; i < 2; i++) {
        jobs[i].n = BYTES / sizeof(double);
        jobs[i].src = malloc(BYTES), jobs[i].dst = malloc(BYTES);
        if (!jobs[i].src || !jobs[i].dst) return fprintf(stderr, "bench_membw: out of memory\n"), 1;
        for (size_t k = 0; k < jobs[i].n; k++) jobs[i].src[k] = (double)(k % 1000), jobs[i].dst[k] = 0;
    }
    double r1 = measure(jobs, 1, 0, 5), r2 = measure(jobs, 2, 0, 5), c1 = measure(jobs, 1, 1, 5), c2 = measure(jobs, 2, 1, 5);
    printf("host memory bandwidth (best of 5, %u MiB per thread; GB/s, copy = read + write)\n", BYTES >> 20);
    printf("  read  1 thread %6.2f   2 threads %6.2f\n  copy  1 thread %6.2f   2 threads %6.2f\n", r1, r2, c1, c2);
    char dir[1024], path[1024];
    kb_cache_path("", dir, sizeof dir);
    mkdir(dir, 0755);
    kb_cache_path("membw.tsv", path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "bench_membw: cannot write %s\n", path), 1;
    fprintf(f, "read 1 %.3f\nread 2 %.3f\ncopy 1 %.3f\ncopy 2 %.3f\n", r1, r2, c1, c2);
    fclose(f);
    printf("  written to %s (kvbench sim reads it)\n", path);
    for (int i = 0; i < 2; i++) free(jobs[i].src), free(jobs[i].dst);
    return jobs[0].sum < 0 ? 1 : 0;
}
