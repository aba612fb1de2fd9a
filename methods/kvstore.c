#include "kvstore.h"
#include "../kernels/cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef KB_CUDA
#include "../kernels/cuda_kvmirror.h"
#endif

/* Bytes of one row of K (or V). */
static size_t row_size(const kv_store *s) { return (size_t)s->d * kb_kvtype_bytes(s->type); }

static void *row_at(void *base, const kv_store *s, int i) { return (char *)base + (size_t)i * row_size(s); }

int kvs_init(kv_store *s, int d, int cap, int type) {
    memset(s, 0, sizeof *s);
    s->d = d;
    s->type = type;
    if (cap < 1) cap = 1;
    s->K = malloc((size_t)cap * row_size(s));
    s->V = malloc((size_t)cap * row_size(s));
    s->pos = malloc((size_t)cap * sizeof(int32_t));
    if (!s->K || !s->V || !s->pos) { kvs_free(s); return -1; }
    s->cap = cap;
    return 0;
}

void kvs_free(kv_store *s) {
#ifdef KB_CUDA
    kb_kvdev_free(s->dev);
#endif
    free(s->K); free(s->V); free(s->pos);
    memset(s, 0, sizeof *s);
}

/* Rows from i on no longer match the device copy. */
static void moved_from(kv_store *s, int i) {
    if (i < s->dev_valid) s->dev_valid = i;
}

static int kvs_grow(kv_store *s, int need) {
    if (need <= s->cap) return 0;
    int cap = s->cap * 2 > need ? s->cap * 2 : need;
    void *K = realloc(s->K, (size_t)cap * row_size(s));
    if (!K) return -1;
    s->K = K;
    void *V = realloc(s->V, (size_t)cap * row_size(s));
    if (!V) return -1;
    s->V = V;
    int32_t *p = realloc(s->pos, (size_t)cap * sizeof(int32_t));
    if (!p) return -1;
    s->pos = p;
    s->cap = cap;
    return 0;
}

int kvs_push(kv_store *s, const float *k, const float *v, int pos) {
    if (kvs_grow(s, s->n + 1)) return -1;
    moved_from(s, s->n);
    kb_kv_put(s->type, row_at(s->K, s, s->n), k, s->d);
    kb_kv_put(s->type, row_at(s->V, s, s->n), v, s->d);
    s->pos[s->n++] = pos;
    return 0;
}

void kvs_get_k(const kv_store *s, int i, float *out) { kb_kv_get(s->type, out, row_at(s->K, s, i), s->d); }
void kvs_get_v(const kv_store *s, int i, float *out) { kb_kv_get(s->type, out, row_at(s->V, s, i), s->d); }

void kvs_keep(kv_store *s, const int32_t *keep, int nk) {
    size_t row = row_size(s);
    moved_from(s, nk);
    for (int i = 0; i < nk; i++) {
        int r = keep[i];
        if (r == i) continue;            /* ascending, so r >= i: safe in place */
        moved_from(s, i);
        memcpy(row_at(s->K, s, i), row_at(s->K, s, r), row);
        memcpy(row_at(s->V, s, i), row_at(s->V, s, r), row);
        s->pos[i] = s->pos[r];
    }
    s->n = nk;
}

void kvs_remove(kv_store *s, int i) {
    int tail = s->n - i - 1;
    moved_from(s, i);
    if (tail > 0) {
        memmove(row_at(s->K, s, i), row_at(s->K, s, i + 1), (size_t)tail * row_size(s));
        memmove(row_at(s->V, s, i), row_at(s->V, s, i + 1), (size_t)tail * row_size(s));
        memmove(s->pos + i, s->pos + i + 1, (size_t)tail * sizeof(int32_t));
    }
    s->n--;
}

size_t kvs_bytes(const kv_store *s) {
    return (size_t)s->n * 2 * row_size(s);
}

#ifdef KB_CUDA
/* The device copy (rows of the store's own type) when the CUDA backend is selected and
 * the copy has not failed. */
static struct kb_kvdev *device_copy(kv_store *s) {
    if (s->dev_off || !kb_kvdev_active()) return NULL;
    if (!s->dev && !(s->dev = kb_kvdev_new_typed(s->d, s->type, "KV store rows"))) s->dev_off = 1;
    return s->dev;
}

static void device_failed(kv_store *s) {
    fprintf(stderr, "kvbench: KV store rows failed on the device; this store attends on the host rows from now on\n");
    kb_kvdev_free(s->dev);
    s->dev = NULL;
    s->dev_off = 1;
}
#endif

void kvs_decode(kv_store *s, kb_decode_args *a) {
    a->K = s->K;
    a->V = s->V;
    a->kv_type = s->type;
    a->idx = NULL;
#ifdef KB_CUDA
    struct kb_kvdev *m = device_copy(s);
    if (m) {
        if (kb_kvdev_sync(m, s->K, s->V, s->n, s->cap, &s->dev_valid) == 0 && kb_kvdev_decode(m, a) == 0) return;
        device_failed(s);
    }
#endif
    kb_get()->decode(a);
}

void kvs_decode_many(kv_store *const *s, kb_decode_args *a, int n) {
    int host = kb_get() == kb_cpu();
#ifdef KB_CUDA
    for (int k = 0; k < n && host; k++) host = !device_copy(s[k]);
#endif
    if (!host) {   /* a device copy or another backend: one at a time, as kvs_decode */
        for (int k = 0; k < n; k++) kvs_decode(s[k], &a[k]);
        return;
    }
    for (int k = 0; k < n; k++) {
        a[k].K = s[k]->K;
        a[k].V = s[k]->V;
        a[k].kv_type = s[k]->type;
        a[k].idx = NULL;
    }
    kb_cpu_decode_many(a, n);
}

void kvs_decode_subset(kv_store *s, kb_decode_args *a) {
    a->K = s->K;
    a->V = s->V;
    a->kv_type = s->type;
#ifdef KB_CUDA
    struct kb_kvdev *m = device_copy(s);
    if (m) {
        if (kb_kvdev_decode_subset(m, s->K, s->V, s->n, &s->dev_valid, a) == 0) return;
        device_failed(s);
    }
#endif
    kb_get()->decode(a);
}

size_t kvs_dev_bytes(const kv_store *s) {
#ifdef KB_CUDA
    return kb_kvdev_bytes(s->dev);
#else
    (void)s;
    return 0;
#endif
}

int kvs_dev_rows(const kv_store *s) {
#ifdef KB_CUDA
    return kb_kvdev_rows(s->dev);
#else
    (void)s;
    return 0;
#endif
}
