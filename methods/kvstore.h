/* A compacted K/V store for one (layer, kv head): rows of d elements of the store's type
 * (kernels/kvtype.h: f32, or f16/bf16 as uint16_t, rounded to nearest even on the way
 * in), with the original position of each row. Methods that evict keep their kept rows
 * here, so resident bytes are real rows, not masks.
 *
 * Decode attention goes through kvs_decode / kvs_decode_subset. With the CUDA backend
 * selected (CUDA builds), the store then keeps a device copy of its rows
 * (kernels/cuda_kvmirror.h), from the tracked allocator, brought up to date before each
 * attention from a "valid" mark that push, keep and remove maintain; the rows stay
 * authoritative on the host. The device copy holds f32 rows only: a 16-bit store attends
 * on the host rows (the CPU kernel). Otherwise both call kb_get()->decode on the host rows. */
#ifndef KV_STORE_H
#define KV_STORE_H
#include "../kernels/core.h"
#include "../kernels/kvtype.h"
#include <stddef.h>
#include <stdint.h>

struct kb_kvdev;

typedef struct {
    int d, n, cap;
    int type;              /* kb_kvtype of the rows */
    void *K, *V;           /* [cap][d] elements of type */
    int32_t *pos;          /* [cap] original positions */
    struct kb_kvdev *dev;  /* device copy, NULL until the first attention on the CUDA backend */
    int dev_valid;         /* rows [0, dev_valid) unchanged since the device copy was updated */
    int dev_off;           /* the device copy failed: attend on the host rows from now on */
} kv_store;

int  kvs_init(kv_store *s, int d, int cap, int type);     /* 0 or -1 (out of memory) */
void kvs_free(kv_store *s);                               /* frees the device copy too */
int  kvs_push(kv_store *s, const float *k, const float *v, int pos);  /* grows as needed */
/* Row i of K (or V) as floats, into out [d]. */
void kvs_get_k(const kv_store *s, int i, float *out);
void kvs_get_v(const kv_store *s, int i, float *out);
/* Keep only rows keep[0..nk) (ascending row indices), compacting in place. */
void kvs_keep(kv_store *s, const int32_t *keep, int nk);
/* Remove row i, shifting later rows down (order is preserved). */
void kvs_remove(kv_store *s, int i);
size_t kvs_bytes(const kv_store *s);                      /* n rows of K and V, at the type's size */

/* Decode attention over all n rows (a->K, a->V, a->idx are set here): on the device
 * copy, a mirror of every row, when the CUDA backend is selected. */
void kvs_decode(kv_store *s, kb_decode_args *a);
/* kvs_decode for n stores at once (a layer's kv heads): on the CPU backend their work is
 * shared between the threads (kb_cpu_decode_many); results are the same. */
void kvs_decode_many(kv_store *const *s, kb_decode_args *a, int n);
/* Decode attention over the rows a->idx lists (a->K, a->V are set here): on the device,
 * the copy holds only the listed rows (a working set; for a store that is a slow tier). */
void kvs_decode_subset(kv_store *s, kb_decode_args *a);
/* The device copy: bytes held (rows and its decode buffers) and rows it has room for;
 * 0 without one. */
size_t kvs_dev_bytes(const kv_store *s);
int    kvs_dev_rows(const kv_store *s);

#endif
