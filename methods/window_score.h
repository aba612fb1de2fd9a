/* SnapKV-style observation-window scoring, shared by SnapKV, PyramidKV, ChunkKV and
 * SentenceKV's pre-filter. */
#ifndef KV_WINDOW_SCORE_H
#define KV_WINDOW_SCORE_H
#include "method.h"

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

/* Indices of the k largest scores among n (ties: lower index first), written to out
 * in ascending index order. Returns min(k, n) (0 if k <= 0), or -1 when out of memory.
 * NaN scores rank lowest. */
int topk_sorted(const float *score, int n, int k, int32_t *out);

#endif
