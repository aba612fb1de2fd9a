/* kvbench train-sekv: trains SeKV's zoom-in (routing W, thresholds tau, rank gate) on a
 * document corpus with the base model frozen, and writes the parameter file the sekv
 * method loads (params_file=...). */
#ifndef KV_TRAIN_SEKV_H
#define KV_TRAIN_SEKV_H
#include "sekv_teacher.h"
#include <stdint.h>

enum { TRAIN_MAX_STAGES = 4, TRAIN_MAX_FIT_BUDGETS = 8 };

typedef struct {
    const char *model, *corpus, *out, *cache, *log, *checkpoint;
    int steps, rank, threads, max_docs, ctx, budget_per_span, gate_norm;
    int n_stages, stage_ctx[TRAIN_MAX_STAGES];   /* curriculum: --ctx A,B,.. (ascending) */
    int n_fit, fit_alpha;                  /* --alpha fit: budgets sampled per document */
    double fit_budgets[TRAIN_MAX_FIT_BUDGETS];
    double time_limit;                     /* --time-limit: checkpoint and stop after S seconds */
    int held_out, eval_every;   /* early stopping: documents held out, steps between checks */
    int held_out_given;         /* --held-out given: too few documents is an error, not a note */
    double lambda_budget, lambda_order;
    uint64_t seed;
    sekv_teacher_cfg tc;
    double mem_mb;
} train_opts;

int cmd_train_sekv(int argc, char **argv);   /* train_sekv.c */
/* The options alone, checked, nothing opened or written (the fuzz target
 * tests/fuzz/fuzz_train_args.c): 0 (*help set for --help), or -1 after the one-line error. */
int train_sekv_parse(int argc, char **argv, train_opts *o, int *help);
#endif
