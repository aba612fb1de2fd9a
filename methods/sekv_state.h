/* SeKV's state, shared by sekv.c (setup, ingest, accounting) and sekv_decode.c (append,
 * compaction, zoom-in attention). Not a public header: use sekv.h. */
#ifndef KV_SEKV_STATE_H
#define KV_SEKV_STATE_H
#include "sekv.h"

/* One span's factors for one kv head (slow tier) and its gate masks. */
typedef struct {
    float *buf;                 /* fk's and fv's arrays */
    sekv_factor fk, fv;
    float mk[SEKV_RMAX], mv[SEKV_RMAX];
} sekv_basis;

/* One kv head of one layer: K/V rows. Rows [0, n_rows) are the persistent rows, in
 * position order (a full-resolution token, or a span's coarse row at its start); rows
 * [n_rows, n_rows + n_recon) hold the spans reconstructed at the last attend(). */
typedef struct {
    float *K, *V;               /* [row_cap][d] */
    sekv_basis *basis;          /* [span_cap] */
    int n_recon;
} sekv_kvh;

typedef struct {
    int ingested, steps;
    int n_rows, row_cap;        /* persistent rows (same structure in every kv head) */
    int32_t *row_span;          /* [row_cap] -1 full resolution, else the span index */
    int32_t *row_pos;           /* [row_cap] position (a span's start for coarse rows) */
    int ns, span_cap;
    sekv_span *span;            /* [span_cap] */
    int32_t *span_row;          /* [span_cap] the row of span s's coarse entry */
    float *khat;                /* [H][span_cap][dp] routing keys */
    int total, frontier;        /* tokens seen; positions < frontier are settled */
    sekv_kvh *kv;               /* [Hkv] */
    /* last step */
    int32_t *sel;               /* [Hkv][span_cap] spans reconstructed per group */
    int *n_sel;                 /* [Hkv] */
    int32_t *recon_row;         /* [Hkv][span_cap] first reconstructed row of span s, -1 */
    uint8_t *zoom_h;            /* [H][span_cap] span expanded for head h */
    double *kept;               /* [H] entries attended */
    long *events;               /* [H] expansions so far */
} sekv_layer;

struct kv_state {
    int L, H, Hkv, d, g, eb, n_prompt, B;
    /* parameters */
    double alpha;               /* < 0: auto */
    int l_min, l_max, sinks, local, rank, zoom, trained_zoom, fixed_chunk, gate;
    /* l_max, local: -1 = auto until the first ingest, then the values chosen */
    int lmax_auto, local_auto, lmin_given;
    double tau_override;        /* < 0: from the params */
    char params_file[512];      /* "" = untrained initial values */
    int params_default;         /* params_file is the default file, found for this model */
    sekv_params prm;
    /* chosen at the first ingest */
    sekv_seg seg;
    int have_seg, lmin_used;
    double alpha_used, threshold;
    float *surp;                /* [surp_cap] surprisal by position */
    int surp_cap;
    sekv_layer *layer;          /* [L] */
    /* accounting */
    size_t slow_bytes, slow_peak, fast_peak;
    int warned_over;
    sekv_zoom_event *zlog;
    size_t n_zlog, zlog_cap, zlog_step_start;
    /* decode scratch */
    float *scores;              /* [H][span_cap] */
    int scores_cap;
    int32_t *idx;               /* [entries] */
    float *bias;
    int idx_cap;
};

/* sekv.c */
int  sekv_grow_rows(kv_state *st, sekv_layer *ly, int need);
int  sekv_grow_spans(kv_state *st, sekv_layer *ly, int need);
/* Builds span s of a layer for kv head j from its rows K, V [len][d] and surprisal
 * [len]: the coarse entry (into kbar, vbar), the factors and gate masks (basis[s]) and
 * the routing keys of the group's query heads. Thread safe across (s, j). 0 or -1
 * (out of memory / SVD failure). */
int  sekv_build_span(kv_state *st, int layer, int s, int j, const float *K, const float *V,
                     const float *surp, float *kbar, float *vbar);
void sekv_refresh_span_rows(sekv_layer *ly);
void sekv_track_peak(kv_state *st, size_t extra_fast);
size_t sekv_fast_bytes(const kv_state *st, size_t *aux, long *tokens);
/* Runs fn(ctx, i) for i < n on the worker threads (the span work is plain C: factors by
 * sekv_svd, never the backend's svd). */
void sekv_par_for(int n, void (*fn)(void *, int), void *ctx);

/* sekv_fold.c */
void sekv_keep_budget(kv_state *st, int layer);
void sekv_die(const char *what, int layer);

/* sekv_decode.c */
void sekv_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);
void sekv_attend(kv_state *st, int layer, const float *q, float *out);

#endif
