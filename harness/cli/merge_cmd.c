/* kvbench merge OUT IN...: joins the results files of a sharded run (kvbench run --shard
 * K/N, one file per machine) into one, then says which planned results are still missing.
 *
 * Every input is checked before anything is written: all must be kvbench results files
 * holding the same run identities (code, configuration, model); OUT may be new or hold
 * the same runs (an earlier, partial merge). Each input then goes in in one transaction,
 * so an interrupted merge is resumed by running it again, and merging a file twice
 * changes nothing. */
#include "commands.h"
#include "../../results/db.h"
#include "../../results/merge.h"
#include "../../results/query.h"
#include "../../kernels/cli_opt.h"
#include "../../kernels/host.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { SHOW_MISSING = 20 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench merge OUT.db IN.db [IN.db ...] [--quiet]\n"
            "\n"
            "Joins results files into OUT.db (created if missing): typically the shard files of\n"
            "one `kvbench run --shard K/N` command run on several machines (kvbench slurm-script).\n"
            "\n"
            "  - the inputs must hold the same runs: same run key, code (git commit, build flags),\n"
            "    model and configuration; a mixture is refused before anything is written\n"
            "  - results are unioned by (case, method, budget); one present in two files must be\n"
            "    equal in every column but timings and device peaks, else the merge stops naming\n"
            "    the case, method, budget and column, and that input is not merged\n"
            "  - each input is merged in one transaction: rerunning the same merge (after an\n"
            "    interruption, or with more shard files) resumes it, merging a file twice is harmless\n"
            "  - at the end, the results the runs' commands planned but no input holds are listed\n"
            "    by case, and results no plan lists are counted (such a run is not complete)\n"
            "\n"
            "  --quiet   only errors and the missing cases\n"
            "  --help    this text\n"
            "\n"
            "Exit status: 0 merged and complete, 3 merged but results are missing or unplanned,\n"
            "1 on an error (unreadable file, conflict, mixture), 2 on a usage error.\n");
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain("merge", fmt, ap);
    va_end(ap);
    return code;
}

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

typedef struct {
    int shown;
} show_ctx;

static void show_missing(const char *key, int missing, int planned, void *ctx) {
    show_ctx *s = ctx;
    if (s->shown++ < SHOW_MISSING) printf("  missing: %s (%d of %d results)\n", key, missing, planned);
}

int cmd_merge(int argc, char **argv) {
    const char *out_path = NULL;
    const char **in = calloc((size_t)argc + 1, sizeof *in);
    int n_in = 0, quiet = 0;
    if (!in) return fail(1, "out of memory");
    static const char *const bare[] = {"--help", "-h", "--quiet", NULL};
    for (int i = 1; i < argc; i++) {   /* the one rule of every command's options (kernels/cli_opt.h) */
        char a[64];
        const char *v = NULL;
        int r = kb_opt_read("merge", argc, argv, &i, bare, NULL, 1, a, sizeof a, &v);
        if (r < 0) {
            free(in);
            return 2;
        }
        if (r == 1) {   /* a file: the output, then the inputs */
            if (!out_path) out_path = argv[i];
            else in[n_in++] = argv[i];
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else {
            usage(stdout);
            free(in);
            return 0;
        }
    }
    if (!out_path || !n_in) {
        free(in);
        usage(stderr);
        return fail(2, "needs OUT.db and at least one IN.db");
    }
    int rc = 0;
    char err[1024];
    for (int i = 0; i < n_in && !rc; i++)
        if (same_file(out_path, in[i])) rc = fail(2, "%s is both the output and an input", in[i]);

    /* every input readable and of one run identity, before anything is written */
    merge_runs *ref = NULL;
    for (int i = 0; i < n_in && !rc; i++) {
        kv_db *db = kvdb_open_readonly(in[i], err, sizeof err);
        if (!db) {
            rc = fail(1, "%s", err);
            break;
        }
        merge_runs *r = merge_runs_read(db, err, sizeof err);
        kvdb_close(db);
        if (!r) {
            rc = fail(1, "results db '%s': %s", in[i], err);
            break;
        }
        if (!ref) {
            ref = r;
            if (!merge_runs_count(ref)) rc = fail(1, "results db '%s' holds no run", in[i]);
            continue;
        }
        if (merge_runs_differ(ref, in[0], r, in[i], err, sizeof err))
            rc = fail(1, "refusing a mixture of runs (merge the shards of one command): %s", err);
        merge_runs_free(r);
    }
    struct stat st_out;
    if (!rc && stat(out_path, &st_out) == 0) {   /* an earlier merge: the same runs */
        kv_db *db = kvdb_open_readonly(out_path, err, sizeof err);
        merge_runs *r = db ? merge_runs_read(db, err, sizeof err) : NULL;
        kvdb_close(db);
        if (!r) rc = fail(1, "%s", err);
        else if (merge_runs_count(r) && merge_runs_differ(ref, in[0], r, out_path, err, sizeof err))
            rc = fail(1, "refusing a mixture of runs (%s holds others): %s", out_path, err);
        merge_runs_free(r);
    }
    merge_runs_free(ref);
    kv_db *out = rc ? NULL : kvdb_open(out_path, err, sizeof err);
    if (!rc && !out) rc = fail(1, "%s", err);
    if (!rc) merge_speed_up(out);

    double t0 = kb_now_s();
    merge_stats total = {0};
    for (int i = 0; i < n_in && !rc; i++) {
        merge_stats st = {0};
        if (merge_file(out, in[i], &st, err, sizeof err)) {
            rc = fail(1, "%s (nothing of %s merged; %d of %d inputs merged before it)", err, in[i], i, n_in);
            break;
        }
        if (!quiet)
            fprintf(stderr, "[%d/%d] %s: %lld new results, %lld already present, %lld new cases\n", i + 1, n_in, in[i],
                    (long long)st.results_new, (long long)st.results_present, (long long)st.cases_new);
        total.results_new += st.results_new;
        total.results_present += st.results_present;
        total.cases_new += st.cases_new;
        total.runs_new += st.runs_new;
    }
    if (!rc) {
        /* completeness of every run against its plan */
        sqlite3_stmt *q = kvq_run_ids(kvdb_sqlite(out));
        int any_missing = 0;
        if (!q)
            rc = fail(1, "results db '%s': %s", out_path, sqlite3_errmsg(kvdb_sqlite(out)));
        while (!rc && sqlite3_step(q) == SQLITE_ROW) {
            int64_t run_id = sqlite3_column_int64(q, 0);
            merge_missing m;
            if (merge_missing_scan(out, run_id, &m, NULL, NULL, err, sizeof err)) {
                rc = fail(1, "%s", err);
                break;
            }
            if (!m.planned) {
                printf("run %lld (%s): no plan recorded (files from before schema 3), completeness unknown\n",
                       (long long)m.run_id, m.workload);
                continue;
            }
            printf("run %lld (%s): %lld of %lld planned results present", (long long)m.run_id, m.workload,
                   (long long)m.present, (long long)m.planned);
            if (m.unplanned) {   /* not the run its plan describes: never "complete" */
                printf("; %lld results no plan lists (e.g. %s), so not complete%s\n", (long long)m.unplanned,
                       m.unplanned_eg, m.missing ? "; and" : "");
                any_missing = 1;
                if (!m.missing) continue;
            }
            if (!m.missing) {
                printf(", complete\n");
                continue;
            }
            printf("; %lld missing in %lld cases:\n", (long long)m.missing, (long long)m.missing_cases);
            show_ctx sc = {0};
            if (merge_missing_scan(out, run_id, &m, show_missing, &sc, err, sizeof err)) {
                rc = fail(1, "%s", err);
                break;
            }
            if (sc.shown > SHOW_MISSING) printf("  ... and %d more cases\n", sc.shown - SHOW_MISSING);
            any_missing = 1;
        }
        sqlite3_finalize(q);
        if (!rc) {
            printf("%s: %lld results merged from %d files (%lld new, %lld already present); %.2fs\n", out_path,
                   (long long)(total.results_new + total.results_present), n_in, (long long)total.results_new,
                   (long long)total.results_present, kb_now_s() - t0);
            if (any_missing) rc = 3;
        }
    }
    kvdb_close(out);
    free(in);
    return rc;
}
