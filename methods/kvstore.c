#include "kvstore.h"
#include <stdlib.h>
#include <string.h>

int kvs_init(kv_store *s, int d, int cap) {
    memset(s, 0, sizeof *s);
    s->d = d;
    if (cap < 1) cap = 1;
    s->K = malloc((size_t)cap * d * sizeof(float));
    s->V = malloc((size_t)cap * d * sizeof(float));
    s->pos = malloc((size_t)cap * sizeof(int32_t));
    if (!s->K || !s->V || !s->pos) { kvs_free(s); return -1; }
    s->cap = cap;
    return 0;
}

void kvs_free(kv_store *s) {
    free(s->K); free(s->V); free(s->pos);
    memset(s, 0, sizeof *s);
}

static int kvs_grow(kv_store *s, int need) {
    if (need <= s->cap) return 0;
    int cap = s->cap * 2 > need ? s->cap * 2 : need;
    float *K = realloc(s->K, (size_t)cap * s->d * sizeof(float));
    if (!K) return -1;
    s->K = K;
    float *V = realloc(s->V, (size_t)cap * s->d * sizeof(float));
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
    memcpy(s->K + (size_t)s->n * s->d, k, (size_t)s->d * sizeof(float));
    memcpy(s->V + (size_t)s->n * s->d, v, (size_t)s->d * sizeof(float));
    s->pos[s->n++] = pos;
    return 0;
}

void kvs_keep(kv_store *s, const int32_t *keep, int nk) {
    size_t row = (size_t)s->d * sizeof(float);
    for (int i = 0; i < nk; i++) {
        int r = keep[i];
        if (r == i) continue;            /* ascending, so r >= i: safe in place */
        memcpy(s->K + (size_t)i * s->d, s->K + (size_t)r * s->d, row);
        memcpy(s->V + (size_t)i * s->d, s->V + (size_t)r * s->d, row);
        s->pos[i] = s->pos[r];
    }
    s->n = nk;
}

void kvs_remove(kv_store *s, int i) {
    int tail = s->n - i - 1;
    if (tail > 0) {
        memmove(s->K + (size_t)i * s->d, s->K + (size_t)(i + 1) * s->d, (size_t)tail * s->d * sizeof(float));
        memmove(s->V + (size_t)i * s->d, s->V + (size_t)(i + 1) * s->d, (size_t)tail * s->d * sizeof(float));
        memmove(s->pos + i, s->pos + i + 1, (size_t)tail * sizeof(int32_t));
    }
    s->n--;
}

size_t kvs_bytes(const kv_store *s, int elem_bytes) {
    return (size_t)s->n * s->d * 2 * (size_t)elem_bytes;
}
