/* The forward pass's building blocks: RMSNorm, RoPE, SwiGLU, mat-vec over quantized
 * rows (threaded), GEMM over dequantized tiles of the weights, and log-softmax of one logit row. */
#include "engine.h"
#include "quant.h"
#include "quant_q8.h"
#include "../kernels/core.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * scale);
}

void rope_rotate(const kv_model *m, float *x, int n_heads, const float *cs) {
    int d = m->cfg.head_dim, half = m->n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * d;
        for (int i = 0; i < half; i++) {
            /* llama (GGUF "normal"): adjacent pairs; qwen2 (NeoX): halves of the rotated dims */
            int ia = m->rope_neox ? i : 2 * i, ib = m->rope_neox ? i + half : 2 * i + 1;
            float a = v[ia], b = v[ib], c = cs[2 * i], s = cs[2 * i + 1];
            v[ia] = a * c - b * s;
            v[ib] = a * s + b * c;
        }
    }
}

void silu_mul(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Rows [r0, r1) of one job; each row's value does not depend on how rows are split. */
static void matvec_rows(const matvec_job *jb, long r0, long r1) {
    int type = jb->w->t->type;
    const uint8_t *row = (const uint8_t *)jb->w->t->data + (size_t)r0 * jb->w->row_bytes;
    float *y = jb->y, buf[64];
    if (jb->xq && quant_q8_supported(type)) {   /* 64 rows at a time through buf */
        for (long r = r0; r < r1; r += 64) {
            int nr = (int)(r1 - r < 64 ? r1 - r : 64);
            quant_matvec_q8(type, row + (size_t)(r - r0) * jb->w->row_bytes, jb->w->row_bytes, nr, jb->xq, jb->w->cols,
                            buf);
            for (int i = 0; i < nr; i++) {
                float v = buf[i] + (jb->bias ? jb->bias[r + i] : 0.0f);
                y[r + i] = jb->add ? y[r + i] + v : v;
            }
        }
    } else
        for (long r = r0; r < r1; r++, row += jb->w->row_bytes) {
            float v = quant_dot(type, row, jb->x, jb->w->cols) + (jb->bias ? jb->bias[r] : 0.0f);
            y[r] = jb->add ? y[r] + v : v;
        }
}

/* The rows of all jobs form one range [0, total); task i takes an equal slice of it. */
typedef struct {
    const matvec_job *jobs;
    int n_jobs, n_tasks;
    long total;
} matvec_ctx;

static void matvec_task(void *vctx, int task) {
    const matvec_ctx *c = vctx;
    long lo = c->total * task / c->n_tasks, hi = c->total * (task + 1) / c->n_tasks, base = 0;
    for (int j = 0; j < c->n_jobs && lo < hi; j++) {
        long rows = c->jobs[j].w->rows;
        if (lo < base + rows) {
            long r0 = lo - base, r1 = (hi < base + rows ? hi : base + rows) - base;
            matvec_rows(&c->jobs[j], r0, r1);
            lo = base + r1;
        }
        base += rows;
    }
}

/* Tasks for `rows` rows in all: 4 per thread, at least 32 rows each. */
static int matvec_tasks(long rows) {
    long tasks = (long)kb_threads() * 4, by_rows = rows / 32;
    return tasks < by_rows ? (int)tasks : by_rows > 1 ? (int)by_rows : 1;
}

void matvec_many(const matvec_job *jobs, int n_jobs) {
    matvec_ctx c = {jobs, n_jobs, 0, 0};
    for (int j = 0; j < n_jobs; j++) c.total += jobs[j].w->rows;
    c.n_tasks = matvec_tasks(c.total);
    if (c.n_tasks == 1) matvec_task(&c, 0);
    else kb_parallel_for(c.n_tasks, matvec_task, &c);
}

/* gate and up over the same rows in one task, then silu(gate) * up on those rows: the
 * SwiGLU runs on every thread instead of after the loop on one. */
static void glu_task(void *vctx, int task) {
    const matvec_ctx *c = vctx;
    long lo = c->total * task / c->n_tasks, hi = c->total * (task + 1) / c->n_tasks;
    matvec_rows(&c->jobs[0], lo, hi);
    matvec_rows(&c->jobs[1], lo, hi);
    silu_mul(c->jobs[0].y + lo, c->jobs[1].y + lo, (int)(hi - lo));
}

void matvec_glu(const matvec_job gate_up[2]) {
    matvec_ctx c = {gate_up, 2, 0, gate_up[0].w->rows};
    c.n_tasks = matvec_tasks(2 * c.total);
    if (c.n_tasks == 1) glu_task(&c, 0);
    else kb_parallel_for(c.n_tasks, glu_task, &c);
}

/* ---- several rows of activations at once (batched decode) ----
 * jobs[b * n_jobs + j]: batch row b's job j; every b has the same weights. The tasks split
 * the output rows exactly as matvec_many does for one row (the split depends on the
 * weights only), and within a task the weight rows go 64 at a time. Each chunk of 64
 * rows goes through a multi-row kernel (quant_dot_multi, quant_matvec_q8_multi) that
 * unpacks each weight block once and multiplies it with every batch row's activations;
 * those kernels give each row the single-row kernel's value bit for bit, and the bias and
 * the residual add are matvec_rows's, so every batch row's result is bit-identical to a
 * single-row call, whatever the batch. */
#define BATCH_SLICE 32   /* batch rows per multi-row call (their outputs on the stack) */

/* Rows [r, e) (at most 64) of the jobs jobs[b * stride], b < nb. */
static void rows_multi(const matvec_job *jobs, int stride, int nb, long r, long e) {
    if (nb == 1) {   /* the single-row kernel itself: the multi-row one's unpacking costs a lone row */
        matvec_rows(&jobs[0], r, e);
        return;
    }
    const weight *w = jobs[0].w;
    int type = w->t->type, n = (int)(e - r), q8 = jobs[0].xq && quant_q8_supported(type);
    for (int b = 1; b < nb; b++)
        if ((jobs[(size_t)b * stride].xq != NULL) != (jobs[0].xq != NULL)) {   /* mixed modes: one at a time */
            for (int k = 0; k < nb; k++) matvec_rows(&jobs[(size_t)k * stride], r, e);
            return;
        }
    const uint8_t *row = (const uint8_t *)w->t->data + (size_t)r * w->row_bytes;
    float buf[BATCH_SLICE * 64];
    const float *xf[BATCH_SLICE];
    const void *xq[BATCH_SLICE];
    for (int b0 = 0; b0 < nb; b0 += BATCH_SLICE) {
        int bn = nb - b0 < BATCH_SLICE ? nb - b0 : BATCH_SLICE;
        for (int k = 0; k < bn; k++) xf[k] = jobs[(size_t)(b0 + k) * stride].x, xq[k] = jobs[(size_t)(b0 + k) * stride].xq;
        if (q8) quant_matvec_q8_multi(type, row, w->row_bytes, n, xq, bn, w->cols, buf, 64);
        else quant_dot_multi(type, row, w->row_bytes, n, xf, bn, w->cols, buf, 64);
        for (int k = 0; k < bn; k++) {
            const matvec_job *jb = &jobs[(size_t)(b0 + k) * stride];
            for (int i = 0; i < n; i++) {
                float v = buf[k * 64 + i] + (jb->bias ? jb->bias[r + i] : 0.0f);
                jb->y[r + i] = jb->add ? jb->y[r + i] + v : v;
            }
        }
    }
}

typedef struct {
    const matvec_job *jobs;
    int n_jobs, n_tasks, nb;
    long total;
} batch_ctx;

static void rows_chunked(const matvec_job *jobs, int stride, int nb, long r0, long r1) {
    for (long r = r0; r < r1; r += 64) {
        long e = r1 - r < 64 ? r1 : r + 64;
        rows_multi(jobs, stride, nb, r, e);
    }
}

static void batch_task(void *vctx, int task) {
    const batch_ctx *c = vctx;
    long lo = c->total * task / c->n_tasks, hi = c->total * (task + 1) / c->n_tasks, base = 0;
    for (int j = 0; j < c->n_jobs && lo < hi; j++) {
        long rows = c->jobs[j].w->rows;
        if (lo < base + rows) {
            long r0 = lo - base, r1 = (hi < base + rows ? hi : base + rows) - base;
            rows_chunked(c->jobs + j, c->n_jobs, c->nb, r0, r1);
            lo = base + r1;
        }
        base += rows;
    }
}

void matvec_many_batch(const matvec_job *jobs, int n_jobs, int nb) {
    batch_ctx c = {jobs, n_jobs, 0, nb, 0};
    for (int j = 0; j < n_jobs; j++) c.total += jobs[j].w->rows;
    c.n_tasks = matvec_tasks(c.total);
    if (c.n_tasks == 1) batch_task(&c, 0);
    else kb_parallel_for(c.n_tasks, batch_task, &c);
}

static void glu_batch_task(void *vctx, int task) {
    const batch_ctx *c = vctx;
    long lo = c->total * task / c->n_tasks, hi = c->total * (task + 1) / c->n_tasks;
    for (long r = lo; r < hi; r += 64) {
        long e = hi - r < 64 ? hi : r + 64;
        rows_multi(c->jobs, 2, c->nb, r, e);       /* gate */
        rows_multi(c->jobs + 1, 2, c->nb, r, e);   /* up */
        for (int b = 0; b < c->nb; b++) silu_mul(c->jobs[(size_t)b * 2].y + r, c->jobs[(size_t)b * 2 + 1].y + r, (int)(e - r));
    }
}

void matvec_glu_batch(const matvec_job *gate_up, int nb) {
    batch_ctx c = {gate_up, 2, 0, nb, gate_up[0].w->rows};
    c.n_tasks = matvec_tasks(2 * c.total);
    if (c.n_tasks == 1) glu_batch_task(&c, 0);
    else kb_parallel_for(c.n_tasks, glu_batch_task, &c);
}

/* Y = X W^T + beta Y straight from the quantized rows: W is cut into tiles of rows at
 * fixed offsets, each task takes a run of whole tiles, dequantizes each into its own
 * scratch and runs a single-threaded sgemm on it (the parallelism is kb_parallel_for's, as
 * in the kernels). The tile size depends on W's shape only, so every sgemm call has the
 * same shape whatever the thread count and the result does not depend on it (OpenBLAS's
 * rounding does depend on the call's shape). No f32 copy of the weights outlives the
 * call; F32 weights are used in place. */

/* About 8 tiles a matrix, 64 to 512 rows (larger tiles run sgemm closer to its speed on
 * the whole matrix; 512 rows of llama3-8b's ffn_down are 29 MB of scratch per thread). */
static int gemm_tile_rows(int rows) {
    int t = ((rows + 7) / 8 + 15) / 16 * 16;
    return t < 64 ? 64 : t > 512 ? 512 : t;
}

typedef struct {
    const float *X;
    int n, tasks, tiles, tile_rows;
    const weight *w;
    float beta, *Y;
    float *scratch;   /* [tasks][tile_rows][cols]; NULL for F32 weights (or out of memory) */
} gemm_ctx;

static void gemm_task(void *vctx, int i) {
    const gemm_ctx *c = vctx;
    const weight *w = c->w;
    int k0 = (int)((long)c->tiles * i / c->tasks), k1 = (int)((long)c->tiles * (i + 1) / c->tasks);
    float *tile = c->scratch ? c->scratch + (size_t)i * c->tile_rows * w->cols : NULL;
    for (int k = k0; k < k1; k++) {
        int t0 = k * c->tile_rows, tn = w->rows - t0 < c->tile_rows ? w->rows - t0 : c->tile_rows;
        const uint8_t *row = (const uint8_t *)w->t->data + (size_t)t0 * w->row_bytes;
        const float *W = (const float *)row;
        if (tile) {
            for (int r = 0; r < tn; r++) dequant_row(w->t->type, row + (size_t)r * w->row_bytes, tile + (size_t)r * w->cols, w->cols);
            W = tile;
        } else if (w->t->type != GGML_F32) {   /* no scratch could be had: a row at a time, on the stack */
            for (int r = 0; r < tn; r++) {
                float one[w->cols];
                dequant_row(w->t->type, row + (size_t)r * w->row_bytes, one, w->cols);
                cblas_sgemv(CblasRowMajor, CblasNoTrans, c->n, w->cols, 1.0f, c->X, w->cols, one, 1, c->beta,
                            c->Y + t0 + r, w->rows);
            }
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, tn, w->cols, 1.0f, c->X, w->cols, W, w->cols,
                    c->beta, c->Y + t0, w->rows);
    }
}

int gemm_test_no_scratch;

void gemm_xwt(const float *X, int n, const weight *w, float beta, float *Y) {
    int tr = gemm_tile_rows(w->rows), tiles = (w->rows + tr - 1) / tr;
    gemm_ctx c = {X, n, kb_threads() < tiles ? kb_threads() : tiles, tiles, tr, w, beta, Y, NULL};
    /* malloc/free of the same size each call: glibc hands the same block back; without it
     * gemm_task falls back to a row at a time */
    if (w->t->type != GGML_F32 && !gemm_test_no_scratch)
        c.scratch = malloc((size_t)c.tasks * tr * w->cols * sizeof(float));
    kb_parallel_for(c.tasks, gemm_task, &c);
    free(c.scratch);
}

double logits_surprisal(const float *logits, int n, int id) {
    float mx = logits[0];
    for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    return mx + log(sum) - logits[id];
}

int model_argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

double model_surprisal(const kv_model *m, const float *logits, int id) {
    return id >= 0 && id < m->cfg.n_vocab ? logits_surprisal(logits, m->cfg.n_vocab, id) : INFINITY;
}
