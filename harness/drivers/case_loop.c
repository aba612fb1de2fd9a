#include "case_loop.h"
#include "run_args.h"
#include "../identity/plugin.h"
#include "../../kernels/core.h"
#include "../../kernels/host.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

enum { MAX_JOBS = 64 };

void *cl_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "kvbench run: out of memory (%zu bytes)\n", n * size);
        exit(1);
    }
    return p;
}

void cl_fmt_dur(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

void cl_fmt_bytes(char *buf, size_t len, double b) {
    if (b >= 1 << 30) snprintf(buf, len, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, len, "%.1f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, len, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, len, "%.0f B", b);
}

/* ---------------------------------------------------------------- the plan */

/* Which cases this process runs: take[c] = 1 for the shard's cases (every case when not
 * sharded) and, in a copy of --jobs, every jobs-th of them (numbered in case order).
 * Returns the shard's count in *n_shard, the taken count. */
static int take_cases(const cl_source *src, const cl_grid *g, int *take, int *n_shard) {
    int *owner = cl_xcalloc((size_t)src->n_cases, sizeof *owner);
    if (g->shard.n) {
        const char **kp = cl_xcalloc((size_t)src->n_cases, sizeof *kp);
        double *cost = cl_xcalloc((size_t)src->n_cases, sizeof *cost);
        for (int i = 0; i < src->n_cases; i++) kp[i] = src->cases[i].key, cost[i] = src->cases[i].cost;
        if (shard_assign(kp, cost, src->n_cases, g->shard.n, owner)) {
            fprintf(stderr, "kvbench run: out of memory\n");
            exit(1);
        }
        free(kp), free(cost);
    }
    int mine = 0, n = 0;
    for (int i = 0; i < src->n_cases; i++) {
        take[i] = 0;
        if (owner[i] != g->shard.k) continue;
        take[i] = g->job_index < 0 || mine % g->jobs == g->job_index;
        mine++;
        n += take[i];
    }
    free(owner);
    *n_shard = mine;
    return n;
}

/* Records run r's whole plan (every shard's cases) for `kvbench merge`. */
static int put_plan(kv_db *db, int64_t run_id, const cl_source *src, int r, const cl_grid *g) {
    int n = 0;
    const char **kp = cl_xcalloc((size_t)src->n_cases, sizeof *kp), **mp = cl_xcalloc((size_t)g->n_pairs, sizeof *mp);
    for (int i = 0; i < src->n_cases; i++)
        if (src->cases[i].run == r) kp[n++] = src->cases[i].key;
    for (int p = 0; p < g->n_pairs; p++) mp[p] = g->methods[p]->name;
    int rc = kvdb_plan_put(db, run_id, kp, n, mp, g->budgets, g->n_pairs);
    free(kp), free(mp);
    return rc;
}

/* Every run's row and, but in a copy of --jobs, its plan first: a shard stopped early
 * still holds all the runs of the command (kvbench merge compares the runs of its inputs). */
static int begin_runs(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov, int64_t *run_ids) {
    for (int r = 0; r < src->n_runs; r++) {
        char key[8192], *json = cl_xcalloc(65536, 1);
        kvdb_run row;
        int rc = src->run_row(src->self, r, prov, key, sizeof key, json, 65536, &row);
        int resumed = 0;
        if (!rc) run_ids[r] = kvdb_run_begin(db, &row, &resumed);
        if (!rc && (run_ids[r] < 0 || (g->job_index < 0 && put_plan(db, run_ids[r], src, r, g))))
            rc = run_fail("%s", kvdb_errmsg(db));
        if (!rc && resumed && !g->quiet && g->job_index < 0)
            fprintf(stderr, "kvbench run: resuming run %lld (%s)\n", (long long)run_ids[r], row.workload);
        free(json);
        if (rc) return -1;
    }
    return 0;
}

/* Finds each taken case's id (0: not recorded yet) and marks the pairs it lacks,
 * miss[c * n_pairs + p] = 1. Returns their count, or -1 (error printed). */
static int scan_missing(const cl_source *src, const cl_grid *g, kv_db *db, const int64_t *run_ids, const int *take,
                        int64_t *case_ids, unsigned char *miss) {
    int total = 0;
    for (int c = 0; c < src->n_cases; c++) {
        if (!take[c]) continue;
        const cl_case *cs = &src->cases[c];
        case_ids[c] = kvdb_case_find(db, run_ids[cs->run], cs->key);
        if (case_ids[c] < 0)
            return run_fail("results db '%s': looking up case %s: %s", kvdb_path(db), cs->key,
                            sqlite3_errmsg(kvdb_sqlite(db)));
        for (int p = 0; p < g->n_pairs; p++) {
            int e = case_ids[c] ? kvdb_result_exists(db, case_ids[c], g->methods[p]->name, g->budgets[p]) : 0;
            if (e < 0) return run_fail("%s", kvdb_errmsg(db));
            miss[(size_t)c * g->n_pairs + p] = !e;
            total += !e;
        }
    }
    return total;
}

/* ---------------------------------------------------------------- --jobs */

/* Starts the N copies of this command with --job-index, waits for all. 0 if all succeeded. */
static int run_jobs(const cl_grid *g) {
    int per = g->threads ? g->threads : (kb_threads() / g->jobs > 0 ? kb_threads() / g->jobs : 1);
    char per_s[16];
    snprintf(per_s, sizeof per_s, "%d", per);
    /* main() took the --plugin options out of argv: each copy is given the plugins this
     * process loaded, else their methods are unknown there */
    int np = kv_plugin_count(), n = 0;
    char **args = cl_xcalloc((size_t)g->argc + 2 * (size_t)np + 8, sizeof *args);
    args[n++] = "kvbench";
    for (int p = 0; p < np; p++) {
        args[n++] = "--plugin";
        args[n++] = (char *)kv_plugin_path(p);
    }
    for (int i = 0; i < g->argc; i++) args[n++] = g->argv[i];
    char idx[MAX_JOBS][16];
    pid_t pids[MAX_JOBS];
    int started = 0, rc = 0;
    for (int j = 0; j < g->jobs && j < MAX_JOBS; j++) {
        snprintf(idx[j], sizeof idx[j], "%d", j);
        args[n] = "--threads";
        args[n + 1] = per_s;
        args[n + 2] = "--job-index";
        args[n + 3] = idx[j];
        args[n + 4] = NULL;
        int e = posix_spawn(&pids[j], "/proc/self/exe", NULL, NULL, args, environ);
        if (e) {
            rc = run_fail("--jobs: cannot start job %d: %s", j + 1, strerror(e));
            break;
        }
        started++;
    }
    for (int j = 0; j < started; j++) {
        int status;
        while (waitpid(pids[j], &status, 0) < 0)
            if (errno != EINTR) {
                status = -1;
                break;
            }
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
            if (status != -1 && WIFSIGNALED(status)) run_fail("job %d killed by signal %d", j + 1, WTERMSIG(status));
            else run_fail("job %d failed", j + 1);
            rc = -1;
        }
    }
    free(args);
    return rc;
}

/* ---------------------------------------------------------------- progress */

/* The ETA from two rates measured as the run goes: seconds per unit of preparation cost
 * (the prefill) and per unit of result cost. */
typedef struct {
    double start, pf_s, pf_cost, res_s, res_cost;
    double left_pf_cost, left_res_cost;
    int done, total;
    char prefix[32];
} progress;

static double eta(const progress *p) {
    if (p->pf_cost <= 0 && p->res_cost <= 0) return -1;
    double rate_pf = p->pf_cost > 0 ? p->pf_s / p->pf_cost : 0, rate_res = p->res_cost > 0 ? p->res_s / p->res_cost : 0;
    if (p->left_pf_cost > 0 && rate_pf == 0) return -1;
    if (p->left_res_cost > 0 && rate_res == 0) return -1;
    return p->left_pf_cost * rate_pf + p->left_res_cost * rate_res;
}

/* One result's line: what it scored (or why not), its times, the run's progress. */
static void print_result(const progress *pg, const char *label, const kvdb_result *r) {
    char el[32], et[32], sc[128], dec[96];
    cl_fmt_dur(el, sizeof el, kb_now_s() - pg->start);
    cl_fmt_dur(et, sizeof et, eta(pg));
    if (!strcmp(r->status, "ok")) {
        int k = snprintf(sc, sizeof sc, "score %.2f", r->score);
        if (r->ans_tokens > 0 && k < (int)sizeof sc) k += snprintf(sc + k, sizeof sc - k, ", nll %.2f", r->ans_nll);
        if (r->fid_steps > 0 && k < (int)sizeof sc)
            snprintf(sc + k, sizeof sc - k, ", kl %.3f, top1 %.2f", r->kl, r->top1);
        else if (isfinite(r->rel_err) && k < (int)sizeof sc)
            snprintf(sc + k, sizeof sc - k, ", err %.3g", r->rel_err);
        snprintf(dec, sizeof dec, "compress %.2fs, decode %d steps %.1f tok/s", r->compress_s, r->decode_tokens,
                 r->tokens_per_s);
    } else {
        snprintf(sc, sizeof sc, "%s", r->status);
        snprintf(dec, sizeof dec, "%.50s", r->output ? r->output : "");
    }
    fprintf(stderr, "%s %-12s @ %-5g %s | %s | %d/%d done, %s elapsed, ETA %s\n", label, r->method, r->budget, sc, dec,
            pg->done, pg->total, el, et);
}

/* ---------------------------------------------------------------- the cases */

/* Runs the taken cases' missing pairs. *n_new counts the results committed, *n_present
 * those another process committed first. 0 or -1 (error printed). */
static int run_cases(const cl_source *src, const cl_grid *g, kv_db *db, const int64_t *run_ids, const int *take,
                     int n_take, int64_t *case_ids, const unsigned char *miss, int *n_new, int *n_present) {
    const int np = g->n_pairs;
    progress pg = {.start = kb_now_s()};
    if (g->job_index >= 0) snprintf(pg.prefix, sizeof pg.prefix, "[job %d/%d] ", g->job_index + 1, g->jobs);
    else if (g->shard.n) snprintf(pg.prefix, sizeof pg.prefix, "[shard %d/%d] ", g->shard.k, g->shard.n);
    for (int c = 0; c < src->n_cases; c++) {
        if (!take[c]) continue;
        int k = 0;
        for (int p = 0; p < np; p++) k += miss[(size_t)c * np + p];
        if (!k) continue;
        pg.total += k;
        pg.left_pf_cost += src->cases[c].cost;
        pg.left_res_cost += k * src->cases[c].pair_cost;
    }
    if (!g->quiet)
        fprintf(stderr, "%s%d cases, %d results to compute (%d method/budget pairs per case)\n", pg.prefix, n_take,
                pg.total, np);
    const kv_method **um = cl_xcalloc((size_t)np, sizeof *um);
    double *ub = cl_xcalloc((size_t)np, sizeof *ub);
    const kvdb_result **results = cl_xcalloc((size_t)np, sizeof *results);
    int rc = 0, seen = 0;
    for (int c = 0; c < src->n_cases && !rc; c++) {
        if (!take[c]) continue;
        const cl_case *cs = &src->cases[c];
        seen++;
        char label[320];
        snprintf(label, sizeof label, "%s[case %d/%d] %s%s%s", pg.prefix, seen, n_take, cs->label ? cs->label : "",
                 cs->label ? " " : "", cs->key);
        int nu = 0;
        for (int p = 0; p < np; p++)
            if (miss[(size_t)c * np + p]) um[nu] = g->methods[p], ub[nu++] = g->budgets[p];
        if (!nu) {
            if (!g->quiet) fprintf(stderr, "%s: all %d results present, skipped\n", label, np);
            continue;
        }
        void *prepared = NULL;
        kvdb_case row;
        double t0 = kb_now_s();
        if (src->prepare(src->self, c, g->quiet ? NULL : label, um, ub, nu, &prepared, &row)) {
            rc = -1;
            break;
        }
        pg.pf_s += kb_now_s() - t0;
        pg.pf_cost += cs->cost;
        pg.left_pf_cost -= cs->cost;
        if (!case_ids[c]) case_ids[c] = kvdb_case_get(db, run_ids[cs->run], &row);
        if (case_ids[c] < 0) {
            rc = run_fail("%s", kvdb_errmsg(db));
            src->release(src->self, prepared, db, 0, 0);
            break;
        }
        if (src->recorded) src->recorded(src->self, prepared, db, case_ids[c]);
        int group = src->batched ? nu : 1;
        for (int q = 0; q < nu && !rc; q += group) {
            int gn = nu - q < group ? nu - q : group;
            double tr = kb_now_s();
            src->run_pairs(src->self, prepared, um + q, ub + q, gn, results);
            double share = (kb_now_s() - tr) / gn;   /* batched: an equal share of the batch's time */
            for (int i = 0; i < gn; i++) {
                const kvdb_result *r = results[i];
                if (!strcmp(r->status, "refused")) {   /* passed the check before the first case, refused now */
                    rc = run_fail("case %s: %s refused its configuration (it passed before the first case): %s; "
                                  "nothing stored", cs->key, um[q + i]->name, r->output ? r->output : "?");
                    break;
                }
                int put = kvdb_result_put(db, case_ids[c], r);
                if (put < 0) {
                    rc = run_fail("%s", kvdb_errmsg(db));
                    break;
                }
                if (put > 0) {   /* another run on this file recorded it first: already present */
                    (*n_present)++;
                    continue;
                }
                (*n_new)++;
                if (src->added) src->added(src->self, prepared, db, case_ids[c], c, i, r);
                pg.done++;
                pg.res_s += share;
                pg.res_cost += cs->pair_cost;
                pg.left_res_cost -= cs->pair_cost;
                if (!g->quiet) print_result(&pg, label, r);
            }
        }
        src->release(src->self, prepared, db, case_ids[c], !rc);
    }
    free(um), free(ub), free(results);
    return rc;
}

int case_loop_run(const cl_source *src, const cl_grid *g, kv_db *db, const provenance *prov) {
    int *take = cl_xcalloc((size_t)src->n_cases, sizeof *take), n_shard = 0;
    int n_take = take_cases(src, g, take, &n_shard);
    int64_t *run_ids = cl_xcalloc((size_t)src->n_runs, sizeof *run_ids);
    int64_t *case_ids = cl_xcalloc((size_t)src->n_cases, sizeof *case_ids);
    unsigned char *miss = cl_xcalloc((size_t)src->n_cases * g->n_pairs, 1);
    double start = kb_now_s();
    int n_new = 0, n_present = 0;
    int rc = begin_runs(src, g, db, prov, run_ids);
    if (!rc && g->shard.n && !g->quiet && g->job_index < 0)
        fprintf(stderr, "kvbench run: shard %d/%d: %d of the %d cases\n", g->shard.k, g->shard.n, n_shard,
                src->n_cases);
    int missing = rc ? -1 : scan_missing(src, g, db, run_ids, take, case_ids, miss);
    if (missing < 0) rc = -1;
    else n_present = n_take * g->n_pairs - missing;
    if (!rc && g->jobs > 1 && g->job_index < 0) {   /* the parent of --jobs: its copies run the cases */
        int64_t before = 0, after = 0;
        for (int r = 0; r < src->n_runs; r++) before += kvdb_run_result_count(db, run_ids[r]);
        if (src->unload) src->unload(src->self);
        rc = run_jobs(g);
        for (int r = 0; r < src->n_runs; r++) after += kvdb_run_result_count(db, run_ids[r]);
        n_new = (int)(after - before);
    } else if (!rc) {
        rc = run_cases(src, g, db, run_ids, take, n_take, case_ids, miss, &n_new, &n_present);
    }
    if (!rc && g->job_index < 0) {
        if (src->summary) src->summary(src->self, db, run_ids);
        printf("\n%d results written, %d already present; %.1fs. Full table: kvbench report --db %s\n", n_new,
               n_present, kb_now_s() - start, kvdb_path(db));
    }
    free(take), free(run_ids), free(case_ids), free(miss);
    return rc;
}
