/* A compacted K/V store for one (layer, kv head): rows of d floats, with the original
 * position of each row. Methods that evict keep their kept rows here, so resident
 * bytes are real rows, not masks. */
#ifndef KV_STORE_H
#define KV_STORE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int d, n, cap;
    float *K, *V;          /* [cap][d] */
    int32_t *pos;          /* [cap] original positions */
} kv_store;

int  kvs_init(kv_store *s, int d, int cap);               /* 0 or -1 (out of memory) */
void kvs_free(kv_store *s);
int  kvs_push(kv_store *s, const float *k, const float *v, int pos);  /* grows as needed */
/* Keep only rows keep[0..nk) (ascending row indices), compacting in place. */
void kvs_keep(kv_store *s, const int32_t *keep, int nk);
/* Remove row i, shifting later rows down (order is preserved). */
void kvs_remove(kv_store *s, int i);
size_t kvs_bytes(const kv_store *s, int elem_bytes);       /* n rows of K and V */

#endif
