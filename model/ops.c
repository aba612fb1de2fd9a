/* The forward pass's building blocks: RMSNorm, RoPE, SwiGLU, mat-vec over quantized
 * rows (threaded), GEMM over the f32 copies, and log-softmax of one logit row. */
#include "engine.h"
#include "quant.h"
#include "quant_q8.h"
#include "../kernels/core.h"
#include <cblas.h>
#include <math.h>

void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * scale);
}

void rope_cossin(const kv_model *m, int pos, float *cs) {
    double p = pos * m->rope_pos_scale, base = m->cfg.rope_base;
    for (int i = 0; i < m->n_rot / 2; i++) {
        double theta = p * pow(base, -2.0 * i / m->n_rot);
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
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
        const matvec_job *jb = &c->jobs[j];
        long rows = jb->w->rows;
        if (lo < base + rows) {
            long r0 = lo - base, r1 = (hi < base + rows ? hi : base + rows) - base;
            int type = jb->w->t->type;
            const uint8_t *row = (const uint8_t *)jb->w->t->data + (size_t)r0 * jb->w->row_bytes;
            float *y = jb->y, buf[64];
            if (jb->xq && quant_q8_supported(type)) {   /* 64 rows at a time through buf */
                for (long r = r0; r < r1; r += 64) {
                    int nr = (int)(r1 - r < 64 ? r1 - r : 64);
                    quant_matvec_q8(type, row + (size_t)(r - r0) * jb->w->row_bytes, jb->w->row_bytes, nr, jb->xq,
                                    jb->w->cols, buf);
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
            lo = base + r1;
        }
        base += rows;
    }
}

void matvec_many(const matvec_job *jobs, int n_jobs) {
    matvec_ctx c = {jobs, n_jobs, 0, 0};
    for (int j = 0; j < n_jobs; j++) c.total += jobs[j].w->rows;
    long tasks = (long)kb_threads() * 4, by_rows = c.total / 32;
    c.n_tasks = (int)(tasks < by_rows ? tasks : by_rows);
    if (c.n_tasks < 1) c.n_tasks = 1;
    if (c.n_tasks == 1) matvec_task(&c, 0);
    else kb_parallel_for(c.n_tasks, matvec_task, &c);
}

/* Task i computes the columns of Y for an equal slice of W's rows, with a
 * single-threaded sgemm (the parallelism is kb_parallel_for's, as in the kernels). */
typedef struct {
    const float *X;
    int n, tasks;
    const weight *w;
    float beta, *Y;
} gemm_ctx;

static void gemm_task(void *vctx, int i) {
    const gemm_ctx *c = vctx;
    int r0 = (int)((long)c->w->rows * i / c->tasks), r1 = (int)((long)c->w->rows * (i + 1) / c->tasks);
    if (r1 > r0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, r1 - r0, c->w->cols, 1.0f, c->X,
                    c->w->cols, c->w->f32 + (size_t)r0 * c->w->cols, c->w->cols, c->beta, c->Y + r0,
                    c->w->rows);
}

void gemm_xwt(const float *X, int n, const weight *w, float beta, float *Y) {
    gemm_ctx c = {X, n, kb_threads(), w, beta, Y};
    if (c.tasks > w->rows / 16) c.tasks = w->rows / 16 > 0 ? w->rows / 16 : 1;
    kb_parallel_for(c.tasks, gemm_task, &c);
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
