/* SeKV's state, shared by sekv.c (setup, ingest, accounting) and sekv_decode.c (append,
 * compaction, zoom-in attention). Not a public header: use sekv.h. */
#ifndef KV_SEKV_STATE_H
#define KV_SEKV_STATE_H
/* The words of sekv's refusal on a model file with no trained parameters (sekv.c
 * refuse_untrained); the run key's trained_file reads it as "no file" (sekv_door.c). */
#define SEKV_NO_PARAMS "no trained parameters for this model"
#include "sekv.h"
#include "../../kernels/core.h"

/* sekv's p_max: the share of B the segmentation alone may take (tuned on NIAH dev cases,
 * docs/sekv-results.md) */
#define SEKV_PAPER_P "0.2"
/* alpha=auto's grid when the method declares no alpha_grid (sekv-spread) */
#define SEKV_GRID_MAX 128

/* fixed_chunk=same: the C8 ablation at the surprisal segmentation's anchor count */
#define SEKV_CHUNK_SAME (-1)

/* One span's slow-tier store for one kv head and its gate masks: the factors (buf holds
 * fk's and fv's arrays), or, when rows is set (sekv_store_rows: no larger), the rows the
 * gated factors rebuild, K [len][d] then V [len][d] (fk, fv keep len, d, r only). */
typedef struct {
    float *buf;
    sekv_factor fk, fv;
    float mk[SEKV_RMAX], mv[SEKV_RMAX];
    int rows;
} sekv_basis;

/* One kv head of one layer: K/V rows. Rows [0, n_rows) are the persistent rows, in
 * position order (a full-resolution token, or a span's coarse row at its start); rows
 * [n_rows, n_rows + n_recon) hold the spans reconstructed at the last attend(). */
typedef struct {
    float *K, *V;               /* [row_cap][d] */
    sekv_basis *basis;          /* [span_cap] */
    int n_recon;
    /* CUDA backend (sekv_dev.c): the device copy of these rows (a struct kb_kvdev) and its
     * valid mark: rows [0, dev_valid) are unchanged since they were last uploaded. */
    void *dev;
    int dev_valid;
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
    float *kspread;              /* route=1: [Hkv][span_cap][2][d] the span's top-2 key directions about kbar, times their rms */
    int total, frontier;        /* tokens seen; positions < frontier are settled */
    sekv_kvh *kv;               /* [Hkv] */
    /* last step */
    int32_t *sel;               /* [Hkv][span_cap] spans reconstructed per group */
    int *n_sel;                 /* [Hkv] */
    int32_t *recon_row;         /* [Hkv][span_cap] first reconstructed row of span s, -1 */
    uint8_t *zoom_h;            /* [H][span_cap] span expanded for head h */
    uint8_t *why;               /* [H][span_cap] sekv_why_code of span s for head h */
    double *kept;               /* [H] entries attended */
    long *events;               /* [H] expansions so far */
} sekv_layer;

struct kv_state {
    const kv_method *m;         /* kv_sekv, kv_sekv_ref or kv_sekv_spread: the parameter defaults */
    int L, H, Hkv, d, g, eb, n_prompt, B;
    int kvt;                    /* the K/V element type (kb_kvtype); eb its bytes */
    int hold;                   /* --decode hold: fold decoded tokens to keep P <= B (else append) */
    /* parameters */
    double alpha;               /* < 0: auto */
    double grid[SEKV_GRID_MAX];  /* alpha=auto's candidates, ascending */
    int n_grid;
    char grid_text[64];         /* alpha_grid as given ("" when the method has none) */
    int l_min, l_max, sinks, local, rank, zoom, trained_zoom, fixed_chunk, gate, route;
    double p_max;               /* P <= p_max * B after ingest */
    int uncapped;               /* no budget: P unchecked, every span over tau expands */
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
    /* CUDA backend (sekv_dev.c) */
    int pinned;                 /* factor buffers from kb_cuda_host_alloc, through the arena */
    struct sekv_arena *arena;   /* pinned blocks (sekv_dev.c); NULL when not pinned */
    int dev_off;                /* the device path failed: host rows from now on */
    void *dev;                  /* staging of the span factors (a kb_spans_dev) */
    void *dev_spans;            /* [dev_spans_cap] scratch span list */
    int dev_spans_cap;
};

/* Storage of the K/V type: SeKV's rows (anchors, decoded tokens, coarse span rows) and
 * its span factors hold exactly the values the type stores, rounded where they are
 * written, and are accounted at eb bytes an element; the buffers themselves are f32
 * (the decode reads them as such). */
static inline void sekv_round_rows(const kv_state *st, float *rows, int n) {
    kb_kv_round_rows(st->kvt, rows, (size_t)n * st->d);
}

/* Rows from r on changed or moved: the device copies upload them again at the next attend. */
static inline void sekv_rows_moved(const kv_state *st, sekv_layer *ly, int r) {
    for (int j = 0; ly->kv && j < st->Hkv; j++)
        if (ly->kv[j].dev_valid > r) ly->kv[j].dev_valid = r;
}

/* sekv.c */
/* init with m's parameter defaults (kv_sekv, kv_sekv_ref, kv_sekv_spread) */
kv_state *sekv_init_as(const kv_method *m, const kv_setup *s, char *err, size_t errlen);
/* the rest of kv_sekv's table, shared by kv_sekv_spread */
void sekv_needs(const kv_setup *s, kv_needs *out);
/* sekv_door.c: the door's optional members, for every SeKV table */
double sekv_door_slow_rows(const kv_state *st, int layer);
size_t sekv_door_events(const kv_state *st, kv_event *out, size_t cap);
size_t sekv_door_trained(const kv_setup *s, char *detail, size_t len);
/* the trained-parameters file a setup of kv_sekv loads (the run identity hashes it) */
int sekv_door_trained_file(const kv_setup *s, char *path, size_t len);
int sekv_ref_trained_file(const kv_setup *s, char *path, size_t len);
int sekv_spread_trained_file(const kv_setup *s, char *path, size_t len);
/* the commands SeKV brings (sekv-probe, train-sekv) and its paper (sekv_paper.c) */
extern const kv_command sekv_commands[];
extern const kv_paper sekv_paper;
/* tools/sekv_probe.c */
int sekv_probe_main(int argc, char **argv);
/* train/train_sekv.c */
int cmd_train_sekv(int argc, char **argv);
#define SEKV_DOOR_HOOKS                                                                                \
    .slow_rows = sekv_door_slow_rows, .params_used = sekv_params_used, .events = sekv_door_events,   \
    .describe = sekv_describe, .trained_params = sekv_door_trained, .paper = &sekv_paper
/* Everything of a SeKV table after name, summary, params and init: the same code for sekv,
 * sekv-ref and sekv-spread, which differ only in their defaults. */
#define SEKV_TABLE_REST                                                                              \
    .needs = sekv_needs, .ingest = sekv_ingest, .needs_surprisal = 1, .append = sekv_append,         \
    .attend = sekv_attend, .memory = sekv_memory, .head_stats = sekv_head_stats, .rows = sekv_kv_rows, \
    .free = sekv_free, SEKV_DOOR_HOOKS
int  sekv_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen);
void sekv_memory(const kv_state *st, kv_mem *out);
void sekv_head_stats(const kv_state *st, int layer, int head, kv_headstat *out);
int sekv_kv_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos);
void sekv_free(kv_state *st);
int  sekv_grow_rows(kv_state *st, sekv_layer *ly, int need);
int  sekv_grow_spans(kv_state *st, sekv_layer *ly, int need);
/* Builds span s of a layer for kv head j from its rows K, V [len][d] and surprisal
 * [len]: the coarse entry (into kbar, vbar), the factors and gate masks (basis[s]) and
 * the routing keys of the group's query heads. Thread safe across (s, j). 0 or -1
 * (out of memory / SVD failure). */
int  sekv_build_span(kv_state *st, int layer, int s, int j, const float *K, const float *V,
                     const float *surp, float *kbar, float *vbar);
void sekv_refresh_span_rows(sekv_layer *ly);
/* The span's rows K, V [len][d] from its store: factors with the gate masks (gated) or
 * every component; stored rows as they are (gated when built). */
void sekv_basis_rows(const sekv_basis *b, int gated, float *K, float *V);
void sekv_track_peak(kv_state *st, size_t extra_fast);
size_t sekv_fast_bytes(const kv_state *st, size_t *aux, long *tokens);
/* Runs fn(ctx, i) for i < n on the worker threads (the span work is plain C: factors by
 * sekv_svd, never the backend's svd). */
void sekv_par_for(int n, void (*fn)(void *, int), void *ctx);

/* sekv_fold.c */
void sekv_keep_budget(kv_state *st, int layer);
void sekv_die(const char *what, int layer);

/* sekv_dev.c: the tiers on the CUDA backend when it is the selected one (built with
 * KB_CUDA); otherwise plain host memory and no device work. */
void   sekv_dev_init(kv_state *st);                 /* at init: pinned factors if CUDA is selected */
float *sekv_slow_alloc(const kv_state *st, size_t floats);   /* a factor buffer (NULL: out of memory) */
void   sekv_slow_free(const kv_state *st, float *p);
/* At attend, after the spans are selected: queues their factors to the device, syncs the
 * groups' persistent rows and rebuilds the spans there. 1 when the layer attends on the
 * device (sekv_dev_decode), 0 when on the host (host rebuild, kb_get()->decode). */
int    sekv_dev_prepare(kv_state *st, int layer);
/* Decode of every query head of the layer over its group's device rows (as[h]'s idx lists
 * rows of group h / g), in one batched call. 0, or -1 when the device failed (then off for
 * good: attend on the host). */
int    sekv_dev_decode_heads(kv_state *st, int layer, const kb_decode_args *as);
size_t sekv_dev_bytes_held(const kv_state *st);
void   sekv_dev_free(kv_state *st);

/* sekv_decode.c */
void sekv_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);
void sekv_attend(kv_state *st, int layer, const float *q, float *out);

#endif
