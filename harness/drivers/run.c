/* kvbench run: a workload over methods and budgets into a results file, through the one
 * case loop (case_loop.c). The options are parsed once, by one rule (run_args.c); the
 * workload (or --model) picks the case source: the synthetic streams (syn_source.c) or
 * the text workloads through the model (model_source.c). Every result is committed as
 * soon as it is computed; rerunning the same command finds the same run and skips what
 * is committed. */
#include "run_sources.h"
#include "../cli/commands.h"
#include "../identity/provenance.h"
#include "../../results/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const run_source_kind *const kinds[] = {&syn_source_kind, &model_source_kind};
enum { N_KINDS = sizeof kinds / sizeof kinds[0], MAX_GIVEN = 256 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench run --db FILE [--workload W] [--model F] [options]\n"
            "\n"
            "Replays a workload over methods and budgets; every result is committed to the SQLite\n"
            "file FILE as soon as it is computed, and rerunning the same command resumes where it\n"
            "stopped. The workload picks the cases: synthetic-* (the default: synthetic-niah) replays\n"
            "synthetic Q/K/V streams without a model; a text workload (niah, ruler, longbench,\n"
            "infinitebench, gsm8k), or --model, runs through the model. Each case is prepared once\n"
            "(the shared prefill) and every (method, budget) it lacks runs on it.\n"
            "\n"
            "Options of every run:\n");
    run_common_usage(f);
    fprintf(f, "\nThe synthetic workloads:\n");
    syn_source_kind.options(f);
    fprintf(f, "\nText workloads through the model:\n");
    model_source_kind.options(f);
    fprintf(f,
            "\n"
            "LIST is comma-separated. A run is identified by everything that changes the numbers of a\n"
            "result: the workload and its inputs (through the model: the model file, the generation\n"
            "settings), seed, split, K/V type, backend, the code (git commit, and a hash of uncommitted\n"
            "edits) and every method's effective parameters (defaults with --params applied); methods,\n"
            "budgets, ctx, depths and limits only select which results to add. A bad --params value or\n"
            "params file stops the run before its first case (exit 2, nothing stored).\n"
            "Through the model, generation is greedy and stops at the tokenizer's stop tokens (end of\n"
            "turn and end of text), at a newline for tasks scored on one line (LongBench samsum), or at\n"
            "the limit; latency is split into prefill (shared; with --question-after plus the question\n"
            "tokens), compression (the method's ingest) and decode (tokens/s of the forward passes).\n");
}

static int is_flag_of(const run_source_kind *k, const char *flag) {
    for (const char *const *f = k->flags; *f; f++)
        if (!strcmp(*f, flag)) return 1;
    return 0;
}

/* The sources' own options, kept as given until the source is known. */
typedef struct {
    run_given given[MAX_GIVEN];
    int n;
} given_list;

static int own_flag(void *ctx, const char *flag, const char *val) {
    given_list *gl = ctx;
    for (int k = 0; k < N_KINDS; k++) {
        if (!is_flag_of(kinds[k], flag)) continue;
        if (gl->n == MAX_GIVEN) return run_fail("more than %d options", MAX_GIVEN);
        const char *const *f = kinds[k]->flags;
        while (strcmp(*f, flag)) f++;   /* the table's string: flag is the parser's buffer */
        gl->given[gl->n++] = (run_given){*f, val};
        return 1;
    }
    return 0;
}

int run_apply_own(const run_given *own, int n, int (*fn)(void *ctx, const char *flag, const char *val), void *ctx) {
    for (int i = 0; i < n; i++) {
        int r = fn(ctx, own[i].flag, own[i].val);
        if (r < 0) return -1;
        if (r == 0) return run_unknown(own[i].flag);
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    const char *bare[16];
    int n_bare = 0;
    for (int k = 0; k < N_KINDS; k++)
        for (const char *const *b = kinds[k]->bare; *b && n_bare < 16; b++) bare[n_bare++] = *b;
    const run_flag_syntax syn = {bare, n_bare, usage, own_flag, run_unknown};
    run_common c = {.methods = "all", .budgets = "0.1", .backend = "cpu", .kv_type = -1};
    given_list *gl = calloc(1, sizeof *gl);
    if (!gl) return run_fail("out of memory"), 1;
    int pr = run_parse(&syn, argc, argv, &c, gl);
    if (pr) {
        free(gl);
        return pr > 0 ? 0 : 2;
    }
    /* the source: the model's when --model is given or the workload is a text one */
    int model = c.workload && strncmp(c.workload, "synthetic-", 10);
    for (int i = 0; i < gl->n; i++) model |= !strcmp(gl->given[i].flag, "--model");
    const run_source_kind *kind = kinds[model], *other = kinds[!model];
    if (kind->check_workload(c.workload)) return free(gl), 2;
    for (int i = 0; i < gl->n; i++)
        if (!is_flag_of(kind, gl->given[i].flag)) {
            run_fail("%s applies to %s, not to %s", gl->given[i].flag, other->where, kind->not_these);
            return free(gl), 2;
        }
    cl_source src;
    cl_grid grid;
    int rc = kind->open(&c, gl->given, gl->n, argc, argv, &src, &grid);
    free(gl);
    if (rc != RUN_READY) return rc;
    char err[512];
    kv_db *db = kvdb_open(c.db_path, err, sizeof err);
    if (!db) {
        kind->close(&src);
        return run_fail("%s", err), 1;
    }
    provenance prov;
    provenance_get(&prov);
    rc = case_loop_run(&src, &grid, db, &prov);
    kind->close(&src);
    kvdb_close(db);
    return rc ? 1 : 0;
}
