/* sekv-ref: SeKV with the authors' code defaults (their default.yaml): alpha = 1,
 * l_min = 4, spans the maximal runs between anchors, no sinks or local window, and a
 * persistent part P > B is infeasible (the code raises). The paper's text gives neither
 * alpha nor l_min; `sekv` (sekv.c) fits alpha per prompt instead. Same code as sekv. */
#include "sekv_state.h"

static const kv_param params[] = {
    {"alpha", "1", "[code] anchor threshold mu + alpha*sigma; auto = the smallest of 0.5..4 with P <= p_max*B"},
    {"l_min", "4", "[code] spans shorter than this stay at full resolution"},
    {"l_max", "none", "[code] none = spans are the maximal runs between anchors; N = runs split into balanced spans "
                      "of at most N; auto = 32, else 48, 64, 128, 256 (the first that fits)"},
    {"sinks", "0", "[code] first tokens kept at full resolution (token 0 always is an anchor)"},
    {"local", "0", "[code] most recent prompt tokens kept at full resolution; auto = 32, or clamp(B/8, 4, 32)"},
    {"rank", "32", "[code] rank cap R of the span factors (truncated SVD): 8, 32 or 64"},
    {"dprime", "32", "[code] routing dimension d' (fixed: 32)"},
    {"tau", "-1", "[code] zoom threshold on the relevance for every head; -1 = the trained per-(layer, head) "
                  "thresholds (0.05 untrained)"},
    {"zoom", "1", "0 = no reconstruction: coarse summaries only (ablation)"},
    {"trained_zoom", "1", "0 = untrained zoom: relevance sigmoid(q.kbar/sqrt d) alone, no W, no ln|S| (ablation)"},
    {"fixed_chunk", "0", "> 0: fixed-length chunks instead of surprisal spans; same = the surprisal anchors' count "
                         "placed evenly (ablation)"},
    {"route", "0", "[code] span relevance: 0 = the trained d'=32 routing summary (+ln|S|); 1 = kvbench's spread"},
    {"gate", "2", "[code] rank gate at decode: 2 = soft m, 1 = hard, 0 = off"},
    {"p_max", "1", "[code] P <= p_max*B (1: the code raises when P > B); more is infeasible"},
    {"uncapped", "0", "1 = no budget: the spans fitted as at this budget (the smallest P found if none fits), then P "
                      "is not capped and every span over its threshold expands"},
    {"params_file", "default", "[kvbench: trained at alpha = 1, methods/sekv/params/README.md] trained parameters; "
                               "default = as sekv's (refused on a model without them); none = untrained"},
    {NULL, NULL, NULL},
};

static kv_state *ref_init(const kv_setup *s, char *err, size_t errlen) {
    return sekv_init_as(&kv_sekv_ref, s, err, errlen);
}

const kv_method kv_sekv_ref = {
    KV_METHOD_HEAD,
    .name = "sekv-ref",
    .summary = "SeKV at the authors' code defaults (default.yaml: alpha = 1, l_min = 4; the paper's text gives "
               "neither): anchors above mu + sigma, spans the maximal runs between them, no local window, the "
               "trained router, P > B infeasible (as the code raises); same code as sekv",
    .params = params,
    .init = ref_init,
    SEKV_TABLE_REST,
    .trained_file = sekv_ref_trained_file,
};
