/* A device copy of a method's K/V rows (kernels/cuda_kvmirror.cu; `make CUDA=1` builds
 * only: C callers use #ifdef KB_CUDA). The methods' logic stays on the host, on host rows;
 * this keeps the rows attention reads on the device, in memory from the tracked allocator
 * (kb_cuda_malloc), so the backend's current/peak bytes count them. Two ways to fill it:
 *
 *   mirror       device rows [0, n) = the host rows [0, n) (kb_kvdev_sync). The caller
 *                keeps a "valid" mark: host rows [0, valid) are unchanged since the last
 *                sync (a push leaves it, a removal or compaction lowers it to the first
 *                row that moved); only rows [valid, n) are uploaded.
 *   working set  the device holds only the host rows a decode lists (kb_kvdev_decode_subset),
 *                in slots: rows already resident stay, the slots of rows no longer listed
 *                go to newly listed rows, and only those cross the bus. For a store that is a
 *                slow tier on the host (SentenceKV); host rows must keep their index, rows
 *                from `valid` on are treated as new.
 *
 * Capacity grows geometrically (mirror: up to the host store's capacity, which its first
 * allocation takes at once, so the decode's appends fit), by freeing the old rows first
 * (the peak never holds both) and uploading again from the host.
 *
 * For SeKV: one copy (kb_kvdev_new_from_f32: its host rows are f32 buffers holding values
 * of the K/V type) per (layer, kv head) mirrors its persistent rows (anchors, local window,
 * coarse span rows) with kb_kvdev_sync and its own valid mark; kb_kvdev_reserve (before
 * the sync: a growth drops the contents) makes room after them for each step's rebuilt
 * span rows, which kernels/cuda_spans.cu writes there in the rows' type (kb_kvdev_rows_dev).
 *
 * Every function reports a failing CUDA call or bad argument on stderr and returns -1
 * (NULL); the caller then attends through kb_get()->decode on host rows instead. */
#ifndef KB_CUDA_KVMIRROR_H
#define KB_CUDA_KVMIRROR_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#include "core.h"   /* C linkage for C++ includers too */

typedef struct kb_kvdev kb_kvdev;

/* 1 when the selected backend (kb_get) is the CUDA table, else 0. */
int kb_kvdev_active(void);

/* An empty copy for rows of d floats (no device memory until rows are needed); what
 * names it in error messages (a string literal). kb_kvdev_free(NULL) does nothing.
 * kb_kvdev_new_typed: rows of d elements of type (kvtype.h: KB_F32, KB_F16, KB_BF16),
 * stored on the device as the host stores them (a 16-bit row takes half the bytes) and
 * widened to f32 by the decode kernels as they read them. Host rows passed to the
 * functions below are of that type. */
kb_kvdev *kb_kvdev_new(int d, const char *what);
kb_kvdev *kb_kvdev_new_typed(int d, int type, const char *what);
/* Host rows of f32 holding values of type (rounded to it, kb_kv_round_rows), stored on the
 * device as type: every upload narrows them on the host first (exact), so the device holds
 * 2 bytes an element for 16-bit types. For stores that keep f32 buffers (SeKV's rows).
 * Uploads are synchronous: kb_kvdev_put_async refuses 16-bit rows from f32. */
kb_kvdev *kb_kvdev_new_from_f32(int d, int type, const char *what);
int kb_kvdev_type(const kb_kvdev *m);   /* NULL: KB_F32 */
void kb_kvdev_free(kb_kvdev *m);

/* Device bytes held (rows and this copy's decode buffers); rows there is room for; rows
 * uploaded so far (for tests and statistics). */
size_t kb_kvdev_bytes(const kb_kvdev *m);
int kb_kvdev_rows(const kb_kvdev *m);
long kb_kvdev_uploaded(const kb_kvdev *m);

/* Mirror: device rows [0, n) = host K, V [n][d]. Uploads rows [*valid, n) (all of them
 * after a growth or a switch from the working-set use), then sets *valid = n. host_cap:
 * the host store's capacity, the most the device grows to ahead of need. 0 or -1. */
int kb_kvdev_sync(kb_kvdev *m, const void *K, const void *V, int n, int host_cap, int *valid);

/* Room for at least rows rows (exactly rows when it grows); growth drops the contents.
 * 0 or -1. */
int kb_kvdev_reserve(kb_kvdev *m, int rows);

/* Device rows [r0, r0 + n) = host K, V [n][d], queued on the copy stream (cuda_mem.h):
 * asynchronous when the host rows are pinned, which must then stay unchanged until the
 * next kb_kvdev_decode of this copy returns. Needs r0 + n <= kb_kvdev_rows (reserve
 * first). 0 or -1. */
int kb_kvdev_put_async(kb_kvdev *m, int r0, const void *K, const void *V, int n);

/* Device addresses of rows [r0, r0 + n) (K's at *K, V's at *V, [n][d] elements of
 * kb_kvdev_type(m) each) for a kernel to write on the default stream, in order with
 * kb_kvdev_decode (reserve first). Like kb_kvdev_put_async, the copy no longer takes those
 * rows for the host's. 0 or -1. */
int kb_kvdev_rows_dev(kb_kvdev *m, int r0, int n, void **K, void **V);

/* Decode attention (core.h's contract) over the device rows: a->q, a->idx, a->bias,
 * a->out, a->probs are host pointers; a->K, a->V are ignored; a->idx lists device rows
 * (NULL: rows 0 .. n-1). out always comes back to the host, probs only when asked for.
 * Waits for the result. 0 or -1. */
int kb_kvdev_decode(kb_kvdev *m, const kb_decode_args *a);

/* n decodes at once, decode i over the device rows of ms[i] with as[i] (as for
 * kb_kvdev_decode; probs must be NULL): the queries, indices and biases of all go to the
 * device in one copy, the kernels are queued back to back without the host waiting in
 * between, and all outputs come back in one copy. For SeKV, whose query heads each attend
 * over their own entry list: one round trip per layer instead of several per head.
 * b holds the packed inputs and outputs (device and pinned), grown as needed and kept for
 * the next call; one caller at a time per b. 0 or -1 (then no out is to be trusted). */
typedef struct kb_kvdev_batch kb_kvdev_batch;
kb_kvdev_batch *kb_kvdev_batch_new(void);
void kb_kvdev_batch_free(kb_kvdev_batch *b);          /* NULL: nothing */
size_t kb_kvdev_batch_bytes(const kb_kvdev_batch *b); /* device bytes held */
int kb_kvdev_decode_many(kb_kvdev_batch *b, kb_kvdev *const *ms, const kb_decode_args *as, int n);

/* Working set: a->idx (required) lists host rows of K, V [host_n][d]; makes them resident
 * (uploading those that are not, and treating rows [*valid, host_n) as changed), sets
 * *valid = host_n and attends as kb_kvdev_decode over them, in a->idx's order. 0 or -1. */
int kb_kvdev_decode_subset(kb_kvdev *m, const void *K, const void *V, int host_n, int *valid,
                           const kb_decode_args *a);

#ifdef __cplusplus
}
#endif
#endif
