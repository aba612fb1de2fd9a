/* SeKV training data from the frozen model (reference §8 "Training"): prefill a document
 * once, capture every layer's queries at evenly spaced candidate positions by decoding
 * the document's own token there through a private "capture" kv_method (exact full
 * attention over the prefill's K/V: the teacher), keep the candidates whose attention
 * lies furthest back, and build the sekv_tdoc the loss trains on. */
#ifndef KV_SEKV_TEACHER_H
#define KV_SEKV_TEACHER_H
#include <stdint.h>
#include "../../../model/model.h"
#include "sekv_train.h"

typedef struct {
    int candidates;       /* evenly spaced candidate positions (reference: 512) */
    int keep;             /* mined positions kept (reference: 64) */
    int window;           /* far = more than this many tokens back; 0 = n/16 (reference: 512 at 8K) */
    double alpha;         /* segmentation: anchor threshold mu + alpha*sigma */
    int l_min, l_max, sinks, local, rank;
    double rho;           /* coverage level */
    /* fit_budget > 0: alpha is fitted per document as the sekv method fits it per prompt
     * (the smallest alpha on grid_lo:grid_hi:grid_step whose persistent part P is at most
     * p_max * B, B = floor(fit_budget * n)); `alpha` is then unused. When none fits, the
     * largest alpha on the grid is used (and reported). */
    double fit_budget, p_max, grid_lo, grid_hi, grid_step;
} sekv_teacher_cfg;

/* Candidates 64, keep 16, window n/16, alpha 1.0, and the sekv method's (the paper's)
 * defaults: l_min 4, spans the maximal runs between anchors (no l_max), no sinks or local
 * window beyond token 0, rank 32; rho 0.9. */
sekv_teacher_cfg sekv_teacher_defaults(void);

typedef struct {
    int n, n_spans, n_cand, n_kept;
    double far_best, far_last;   /* far shares of the best and the last kept candidate */
    double prefill_s, decode_s, build_s;
    double alpha;                /* the alpha the segmentation used (fitted or given) */
    int persistent, fit_cap;     /* its P, and p_max*B when fitted (0 otherwise) */
} sekv_teacher_stats;

/* The fitted segmentation (see fit_budget above) of surprisal[0..n): fills seg and
 * *alpha; returns 1 when an alpha on the grid fits, 0 when none does (seg is then the
 * largest alpha's), -1 when segmenting fails. */
int sekv_teacher_fit(const float *surprisal, int n, const sekv_teacher_cfg *c, sekv_seg *seg, double *alpha);

/* One capture: decodes ids[t] at position t through the capture method, attending over
 * pf's rows [0, t) (pf holds at least t tokens) plus the token's own; writes every
 * layer's queries q [L][H][d], the logits [n_vocab] and the far share: the attention mass
 * more than `window` tokens back over the mass on [0, t), all layers and heads.
 * 0, or -1 (decode failed / out of memory). */
int sekv_teacher_capture(kv_model *m, const kv_prefill_out *pf, const int32_t *ids, int t,
                         int window, float *q, float *logits, double *far_share);

/* Builds out from the document ids[0..n). 0, or -1 with err. */
int sekv_teacher_doc(kv_model *m, const int32_t *ids, int n, const sekv_teacher_cfg *c,
                     sekv_tdoc *out, sekv_teacher_stats *st, char *err, size_t errlen);

/* A 64-bit key of everything a document's data depends on (model, ids, cfg, R), for
 * cache file names. */
uint64_t sekv_teacher_key(uint64_t model_hash, const int32_t *ids, int n,
                          const sekv_teacher_cfg *c);

#endif
