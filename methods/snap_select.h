/* SnapKV's prefill selection for one layer, shared by SnapKV and PyramidKV: per kv head,
 * the top (rows - w) prefix tokens by pooled window score plus the w window tokens are
 * loaded into the cache set, each row keeping its score (window rows score +inf) for
 * decode-time eviction. */
#ifndef KV_SNAP_SELECT_H
#define KV_SNAP_SELECT_H
#include "cacheset.h"

/* rows: rows a kv head of this layer may hold (window included). 0, or -1 with err. */
int snap_select_layer(kv_cacheset *c, const kv_prefill *p, int window, int kernel, int pool, int agg_max,
                      int rows, const char *name, char *err, size_t errlen);

#endif
