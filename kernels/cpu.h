/* The CPU backend's functions (kb_cpu() points at them); the CUDA backend falls back
 * to them. */
#ifndef KB_CPU_H
#define KB_CPU_H
#include "core.h"

void kb_cpu_prefill(const kb_prefill_args *a);
void kb_cpu_decode(const kb_decode_args *a);
/* n independent decodes (e.g. the kv heads of one layer) with the work of all of them
 * shared between the threads; each result is bit-identical to kb_cpu_decode's. */
void kb_cpu_decode_many(const kb_decode_args *a, int n);
void kb_cpu_gather(float *dst, const float *src, const int32_t *idx, int n, int d);
int kb_cpu_svd(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt);

/* Flip signs so each row of Vt [rank][cols] has its largest-|.| entry positive
 * (U [rows][rank] columns flipped with it): reproducible factors across backends. */
void kb_svd_fix_signs(int rows, int cols, int rank, float *U, float *Vt);

/* malloc that reports and exits when memory runs out (kernels have no error path). */
void *kb_xmalloc(size_t bytes, const char *what);

#endif
