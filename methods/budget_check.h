/* The budget, checked where results are made: what a method says it holds (rows(),
 * memory()) against the limit of the run's decode rule, after compression and after every
 * decode step. The drivers call it and store an over-budget result as `error`; the
 * conformance checks call the same function, so the rule is written once.
 *
 * Everything it reads from the method is checked before use: the row counts, the count
 * and range of the positions, their order (ascending, no position twice), the memory
 * figures. */
#ifndef KV_BUDGET_CHECK_H
#define KV_BUDGET_CHECK_H
#include <stddef.h>
#include "method.h"

/* Fast-tier rows allowed per layer and kv head with `decoded` tokens appended since
 * compression, under s->decode_rule:
 *   keeps_all (FullKV): n_prompt + decoded;
 *   hold, or a method that evicts while decoding (evicts_decoding): B;
 *   append: B + decoded (the prompt within B, generated tokens at full resolution).
 * A layer_budgets method (PyramidKV) is held to L times this over the layers together. */
long kv_row_limit(const kv_method *m, const kv_setup *s, int decoded);

/* 1 when s->params turn on the setting the method's paper names as running past the
 * budget (kv_paper.uncapped, "uncapped=1"): its rows are then not held to the limit (the
 * positions and memory still are). */
int kv_runs_uncapped(const kv_method *m, const kv_setup *s);

/* Bytes of the K/V rows of (layer, kv head), `rows` of them, their positions pos[0..npos) as
 * rows() wrote them: 2 d elements of s->kv_type a row, except a prompt row (position <
 * n_prompt) of a method that prunes key channels (kv_method.key_channels = kc >= 0): kc + d. */
size_t kv_rows_bytes(const kv_method *m, const kv_state *st, const kv_setup *s, int layer, int kv_head, long rows,
                     const int32_t *pos, int npos);

/* Checks state st of m (built for setup s) with `decoded` tokens appended since
 * compression (0: right after ingest):
 *   - rows(l, j) >= 0 and within kv_row_limit for every layer l and kv head j;
 *   - the positions rows() reports: at most the buffer it was given, each in
 *     [0, n_prompt + decoded), strictly ascending (a position held twice is refused);
 *   - key_channels(): -1, or a count in [0, d] of channels ascending in [0, d);
 *   - memory(): fast_tokens is the sum of the rows, fast_aux_bytes <= fast_bytes,
 *     fast_bytes >= the rows' bytes (kv_rows_bytes) + fast_aux_bytes, peaks >=
 *     what is resident now (a method reporting 0 B for resident rows is refused).
 * Returns 0, or -1 with one line in err ("layer 3 kv head 1: 12 fast-tier rows, limit 10
 * (B 10, hold)"). */
int kv_budget_check(const kv_method *m, const kv_state *st, const kv_setup *s, int decoded, char *err,
                    size_t errlen);

#endif
