/* SeKV's slow tier on the device (kernels/cuda_spans.cu; `make CUDA=1` builds only: C
 * callers use #ifdef KB_CUDA, see methods/sekv/sekv_dev.c). The span factors live in pinned
 * host memory; at each attend the selected spans' factors (or, for a span the slow tier
 * keeps as rows, its rows) are queued to the device on the copy stream (kb_spans_dev_stage,
 * before anything else of the step, so the copies overlap the device's work and the
 * host's), then, once the groups' persistent rows are synced, one kernel rebuilds every
 * span, rows = U diag(s) diag(m) Vt with sekv_reconstruct's operations in its order, and
 * stores it in the group's device rows in their element type (f32, f16, bf16: the same
 * bits as the host's kb_kv_round_rows of the host's rebuild) (kb_spans_dev_rebuild: fences
 * the copies first). The decodes that follow on the default stream see the rebuilt rows.
 * The next stage waits for the last rebuild to finish before it reuses the staging
 * buffers, so no caller has to wait. Device memory comes from the tracked allocator
 * (kb_cuda_malloc). Every function reports a failing CUDA call or bad argument on stderr
 * and returns -1 (NULL). */
#ifndef KB_CUDA_SPANS_H
#define KB_CUDA_SPANS_H
#include <stddef.h>
#include "cuda_kvmirror.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_spans_dev kb_spans_dev;

/* One span of one kv group to rebuild. buf (pinned host memory, unchanged until the next
 * decode on m returns): K's factors U [len][r], s [r], Vt [r][d], then V's, as
 * sekv_basis.buf; mk, mv [r] the gate masks. rows = 1: buf holds the span's rows instead,
 * K [len][d] then V [len][d] (r, mk, mv unused), stored into m's rows as they are. */
typedef struct {
    kb_kvdev *m;            /* the group's device rows (needed by kb_spans_dev_rebuild) */
    int row;                /* rebuilt into rows [row, row + len) of m */
    int len, d, r;
    const float *buf;
    const float *mk, *mv;
    int rows;
} kb_spans_span;

/* Staging for one SeKV state (no device memory until spans are staged); free(NULL) does
 * nothing. bytes: device bytes held. */
kb_spans_dev *kb_spans_dev_new(void);
void kb_spans_dev_free(kb_spans_dev *x);
size_t kb_spans_dev_bytes(const kb_spans_dev *x);

/* Queues the factors of sp[0..n) (and the masked singular values) to the device on the
 * copy stream; returns without waiting. 0 or -1. */
int kb_spans_dev_stage(kb_spans_dev *x, const kb_spans_span *sp, int n);
/* Rebuilds the spans last staged (the same sp[0..n), m set) into their rows on the
 * default stream, after the staged copies (a fence); returns without waiting. 0 or -1. */
int kb_spans_dev_rebuild(kb_spans_dev *x, const kb_spans_span *sp, int n);

/* The buffers of the state's batched decodes (kb_kvdev_decode_many), made on first use and
 * freed with x; counted in kb_spans_dev_bytes. NULL when out of memory. */
kb_kvdev_batch *kb_spans_dev_batch(kb_spans_dev *x);

/* 1 when p is in pinned (page-locked) host memory from the CUDA runtime, 0 when not,
 * -1 on error (for tests). */
int kb_cuda_host_pinned(const void *p);

#ifdef __cplusplus
}
#endif
#endif
