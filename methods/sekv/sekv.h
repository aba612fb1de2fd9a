/* SeKV (reference §8) as a kv_method: surprisal spans, coarse entries on the fast tier,
 * low-rank span factors on the slow tier, per-step zoom-in under the budget B.
 * These views let the driver record what SeKV chose and let tests look inside; call
 * them only on a state made by kv_sekv, kv_sekv_ref or kv_sekv_spread. */
#ifndef KV_SEKV_H
#define KV_SEKV_H
#include "../method.h"
#include "sekv_spans.h"

/* kv_sekv: the paper's text (alpha fitted per prompt, sekv.c); kv_sekv_ref: the authors'
 * code defaults (sekv_ref.c); kv_sekv_spread: the same code with kvbench's budget fit and
 * untrained spread router (sekv_spread.c). */
extern const kv_method kv_sekv, kv_sekv_ref, kv_sekv_spread;
/* 1 for any of them (the views below apply to all). */
static inline int kv_is_sekv(const kv_method *m) {
    return m == &kv_sekv || m == &kv_sekv_ref || m == &kv_sekv_spread;
}

/* The anchor threshold alpha used (auto-selected or given); NAN before the first ingest
 * or with fixed-chunk segmentation. *l_min (optional) receives the l_min used. */
double sekv_chosen_alpha(const kv_state *st, int *l_min);
/* One line for logs: alpha, l_min, l_max, sinks, local ("(auto)" where the fit chose
 * it), spans, P, B, rank, zoom, gate, params (trained or not). */
void sekv_describe(const kv_state *st, char *buf, size_t len);
/* The parameters this state runs with, as "key=value,..." that reproduce it when given
 * back as params: after the first ingest alpha, l_min, l_max and local are the values
 * the automatic fit chose (before it, "auto" where not given); params_file is the file
 * used (the default one too) or "none". For the results' params column; 256 bytes plus
 * the file's path hold it. */
void sekv_params_used(const kv_state *st, char *buf, size_t len);
/* The parameters file this state loaded (its default or params_file), "" for none. */
const char *sekv_params_path(const kv_state *st);

/* Zoom-ins: one record per (decode step, layer, query head) with at least one span
 * expanded for that head (zero counts are not logged). step counts attend() calls on
 * the layer, from 0; spans: the compressed spans the head could expand at that step, so
 * expanded / spans is its zoom rate there (figure 6's quantity). Valid until the next
 * attend(). */
typedef struct {
    int32_t step, layer, head, expanded, spans;
} sekv_zoom_event;
size_t sekv_zoom_log(const kv_state *st, const sekv_zoom_event **events);

/* The prompt's segmentation (NULL before the first ingest). */
const sekv_seg *sekv_segmentation(const kv_state *st);
/* Rows resident for (layer, kv head): persistent rows P (full resolution + one coarse
 * row per span) and reconstructed rows held from the last attend(). Returns P + recon. */
int sekv_resident(const kv_state *st, int layer, int kv_head, int *persistent, int *recon);
/* Spans of a layer (prompt spans, then spans made at decode time), in position order. */
int sekv_span_count(const kv_state *st, int layer);
sekv_span sekv_span_at(const kv_state *st, int layer, int s);
/* Persistent rows of a layer in position order: pos[i] their first position, span[i]
 * the span index of a coarse row or -1 for a full-resolution token (either array may be
 * NULL). Returns the count. */
int sekv_rows(const kv_state *st, int layer, int32_t *pos, int32_t *span);
/* Row r of kv head j: its key and value (d floats each). */
void sekv_row(const kv_state *st, int layer, int kv_head, int r, const float **k, const float **v);
/* Span s of kv head j rebuilt from its factors with every component (no gate), or the
 * rows stored in their place (gate applied when built): K, V [len][d]. */
void sekv_span_tokens(const kv_state *st, int layer, int kv_head, int s, float *K, float *V);
/* Spans expanded for query head h at the last attend(): writes their indices (ascending)
 * and returns the count. */
int sekv_expanded(const kv_state *st, int layer, int head, int32_t *spans);

/* Why span s was or was not expanded for query head h at the last attend(). */
enum {
    SEKV_WHY_BELOW = 0,      /* its relevance for h is not above h's tau */
    SEKV_WHY_ZOOMED = 1,     /* expanded for h */
    SEKV_WHY_TOO_LONG = 2,   /* above tau, but its |S| rows exceed the whole room B - P */
    SEKV_WHY_NO_ROOM = 3,    /* above tau and would fit alone: the room went to higher-scored spans */
    SEKV_WHY_OFF = 4,        /* no routing this step (zoom=0, no spans, or no room at all) */
};
int sekv_why(const kv_state *st, int layer, int head, int s);

/* Span s's slow-tier buffer for kv head j (K's U, s, Vt, then V's; or K's rows then V's
 * when sekv_store_rows): pinned host memory
 * when the state was made with the CUDA backend selected. */
const float *sekv_span_factors(const kv_state *st, int layer, int kv_head, int s);
/* Device bytes the state's device tiers hold now (0 unless the CUDA backend attends). */
size_t sekv_device_bytes(const kv_state *st);

#endif
