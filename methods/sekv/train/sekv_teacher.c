/* SeKV teacher data: prefill, query capture at candidate positions, mining (see
 * sekv_teacher.h). */
#include "sekv_teacher.h"
#include "../../../kernels/core.h"
#include "../../../kernels/host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sekv_teacher_cfg sekv_teacher_defaults(void) {
    return (sekv_teacher_cfg){.candidates = 64, .keep = 16, .window = 0, .alpha = 1.0, .l_min = 4,
                              .l_max = SEKV_LMAX_NONE, .sinks = 0, .local = 0, .rank = 32, .rho = 0.9,
                              .fit_budget = 0, .p_max = 0.2, .grid_lo = 0.5, .grid_hi = 8, .grid_step = 0.25};
}

/* ---------------------------------------------------------------- the capture method */

/* Rows [0, t) of every layer come from the prefill; append() supplies row t. attend()
 * records the queries and answers with exact full attention (the teacher), adding up
 * the attention mass that lies more than `window` tokens back. */
struct kv_state {
    const kv_prefill_out *pf;
    int t, window, L, H, Hkv, d;
    float *q;             /* [L][H][d] captured queries */
    float *knew, *vnew;   /* [L][Hkv][d] the decoded token's own row */
    double *far, *tot;    /* [H] per head, summed over layers */
    /* attend() arguments, for the per-head workers */
    int layer;
    const float *qin;
    float *out;
    float *scratch;       /* [H][t+1] */
};

static void cap_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    (void)t;
    size_t o = (size_t)layer * st->Hkv * st->d;
    memcpy(st->knew + o, k, (size_t)st->Hkv * st->d * sizeof *k);
    memcpy(st->vnew + o, v, (size_t)st->Hkv * st->d * sizeof *v);
}

static void cap_head(void *ctx, int h) {
    kv_state *st = ctx;
    int d = st->d, t = st->t, l = st->layer, j = h / (st->H / st->Hkv), n = st->pf->n;
    const float *q = st->qin + (size_t)h * d;
    const float *K = st->pf->K + ((size_t)l * st->Hkv + j) * n * d;
    const float *V = st->pf->V + ((size_t)l * st->Hkv + j) * n * d;
    const float *kn = st->knew + ((size_t)l * st->Hkv + j) * d, *vn = st->vnew + ((size_t)l * st->Hkv + j) * d;
    float *p = st->scratch + (size_t)h * (t + 1);
    double scale = 1.0 / sqrt((double)d), mx = -INFINITY, sum = 0;
    for (int i = 0; i <= t; i++) {
        const float *k = i < t ? K + (size_t)i * d : kn;
        double a = 0;
        for (int c = 0; c < d; c++) a += (double)q[c] * k[c];
        p[i] = (float)(a * scale);
        mx = p[i] > mx ? p[i] : mx;
    }
    double acc[512] = {0};   /* d <= 512 (checked at setup) */
    for (int i = 0; i <= t; i++) {
        double e = exp(p[i] - mx);
        sum += e;
        p[i] = (float)e;
        const float *v = i < t ? V + (size_t)i * d : vn;
        for (int c = 0; c < d; c++) acc[c] += e * v[c];
    }
    double far = 0, tot = 0;
    for (int i = 0; i < t; i++) {   /* the reference excludes the query's own token */
        tot += p[i] / sum;
        if (i < t - st->window) far += p[i] / sum;
    }
    st->far[h] += far, st->tot[h] += tot;
    for (int c = 0; c < d; c++) st->out[(size_t)h * d + c] = (float)(acc[c] / sum);
}

static void cap_attend(kv_state *st, int layer, const float *q, float *out) {
    memcpy(st->q + (size_t)layer * st->H * st->d, q, (size_t)st->H * st->d * sizeof *q);
    st->layer = layer, st->qin = q, st->out = out;
    kb_parallel_for(st->H, cap_head, st);
}

/* Only append and attend are ever called: model_decode drives this state directly. */
static const kv_method capture_method = {
    .name = "sekv-teacher-capture",
    .summary = "records queries, attends exactly over the prefill (training only)",
    .append = cap_append,
    .attend = cap_attend,
};

int sekv_teacher_capture(kv_model *m, const kv_prefill_out *pf, const int32_t *ids, int t,
                         int window, float *q, float *logits, double *far_share) {
    const kv_model_config *cfg = model_config(m);
    int L = cfg->n_layer, H = cfg->n_head, Hkv = cfg->n_head_kv, d = cfg->head_dim;
    if (t < 0 || t > pf->n || d > 512 || pf->n_layer != L || pf->head_dim != d) return -1;
    kv_state cap = {.pf = pf, .t = t, .window = window, .L = L, .H = H, .Hkv = Hkv, .d = d, .q = q};
    cap.knew = malloc((size_t)L * Hkv * d * sizeof *cap.knew);
    cap.vnew = malloc((size_t)L * Hkv * d * sizeof *cap.vnew);
    cap.far = calloc((size_t)H, sizeof *cap.far), cap.tot = calloc((size_t)H, sizeof *cap.tot);
    cap.scratch = malloc((size_t)H * (t + 1) * sizeof *cap.scratch);
    int rc = -1;
    if (cap.knew && cap.vnew && cap.far && cap.tot && cap.scratch) {
        kv_token info = {t, t < pf->n ? pf->surprisal[t] : 0.0f, t < pf->n && pf->sent_end ? pf->sent_end[t] : 0};
        rc = model_decode(m, &capture_method, &cap, ids[t], t, &info, logits) ? -1 : 0;
        double far = 0, tot = 0;
        for (int h = 0; h < H; h++) far += cap.far[h], tot += cap.tot[h];
        *far_share = tot > 0 ? far / tot : 0;
    }
    free(cap.knew), free(cap.vnew), free(cap.far), free(cap.tot), free(cap.scratch);
    return rc;
}

/* ---------------------------------------------------------------- one document */

uint64_t sekv_teacher_key(uint64_t model_hash, const int32_t *ids, int n, const sekv_teacher_cfg *c) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *b;
#define MIX(ptr, len) for (b = (const unsigned char *)(ptr); b < (const unsigned char *)(ptr) + (len); b++) h = (h ^ *b) * 0x100000001b3ULL
    const char tag[] = "sekv-teacher-v2";
    MIX(tag, sizeof tag);
    MIX(&model_hash, sizeof model_hash);
    MIX(&n, sizeof n);
    MIX(ids, (size_t)n * sizeof *ids);
    int iv[8] = {c->candidates, c->keep, c->window, c->l_min, c->l_max, c->sinks, c->local, c->rank};
    double dv[7] = {c->fit_budget > 0 ? 0 : c->alpha, c->rho, c->fit_budget, c->p_max, c->grid_lo, c->grid_hi,
                    c->grid_step};
    MIX(iv, sizeof iv);
    MIX(dv, sizeof dv);
#undef MIX
    return h;
}

int sekv_teacher_fit(const float *surprisal, int n, const sekv_teacher_cfg *c, sekv_seg *seg, double *alpha) {
    int cap = (int)floor(c->p_max * (double)(c->fit_budget * n >= 1 ? floor(c->fit_budget * n) : 1));
    int steps = (int)floor((c->grid_hi - c->grid_lo) / c->grid_step + 1e-9);
    for (int i = 0; i <= steps; i++) {   /* the grid ascending, as the method walks it */
        double a = c->grid_lo + i * c->grid_step;
        if (sekv_segment_ex(surprisal, n, a, c->l_min, c->l_max, 0, c->sinks, c->local, seg)) return -1;
        *alpha = a;
        if (sekv_seg_persistent(seg) <= cap) return 1;
        if (i < steps) sekv_seg_free(seg);
    }
    return 0;
}

int sekv_teacher_doc(kv_model *m, const int32_t *ids, int n, const sekv_teacher_cfg *c,
                     sekv_tdoc *out, sekv_teacher_stats *stats, char *err, size_t errlen) {
    const kv_model_config *cfg = model_config(m);
    int L = cfg->n_layer, H = cfg->n_head, Hkv = cfg->n_head_kv, d = cfg->head_dim;
    memset(out, 0, sizeof *out);
    sekv_teacher_stats st0 = {.n = n};
    if (n < 16 || c->candidates < 1 || c->keep < 1 || d > 512) {
        snprintf(err, errlen, "sekv teacher: document of %d tokens / settings unusable", n);
        return -1;
    }
    double t0 = kb_now_s();
    kv_needs needs = {0};
    kv_prefill_out pf;
    if (model_prefill(m, ids, n, &needs, &pf, err, errlen)) return -1;
    st0.prefill_s = kb_now_s() - t0;

    int rc = -1, window = c->window > 0 ? c->window : (n / 16 > 1 ? n / 16 : 1);
    sekv_seg seg = {0};
    int32_t *cand = malloc((size_t)c->candidates * sizeof *cand), *kept = NULL;
    double *score = malloc((size_t)c->candidates * sizeof *score);
    float *Qc = malloc((size_t)c->candidates * L * H * d * sizeof *Qc), *Qk = NULL;
    float *logits = malloc((size_t)cfg->n_vocab * sizeof *logits);
    if (!cand || !score || !Qc || !logits) {
        snprintf(err, errlen, "sekv teacher: out of memory");
        goto done;
    }
    st0.alpha = c->alpha;
    if (c->fit_budget > 0) {
        st0.fit_cap = (int)floor(c->p_max * floor(c->fit_budget * n));
        if (sekv_teacher_fit(pf.surprisal, n, c, &seg, &st0.alpha) < 0) {
            snprintf(err, errlen, "sekv teacher: segmentation failed");
            goto done;
        }
    } else if (sekv_segment_ex(pf.surprisal, n, c->alpha, c->l_min, c->l_max, 0, c->sinks, c->local, &seg)) {
        snprintf(err, errlen, "sekv teacher: segmentation failed");
        goto done;
    }
    st0.n_spans = seg.n_spans;
    st0.persistent = sekv_seg_persistent(&seg);
    /* queries and far shares at the candidates */
    t0 = kb_now_s();
    int nc = sekv_candidates(n, c->candidates, cand);
    for (int k = 0; k < nc; k++)
        if (sekv_teacher_capture(m, &pf, ids, cand[k], window, Qc + (size_t)k * L * H * d, logits, &score[k])) {
            snprintf(err, errlen, "sekv teacher: decode at position %d failed", cand[k]);
            goto done;
        }
    st0.n_cand = nc;
    st0.decode_s = kb_now_s() - t0;
    /* keep the most far-reaching candidates */
    t0 = kb_now_s();
    kept = malloc((size_t)nc * sizeof *kept);
    Qk = malloc((size_t)nc * L * H * d * sizeof *Qk);
    if (!kept || !Qk) {
        snprintf(err, errlen, "sekv teacher: out of memory");
        goto done;
    }
    int nk = sekv_mine(cand, score, nc, c->keep, kept);
    st0.far_best = 0, st0.far_last = 1;
    for (int i = 0; i < nk; i++) {
        int k = 0;
        while (cand[k] != kept[i]) k++;
        memcpy(Qk + (size_t)i * L * H * d, Qc + (size_t)k * L * H * d, (size_t)L * H * d * sizeof *Qk);
        st0.far_best = fmax(st0.far_best, score[k]);
        st0.far_last = fmin(st0.far_last, score[k]);
    }
    st0.n_kept = nk;
    if (sekv_tdoc_build(out, pf.K, pf.V, pf.surprisal, n, L, Hkv, d, H, &seg, c->rank, c->local, kept, nk, Qk,
                        c->rho, err, errlen))
        goto done;
    st0.build_s = kb_now_s() - t0;
    rc = 0;
done:
    if (stats) *stats = st0;
    sekv_seg_free(&seg);
    free(cand), free(kept), free(score), free(Qc), free(Qk), free(logits);
    prefill_out_free(&pf);
    return rc;
}
