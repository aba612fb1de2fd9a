/* The "score the rows, keep the top B" family (kvpress's ScorerPress), written once: a
 * method of the family is its scoring function plus its table. KnormPress is the whole
 * example (knormpress.c); SnapKV and PyramidKV load their selection through scorer_load.
 *
 * A scorer method's kv_state begins with its kv_cacheset (made with scored = 1), so the
 * cache set's door members (KV_CACHESET_DOOR, cs_door_append, cs_door_free) serve as its
 * append, attend, memory, head_stats, rows and free. */
#ifndef KV_SCORER_H
#define KV_SCORER_H
#include "cacheset.h"

/* Indices of the k largest scores among n (ties: lower index first), written to out
 * in ascending index order. Returns min(k, n) (0 if k <= 0), or -1 when out of memory.
 * NaN scores rank lowest. */
int topk_sorted(const float *score, int n, int k, int32_t *out);

/* Loads kv head j of the layer from p: rows [0, sinks) and [n - recent, n) always (they
 * score +inf), plus the top rows - sinks - recent of the rows between by score[t - sinks]
 * (score covers the positions sinks .. n - recent - 1; ties: the lower position). Each
 * kept row keeps its score for decode-time eviction (--decode hold evicts the lowest).
 * sinks + recent <= rows <= n. 0, or -1 when out of memory. */
int scorer_load(kv_cacheset *c, const kv_prefill *p, int j, const float *score, int sinks, int recent, int rows);

/* score[t], t < p->n: how much kv head j's row t is worth keeping (higher is kept). */
typedef void (*kv_row_score)(const kv_state *st, const kv_prefill *p, int j, float *score);

/* kv_method.ingest of a scorer method: per kv head, the first min(sinks, B) rows plus the
 * top of the rest by score_fn; everything when n <= B. 0, or -1 with err naming the method. */
int scorer_ingest(kv_state *st, const kv_prefill *p, int sinks, kv_row_score score_fn, const char *name, char *err,
                  size_t errlen);

/* AdaKV's head-adaptive allocation (kvpress's AdaKVPress, kvpress/presses/adakv_press.py at
 * NVIDIA/kvpress 8bb29b9; Feng et al. 2024, arXiv 2407.11550) over any score: the layer keeps
 * Hkv * B rows in all, chosen jointly over its kv heads, and each kv head first keeps its own
 * top max(1, floor(B * alpha)) (0 when alpha = 0: the safeguard; kvpress's alpha_safeguard =
 * 0.20; the floor of 1 is kvpress 0.5.5's). score is [Hkv][n]
 * (higher is kept; +inf forces a row, as window or sink rows). The order that decides: safeguard
 * rows, then by score, ties to the lower kv head and then the earlier row (torch's topk leaves
 * tie order unspecified). n <= B keeps everything. Each kept row keeps its score for decode-time
 * eviction. 0, or -1 when out of memory. */
int scorer_load_adaptive(kv_cacheset *c, const kv_prefill *p, const float *score, double alpha);

/* scorer_load_adaptive's choice without the load, for a method that goes on from it
 * (criticalkv-adakv): kept[j * n + t] = 1 for the layer's Hkv * B rows, safe[j * n + t] = 1 for
 * each head's safeguard rows (both [Hkv][n], written whole). Needs n > B. 0, or -1 when out of
 * memory. */
int scorer_adaptive_alloc(const kv_cacheset *c, int n, const float *score, double alpha, uint8_t *kept,
                          uint8_t *safe);

/* kv_method.append of an adaptive method (kv_method.head_budgets = 1): the token joins every
 * kv head at full resolution; under --decode hold, while the layer holds more than Hkv * B
 * rows, the lowest-score row of the layer goes (ties: the older position, then the lower kv
 * head), so the layer's total stays within the budget and no kv head is left empty. */
void scorer_adaptive_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t);

#endif
