/* The per-(layer, kv head) row stores shared by FullKV, StreamingLLM, H2O and SnapKV:
 * setup/budget validation, optional per-row scores kept in step with the rows, byte
 * accounting with a high-water mark, per-head counters and decode attention through
 * the kernels backend (kvs_decode: with the CUDA backend, over each store's device mirror).
 *
 * Accounting: fast_bytes = resident K/V rows (the setup's kv_type) + 4 bytes per row when
 * the method keeps a per-row score (an f32 on the device; reported as fast_aux_bytes).
 * fast_peak also counts, at the start of each layer's ingest, the full uncompressed layer
 * on top of what is resident (reference §0: prefill peak = compressed earlier layers +
 * one full layer). */
#ifndef KV_CACHESET_H
#define KV_CACHESET_H
#include "kvstore.h"
#include "method.h"

typedef struct {
    kv_store kv;
    double *score;      /* [score_cap], parallel to kv rows; NULL when the method keeps none */
    int score_cap;
    long events;        /* rows evicted so far (prefill and decode) */
} kv_slot;

typedef struct {
    int L, H, Hkv, d, g, kv_type, n_prompt, budget;
    int scored;         /* 1: slots keep per-row scores (and pay 4 bytes a row) */
    int hold;           /* the setup's decode rule is KV_DECODE_HOLD */
    kv_slot *slot;      /* [L][Hkv] */
    long rows;          /* resident rows over all slots */
    size_t peak;
    float *probs;       /* decode scratch [g][probs_cap] */
    int probs_cap;
} kv_cacheset;

/* Validates the setup (shapes, kv_type, budget) and allocates L*Hkv slots with room
 * for cap rows each. Returns 0, or -1 with a one-line reason naming the method. */
int  cs_init(kv_cacheset *c, const kv_setup *s, int scored, int cap, const char *name,
             char *err, size_t errlen);
void cs_free(kv_cacheset *c);
kv_slot *cs_slot(kv_cacheset *c, int layer, int kv_head);
const kv_slot *cs_slot_c(const kv_cacheset *c, int layer, int kv_head);

/* Checks an ingest call (layer, n, required statistics) and counts the transient
 * full layer into the peak. Returns 0, or -1 with err filled. */
int  cs_begin_layer(kv_cacheset *c, const kv_prefill *p, const char *name, char *err,
                    size_t errlen);
/* Loads prompt rows keep[0..nk) (ascending) of kv head j from p, with scores
 * score[keep[i]] (score may be NULL: 0). Counts n - nk evictions. 0, -1 (memory), or -2
 * when keep is not strictly ascending positions in [0, p->n) (a position outside the
 * prompt or kept twice; nothing is loaded then). */
int  cs_load(kv_cacheset *c, const kv_prefill *p, int j, const int32_t *keep, int nk,
             const double *score);
/* Appends one row; exits with a message when out of memory (append cannot fail). */
void cs_push(kv_cacheset *c, kv_slot *s, const float *k, const float *v, int pos, double score);
/* A decoded token for a prompt-compressing method (SnapKV, PyramidKV, ChunkKV, one-shot
 * H2O): appended to every kv head of the layer at full resolution with score +inf. Under
 * --decode hold, a kv head then over `cap` rows evicts its lowest-score row (prompt rows
 * first; among +inf rows the oldest); under append nothing is evicted. */
void cs_append_decoded(kv_cacheset *c, int layer, const float *k, const float *v, int pos, int cap);
/* Removes row i (order kept), counting one eviction. */
void cs_remove(kv_cacheset *c, kv_slot *s, int i);
/* Index of the lowest-score row among rows [0, end); ties go to the lowest index (so 0,
 * the oldest row, in a slot that keeps no scores). */
int  cs_argmin(const kv_slot *s, int end);

/* Decode attention of kv head j's query group over all its rows: q, out point at the
 * group's [g][d]. Returns the [g][n] probabilities when want_probs (valid until the
 * next call), else NULL. */
const float *cs_attend_group(kv_cacheset *c, int layer, int j, const float *q, float *out,
                             int want_probs);
/* Attention for every kv head of a layer, q and out [H][d]. */
void cs_attend(kv_cacheset *c, int layer, const float *q, float *out);

void cs_memory(const kv_cacheset *c, kv_mem *out);
void cs_head_stats(const kv_cacheset *c, int layer, int head, kv_headstat *out);
/* kv_method.rows for a cache set: every row is resident and at full resolution. */
int  cs_rows(const kv_cacheset *c, int layer, int kv_head, int32_t *pos, int cap, int *npos);

/* kv_method members for a method whose kv_state begins with its kv_cacheset (so a state
 * pointer is its cache set's pointer) and holds nothing else to free: the forwarding
 * every cache-based method would otherwise repeat. KV_CACHESET_DOOR fills attend, memory,
 * head_stats and rows; cs_door_append is cs_append_decoded up to the budget (the
 * prompt-compressing methods' append) and cs_door_free frees the cache set and the state. */
void cs_door_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);
void cs_door_attend(kv_state *st, int layer, const float *q, float *out);
void cs_door_memory(const kv_state *st, kv_mem *out);
void cs_door_head_stats(const kv_state *st, int layer, int head, kv_headstat *out);
int  cs_door_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos);
void cs_door_free(kv_state *st);
#define KV_CACHESET_DOOR \
    .attend = cs_door_attend, .memory = cs_door_memory, .head_stats = cs_door_head_stats, .rows = cs_door_rows

/* For tests: the store of (layer, kv head) of a method whose kv_state begins with a
 * kv_cacheset (FullKV, StreamingLLM, H2O, SnapKV, PyramidKV, ChunkKV). Undefined for
 * other methods' states. */
const kv_store *kv_a_store(const kv_state *st, int layer, int kv_head);

#endif
