/* SeKV training loss and its hand-written gradient (see sekv_train.h for the loss).
 *
 * Work is split by layer (kb_parallel_for): a layer's rows touch only that layer's W,
 * tau and rank-gate outputs; the gate MLP's own gradient is accumulated per layer and
 * summed in layer order afterwards, so results do not depend on the thread count.
 *
 * Per layer: (1) the rank gates m_K, m_V of every span some selected position sees;
 * (2) per head, the routing keys khat_s = W kbar_s / |W kbar_s|; (3) per row, the
 * forward (alpha~, z, the student's softmax, the KL to the teacher, BCE) and its
 * backward into dL/dm_K, dL/dtau, dL/dW; (4) the recon and rank-budget terms;
 * (5) backprop of dL/dm through the gate MLP. */
#include "sekv_train.h"
#include "../../../kernels/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sekv_loss_cfg sekv_loss_defaults(void) {
    return (sekv_loss_cfg){.lambda_zoom = 1.0, .lambda_recon = 0.5, .lambda_budget = 0.1,
                           .beta = 0.1, .w_pos = 10.0, .temp = 0.1};
}

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }
static double gelu_d(double x) {
    return 0.5 * (1.0 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x);
}

/* ---------------------------------------------------------------- rank gate */

static size_t gate_cache_len(const sekv_tparams *th) {
    return (size_t)th->R + th->d + 4 * (size_t)th->hidden + th->R;
}
static size_t gate_param_len(const sekv_tparams *th) {
    size_t hid = th->hidden;
    return hid * (th->R + th->d) + hid + hid * hid + hid + (size_t)th->R * hid + th->R;
}

/* y [rows] = W x + b with W given transposed, WT [cols][rows]: the inner loop runs over
 * contiguous outputs, so it vectorises (a dot-product loop would not, without reassociating). */
static void dense_t(const double *WT, const double *b, const double *x, int rows, int cols, double *y) {
    for (int i = 0; i < rows; i++) y[i] = b[i];
    for (int k = 0; k < cols; k++) {
        double xk = x[k];
        const double *w = WT + (size_t)k * rows;
        if (xk != 0)
            for (int i = 0; i < rows; i++) y[i] += xk * w[i];
    }
}

static void transpose(const double *A, int rows, int cols, double *AT) {
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < cols; k++) AT[(size_t)k * rows + i] = A[(size_t)i * cols + k];
}

/* The gate's weight matrices transposed (W1T [R+d][hid], W2T [hid][hid], W3T [hid][R]),
 * made once per loss evaluation. */
typedef struct {
    double *w1t, *w2t, *w3t;
} gate_t;

static int gate_t_make(const sekv_tparams *th, gate_t *g) {
    int in = th->R + th->d, hid = th->hidden;
    g->w1t = malloc(((size_t)in * hid + (size_t)hid * hid + (size_t)hid * th->R) * sizeof *g->w1t);
    if (!g->w1t) return -1;
    g->w2t = g->w1t + (size_t)in * hid;
    g->w3t = g->w2t + (size_t)hid * hid;
    transpose(th->g_w1, hid, in, g->w1t);
    transpose(th->g_w2, hid, hid, g->w2t);
    transpose(th->g_w3, th->R, hid, g->w3t);
    return 0;
}

/* sekv_gate_forward's math in double; cache: x [R+d], a1, h1, a2, h2 [hid], z3 [R]. */
static void gate_fwd(const sekv_tparams *th, const gate_t *gt, const float *s, int r,
                     const float *kbar, double *m, double *c) {
    int R = th->R, d = th->d, hid = th->hidden;
    double *x = c, *a1 = x + R + d, *h1 = a1 + hid, *a2 = h1 + hid, *h2 = a2 + hid, *z3 = h2 + hid;
    for (int i = 0; i < R; i++) x[i] = i < r && s[0] > 0 ? (double)s[i] / s[0] : 0.0;
    double nk = 0;
    for (int i = 0; i < d; i++) nk += (double)kbar[i] * kbar[i];
    nk = sqrt(nk);
    for (int i = 0; i < d; i++) x[R + i] = nk > 0 ? kbar[i] / nk : 0.0;
    dense_t(gt->w1t, th->g_b1, x, hid, R + d, a1);
    for (int i = 0; i < hid; i++) h1[i] = gelu(a1[i]);
    dense_t(gt->w2t, th->g_b2, h1, hid, hid, a2);
    for (int i = 0; i < hid; i++) h2[i] = gelu(a2[i]);
    dense_t(gt->w3t, th->g_b3, h2, R, hid, z3);
    for (int i = 0; i < R; i++) m[i] = i < r ? sigm(z3[i]) : 0.0;
}

/* Accumulates dL/dphi into g (the gate arrays w1, b1, w2, b2, w3, b3 back to back) from
 * dL/dm; work needs 2*hid doubles. */
static void gate_bwd(const sekv_tparams *th, const double *c, const double *m, const double *dm,
                     int r, double *g, double *work) {
    int R = th->R, d = th->d, hid = th->hidden, in = R + d;
    const double *x = c, *a1 = x + in, *h1 = a1 + hid, *a2 = h1 + hid, *h2 = a2 + hid;
    double *gw1 = g, *gb1 = gw1 + (size_t)hid * in, *gw2 = gb1 + hid, *gb2 = gw2 + (size_t)hid * hid,
           *gw3 = gb2 + hid, *gb3 = gw3 + (size_t)R * hid;
    double *da2 = work, *da1 = work + hid;
    for (int i = 0; i < hid; i++) da2[i] = 0;
    for (int o = 0; o < r; o++) {
        double dz = dm[o] * m[o] * (1 - m[o]);
        if (dz == 0) continue;
        gb3[o] += dz;
        const double *w = th->g_w3 + (size_t)o * hid;
        double *gw = gw3 + (size_t)o * hid;
        for (int k = 0; k < hid; k++) {
            gw[k] += dz * h2[k];
            da2[k] += dz * w[k];
        }
    }
    for (int k = 0; k < hid; k++) da2[k] *= gelu_d(a2[k]);
    for (int i = 0; i < hid; i++) da1[i] = 0;
    for (int o = 0; o < hid; o++) {
        double dz = da2[o];
        gb2[o] += dz;
        const double *w = th->g_w2 + (size_t)o * hid;
        double *gw = gw2 + (size_t)o * hid;
        for (int k = 0; k < hid; k++) {
            gw[k] += dz * h1[k];
            da1[k] += dz * w[k];
        }
    }
    for (int o = 0; o < hid; o++) {
        double dz = da1[o] * gelu_d(a1[o]);
        gb1[o] += dz;
        double *gw = gw1 + (size_t)o * in;
        for (int k = 0; k < in; k++) gw[k] += dz * x[k];
    }
}

void sekv_tgate(const sekv_tparams *th, const float *s, int r, const float *kbar, double *m) {
    double *c = malloc(gate_cache_len(th) * sizeof *c);
    gate_t gt;
    if (!c || gate_t_make(th, &gt)) {
        for (int i = 0; i < th->R; i++) m[i] = NAN;
        free(c);
        return;
    }
    gate_fwd(th, &gt, s, r, kbar, m, c);
    free(c), free(gt.w1t);
}

/* ---------------------------------------------------------------- routing */

/* WT [d][dp] is one head's W [dp][d] transposed. qhat = W q. */
static void route_query(const double *WT, const float *q, int d, int dp, double *qhat) {
    for (int i = 0; i < dp; i++) qhat[i] = 0;
    for (int k = 0; k < d; k++) {
        double qk = q[k];
        const double *w = WT + (size_t)k * dp;
        for (int i = 0; i < dp; i++) qhat[i] += qk * w[i];
    }
}

/* khat = W kbar / |W kbar| (0 when the norm is 0); returns the norm. */
static double route_key(const double *WT, const float *kbar, int d, int dp, double *khat) {
    route_query(WT, kbar, d, dp, khat);
    double n = 0;
    for (int i = 0; i < dp; i++) n += khat[i] * khat[i];
    n = sqrt(n);
    for (int i = 0; i < dp; i++) khat[i] = n > 0 ? khat[i] / n : 0.0;
    return n;
}

double sekv_talpha(const sekv_tparams *th, int layer, int head, const float *q, const float *kbar,
                   int len) {
    int d = th->d, dp = th->dp;
    double *WT = calloc((size_t)d * dp, sizeof *WT), qh[SEKV_DPRIME] = {0}, kh[SEKV_DPRIME] = {0}, dot = 0;
    if (!WT) return NAN;
    transpose(th->W + ((size_t)layer * th->H + head) * dp * d, dp, d, WT);
    route_query(WT, q, d, dp, qh);
    route_key(WT, kbar, d, dp, kh);
    free(WT);
    for (int i = 0; i < dp; i++) dot += qh[i] * kh[i];
    return sigm(dot / sqrt((double)dp) + log((double)len));
}

/* ---------------------------------------------------------------- one row */

/* Inputs, scratch and forward results of one row (position p, layer l, head h). */
typedef struct {
    const sekv_tdoc *doc;
    int p, l, h, j, t, nv;
    const float *q, *lo, *gq, *cq;
    const uint8_t *y;
    size_t e0;                   /* probe index of span 0 */
    const double *mK;            /* [nvmax][R] this kv head's key gates */
    const double *khat;          /* [nvmax][dp] this head's routing keys */
    const double *WT;            /* [d][dp] this head's W transposed */
    double qhat[SEKV_DPRIME];
    double *x, *al, *sig, *z;    /* [nv] routing logit, alpha~, STE sigmoid, gate value */
    uint8_t *zh;                 /* [nv] side: 1 = reconstructed rows, 0 = coarse row */
    int32_t *own;                /* [t+1] visible span holding token i, or -1 */
    double *sl;                  /* [t+1] logit of token i's own entry (full res or reconstructed) */
    double *cl;                  /* [nv] coarse logit (side 0) */
    double *ta;                  /* [t+1] teacher probabilities */
    double *es, *ec;             /* [t+1], [nv]: student probabilities of token and coarse entries */
    double mx, lnZ, mxa, lnZa;   /* student and teacher log-normalisers: max + ln sum exp */
} row_t;

static const float *span_U(const sekv_tdoc *doc, int l, int j, int s) {
    return doc->U + ((size_t)l * doc->Hkv + j) * doc->u_off[doc->n_spans] + doc->u_off[s];
}
static const float *span_s(const float *arr, const sekv_tdoc *doc, int l, int j, int s) {
    return arr + (((size_t)l * doc->Hkv + j) * doc->n_spans + s) * doc->R;
}

/* Points w at row (p, l, h)'s inputs; scratch must already be attached. */
static void row_bind(row_t *w, const sekv_tdoc *doc, int p, int l, int h) {
    size_t LH = (size_t)doc->L * doc->H, row = (size_t)l * doc->H + h;
    w->doc = doc, w->p = p, w->l = l, w->h = h, w->j = h / (doc->H / doc->Hkv);
    w->t = doc->pos[p], w->nv = doc->nvis[p];
    w->q = doc->q + (((size_t)p * doc->L + l) * doc->H + h) * doc->d;
    w->lo = doc->logit + doc->lo_off[p] + row * (size_t)(w->t + 1);
    w->gq = doc->gq + doc->g_off[p] + row * ((doc->g_off[p + 1] - doc->g_off[p]) / LH);
    w->cq = doc->cq + doc->c_off[p] + row * (size_t)w->nv;
    w->y = doc->y + doc->c_off[p] + row * (size_t)w->nv;
    w->e0 = doc->c_off[p] + row * (size_t)w->nv;
}

/* Forward of one row: alpha~, z (hard, or the STE surrogate of probe mode 2), the
 * student's entry logits and both softmax normalisers. */
static void row_forward(row_t *w, const sekv_tparams *th, double temp, sekv_ste_probe *probe) {
    const sekv_tdoc *doc = w->doc;
    int D = doc->d, R = doc->R, dp = th->dp, t = w->t;
    double tau = th->tau[(size_t)w->l * th->H + w->h];
    route_query(w->WT, w->q, D, dp, w->qhat);
    for (int s = 0; s < w->nv; s++) {
        double dot = 0;
        for (int i = 0; i < dp; i++) dot += w->qhat[i] * w->khat[(size_t)s * dp + i];
        w->x[s] = dot / sqrt((double)dp) + log((double)doc->span[s].len);
        w->al[s] = sigm(w->x[s]);
        w->sig[s] = sigm((w->al[s] - tau) / temp);
        size_t e = w->e0 + s;
        if (probe && probe->mode == 2) {
            w->zh[s] = probe->zhard[e];
            w->z[s] = w->zh[s] + (w->sig[s] - probe->sig[e]);
        } else {
            w->zh[s] = w->al[s] > tau;
            w->z[s] = w->zh[s];
            if (probe && probe->mode == 1) probe->zhard[e] = w->zh[s], probe->sig[e] = w->sig[s];
        }
    }
    for (int i = 0; i <= t; i++) w->own[i] = -1, w->sl[i] = w->lo[i];
    const float *gq = w->gq;
    for (int s = 0; s < w->nv; s++) {
        sekv_span sp = doc->span[s];
        int r = doc->rank[s];
        for (int u = 0; u < sp.len; u++) w->own[sp.start + u] = s;
        if (w->zh[s]) {   /* reconstructed rows: q.(U diag(m s) Vt)_u / sqrt d + ln z */
            const float *U = span_U(doc, w->l, w->j, s), *sK = span_s(doc->sK, doc, w->l, w->j, s);
            const double *m = w->mK + (size_t)s * R;
            double coef[SEKV_RMAX], lz = log(w->z[s]);
            for (int c = 0; c < r; c++) coef[c] = m[c] * sK[c] * gq[c];
            for (int u = 0; u < sp.len; u++) {
                double a = 0;
                for (int c = 0; c < r; c++) a += U[(size_t)u * r + c] * coef[c];
                w->sl[sp.start + u] = a + lz;
            }
        } else {
            w->cl[s] = w->cq[s] + log((double)sp.len) + log(1.0 - w->z[s]);
        }
        gq += r;
    }
    double mx = -INFINITY, mxa = -INFINITY, Z = 0, Za = 0;
    for (int i = 0; i <= t; i++) {
        mxa = fmax(mxa, w->lo[i]);
        if (w->own[i] < 0 || w->zh[w->own[i]]) mx = fmax(mx, w->sl[i]);
    }
    for (int s = 0; s < w->nv; s++)
        if (!w->zh[s]) mx = fmax(mx, w->cl[s]);
    for (int i = 0; i <= t; i++) {
        Za += w->ta[i] = exp(w->lo[i] - mxa);
        w->es[i] = w->own[i] < 0 || w->zh[w->own[i]] ? exp(w->sl[i] - mx) : 0.0;
        Z += w->es[i];
    }
    for (int s = 0; s < w->nv; s++) {
        w->ec[s] = w->zh[s] ? 0.0 : exp(w->cl[s] - mx);
        Z += w->ec[s];
    }
    for (int i = 0; i <= t; i++) w->ta[i] /= Za, w->es[i] /= Z;
    for (int s = 0; s < w->nv; s++) w->ec[s] /= Z;
    w->mx = mx, w->lnZ = log(Z), w->mxa = mxa, w->lnZa = log(Za);
}

/* Row totals for the loss report. */
typedef struct {
    double kl, bce, bz, nz, npos, tp, order, order_h;
} row_sums;

/* KL, BCE and z terms of one row, and the backward into dmK [nvmax][R] (this kv head),
 * dtau, dW (this head's [dp][d]) and qacc [nvmax][dp] (the key path, finished per head).
 * sc: 1/rows; sel: lambda_zoom/elems; bud: lambda_budget times the z weight (1/rows or
 * 1/elems). dmK == NULL: forward only. */
static void row_backward(row_t *w, const sekv_tparams *th, const sekv_loss_cfg *cfg, double sc,
                         double sel, double bud, double *dmK, double *dtau, double *dW, double *qacc,
                         row_sums *out) {
    const sekv_tdoc *doc = w->doc;
    int D = doc->d, R = doc->R, dp = th->dp, t = w->t;
    double isdp = 1.0 / sqrt((double)dp);
    double kl = 0;
    /* full-resolution tokens: KL only (no parameters) */
    for (int i = 0; i <= t; i++) {
        if (w->own[i] >= 0) continue;
        double la = w->lo[i] - w->mxa - w->lnZa;
        kl += w->ta[i] * (la - (w->sl[i] - w->mx - w->lnZ));
    }
    /* span order: the teacher's mass on the visible spans (tot) and the routing logits'
     * log-normaliser; the term is skipped where the teacher puts nothing there */
    double tot = 0, xm = -INFINITY, lzx = 0;
    int order = cfg->lambda_order > 0 && w->nv > 0;
    if (order) {
        for (int i = 0; i <= t; i++)
            if (w->own[i] >= 0) tot += w->ta[i];
        for (int s = 0; s < w->nv; s++) xm = fmax(xm, w->x[s]);
        for (int s = 0; s < w->nv; s++) lzx += exp(w->x[s] - xm);
        lzx = xm + log(lzx);
        order = tot > 0;
    }
    double dqhat[SEKV_DPRIME] = {0};
    const float *gq = w->gq;
    for (int s = 0; s < w->nv; s++) {
        sekv_span sp = doc->span[s];
        int r = doc->rank[s];
        double dz, A = 0;
        if (w->zh[s]) {
            const float *U = span_U(doc, w->l, w->j, s), *sK = span_s(doc->sK, doc, w->l, w->j, s);
            double dcoef[SEKV_RMAX] = {0}, dsum = 0;
            for (int u = 0; u < sp.len; u++) {
                int i = sp.start + u;
                double la = w->lo[i] - w->mxa - w->lnZa, lp = w->sl[i] - w->mx - w->lnZ;
                double a = w->ta[i], del = (w->es[i] - a) * sc;
                A += a;
                kl += a * (la - lp);
                dsum += del;
                for (int c = 0; c < r; c++) dcoef[c] += del * U[(size_t)u * r + c];
            }
            if (dmK)
                for (int c = 0; c < r; c++) dmK[(size_t)s * R + c] += dcoef[c] * sK[c] * gq[c];
            dz = dsum / w->z[s];                      /* d(ln z)/dz */
        } else {
            double lc = w->cl[s] - w->mx - w->lnZ, ll = log((double)sp.len);
            for (int u = 0; u < sp.len; u++) {
                int i = sp.start + u;
                double la = w->lo[i] - w->mxa - w->lnZa, a = w->ta[i];
                A += a;
                kl += a * (la - (lc - ll));
            }
            dz = -(w->ec[s] - A) * sc / (1.0 - w->z[s]);   /* d(ln(1-z))/dz */
        }
        gq += r;
        dz += bud;
        out->bz += w->z[s];
        out->nz += w->zh[s];
        out->npos += w->y[s];
        out->tp += w->y[s] && w->zh[s];
        double y = w->y[s], x = w->x[s], al = w->al[s];
        out->bce += cfg->w_pos * y * softplus(-x) + (1 - y) * softplus(x);
        double dord = 0;   /* d(CE)/dx_s = softmax_s - teacher share_s, weighted per row */
        if (order) {
            double ps = A / tot, lq = x - lzx;
            if (ps > 0) out->order -= ps * lq, out->order_h -= ps * log(ps);
            dord = cfg->lambda_order * sc * (exp(lq) - ps);
        }
        if (!dmK) continue;
        double ds = w->sig[s] * (1 - w->sig[s]) / cfg->temp;
        *dtau -= dz * ds;
        double dx = dz * ds * al * (1 - al) + sel * (-cfg->w_pos * y * (1 - al) + (1 - y) * al) + dord;
        for (int i = 0; i < dp; i++) {
            dqhat[i] += dx * w->khat[(size_t)s * dp + i] * isdp;
            qacc[(size_t)s * dp + i] += dx * w->qhat[i] * isdp;
        }
    }
    out->kl += kl;
    if (!dmK) return;
    for (int i = 0; i < dp; i++)
        for (int k = 0; k < D; k++) dW[(size_t)i * D + k] += dqhat[i] * w->q[k];
}

/* ---------------------------------------------------------------- one layer */

typedef struct {
    const sekv_tparams *th;
    const sekv_tdoc *doc;
    const int *sel;
    int n_sel;
    const sekv_loss_cfg *cfg;
    double lambda_b, sc, sel_w, kvw, kve;   /* budget weight, 1/rows, lambda_zoom/elems, 1/kv rows,
                                             * 1/(kv rows x visible spans) */
    double zw;                         /* weight of each z in the budget: 1/rows or 1/elems */
    sekv_tparams *grad;                /* NULL: loss only */
    const gate_t *gt;
    double *gate_g;                    /* [L][gate params] per-layer gate gradients */
    sekv_ste_probe *probe;
    double *acc;                       /* [L][ACC_N] per-layer sums */
    int *failed;                       /* [L] */
} loss_ctx;

enum { ACC_KL, ACC_BCE, ACC_BZ, ACC_NZ, ACC_POS, ACC_TP, ACC_RECON, ACC_BM, ACC_RANK, ACC_ORDER, ACC_ORDER_H, ACC_N };

static void layer_task(void *vc, int l) {
    loss_ctx *c = vc;
    const sekv_tparams *th = c->th;
    const sekv_tdoc *doc = c->doc;
    const sekv_loss_cfg *cfg = c->cfg;
    int H = doc->H, J = doc->Hkv, R = doc->R, D = doc->d, dp = th->dp, ns = doc->n_spans;
    int nvmax = 0, tmax = 0, want = c->grad != NULL;
    for (int k = 0; k < c->n_sel; k++) {
        int p = c->sel[k];
        nvmax = doc->nvis[p] > nvmax ? doc->nvis[p] : nvmax;
        tmax = doc->pos[p] > tmax ? doc->pos[p] : tmax;
    }
    size_t gcl = gate_cache_len(th), nJ = (size_t)J * nvmax, n1 = (size_t)nvmax + 1;
    double *mK = calloc(nJ * R + 1, 8), *mV = calloc(nJ * R + 1, 8), *dmK = calloc(nJ * R + 1, 8),
           *dmV = calloc(nJ * R + 1, 8), *cK = malloc((nJ * gcl + 1) * 8), *cV = malloc((nJ * gcl + 1) * 8),
           *khat = malloc(n1 * dp * 8), *unorm = malloc(n1 * 8), *qacc = malloc(n1 * dp * 8),
           *rx = malloc(n1 * 8), *ral = malloc(n1 * 8), *rsig = malloc(n1 * 8), *rz = malloc(n1 * 8),
           *rcl = malloc(n1 * 8), *rsl = malloc(((size_t)tmax + 1) * 8),
           *gwork = malloc(2 * (size_t)th->hidden * 8), *rta = malloc(((size_t)tmax + 1) * 8),
           *res = malloc(((size_t)tmax + 1) * 8), *rec = malloc(n1 * 8), *WT = malloc((size_t)D * dp * 8);
    uint8_t *rzh = malloc(n1);
    int32_t *own = malloc(((size_t)tmax + 1) * 4);
    int *cnt = calloc(n1, sizeof *cnt);
    double *acc = c->acc + (size_t)l * ACC_N;
    if (!mK || !mV || !dmK || !dmV || !cK || !cV || !khat || !unorm || !qacc || !rx || !ral ||
        !rsig || !rz || !rcl || !rsl || !gwork || !rzh || !own || !cnt || !rta || !res || !rec || !WT) {
        c->failed[l] = 1;
        goto done;
    }
    /* (1) rank gates of the spans this layer's rows can see */
    for (int j = 0; j < J; j++)
        for (int s = 0; s < nvmax; s++) {
            size_t o = (size_t)j * nvmax + s;
            const float *kb = doc->kbar + (((size_t)l * J + j) * ns + s) * D;
            gate_fwd(th, c->gt, span_s(doc->sK, doc, l, j, s), doc->rank[s], kb, mK + o * R, cK + o * gcl);
            gate_fwd(th, c->gt, span_s(doc->sV, doc, l, j, s), doc->rank[s], kb, mV + o * R, cV + o * gcl);
        }
    /* (2, 3) rows, head by head */
    for (int h = 0; h < H; h++) {
        int j = h / (H / J);
        transpose(th->W + ((size_t)l * H + h) * dp * D, dp, D, WT);
        for (int s = 0; s < nvmax; s++)
            unorm[s] = route_key(WT, doc->kbar + (((size_t)l * J + j) * ns + s) * D, D, dp, khat + (size_t)s * dp);
        memset(qacc, 0, n1 * dp * 8);
        double dtau = 0, *dW = want ? c->grad->W + ((size_t)l * H + h) * dp * D : NULL;
        for (int k = 0; k < c->n_sel; k++) {
            row_t w = {.x = rx, .al = ral, .sig = rsig, .z = rz, .zh = rzh, .own = own, .sl = rsl, .cl = rcl,
                       .ta = rta, .es = res, .ec = rec, .mK = mK + (size_t)j * nvmax * R, .khat = khat, .WT = WT};
            row_bind(&w, doc, c->sel[k], l, h);
            row_forward(&w, th, cfg->temp, c->probe);
            row_sums rs = {0};
            row_backward(&w, th, cfg, c->sc, c->sel_w, c->lambda_b * c->zw,
                         want ? dmK + (size_t)j * nvmax * R : NULL, &dtau, dW, qacc, &rs);
            acc[ACC_KL] += rs.kl, acc[ACC_BCE] += rs.bce, acc[ACC_BZ] += rs.bz, acc[ACC_NZ] += rs.nz;
            acc[ACC_POS] += rs.npos, acc[ACC_TP] += rs.tp, acc[ACC_ORDER] += rs.order, acc[ACC_ORDER_H] += rs.order_h;
        }
        if (!want) continue;
        c->grad->tau[(size_t)l * H + h] = dtau;
        /* key path: dL/du = (I - khat khat^T) qacc / |u|, u = W kbar */
        for (int s = 0; s < nvmax; s++) {
            if (!(unorm[s] > 0)) continue;
            const double *kh = khat + (size_t)s * dp, *qa = qacc + (size_t)s * dp;
            const float *kb = doc->kbar + (((size_t)l * J + j) * ns + s) * D;
            double pr = 0;
            for (int i = 0; i < dp; i++) pr += kh[i] * qa[i];
            for (int i = 0; i < dp; i++) {
                double v = (qa[i] - kh[i] * pr) / unorm[s];
                for (int k = 0; k < D; k++) dW[(size_t)i * D + k] += v * kb[k];
            }
        }
    }
    /* (4) reconstruction and rank-budget terms, weighted by how many rows see the span */
    for (int k = 0; k < c->n_sel; k++)
        for (int s = 0; s < doc->nvis[c->sel[k]]; s++) cnt[s]++;
    for (int j = 0; j < J; j++)
        for (int s = 0; s < nvmax; s++) {
            size_t o = ((size_t)j * nvmax + s) * R;
            const float *sk = span_s(doc->sK, doc, l, j, s), *sv = span_s(doc->sV, doc, l, j, s);
            int r = doc->rank[s];
            /* gate_norm 1: s^2 as shares of the span's energy and the weight per (span, direction)
             * pair so that both terms are means over spans; gate_norm 0 leaves f = 1 (exact) */
            double wt = cnt[s] * c->kvw, fk = 1, fv = 1;
            if (cfg->gate_norm) {
                double ek = 0, ev = 0;
                for (int q = 0; q < r; q++) ek += (double)sk[q] * sk[q], ev += (double)sv[q] * sv[q];
                wt = r > 0 ? cnt[s] * c->kve / (2.0 * r) : 0;
                fk = ek > 0 ? 2.0 * r / ek : 0, fv = ev > 0 ? 2.0 * r / ev : 0;
            }
            for (int q = 0; q < r; q++) {
                double mk = mK[o + q], mv = mV[o + q], k2 = fk * sk[q] * sk[q], v2 = fv * sv[q] * sv[q];
                acc[ACC_RECON] += wt * ((1 - mk) * (1 - mk) * k2 + (1 - mv) * (1 - mv) * v2);
                acc[ACC_BM] += wt * (mk + mv);
                acc[ACC_RANK] += cnt[s] * mk;
                if (!want) continue;
                dmK[o + q] += wt * (-2 * cfg->lambda_recon * (1 - mk) * k2 + c->lambda_b * cfg->beta);
                dmV[o + q] += wt * (-2 * cfg->lambda_recon * (1 - mv) * v2 + c->lambda_b * cfg->beta);
            }
        }
    /* (5) through the gate MLP */
    if (want) {
        double *gg = c->gate_g + (size_t)l * gate_param_len(th);
        for (size_t o = 0; o < nJ; o++) {
            int s = (int)(o % (size_t)nvmax);
            gate_bwd(th, cK + o * gcl, mK + o * R, dmK + o * R, doc->rank[s], gg, gwork);
            gate_bwd(th, cV + o * gcl, mV + o * R, dmV + o * R, doc->rank[s], gg, gwork);
        }
    }
done:
    free(mK), free(mV), free(dmK), free(dmV), free(cK), free(cV), free(khat), free(unorm), free(qacc);
    free(rx), free(ral), free(rsig), free(rz), free(rcl), free(rsl), free(gwork), free(rzh), free(own);
    free(cnt), free(rta), free(res), free(rec), free(WT);
}

/* ---------------------------------------------------------------- the loss */

int sekv_train_loss(const sekv_tparams *th, const sekv_tdoc *doc, const int *sel, int n_sel,
                    const sekv_loss_cfg *cfg, double lambda_b, sekv_tparams *grad,
                    sekv_loss_parts *parts, sekv_ste_probe *probe) {
    if (th->L != doc->L || th->H != doc->H || th->d != doc->d || th->R != doc->R ||
        (grad && (grad->n != th->n || grad->L != th->L)))
        return -1;
    int L = doc->L, *all = NULL;
    if (!sel) {
        n_sel = doc->n_pos;
        all = malloc((size_t)(n_sel > 0 ? n_sel : 1) * sizeof *all);
        if (!all) return -1;
        for (int k = 0; k < n_sel; k++) all[k] = k;
        sel = all;
    }
    for (int k = 0; k < n_sel; k++)
        if (sel[k] < 0 || sel[k] >= doc->n_pos) {
            free(all);
            return -1;
        }
    double rows = (double)n_sel * L * doc->H, kvrows = (double)n_sel * L * doc->Hkv, vis = 0;
    for (int k = 0; k < n_sel; k++) vis += doc->nvis[sel[k]];
    double elems = vis * L * doc->H, kvelems = vis * L * doc->Hkv;
    size_t gpl = gate_param_len(th);
    loss_ctx c = {.th = th, .doc = doc, .sel = sel, .n_sel = n_sel, .cfg = cfg, .lambda_b = lambda_b,
                  .sc = rows > 0 ? 1 / rows : 0, .sel_w = elems > 0 ? cfg->lambda_zoom / elems : 0,
                  .kvw = kvrows > 0 ? 1 / kvrows : 0,
                  .kve = kvelems > 0 ? 1 / kvelems : 0, .grad = grad, .probe = probe};
    c.zw = cfg->budget_per_span ? (elems > 0 ? 1 / elems : 0) : c.sc;
    c.acc = calloc((size_t)L * ACC_N, sizeof *c.acc);
    c.failed = calloc((size_t)L, sizeof *c.failed);
    if (grad) {
        sekv_tparams_zero(grad);
        c.gate_g = calloc((size_t)L * gpl, sizeof *c.gate_g);
    }
    gate_t gt = {0};
    c.gt = &gt;
    int rc = 0;
    if (!c.acc || !c.failed || (grad && !c.gate_g) || gate_t_make(th, &gt)) rc = -1;
    if (!rc && n_sel > 0) kb_parallel_for(L, layer_task, &c);
    double a[ACC_N] = {0};
    for (int l = 0; l < L && !rc; l++) {
        if (c.failed[l]) rc = -1;
        for (int i = 0; i < ACC_N; i++) a[i] += c.acc[(size_t)l * ACC_N + i];
        if (grad)
            for (size_t i = 0; i < gpl; i++) grad->g_w1[i] += c.gate_g[(size_t)l * gpl + i];
    }
    if (parts && !rc) {
        sekv_loss_parts o = {.rows = (long)rows, .elems = (long)elems};
        o.kl = a[ACC_KL] * c.sc;
        o.zoom = elems > 0 ? a[ACC_BCE] / elems : 0;
        o.recon = a[ACC_RECON];
        o.budget = a[ACC_BZ] * c.zw + cfg->beta * a[ACC_BM];
        o.order = a[ACC_ORDER] * c.sc;
        o.order_floor = a[ACC_ORDER_H] * c.sc;
        o.total = o.kl + cfg->lambda_zoom * o.zoom + cfg->lambda_recon * o.recon + lambda_b * o.budget +
                  cfg->lambda_order * o.order;
        o.expand = elems > 0 ? a[ACC_NZ] / elems : 0;
        o.pos_rate = elems > 0 ? a[ACC_POS] / elems : 0;
        o.recall = a[ACC_POS] > 0 ? a[ACC_TP] / a[ACC_POS] : 0;
        o.precision = a[ACC_NZ] > 0 ? a[ACC_TP] / a[ACC_NZ] : 0;
        o.eff_rank = vis > 0 ? a[ACC_RANK] / (vis * L * doc->Hkv) : 0;
        *parts = o;
    }
    free(c.acc), free(c.failed), free(c.gate_g), free(all), free(gt.w1t);
    return rc;
}

/* ---------------------------------------------------------------- checks */

int sekv_train_row_probs(const sekv_tparams *th, const sekv_tdoc *doc, int p, int l, int h,
                         double *probs, uint8_t *zout) {
    int R = doc->R, D = doc->d, dp = th->dp, ns = doc->n_spans, J = doc->Hkv, j = h / (doc->H / J);
    int nv = doc->nvis[p], t = doc->pos[p];
    size_t n1 = (size_t)nv + 1;
    double *mK = calloc(n1 * R, 8), *cache = malloc(gate_cache_len(th) * 8), *khat = malloc(n1 * dp * 8),
           *rx = malloc(n1 * 8), *ral = malloc(n1 * 8), *rsig = malloc(n1 * 8), *rz = malloc(n1 * 8),
           *rcl = malloc(n1 * 8), *rsl = malloc(((size_t)t + 1) * 8), *rta = malloc(((size_t)t + 1) * 8),
           *res = malloc(((size_t)t + 1) * 8), *rec = malloc(n1 * 8), *WT = malloc((size_t)D * dp * 8);
    uint8_t *rzh = malloc(n1);
    int32_t *own = malloc(((size_t)t + 1) * 4);
    gate_t gt = {0};
    int n = -1;
    if (mK && cache && khat && rx && ral && rsig && rz && rcl && rsl && rzh && own && rta && res && rec && WT &&
        !gate_t_make(th, &gt)) {
        transpose(th->W + ((size_t)l * doc->H + h) * dp * D, dp, D, WT);
        for (int s = 0; s < nv; s++) {
            const float *kb = doc->kbar + (((size_t)l * J + j) * ns + s) * D;
            gate_fwd(th, &gt, span_s(doc->sK, doc, l, j, s), doc->rank[s], kb, mK + (size_t)s * R, cache);
            route_key(WT, kb, D, dp, khat + (size_t)s * dp);
        }
        row_t w = {.x = rx, .al = ral, .sig = rsig, .z = rz, .zh = rzh, .own = own, .sl = rsl, .cl = rcl,
                   .ta = rta, .es = res, .ec = rec, .mK = mK, .khat = khat, .WT = WT};
        row_bind(&w, doc, p, l, h);
        row_forward(&w, th, 0.1, NULL);
        n = 0;
        for (int i = 0; i <= t; i++)
            if (own[i] < 0) probs[n++] = res[i];
        for (int s = 0; s < nv; s++) {
            if (zout) zout[s] = rzh[s];
            if (!rzh[s]) probs[n++] = rec[s];
            else
                for (int u = 0; u < doc->span[s].len; u++) probs[n++] = res[doc->span[s].start + u];
        }
    }
    free(mK), free(cache), free(khat), free(rx), free(ral), free(rsig), free(rz), free(rcl), free(rsl);
    free(rzh), free(own), free(rta), free(res), free(rec), free(WT), free(gt.w1t);
    return n;
}
