/* Command-line parsing shared by the run drivers (run.c, run_model.c): one-line errors
 * prefixed "kvbench run: ", the split of a word into flag and value, bounded integers,
 * finite numbers, comma lists, and the options both drivers take (--methods, --budget,
 * --seed, --split, --kv-type, ...), each parsed here once. */
#ifndef KV_RUN_ARGS_H
#define KV_RUN_ARGS_H
#include <stdint.h>
#include <stdio.h>
#include "../../methods/method.h"
#include "../../workloads/split.h"

/* Prints "kvbench run: <message>" on stderr; returns -1. */
int run_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A driver's flag syntax: the flags that take no value (bare[0..n_bare)), its help text
 * (a flag it documents but got without a value "needs a value") and its message for an
 * unknown flag (returns -1). */
typedef struct {
    const char *const *bare;
    int n_bare;
    void (*usage)(FILE *);
    int (*unknown)(const char *flag);
} run_flag_syntax;
/* argv[*i] as "--flag value" (advancing *i) or "--flag=value" into flag[0..cap) and *val
 * (NULL for a bare flag); a bare flag given "=value" fails. 0 or -1 (error printed). */
int run_split_flag(const run_flag_syntax *syn, int argc, char **argv, int *i, char *flag, size_t cap,
                   const char **val);
/* An integer in lo..hi, else an error naming the flag; 0 or -1. */
int run_parse_int(const char *flag, const char *s, int lo, int hi, int *out);
/* A finite number (no message); 0 or -1. */
int run_parse_double(const char *s, double *out);
/* Calls item(flag, text, ctx) for every comma-separated item; an empty list or item fails. */
int run_each_item(const char *flag, const char *list, int (*item)(const char *flag, const char *s, void *ctx),
                  void *ctx);

/* One --methods item ("all" or a method name) added to list[0..*n) without duplicates,
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
/* The help lines of --kv-type, shared by the drivers' usage texts. */
#define RUN_KV_TYPE_HELP                                                                          \
    "  --kv-type T       K/V rows stored as f32, f16 or bf16 by every method (rounded to\n"      \
    "                    nearest even; attention computes in f32; memory counts the type's\n"  \
    "                    bytes); part of the run's identity. Default f32, and bf16 with\n"     \
    "                    --backend cuda (device copies hold the rows in the type)\n"
/* The default --kv-type once the backend is known: *kv_type < 0 (not given) becomes bf16
 * for --backend cuda (the paper's GPUs store K/V in bf16), else f32. Returns 0. */
int run_kv_type_backend(int *kv_type, const char *backend);
/* --activations f32|q8: the decode mat-vecs' activations (q8: 8-bit blocks, as llama.cpp).
 * Sets *q8 to 0 or 1; 0, or -1 with the error printed. */
int run_parse_activations(const char *flag, const char *s, int *q8);

/* 1 if the help text usage() prints documents flag (a line "  --flag " or "  --flag,"):
 * tells an unknown option from a known one given without its value, wherever the flag
 * list lives. */
int run_flag_documented(void (*usage)(FILE *), const char *flag);

#endif
