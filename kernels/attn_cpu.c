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
 *   Entries are processed in fixed blocks of DEC_BLOCK. Per block: logits for the g
 *   heads (each K row read once, g dot products), block max and exp-sum, and an
 *   unnormalised partial output (each V row read once). Blocks run in parallel when
 *   there are several; they are combined in block order with the usual max-rescaling
 *   (flash-decoding), so the result is the same for any thread count. 16-bit rows
 *   (kv_type f16/bf16) are converted to f32 one row at a time as they are read; the
 *   arithmetic is the f32 path's.
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

enum { DEC_BLOCK = 2048 };

typedef struct {
    const kb_decode_args *a;
    float *logit;                  /* [g][n]: logits, then exp(logit - block max) */
    float *part;                   /* [block][g][d] unnormalised outputs */
    float *bmax, *bsum;            /* [block][g] */
} decode_job;

/* Entry i's row as floats: the row itself for f32, else converted into buf (one row at a
 * time, so the cache is never copied whole). */
static inline const float *entry_row(const kb_decode_args *a, const void *base, int i, float *buf) {
    size_t r = (size_t)(a->idx ? a->idx[i] : i) * a->d;
    if (a->kv_type == KB_F32) return (const float *)base + r;
    kb_kv_get(a->kv_type, buf, (const uint16_t *)base + r, a->d);
    return buf;
}

static void decode_block(void *ctx, int b) {
    const decode_job *job = ctx;
    const kb_decode_args *a = job->a;
    const int g = a->g, d = a->d, n = a->n;
    const int i0 = b * DEC_BLOCK, i1 = i0 + DEC_BLOCK < n ? i0 + DEC_BLOCK : n, nb = i1 - i0;
    const float scale = 1.0f / sqrtf((float)d);
    float *buf = a->kv_type == KB_F32 ? NULL : kb_xmalloc((size_t)d * sizeof *buf, "decode row");

    for (int i = i0; i < i1; i++) {
        const float *k = entry_row(a, a->K, i, buf);
        float bias = a->bias ? a->bias[i] : 0.0f;
        for (int hh = 0; hh < g; hh++)
            job->logit[(size_t)hh * n + i] = kb_dot(a->q + (size_t)hh * d, k, d) * scale + bias;
    }
    float *acc = job->part + (size_t)b * g * d;
    for (int hh = 0; hh < g; hh++) {
        float *s = job->logit + (size_t)hh * n + i0;
        float mx = kb_max(s, nb);
        job->bmax[b * g + hh] = mx;
        if (mx == -INFINITY) {             /* every entry biased to -inf: weight 0 */
            memset(s, 0, (size_t)nb * sizeof *s);
            job->bsum[b * g + hh] = 0.0f;
        } else {
            job->bsum[b * g + hh] = kb_exp_sum(s, nb, mx);
        }
    }
    memset(acc, 0, (size_t)g * d * sizeof *acc);
    for (int i = i0; i < i1; i++) {
        const float *v = entry_row(a, a->V, i, buf);
        for (int hh = 0; hh < g; hh++) kb_axpy(acc + (size_t)hh * d, job->logit[(size_t)hh * n + i], v, d);
    }
    free(buf);
}

/* probs[hh][i] = exp(logit - block max) * (block factor / Z), per block. */
static void decode_probs_block(void *ctx, int b) {
    const decode_job *job = ctx;
    const kb_decode_args *a = job->a;
    const int g = a->g, n = a->n;
    const int i0 = b * DEC_BLOCK, i1 = i0 + DEC_BLOCK < n ? i0 + DEC_BLOCK : n;
    for (int hh = 0; hh < g; hh++)
        kb_scale(a->probs + (size_t)hh * n + i0, i1 - i0, job->bsum[b * g + hh]);
}

void kb_cpu_decode(const kb_decode_args *a) {
    const int g = a->g, d = a->d, n = a->n;
    if (g <= 0 || d <= 0) return;
    if (n <= 0) {
        memset(a->out, 0, (size_t)g * d * sizeof *a->out);
        return;
    }
    const int nblocks = (n + DEC_BLOCK - 1) / DEC_BLOCK;
    decode_job job = {.a = a};
    job.logit = a->probs ? a->probs : kb_xmalloc((size_t)g * n * sizeof(float), "decode logits");
    float *scratch = kb_xmalloc((size_t)nblocks * g * (d + 2) * sizeof(float), "decode partials");
    job.part = scratch;
    job.bmax = scratch + (size_t)nblocks * g * d;
    job.bsum = job.bmax + (size_t)nblocks * g;
    kb_parallel_for(nblocks, decode_block, &job);

    /* combine the blocks in order */
    for (int hh = 0; hh < g; hh++) {
        float mx = -INFINITY, z = 0.0f;
        for (int b = 0; b < nblocks; b++) mx = job.bmax[b * g + hh] > mx ? job.bmax[b * g + hh] : mx;
        float *o = a->out + (size_t)hh * d;
        memset(o, 0, (size_t)d * sizeof *o);
        for (int b = 0; b < nblocks; b++) {
            float f = job.bmax[b * g + hh] == -INFINITY ? 0.0f : expf(job.bmax[b * g + hh] - mx);
            z += job.bsum[b * g + hh] * f;
            kb_axpy(o, f, job.part + ((size_t)b * g + hh) * d, d);
            job.bsum[b * g + hh] = f;          /* keep the block factor for probs */
        }
        kb_scale(o, d, 1.0f / z);
        for (int b = 0; b < nblocks; b++) job.bsum[b * g + hh] /= z;
    }
    if (a->probs) {
        if (nblocks > 1) kb_parallel_for(nblocks, decode_probs_block, &job);
        else decode_probs_block(&job, 0);
    } else {
        free(job.logit);
    }
    free(scratch);
}
