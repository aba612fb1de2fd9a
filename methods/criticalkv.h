/* CriticalKV's value weight (criticalkv.c), shared with its head-adaptive form
 * (criticaladakv.c). */
#ifndef KV_CRITICALKV_H
#define KV_CRITICALKV_H
#include "cacheset.h"

/* w[t] = mean over kv head j's query heads h of sum_e |sum_i Wo[e][h d + i] v_t[i]| for the
 * layer's n rows: Wo_h v_t by SGEMM in float32 (as kvpress's matmul), CK_ROWS rows at a time,
 * the L1 sums in double. y holds CK_ROWS x p->embd floats. Reads p->V and p->Wo. */
#define CK_ROWS 256
void criticalkv_wov_norm(const kv_cacheset *c, const kv_prefill *p, int j, double *w, float *y);

/* kv_method.needs of a CriticalKV method m (ExpectedAttention's parameters in its table):
 * the pre-RoPE query rows ExpectedAttention reads, and Wo. */
void criticalkv_needs_of(const kv_method *m, const kv_setup *s, kv_needs *out);

/* The ExpectedAttention rows of both CriticalKV methods' parameter and range tables (the
 * scorer under them, kvpress's ExpectedAttentionPress(use_vnorm=False); its epsilon is
 * press_epsilon, as epsilon is CriticalKV's own). */
#define CK_EA_PARAMS                                                                                       \
    {"n_future_positions", "512", "ExpectedAttention: future positions whose RoPE rotation is averaged"}, \
    {"n_sink", "4", "ExpectedAttention: first tokens scored max + 1, their queries left out"},              \
    {"use_covariance", "1", "ExpectedAttention: 1: the queries' covariance term too"},                      \
    {"use_vnorm", "0", "ExpectedAttention: 1: its score times ||v|| (kvpress warns to keep it 0 here)"},   \
    {"press_epsilon", "0", "ExpectedAttention's own epsilon (used with use_vnorm=1)"}
#define CK_EA_RANGES                                                                                \
    {"n_future_positions", 1, 1e7, NAN}, {"n_sink", 0, 1e9, NAN}, {"use_covariance", 0, 1, NAN}, \
    {"use_vnorm", 0, 1, NAN}, {"press_epsilon", 0, 1e9, NAN}

#endif
