/* SeKV's tiers on the CUDA backend (issue 6), used only when the CUDA backend is the
 * selected one in a KB_CUDA build; otherwise factor buffers are plain malloc and no
 * device work is done (the host path of sekv_decode.c, unchanged).
 *   fast tier  each (layer, kv head)'s rows on the device (kernels/cuda_kvmirror.h), in the
 *              K/V type (2 bytes an element for bf16 and f16, narrowed on upload from the
 *              host's f32 buffers, which hold the type's values): the persistent rows
 *              [0, n_rows) mirrored from the host through the valid mark (sekv_rows_moved
 *              lowers it where append, folding or ingest change rows), the rows rebuilt at
 *              this step after them; every query head of a layer attends there in one
 *              batched call (kb_kvdev_decode_many);
 *   slow tier  the span factors in pinned host memory; at attend the selected spans' factors
 *              (or rows) go to the device on the copy stream first (overlapping the row
 *              uploads and the host's idx/bias lists), and a kernel rebuilds them into the
 *              device rows in the K/V type, the same bits as the host's rebuild
 *              (kernels/cuda_spans.h). Attention of every query head then runs on the device.
 * Any device failure is reported once; the state then attends on the host for good. */
#include "sekv_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef KB_CUDA
#include "../../kernels/cuda_backend.h"
#include "../../kernels/cuda_spans.h"
#endif

#ifdef KB_CUDA

/* Pinned memory comes from an arena of large blocks: cudaMallocHost is far too slow to call
 * once per (span, kv head) (a 128K prompt has about a million). Blocks are handed out by
 * bumping, under a lock (spans are built on the worker threads); a freed factor buffer
 * stays in its block until the state is freed (only folding at decode frees any). */
enum { ARENA_BLOCK = 64 << 20 };
typedef struct arena_block {
    struct arena_block *next;
    char *base;
    size_t used, size;
} arena_block;
typedef struct sekv_arena {
    pthread_mutex_t lock;
    arena_block *head;
} sekv_arena;

void sekv_dev_init(kv_state *st) {
    st->pinned = kb_kvdev_active();
    st->arena = NULL;
    if (!st->pinned) return;
    sekv_arena *a = calloc(1, sizeof *a);
    if (!a) { st->pinned = 0; return; }   /* plain host memory then */
    pthread_mutex_init(&a->lock, NULL);
    st->arena = a;
}

float *sekv_slow_alloc(const kv_state *st, size_t floats) {
    if (!st->pinned) return malloc(floats * sizeof(float));
    sekv_arena *a = st->arena;
    size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    float *p = NULL;
    pthread_mutex_lock(&a->lock);
    arena_block *b = a->head;
    if (!b || b->size - b->used < bytes) {
        size_t size = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
        arena_block *nb = malloc(sizeof *nb);
        char *base = nb ? kb_cuda_host_alloc(size) : NULL;
        if (base) {
            *nb = (arena_block){a->head, base, 0, size};
            a->head = b = nb;
        } else {
            free(nb);
            b = NULL;
        }
    }
    if (b) {
        p = (float *)(b->base + b->used);
        b->used += bytes;
    }
    pthread_mutex_unlock(&a->lock);
    return p;
}

void sekv_slow_free(const kv_state *st, float *p) {
    if (!st->pinned) free(p);   /* pinned: returned with the arena, at the state's free */
}

static void arena_free(kv_state *st) {
    sekv_arena *a = st->arena;
    if (!a) return;
    for (arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        kb_cuda_host_free(b->base);
        free(b);
    }
    pthread_mutex_destroy(&a->lock);
    free(a);
    st->arena = NULL;
}

/* Drops every device copy (after the copies in flight are done) and stays on the host. */
static void release(kv_state *st) {
    if (st->dev) kb_cuda_copy_wait();   /* no copy may still read what is freed below */
    for (int l = 0; st->layer && l < st->L; l++)
        for (int j = 0; st->layer[l].kv && j < st->Hkv; j++) {
            kb_kvdev_free(st->layer[l].kv[j].dev);
            st->layer[l].kv[j].dev = NULL;
            st->layer[l].kv[j].dev_valid = 0;
        }
    kb_spans_dev_free(st->dev);
    st->dev = NULL;
}

static void failed(kv_state *st) {
    fprintf(stderr, "kvbench: sekv: the device tiers failed; attending on the host rows from now on\n");
    release(st);
    st->dev_off = 1;
}

int sekv_dev_prepare(kv_state *st, int layer) {
    if (st->dev_off || !kb_kvdev_active()) return 0;
    sekv_layer *ly = &st->layer[layer];
    int n = 0, d = st->d;
    for (int j = 0; j < st->Hkv; j++) n += ly->n_sel[j];
    if (st->dev_spans_cap < n) {
        free(st->dev_spans);
        st->dev_spans = malloc((size_t)n * sizeof(kb_spans_span));
        st->dev_spans_cap = st->dev_spans ? n : 0;
        if (!st->dev_spans) return failed(st), 0;
    }
    kb_spans_span *sp = st->dev_spans;
    if (!st->dev && !(st->dev = kb_spans_dev_new())) return failed(st), 0;
    for (int j = 0; j < st->Hkv; j++) {
        sekv_kvh *kv = &ly->kv[j];
        if (!kv->dev && !(kv->dev = kb_kvdev_new_from_f32(d, st->kvt, "SeKV rows"))) return failed(st), 0;
    }
    /* 1. the factors of every group's spans (the rows of those the slow tier keeps as
     * rows), on the copy stream before anything else */
    n = 0;
    for (int j = 0; j < st->Hkv; j++)
        for (int k = 0; k < ly->n_sel[j]; k++) {
            int s = ly->sel[(size_t)j * ly->span_cap + k];
            const sekv_basis *b = &ly->kv[j].basis[s];
            sp[n++] = (kb_spans_span){ly->kv[j].dev, ly->recon_row[(size_t)j * ly->span_cap + s], b->fk.len, d,
                                     b->fk.r, b->buf, b->mk, b->mv, b->rows};
        }
    if (kb_spans_dev_stage(st->dev, sp, n)) return failed(st), 0;
    /* 2. the persistent rows that changed (room for the rebuilt rows behind them) */
    for (int j = 0; j < st->Hkv; j++) {
        sekv_kvh *kv = &ly->kv[j];
        if ((kb_kvdev_rows(kv->dev) < ly->n_rows + kv->n_recon && kb_kvdev_reserve(kv->dev, ly->row_cap)) ||
            kb_kvdev_sync(kv->dev, kv->K, kv->V, ly->n_rows, ly->row_cap, &kv->dev_valid))
            return failed(st), 0;
    }
    /* 3. the spans rebuilt into the rows after them, in the K/V type */
    if (kb_spans_dev_rebuild(st->dev, sp, n)) return failed(st), 0;
    return 1;
}

int sekv_dev_decode_heads(kv_state *st, int layer, const kb_decode_args *as) {
    kb_kvdev **ms = malloc((size_t)st->H * sizeof *ms);
    kb_kvdev_batch *b = st->dev ? kb_spans_dev_batch(st->dev) : NULL;
    int rc = -1;
    if (ms && b) {
        for (int h = 0; h < st->H; h++) ms[h] = st->layer[layer].kv[h / st->g].dev;
        rc = kb_kvdev_decode_many(b, ms, as, st->H);
    }
    free(ms);
    if (rc) failed(st);
    return rc;
}

size_t sekv_dev_bytes_held(const kv_state *st) {
    size_t b = kb_spans_dev_bytes(st->dev);
    for (int l = 0; st->layer && l < st->L; l++)
        for (int j = 0; st->layer[l].kv && j < st->Hkv; j++) b += kb_kvdev_bytes(st->layer[l].kv[j].dev);
    return b;
}

void sekv_dev_free(kv_state *st) {
    release(st);
    arena_free(st);
    free(st->dev_spans);
    st->dev_spans = NULL;
    st->dev_spans_cap = 0;
}

#else   /* host only */

void sekv_dev_init(kv_state *st) { st->pinned = 0; }
float *sekv_slow_alloc(const kv_state *st, size_t floats) { return (void)st, malloc(floats * sizeof(float)); }
void sekv_slow_free(const kv_state *st, float *p) { (void)st, free(p); }
int sekv_dev_prepare(kv_state *st, int layer) { return (void)st, (void)layer, 0; }
int sekv_dev_decode_heads(kv_state *st, int layer, const kb_decode_args *as) {
    return (void)st, (void)layer, (void)as, -1;
}
size_t sekv_dev_bytes_held(const kv_state *st) { return (void)st, 0; }
void sekv_dev_free(kv_state *st) { (void)st; }

#endif
