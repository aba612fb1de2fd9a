#include "case_loop.h"
#include "run_args.h"
#include "../../kernels/host.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *cl_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "kvbench run: out of memory (%zu bytes)\n", n * size);
        exit(1);
    }
    return p;
}

/* The shard of every case; all 0 when not sharded. */
static int *shard_owners(const cl_source *src, const shard_spec *sh) {
    int *owner = cl_xcalloc((size_t)src->n_cases, sizeof *owner);
    if (!sh->n) return owner;
    const char **kp = cl_xcalloc((size_t)src->n_cases, sizeof *kp);
    double *cost = cl_xcalloc((size_t)src->n_cases, sizeof *cost);
    for (int i = 0; i < src->n_cases; i++) kp[i] = src->cases[i].key, cost[i] = src->cases[i].cost;
    if (shard_assign(kp, cost, src->n_cases, sh->n, owner)) {
        fprintf(stderr, "kvbench run: out of memory\n");
        exit(1);
    }
    free(kp), free(cost);
    return owner;
}

/* Records run r's whole plan (every shard's cases) for `kvbench merge`. */
static int put_plan(kv_db *db, int64_t run_id, const cl_source *src, int r, const cl_grid *g) {
    int np = g->n_methods * g->n_budgets, n = 0;
    const char **kp = cl_xcalloc((size_t)src->n_cases, sizeof *kp), **mp = cl_xcalloc((size_t)np, sizeof *mp);
    double *bp = cl_xcalloc((size_t)np, sizeof *bp);
    for (int i = 0; i < src->n_cases; i++)
        if (src->cases[i].run == r) kp[n++] = src->cases[i].key;
    for (int m = 0, p = 0; m < g->n_methods; m++)
        for (int b = 0; b < g->n_budgets; b++, p++) mp[p] = g->methods[m]->name, bp[p] = g->budgets[b];
    int rc = kvdb_plan_put(db, run_id, kp, n, mp, bp, np);
    free(kp), free(mp), free(bp);
    return rc;
}

/* Every run's row and plan first: a shard stopped early still holds all the runs of the
 * command (kvbench merge compares the runs of its inputs). */
static int begin_runs(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov, int64_t *run_ids) {
    for (int r = 0; r < src->n_runs; r++) {
        char key[8192], json[16384];
        kvdb_run row;
        if (src->run_row(src->self, r, prov, key, sizeof key, json, sizeof json, &row)) return -1;
        int resumed = 0;
        run_ids[r] = kvdb_run_begin(db, &row, &resumed);
        if (run_ids[r] < 0 || put_plan(db, run_ids[r], src, r, g)) return run_fail("%s", kvdb_errmsg(db));
        if (resumed && !g->quiet)
            fprintf(stderr, "kvbench run: resuming run %lld (%s)\n", (long long)run_ids[r], row.workload);
    }
    return 0;
}

/* The pairs of the grid case_id lacks, method by method, into methods/budgets: their
 * count, or -1 (error printed). case_id 0: a case not recorded yet lacks them all. */
static int missing_pairs(kv_db *db, int64_t case_id, const cl_grid *g, const kv_method **methods, double *budgets) {
    int n = 0;
    for (int i = 0; i < g->n_methods; i++)
        for (int b = 0; b < g->n_budgets; b++) {
            int e = case_id > 0 ? kvdb_result_exists(db, case_id, g->methods[i]->name, g->budgets[b]) : 0;
            if (e < 0) return run_fail("%s", kvdb_errmsg(db));
            if (!e) methods[n] = g->methods[i], budgets[n++] = g->budgets[b];
        }
    return n;
}

int case_loop_run(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov) {
    int *owner = shard_owners(src, &g->shard);
    int n_mine = 0, per_case = g->n_methods * g->n_budgets;
    double total_w = 0, done_w = 0;
    for (int i = 0; i < src->n_cases; i++)
        if (owner[i] == g->shard.k) n_mine++, total_w += src->cases[i].cost;
    if (g->shard.n && !g->quiet)
        fprintf(stderr, "kvbench run: shard %d/%d: %d of the %d cases\n", g->shard.k, g->shard.n, n_mine, src->n_cases);
    double start = kb_now_s();
    int case_i = 0, n_new = 0, n_skipped = 0, rc = 0;
    int64_t *run_ids = cl_xcalloc((size_t)src->n_runs, sizeof *run_ids);
    const kv_method **methods = cl_xcalloc((size_t)per_case, sizeof *methods);
    double *budgets = cl_xcalloc((size_t)per_case, sizeof *budgets);
    const kvdb_result **results = cl_xcalloc((size_t)per_case, sizeof *results);
    rc = begin_runs(src, g, db, prov, run_ids);
    for (int c = 0; c < src->n_cases && !rc; c++) {
        const cl_case *cs = &src->cases[c];
        if (owner[c] != g->shard.k) continue;
        case_i++;
        int64_t case_id = kvdb_case_find(db, run_ids[cs->run], cs->key);
        if (case_id < 0) {
            rc = run_fail("results db '%s': looking up case %s: %s", kvdb_path(db), cs->key,
                          sqlite3_errmsg(kvdb_sqlite(db)));
            break;
        }
        int missing = missing_pairs(db, case_id, g, methods, budgets);
        if (missing < 0) {
            rc = -1;
            break;
        }
        n_skipped += per_case - missing;
        if (!missing) {
            done_w += cs->cost;
            if (!g->quiet)
                fprintf(stderr, "[case %d/%d] %s %s: all %d results present, skipped\n", case_i, n_mine, cs->label,
                        cs->key, per_case);
            continue;
        }
        void *prepared = NULL;
        kvdb_case row;
        if (src->prepare(src->self, c, methods, budgets, missing, &prepared, &row)) {
            rc = -1;
            break;
        }
        if (case_id == 0) case_id = kvdb_case_get(db, run_ids[cs->run], &row);
        if (case_id < 0) {
            rc = run_fail("%s", kvdb_errmsg(db));
            src->release(src->self, prepared);
            break;
        }
        src->run_pairs(src->self, prepared, methods, budgets, missing, results);
        for (int p = 0; p < missing && !rc; p++) {
            const kvdb_result *r = results[p];
            if (!strcmp(r->status, "refused")) {   /* passed the check before the first case, refused now */
                rc = run_fail("case %s: %s refused its configuration (it passed before the first case): %s; "
                              "nothing stored", cs->key, methods[p]->name, r->output);
                break;
            }
            int put = kvdb_result_put(db, case_id, r);
            if (put < 0) {
                rc = run_fail("%s", kvdb_errmsg(db));
                break;
            }
            if (put > 0) {   /* another run on this file recorded it first */
                n_skipped++;
                continue;
            }
            n_new++;
            src->added(src->self, db, case_id, c, p, r);
            if (!g->quiet) {
                double el = kb_now_s() - start;
                double frac = (done_w + cs->cost * (p + 1) / missing) / total_w;
                char b_s[32];
                snprintf(b_s, sizeof b_s, "%.10g", budgets[p]);
                fprintf(stderr, "[case %d/%d] %s %s  %-12s budget %-6s %-10s score %.2f err %.3g  "
                        "%.1fs elapsed, ETA %.0fs\n", case_i, n_mine, cs->label, cs->key, methods[p]->name, b_s,
                        r->status, r->score, r->rel_err, el, frac > 0 ? el * (1 - frac) / frac : 0.0);
            }
        }
        done_w += cs->cost;
        src->release(src->self, prepared);
    }
    if (!rc) {
        src->summary(src->self);
        printf("\n%d results written, %d already present; %.1fs. Full table: kvbench report --db %s\n", n_new,
               n_skipped, kb_now_s() - start, kvdb_path(db));
    }
    free(owner), free(run_ids), free(methods), free(budgets), free(results);
    return rc;
}
