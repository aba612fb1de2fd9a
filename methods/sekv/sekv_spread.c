/* sekv-spread: SeKV's code (sekv*.c) with kvbench's own choices as defaults, NOT the
 * paper's method: the persistent part fitted into 70% of the budget by searching the
 * anchor threshold, a span cap and a local window (and 4 sinks), so 30% of B is left to
 * zoom (p_max tuned on NIAH dev cases: README, "sekv-spread on the dev split"); spans routed by an untrained score, the span's mean logit plus the spread of its
 * keys along the query (route=1), with a hard rank gate and no trained parameters. */
#include "sekv_state.h"

static const kv_param params[] = {
    {"alpha", "auto", "[kvbench] anchor threshold mu + alpha*sigma; auto = smallest of 0.5..4 with P <= p_max*B"},
    {"l_min", "4", "[code, lowered by kvbench] spans shorter than this stay at full resolution (lowered to 2 if P does not fit, unless given)"},
    {"l_max", "auto", "[kvbench] longer runs are split into balanced spans of at most this; auto = 32, else 48, 64, 128, 256 (the first that fits); none = maximal runs"},
    {"sinks", "4", "[kvbench] first tokens kept at full resolution"},
    {"local", "auto", "[kvbench] most recent tokens kept at full resolution; auto = 32, or clamp(B/8, 4, 32) if P does not fit at that l_max"},
    {"rank", "32", "[paper] rank cap R of the span factors: 8, 32 or 64"},
    {"dprime", "32", "[paper] routing dimension d' (fixed: 32)"},
    {"tau", "-1", "[kvbench] zoom threshold on the relevance for every head; -1 = 0.05 with route=1, else from the params (0.05 untrained)"},
    {"zoom", "1", "0 = no reconstruction: coarse summaries only"},
    {"trained_zoom", "1", "0 = relevance sigmoid(q.kbar/sqrt d) alone, no spread, no W (ablation)"},
    {"fixed_chunk", "0", "> 0: fixed-length chunks instead of surprisal spans, token 0 the only anchor; same = the surprisal anchors' count placed evenly, one per chunk (ablation)"},
    {"route", "1", "[kvbench] span relevance: 1 = mean + spread (q.kbar + sqrt(2 ln|S|) * the spread of the span's keys along q, from their top-2 principal directions), 0 = the paper's d' routing summary (W from params_file); 2 = the diagnostic oracle (sekv's route)"},
    {"gate", "1", "[kvbench] rank gate at decode: 1 = hard (component kept iff m > 0.5), 2 = soft m, 0 = off"},
    {"p_max", "0.7", "[kvbench, NIAH dev] the persistent part may take P <= p_max*B (the rest is room to zoom; 0.7 tuned on NIAH dev cases)"},
    {"uncapped", "0", "1 = no budget: the spans fitted as at this budget (the smallest P found if none fits), then P "
                      "is not capped and every span over its threshold expands"},
    {"params_file", "none", "[kvbench] trained parameters (kvbench train-sekv) for the rank gate and route=0; default = the sekv method's default file; none = untrained"},
    {NULL, NULL, NULL},
};

static kv_state *spread_init(const kv_setup *s, char *err, size_t errlen) {
    return sekv_init_as(&kv_sekv_spread, s, err, errlen);
}

const kv_method kv_sekv_spread = {
    KV_METHOD_HEAD,
    .name = "sekv-spread",
    .summary = "NOT the paper's SeKV: its code with kvbench's untrained spread router (span mean logit + "
               "key spread along the query, route=1), P fitted into 0.7*B by searching alpha, a span cap and "
               "a local window (+4 sinks), hard rank gate",
    .params = params,
    .init = spread_init,
    SEKV_TABLE_REST,
    .trained_file = sekv_spread_trained_file,
};
