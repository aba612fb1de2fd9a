/* SnapKV-style observation-window scoring, shared by SnapKV, PyramidKV, ChunkKV and
 * SentenceKV's pre-filter. */
#ifndef KV_WINDOW_SCORE_H
#define KV_WINDOW_SCORE_H
#include "method.h"
#include "scorer.h"   /* topk_sorted */

enum { POOL_MAX = 0, POOL_AVG = 1 };

/* Per kv head j, score[j][i] for prefix tokens i < n - w:
 *   s_h[i] = sum over the last w window rows of win_probs[h][row][i] (query head h),
 *   pooled with a 1-D kernel (stride 1, padding kernel/2, max or avg; kernel 1 = none),
 *   then aggregated over the g query heads of the group (mean; or max if agg_max).
 * p->win must be >= w. score: [Hkv][n - w]. Returns n - w (0 if n <= w), or -1 when out
 * of memory. Pooling is PyTorch's (stride 1, padding kernel/2, over the n - w prefix only):
 * output i covers inputs [i - kernel/2, i - kernel/2 + kernel - 1]; max ignores the padding,
 * avg counts it as zeros and divides by kernel (count_include_pad, as SnapKV runs it). */
int window_scores(const kv_prefill *p, int H, int Hkv, int w, int kernel, int pool,
                  int agg_max, float *score);

/* kv_method.needs of a method whose `window` parameter is clamped to the budget, as
 * init does (SnapKV, PyramidKV, ChunkKV): that many window rows, no column mass; nothing
 * when the parameter does not parse (init refuses it). */
void window_needs(const kv_method *m, const kv_setup *s, kv_needs *out);

#endif
