/* kvpress's ExpectedAttentionPress score (kvpress/presses/expected_attention_press.py at
 * NVIDIA/kvpress 8bb29b9, release 0.5.5), shared by the methods built on it (expected-attention,
 * criticalkv, criticaladakv). See expected_attention.c for the rule. */
#ifndef KV_EXPECTED_ATTENTION_H
#define KV_EXPECTED_ATTENTION_H
#include "method.h"

typedef struct {
    int n_future;       /* n_future_positions: the RoPE rotations averaged over (positions n .. n+F-1) */
    int n_sink;         /* the first rows: scored max + 1, and their queries left out of the statistics */
    int use_cov;        /* use_covariance */
    int use_vnorm;      /* use_vnorm: (score + epsilon) * ||v|| */
    double epsilon;
} ea_opts;

/* Pre-RoPE query rows the score reads: those of tokens n_sink .. n-1 (0 when n <= n_sink). */
int ea_query_rows(const ea_opts *o, int n);

/* The parameters by kvpress's names (n_future_positions, n_sink, use_covariance, use_vnorm, and
 * the press's epsilon under the key eps_key) from method m's table. 0, or -1 with err. */
int ea_opts_read(const kv_method *m, const char *params, const char *eps_key, ea_opts *o, char *err, size_t errlen);

/* The layer's scores [Hkv][p->n] as kvpress's score() returns them (sinks padded with the
 * layer's maximum + 1). Reads p->K, p->V, p->Q (q_rows >= ea_query_rows) and p->rope. 0, or -1
 * with err naming `name` (the statistics missing, out of memory). */
int ea_layer_scores(const ea_opts *o, const kv_prefill *p, int H, int Hkv, int d, float *score, const char *name,
                    char *err, size_t errlen);

#endif
