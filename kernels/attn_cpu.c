/* CPU attention: prefill (causal, GQA, sgemm tiles) and decode (explicit entry list).
 *
 * Layout (see core.h for the contract)
 * ------------------------------------
 *   Q, out   [m][H][d]         token-major, as the q projection writes them
 *   K, V     kv head j, token t at K + j*kv_stride + t*d (rows of d floats)
 *   query head h uses kv head h / g, g = H / Hkv (contiguous grouping)
 *
 * Prefill
 *   Work is cut into tasks (kv head j, tile of up to TQ queries). A task packs the
 *   g query heads of its group and tile into Qp [nq*g][d] (row = query*g + head), then
 *     S  = Qp K^T / sqrt(d)     one sgemm, [nq*g][L], L = t0 + last query + 1 keys
 *     P  = softmax(S) per row   keys after the row's position are masked to 0
 *     Op = P V                  one sgemm, [nq*g][d], scattered back into out
 *   so K and V are streamed once per tile for all g heads. Tasks run on kb_parallel_for,
 *   largest tiles first; each writes only its own rows of out and win_probs. col_mass
 *   sums over the rows of a tile into a per-task buffer; the buffers are added into
 *   col_mass afterwards in tile order, so results do not depend on the thread count.
 *   The tiling depends only on the shapes, never on the number of threads.
 *
 * Decode
 *   Softmax blocks are DEC_BLOCK entries; each block gets its max, exp-sum and an
 *   unnormalised partial output, and the blocks are combined in block order with the
 *   usual max-rescaling (flash-decoding). The block size fixes the rounding, so results
 *   do not depend on the thread count. Several kv groups (a layer's kv heads) are
 *   decoded together in three parallel phases, so two threads have work even for one
 *   short block: logits in chunks of entries (each K row read once for the g heads),
 *   block max and exp per (block, head), and values per (block, column chunk) (each V
 *   element read once). Every output element gets the same operations in the same
 *   order as a single pass over the block would give it. 16-bit rows (kv_type
 *   f16/bf16) are converted to f32 as they are read; the arithmetic is the f32 path's.
 */
#include "cpu.h"
#include "kvtype.h"
#include "vec.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *kb_xmalloc(size_t bytes, const char *what) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "kvbench: out of memory allocating %zu bytes for %s\n", bytes, what);
        exit(1);
    }
    return p;
}

/* ---------------------------------------------------------------- prefill */

enum {
    TQ = 64,                       /* queries per tile */
    S_MAX_FLOATS = 4 << 20,        /* cap on one task's logit tile (16 MiB) */
};

typedef struct {
    const kb_prefill_args *a;
    int g, tq, ntiles;
    float **mass;                  /* [task] -> [g][L of that tile], or NULL */
} prefill_job;

/* Softmax of one logit row in place over keys 0..last, zeros after (up to L). */
static void softmax_causal_row(float *s, int last, int L) {
    int valid = last + 1;
    float mx = kb_max(s, valid);
    float sum = kb_exp_sum(s, valid, mx);
    kb_scale(s, valid, 1.0f / sum);
    memset(s + valid, 0, (size_t)(L - valid) * sizeof *s);
}

static void prefill_task(void *ctx, int task) {
    const prefill_job *job = ctx;
    const kb_prefill_args *a = job->a;
    const int g = job->g, d = a->d, H = a->H;
    const int tile = job->ntiles - 1 - task / a->Hkv;   /* largest tiles first */
    const int j = task % a->Hkv;
    const int q0 = tile * job->tq;
    const int nq = a->m - q0 < job->tq ? a->m - q0 : job->tq;
    const int L = a->t0 + q0 + nq;
    const int rows = nq * g;
    const size_t hd = (size_t)H * d;

    float *Qp = kb_xmalloc((size_t)rows * d * sizeof(float), "prefill query tile");
    float *S = kb_xmalloc((size_t)rows * L * sizeof(float), "prefill logit tile");
    for (int qi = 0; qi < nq; qi++)
        memcpy(Qp + (size_t)qi * g * d, a->Q + (size_t)(q0 + qi) * hd + (size_t)j * g * d,
               (size_t)g * d * sizeof(float));

    const float *Kj = a->K + (size_t)j * a->kv_stride, *Vj = a->V + (size_t)j * a->kv_stride;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, L, d, 1.0f / sqrtf((float)d),
                Qp, d, Kj, d, 0.0f, S, L);

    for (int qi = 0; qi < nq; qi++) {
        int pos = a->t0 + q0 + qi;
        for (int hh = 0; hh < g; hh++) {
            float *row = S + (size_t)(qi * g + hh) * L;
            softmax_causal_row(row, pos, L);
            if (a->win_probs && pos >= a->win_start && pos < a->win_start + a->win) {
                int h = j * g + hh;
                float *w = a->win_probs + ((size_t)h * a->win + (pos - a->win_start)) * a->win_ld;
                memcpy(w, row, (size_t)(pos + 1) * sizeof *w);
                memset(w + pos + 1, 0, (a->win_ld - (size_t)(pos + 1)) * sizeof *w);
            }
        }
    }

    if (job->mass) {
        float *part = kb_xmalloc((size_t)g * L * sizeof(float), "prefill column mass");
        memset(part, 0, (size_t)g * L * sizeof(float));
        for (int qi = 0; qi < nq; qi++)
            for (int hh = 0; hh < g; hh++) {
                const float *row = S + (size_t)(qi * g + hh) * L;
                float *acc = part + (size_t)hh * L;
                for (int t = 0; t < L; t++) acc[t] += row[t];
            }
        job->mass[task] = part;
    }

    /* Op reuses Qp: [rows][d] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, L, 1.0f, S, L, Vj, d, 0.0f,
                Qp, d);
    for (int qi = 0; qi < nq; qi++)
        memcpy(a->out + (size_t)(q0 + qi) * hd + (size_t)j * g * d, Qp + (size_t)qi * g * d,
               (size_t)g * d * sizeof(float));
    free(S);
    free(Qp);
}

/* col_mass[h] += the tiles' partial sums, tiles in ascending order. */
static void mass_reduce_head(void *ctx, int h) {
    const prefill_job *job = ctx;
    const kb_prefill_args *a = job->a;
    int j = h / job->g, hh = h % job->g;
    float *dst = a->col_mass + (size_t)h * a->mass_ld;
    for (int tile = 0; tile < job->ntiles; tile++) {
        int task = (job->ntiles - 1 - tile) * a->Hkv + j;
        int q0 = tile * job->tq;
        int nq = a->m - q0 < job->tq ? a->m - q0 : job->tq;
        int L = a->t0 + q0 + nq;
        const float *src = job->mass[task] + (size_t)hh * L;
        for (int t = 0; t < L; t++) dst[t] += src[t];
    }
}

static void free_mass(void *ctx, int task) {
    const prefill_job *job = ctx;
    free(job->mass[task]);
}

void kb_cpu_prefill(const kb_prefill_args *a) {
    if (a->m <= 0) return;
    if (a->H <= 0 || a->Hkv <= 0 || a->H % a->Hkv || a->d <= 0 || a->t0 < 0) {
        fprintf(stderr, "kb prefill: bad shape H=%d Hkv=%d d=%d t0=%d\n", a->H, a->Hkv, a->d, a->t0);
        return;
    }
    prefill_job job = {.a = a, .g = a->H / a->Hkv};
    long per_query = (long)job.g * (a->t0 + a->m);
    long tq = S_MAX_FLOATS / per_query;
    job.tq = tq < 1 ? 1 : tq > TQ ? TQ : (int)tq;
    job.ntiles = (a->m + job.tq - 1) / job.tq;
    int ntasks = job.ntiles * a->Hkv;
    if (a->col_mass) job.mass = kb_xmalloc((size_t)ntasks * sizeof(float *), "prefill mass list");
    kb_parallel_for(ntasks, prefill_task, &job);
    if (job.mass) {
        kb_parallel_for(a->H, mass_reduce_head, &job);
        for (int t = 0; t < ntasks; t++) free_mass(&job, t);
        free(job.mass);
    }
}

/* ---------------------------------------------------------------- decode */

enum {
    DEC_BLOCK = 2048,              /* entries per softmax block: fixes the rounding */
    LOGIT_CHUNK = 256,             /* entries per logit task at least (any split gives the same bits) */
    COL_CHUNK = 32,                /* output columns per pass of the value loop */
    PREFETCH = 8,                  /* entries ahead */
};

typedef struct {
    const kb_decode_args *a;
    int nblocks;                   /* softmax blocks */
    int chunk;                     /* entries per logit task */
    int ncols, cols;               /* value tasks per block, and the columns each takes */
    float *logit;                  /* [g][n]: logits, then exp(logit - block max) */
    float *part;                   /* [block][g][d] unnormalised outputs */
    float *bmax, *bsum;            /* [block][g] */
    float *scratch;                /* part, bmax, bsum in one allocation */
} decode_group;

typedef struct {
    decode_group *grp;
    int n;
    int *first;                    /* [n + 1]: the group's first task in the current phase */
} decode_job;

/* Entry i's row as floats: the row itself for f32, else converted into buf (one row at a
 * time, so the cache is never copied whole). */
static inline const float *entry_row(const kb_decode_args *a, const void *base, int i, float *buf) {
    size_t r = (size_t)(a->idx ? a->idx[i] : i) * a->d;
    if (a->kv_type == KB_F32) return (const float *)base + r;
    kb_kv_get_inline(a->kv_type, buf, (const uint16_t *)base + r, a->d);
    return buf;
}

/* The row's cache lines, on their way before the loop reaches them. */
static inline void prefetch_row(const void *base, size_t row, int bytes) {
    const char *p = (const char *)base + row * bytes;
    for (int o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
}

/* Task t of the phase: its group, and t's index within the group. */
static const decode_group *task_group(const decode_job *job, int *t) {
    int k = 0;
    while (*t >= job->first[k + 1]) k++;
    *t -= job->first[k];
    return &job->grp[k];
}

/* Phase 1: the logits of G->chunk entries, for each of the g heads (each K row read once). */
static void decode_logits(void *ctx, int t) {
    const decode_group *G = task_group(ctx, &t);
    const kb_decode_args *a = G->a;
    const int g = a->g, d = a->d, n = a->n, i0 = t * G->chunk, i1 = i0 + G->chunk < n ? i0 + G->chunk : n;
    const int row_bytes = d * kb_kvtype_bytes(a->kv_type);
    const float scale = 1.0f / sqrtf((float)d);
    float buf[d];
    for (int i = i0; i < i1; i++) {
        if (i + PREFETCH < i1) prefetch_row(a->K, a->idx ? a->idx[i + PREFETCH] : i + PREFETCH, row_bytes);
        const float *k = entry_row(a, a->K, i, buf);
        float bias = a->bias ? a->bias[i] : 0.0f;
        for (int hh = 0; hh < g; hh++) G->logit[(size_t)hh * n + i] = kb_dot(a->q + (size_t)hh * d, k, d) * scale + bias;
    }
}

/* Phase 2: (block, head): the block max, and the logits turned into exp(logit - max). */
static void decode_exp(void *ctx, int t) {
    const decode_group *G = task_group(ctx, &t);
    const kb_decode_args *a = G->a;
    const int g = a->g, n = a->n, b = t / g, hh = t % g;
    const int i0 = b * DEC_BLOCK, nb = (i0 + DEC_BLOCK < n ? i0 + DEC_BLOCK : n) - i0;
    float *s = G->logit + (size_t)hh * n + i0;
    float mx = kb_max(s, nb);
    G->bmax[b * g + hh] = mx;
    if (mx == -INFINITY) {             /* every entry biased to -inf: weight 0 */
        memset(s, 0, (size_t)nb * sizeof *s);
        G->bsum[b * g + hh] = 0.0f;
    } else {
        G->bsum[b * g + hh] = kb_exp_sum(s, nb, mx);
    }
}

/* Columns [c0, c0 + w) of entry i's V row as floats (16-bit rows converted into buf). */
static inline const float *value_cols(const kb_decode_args *a, int i, int c0, int w, float *buf) {
    const size_t r = (size_t)(a->idx ? a->idx[i] : i) * a->d + c0;
    if (a->kv_type == KB_F32) return (const float *)a->V + r;
    kb_kv_get_inline(a->kv_type, buf, (const uint16_t *)a->V + r, w);
    return buf;
}

/* Phase 3: (block, columns): the block's unnormalised outputs in the task's columns
 * for the g heads, 32 columns at a time, summed over the entries in order (each element
 * gets the same operations in the same order as a whole-row pass would give it). */
static void value_chunk(const decode_group *G, int b, int c0);
static void decode_values(void *ctx, int t) {
    const decode_group *G = task_group(ctx, &t);
    const int b = t / G->ncols, c_lo = t % G->ncols * G->cols, c_hi = c_lo + G->cols < G->a->d ? c_lo + G->cols : G->a->d;
    for (int c0 = c_lo; c0 < c_hi; c0 += COL_CHUNK) value_chunk(G, b, c0);   /* later chunks find the rows in L2 */
}

static void value_chunk(const decode_group *G, int b, int c0) {
    const kb_decode_args *a = G->a;
    const int g = a->g, d = a->d, n = a->n;
    const int w = c0 + COL_CHUNK < d ? COL_CHUNK : d - c0;
    const int i0 = b * DEC_BLOCK, i1 = i0 + DEC_BLOCK < n ? i0 + DEC_BLOCK : n;
    const int row_bytes = d * kb_kvtype_bytes(a->kv_type);
    float *part = G->part + (size_t)b * g * d + c0, buf[COL_CHUNK];
    if (w < COL_CHUNK) {   /* a short last chunk (d not a multiple of 32): plain axpy */
        float acc[g][COL_CHUNK];
        memset(acc, 0, sizeof acc);
        for (int i = i0; i < i1; i++) {
            const float *v = value_cols(a, i, c0, w, buf);
            for (int hh = 0; hh < g; hh++) kb_axpy(acc[hh], G->logit[(size_t)hh * n + i], v, w);
        }
        for (int hh = 0; hh < g; hh++) memcpy(part + (size_t)hh * d, acc[hh], (size_t)w * sizeof(float));
        return;
    }
    /* two heads at a time in 8 registers: each element's sum is a chain of (mul, add)
     * over the entries, as kb_axpy computes it, without a store and reload per entry */
    for (int h0 = 0; h0 < g; h0 += 2) {
        const int two = h0 + 1 < g;
        const float *p0 = G->logit + (size_t)h0 * n, *p1 = two ? p0 + n : p0;
        v8f s0 = v8_set1(0), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
        for (int i = i0; i < i1; i++) {
            if (h0 == 0 && i + PREFETCH < i1) prefetch_row(a->V, a->idx ? a->idx[i + PREFETCH] : i + PREFETCH, row_bytes);
            const float *v = value_cols(a, i, c0, w, buf);
            v8f x0 = v8_load(v), x1 = v8_load(v + 8), x2 = v8_load(v + 16), x3 = v8_load(v + 24);
            v8f pa = v8_set1(p0[i]), pb = v8_set1(p1[i]);
            s0 += pa * x0, s1 += pa * x1, s2 += pa * x2, s3 += pa * x3;
            t0 += pb * x0, t1 += pb * x1, t2 += pb * x2, t3 += pb * x3;
        }
        float *o = part + (size_t)h0 * d;
        v8_store(o, s0), v8_store(o + 8, s1), v8_store(o + 16, s2), v8_store(o + 24, s3);
        if (two) v8_store(o + d, t0), v8_store(o + d + 8, t1), v8_store(o + d + 16, t2), v8_store(o + d + 24, t3);
    }
}

/* probs[hh][i] = exp(logit - block max) * (block factor / Z), per block. */
static void decode_probs(void *ctx, int t) {
    const decode_group *G = task_group(ctx, &t);
    const kb_decode_args *a = G->a;
    const int g = a->g, n = a->n, i0 = t * DEC_BLOCK, i1 = i0 + DEC_BLOCK < n ? i0 + DEC_BLOCK : n;
    for (int hh = 0; hh < g; hh++) kb_scale(a->probs + (size_t)hh * n + i0, i1 - i0, G->bsum[t * g + hh]);
}

/* One phase over every group: per_group(G) tasks each. */
static void decode_phase(decode_job *job, int (*per_group)(const decode_group *), void (*fn)(void *, int)) {
    job->first[0] = 0;
    for (int k = 0; k < job->n; k++) job->first[k + 1] = job->first[k] + per_group(&job->grp[k]);
    kb_parallel_for(job->first[job->n], fn, job);
}
static int n_logit_tasks(const decode_group *G) { return (G->a->n + G->chunk - 1) / G->chunk; }
static int n_exp_tasks(const decode_group *G) { return G->nblocks * G->a->g; }
static int n_value_tasks(const decode_group *G) { return G->nblocks * G->ncols; }
static int n_prob_tasks(const decode_group *G) { return G->a->probs ? G->nblocks : 0; }

/* The blocks of one group combined in block order with the usual max-rescaling
 * (flash-decoding), so the result is the same for any thread count. */
static void decode_combine(decode_group *G) {
    const kb_decode_args *a = G->a;
    const int g = a->g, d = a->d;
    for (int hh = 0; hh < g; hh++) {
        float mx = -INFINITY, z = 0.0f;
        for (int b = 0; b < G->nblocks; b++) mx = G->bmax[b * g + hh] > mx ? G->bmax[b * g + hh] : mx;
        float *o = a->out + (size_t)hh * d;
        memset(o, 0, (size_t)d * sizeof *o);
        for (int b = 0; b < G->nblocks; b++) {
            float f = G->bmax[b * g + hh] == -INFINITY ? 0.0f : expf(G->bmax[b * g + hh] - mx);
            z += G->bsum[b * g + hh] * f;
            kb_axpy(o, f, G->part + ((size_t)b * g + hh) * d, d);
            G->bsum[b * g + hh] = f;           /* keep the block factor for probs */
        }
        kb_scale(o, d, 1.0f / z);
        for (int b = 0; b < G->nblocks; b++) G->bsum[b * g + hh] /= z;
    }
}

void kb_cpu_decode_many(const kb_decode_args *args, int n_args) {
    decode_group *grp = kb_xmalloc((size_t)(n_args > 0 ? n_args : 1) * sizeof *grp, "decode groups");
    int *first = kb_xmalloc((size_t)(n_args + 1) * sizeof *first, "decode tasks");
    decode_job job = {grp, 0, first};
    for (int k = 0; k < n_args; k++) {
        const kb_decode_args *a = &args[k];
        if (a->g <= 0 || a->d <= 0) continue;
        if (a->n <= 0) {
            memset(a->out, 0, (size_t)a->g * a->d * sizeof *a->out);
            continue;
        }
        decode_group *G = &grp[job.n++];
        G->a = a;
        G->nblocks = (a->n + DEC_BLOCK - 1) / DEC_BLOCK;
        G->logit = a->probs ? a->probs : kb_xmalloc((size_t)a->g * a->n * sizeof(float), "decode logits");
        G->scratch = kb_xmalloc((size_t)G->nblocks * a->g * (a->d + 2) * sizeof(float), "decode partials");
        G->part = G->scratch;
        G->bmax = G->scratch + (size_t)G->nblocks * a->g * a->d;
        G->bsum = G->bmax + (size_t)G->nblocks * a->g;
    }
    /* Task sizes (the bits do not depend on them): logit tasks about 4 a thread, at
     * least LOGIT_CHUNK entries (long runs keep the prefetcher going); values by whole
     * rows when there are blocks enough for the threads, else by 32 columns */
    long rows = 0, blocks = 0;
    for (int k = 0; k < job.n; k++) rows += grp[k].a->n, blocks += grp[k].nblocks;
    int per = (int)(rows / (4L * kb_threads()) + 63) / 64 * 64;
    for (int k = 0; k < job.n; k++) {
        decode_group *G = &grp[k];
        G->chunk = per > LOGIT_CHUNK ? per : LOGIT_CHUNK;
        G->cols = blocks >= 2L * kb_threads() ? (G->a->d + COL_CHUNK - 1) / COL_CHUNK * COL_CHUNK : COL_CHUNK;
        G->ncols = (G->a->d + G->cols - 1) / G->cols;
    }
    decode_phase(&job, n_logit_tasks, decode_logits);
    decode_phase(&job, n_exp_tasks, decode_exp);
    decode_phase(&job, n_value_tasks, decode_values);
    for (int k = 0; k < job.n; k++) decode_combine(&grp[k]);
    decode_phase(&job, n_prob_tasks, decode_probs);
    for (int k = 0; k < job.n; k++) {
        if (!grp[k].a->probs) free(grp[k].logit);   /* ours unless the caller's probs */
        free(grp[k].scratch);
    }
    free(first);
    free(grp);
}

void kb_cpu_decode(const kb_decode_args *a) { kb_cpu_decode_many(a, 1); }
