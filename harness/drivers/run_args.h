/* The one option parser of kvbench run (run.c, for both case sources): the loop over argv, the
 * options both take (--methods, --budget, --seed, --split, --kv-type, --decode, --backend,
 * ...) with their help lines, and the pieces each case source's own options use (one-line
 * errors prefixed "kvbench run: ", bounded integers, finite numbers, comma lists). */
#ifndef KV_RUN_ARGS_H
#define KV_RUN_ARGS_H
#include <stdint.h>
#include <stdio.h>
#include "../../methods/method.h"
#include "../../workloads/split.h"
#include "shard.h"

/* Prints "kvbench run: <message>" on stderr; returns -1. */
int run_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The options of every run, parsed by run_parse and documented by run_common_usage,
 * the same words and the same errors whichever source runs. Lists (methods, budgets,
 * ctx, depths) stay text here: what an item may be is the source's. run.c sets the
 * defaults before run_parse. */
typedef struct {
    const char *workload, *methods, *budgets, *ctxs, *depths, *params, *db_path, *backend;
    uint64_t seed;              /* --seed (seed_given: the source's default otherwise) */
    int seed_given;
    wl_split split;             /* --split */
    int split_given;
    int kv_type;                /* --kv-type (-1: not given, by the backend: run_kv_type_backend) */
    int decode_rule;            /* --decode (kv_decode_rule) */
    int threads;                /* --threads (0: online CPUs) */
    int quiet;                  /* --quiet */
    shard_spec shard;           /* --shard K/N */
} run_common;

/* The sources' own options: the ones that take no value (bare[0..n_bare), beside --quiet,
 * --help and -h), its help text (a flag it documents but got without a value "needs a
 * value"), its parser own(ctx, flag, value) (1: taken, 0: not its, -1: error printed) and
 * its message for a flag neither parser takes (-1). */
typedef struct {
    const char *const *bare;
    int n_bare;
    void (*usage)(FILE *);
    int (*own)(void *ctx, const char *flag, const char *val);
    int (*unknown)(const char *flag);
} run_flag_syntax;
/* Parses argv[1..argc) ("--flag value" or "--flag=value"): the options above into *c, the
 * rest through syn->own. 0, 1 (--help: usage printed to stdout) or -1 (error printed). */
int run_parse(const run_flag_syntax *syn, int argc, char **argv, run_common *c, void *ctx);
/* The help lines of the options in run_common, the same for every source. */
void run_common_usage(FILE *f);
/* "unknown option '--x' (see kvbench run --help)"; returns -1. */
int run_unknown(const char *flag);

/* An integer in lo..hi, else an error naming the flag; 0 or -1. */
int run_parse_int(const char *flag, const char *s, int lo, int hi, int *out);
/* A finite number (no message); 0 or -1. */
int run_parse_double(const char *s, double *out);
/* Calls item(flag, text, ctx) for every comma-separated item; an empty list or item fails. */
int run_each_item(const char *flag, const char *list, int (*item)(const char *flag, const char *s, void *ctx),
                  void *ctx);

/* One --methods item (a group: all, paper, kvpress; or a method name) added to list[0..*n) without duplicates,
 * at most cap; an unknown name lists the valid ones. 0 or -1. */
int run_add_method(const char *flag, const char *s, const kv_method **list, int *n, int cap);
/* One --budget item: a fraction in (0,1] or an integer token count > 1, no duplicates. */
int run_add_budget(const char *flag, const char *s, double *list, int *n, int cap);

/* --seed N: the workload seed, an integer in 0..WL_SPLIT_SEED_MAX. 0 or -1. */
int run_parse_seed(const char *flag, const char *s, uint64_t *out);
/* --split dev|test: which half of the workload's generator seeds. 0 or -1. */
int run_parse_split(const char *flag, const char *s, wl_split *out);

/* --kv-type: the K/V rows' element type, f32, f16 or bf16 (kernels/kvtype.h). 0 or -1. */
int run_parse_kv_type(const char *flag, const char *s, int *out);
/* The default --kv-type once the backend is known: *kv_type < 0 (not given) becomes bf16
 * for --backend cuda (the paper's GPUs store K/V in bf16), else f32. Returns 0. */
int run_kv_type_backend(int *kv_type, const char *backend);
/* --activations f32|q8: the decode mat-vecs' activations (q8: 8-bit blocks, as llama.cpp).
 * Sets *q8 to 0 or 1; 0, or -1 with the error printed. */
int run_parse_activations(const char *flag, const char *s, int *q8);

/* --batch 1|0: the (method, budget) pairs of a case decode together (1) or one at a time
 * (0: per-method latency). 0, or -1 with the error printed. */
int run_parse_batch(const char *flag, const char *s, int *batch);

/* 1 if the help text usage() prints documents flag (a line "  --flag " or "  --flag,"):
 * tells an unknown option from a known one given without its value, wherever the flag
 * list lives. */
int run_flag_documented(void (*usage)(FILE *), const char *flag);

#endif
