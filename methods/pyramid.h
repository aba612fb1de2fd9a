/* PyramidKV's per-layer budget schedule (KVCache-Factory), kept pure so tests can check it.
 * The method's state begins with a kv_cacheset, so kv_a_store() (cacheset.h) reads its rows. */
#ifndef KV_PYRAMID_H
#define KV_PYRAMID_H
#include "method.h"

enum { PYRAMID_NONE = 0, PYRAMID_UNIFORM = 1, PYRAMID_PYRAMID = 2 };

/* n prompt tokens, C budget per layer including the w window tokens (0 <= w <= C),
 * beta >= 1, L >= 1 layers. keep[l] = prompt tokens layer l keeps besides the window:
 *   n < C        -> PYRAMID_NONE:    keep[l] = max(0, n - w) (everything)
 *   n < 2(C-w)   -> PYRAMID_UNIFORM: keep[l] = C - w (plain SnapKV)
 *   otherwise    -> PYRAMID_PYRAMID: kmin = (C-w)/beta, kmax = 2(C-w) - kmin; if kmax >= n-w
 *                   then kmax = n-w, kmin = 2(C-w) - kmax; keep[l] falls linearly from kmax
 *                   (layer 0) to kmin (layer L-1), rounded by largest remainder so that the
 *                   layers sum to exactly L*(C-w).
 * Deviation, on purpose: the reference's integer step (kmax-kmin)/(L-1) is floored, which
 * makes the total exceed the uniform L*(C-w) by up to L(L-1)/2 tokens (C=128, w=8, L=32:
 * 4016 prompt tokens where the budget allows 3840), so PyramidKV would hold more memory
 * than the budget every other method gets. kvpress also uses real division and rounding.
 * L == 1 takes the uniform branch (the schedule divides by L-1).
 * Returns the branch, or -1 on bad arguments. */
int pyramid_budgets(int n, int C, int w, int beta, int L, int *keep);

/* Rows a kv head of `layer` may hold while decoding: keep[layer] + w, or C when n < C. */
int pyramidkv_layer_budget(const kv_state *st, int layer);

#endif
