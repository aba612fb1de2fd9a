/* The case sources `kvbench run` chooses from (case_loop.h), as run.c sees them: each its
 * own options beside run_common's, its help lines, and how it is built from the parsed
 * options. The synthetic workloads (syn_source.c) and the text workloads through the
 * model (model_source.c); --workload (or --model) picks one. */
#ifndef KV_RUN_SOURCES_H
#define KV_RUN_SOURCES_H
#include <stdio.h>
#include "case_loop.h"
#include "run_args.h"

/* A source's own option as given, in argv order: val NULL for a bare flag. */
typedef struct {
    const char *flag, *val;
} run_given;

enum { RUN_READY = -1 };

typedef struct {
    const char *name;
    const char *const *flags;   /* its own options, NULL-terminated */
    const char *const *bare;    /* those of them that take no value, NULL-terminated */
    const char *where;          /* "the synthetic workloads (...)": where its options apply */
    const char *not_these;      /* "synthetic-* ones": where they do not */
    void (*options)(FILE *f);   /* their help lines */
    /* The --workload value (NULL: not given) is one of this source's, or an error is
     * printed (-1). Checked before the source's options. */
    int (*check_workload)(const char *workload);
    /* Builds the source and the grid from the options (own: those of its flags given, in
     * order; argv for --jobs). RUN_READY: ready to run; else the command's exit code (0:
     * done, nothing to run, as --print-prompts; 2: bad input; 1: failed), the error
     * printed, and nothing is left to close. */
    int (*open)(const run_common *c, const run_given *own, int n_own, int argc, char **argv, cl_source *src,
                cl_grid *g);
    void (*close)(cl_source *src);
} run_source_kind;

extern const run_source_kind syn_source_kind, model_source_kind;

/* Hands each of own[0..n) to fn(ctx, flag, val) (1 taken, -1 error printed): 0 or -1. */
int run_apply_own(const run_given *own, int n, int (*fn)(void *ctx, const char *flag, const char *val), void *ctx);

#endif
