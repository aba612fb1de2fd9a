/* One text case through the model for every (method, budget): the prompt is prefilled
 * once with the statistics all methods asked for, then each method ingests the shared
 * prefill (compression), optionally takes the question tokens through decode steps
 * (--question-after), and generates greedily until a stop token. Used by model_source.c. */
#ifndef KV_MODEL_CASE_H
#define KV_MODEL_CASE_H
#include <stddef.h>
#include <stdint.h>
#include "../../methods/method.h"
#include "../../model/model.h"
#include "../../results/db.h"
#include "../../workloads/textcase.h"
#include "method_params.h"

/* A (method, budget) whose cache was built while the prefill streamed layer by layer. */
typedef struct {
    const kv_method *m;
    double budget;
    kv_state *st;               /* NULL when init refused the setup (err says why) */
    int failed, layer;          /* ingest failed at this layer (err says why) */
    int taken;                  /* mc_run_method has taken st over */
    double compress_s;          /* the method's ingest of every layer */
    char err[512];
} mc_ingested;

typedef struct {
    kv_model *model;
    const tc_case *tc;
    const int32_t *ids;         /* the case's tokens (tc_tokenize) */
    int n, n_context;           /* all tokens; end of the context part */
    int question_after;         /* 1: prefill ids[0, n_context), feed the rest by decode steps */
    int max_new;                /* generation limit (already capped to the model's context) */
    int n_pf;                   /* tokens prefilled: n, or n_context with question_after */
    const method_params *params; /* --params overrides, or NULL */
    int decode_rule;            /* kv_decode_rule of the run */
    int kv_type;                /* kb_kvtype of the methods' K/V rows (0 = f32) */
    int repeat;                 /* timed sections run this many times (median kept); 0 = 1 */
    int one_at_a_time;          /* 1: mc_run_pairs decodes the pairs one after another (--batch 0:
                                   per-method latency); 0: together, one batch per step */
    kv_prefill_out pf;          /* every layer (mc_prefill), or, streamed, surprisal and logits only */
    int have_pf;
    mc_ingested *pre;           /* streamed: the caches built during the prefill */
    int n_pre;
    const char *progress;       /* streamed: a long prefill says on stderr which layer it is at,
                                   lines starting with this label (NULL: quiet) */
} mc_case;

/* The setup method m sees for this case at this budget (the case's kv_type, its --params). */
kv_setup mc_setup(const mc_case *c, const kv_method *m, double budget);
/* The statistics every (method, budget) pair asks the prefill for; pairs whose init
 * refuses the setup are skipped (they are recorded as infeasible when run). */
kv_needs mc_union_needs(const mc_case *c, const kv_method *const *methods, const double *budgets, int n_pairs);
/* The shared prefill; 0, or -1 with err. */
int mc_prefill(mc_case *c, const kv_needs *needs, char *err, size_t errlen);
/* The layer-streaming prefill: every pair's cache is initialised first, and every layer,
 * once computed, is ingested by each pair's method and dropped; methods that need the
 * surprisal (kv_method.needs_surprisal) get every layer's K/V, kept for them, after the
 * last layer. Only one layer of the model's K/V and statistics exists at a time besides
 * that. mc_run_method then finds the pair's cache built (c->pre). A case run this way
 * cannot be ingested again (no --repeat > 1, no fidelity). 0, or -1 with err (the
 * prefill failed; a method's failure is its pair's, reported when it is run). */
int mc_prefill_streamed(mc_case *c, const kv_needs *needs, const kv_method *const *methods, const double *budgets,
                        int n_pairs, char *err, size_t errlen);
void mc_free(mc_case *c);

/* One (method, budget) result. The strings and arrays are owned here (mc_result_clear). */
typedef struct {
    kvdb_result r;               /* ready for kvdb_result_put */
    char *output;                /* generated text, or the reason for a non-ok status */
    kv_headstat *heads;          /* [n_layer][n_head] */
    kvdb_zoom *zoom;             /* SeKV zoom-ins, or NULL */
    size_t n_zoom;
    char chosen[1024];           /* SeKV: the parameters it ran with (alpha as fitted), or "" */
    int n_generated;
    double question_s;           /* question tokens fed after compression (question_after) */
    double *layer_err;           /* [n_layer] fidelity: attention output error vs FullKV */
    int batched;                 /* 1: generated in a batch with the case's other pairs (mc_run_pairs):
                                    decode_s is then the batch's time while this pair was in it */
    double attend_s;             /* batched: the method's own append + attend time in generation */
} mc_result;

/* res->r.status MC_REFUSED: init refused the configuration (not an outcome of this case);
 * the caller stops the run and stores nothing. */
#define MC_REFUSED "refused"

/* 1 if token id's text holds a newline. */
int mc_piece_has_newline(const kv_tokenizer *t, int id);
/* Greedy pick among the tokens that would not stop generation (stop tokens, and newline
 * tokens when newline is set): the first tokens of a case with min_new_tokens. Lowest id
 * on ties, as model_argmax. */
int mc_argmax_no_stop(const kv_tokenizer *t, const float *logits, int n, int newline);

/* Runs method m at budget: compression, generation, score; with c->repeat > 1 the
 * method runs that many times and compress_s / decode_s are the medians (the spread
 * max - min). The fidelity metrics are the caller's (fidelity.h: fid_measure). */
void mc_run_method(mc_case *c, const kv_method *m, double budget, mc_result *res);
/* Runs every (methods[i], budgets[i]) pair of the case, i < n, into results[i], with the
 * same results as mc_run_method on each in turn (timings aside). Unless c->one_at_a_time
 * or c->repeat > 1, the pairs generate together: setup, ingest and question per pair in
 * order, then one greedy loop whose every step is one model_decode_batch over the pairs
 * still generating (a pair that stops, fails or never started leaves it; nothing else
 * changes), then each pair's end and its fidelity metrics. */
void mc_run_pairs(mc_case *c, const kv_method *const *methods, const double *budgets, int n, mc_result *results);
/* Feeds the question tokens [n_pf, n) through m's cache (question_after); logits in: the
 * prefill's, out: after the last; peak (or NULL) gets the most fast-tier bytes held; with
 * s (the state's setup, or NULL) the rows held are checked against the budget after each
 * token (kv_budget_check). 0, or -1 with the reason in why. */
int mc_feed_question(mc_case *c, const kv_method *m, kv_state *st, const kv_setup *s, float *logits,
                     kvdb_result *peak, char *why, size_t len);
void mc_result_clear(mc_result *res);

#endif
