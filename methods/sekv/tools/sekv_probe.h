/* kvbench sekv-probe's options (sekv_probe.c), parsed and checked apart from the run so
 * that the option parser can be fuzzed (tests/fuzz/fuzz_probe_args.c) without a model. */
#ifndef KV_SEKV_PROBE_H
#define KV_SEKV_PROBE_H

enum { SEKV_PROBE_MAX_SETS = 8, SEKV_PROBE_MAX_LIST = 16, SEKV_PROBE_MAX_CTX = 1 << 20 };

typedef struct {
    const char *model_path, *hay_path, *sets[SEKV_PROBE_MAX_SETS];
    int ctxs[SEKV_PROBE_MAX_LIST];         /* prompt lengths, 1..SEKV_PROBE_MAX_CTX */
    double depths[SEKV_PROBE_MAX_LIST];    /* needle depths in %, 0..100 */
    double budget;                         /* a fraction in (0, 1], or a whole token count */
    int n_ctx, n_depth, n_sets, question_after;
    int split;                             /* NIAH_DEV (default) or NIAH_TEST */
} sekv_probe_opts;

/* 0: o holds the options; 1: --help was asked; 2: a usage error, its one line printed. */
int sekv_probe_parse(int argc, char **argv, sekv_probe_opts *o);
#endif
