/* SentenceKV test views (read-only). Positions are original token positions. */
#ifndef KV_SENTENCEKV_H
#define KV_SENTENCEKV_H
#include "kvstore.h"
#include "method.h"

/* Rows of the slow tier (pre-filtered prompt + decoded tokens), ascending; returns the count. */
int sentencekv_rows(const kv_state *st, int layer, int kv_head, int32_t *pos);
/* Rows attended at the last decode step, ascending; returns the count (0 before any step). */
int sentencekv_selection(const kv_state *st, int layer, int kv_head, int32_t *pos);
/* The slow-tier store of (layer, kv head), with its device working set (kvs_dev_*). */
const kv_store *sentencekv_store(const kv_state *st, int layer, int kv_head);
/* Number of sentence vectors, and sentence s: its mean key [d], the position of its first
 * retained token and how many retained tokens it has. */
int sentencekv_sentence_count(const kv_state *st, int layer, int kv_head);
void sentencekv_sentence(const kv_state *st, int layer, int kv_head, int s, float *key, int32_t *first_pos,
                         int *n_tokens);

#endif
