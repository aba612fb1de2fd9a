/* Shared by report and plot: open a results file, pick a run, order and colour methods. */
#include "runinfo.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../methods/method.h"
#include "../results/query.h"

static char *col_dup(sqlite3_stmt *st, int i) {
    const unsigned char *s = sqlite3_column_text(st, i);
    return strdup(s ? (const char *)s : "?");
}

void kv_runinfo_free(kv_runinfo *ri) {
    free(ri->run_key), free(ri->workload), free(ri->model), free(ri->git_commit);
    free(ri->backend), free(ri->build_flags), free(ri->created);
    memset(ri, 0, sizeof *ri);
}

static void read_run(sqlite3_stmt *st, kv_runinfo *ri) {
    ri->id = sqlite3_column_int64(st, 0);
    ri->run_key = col_dup(st, 1);
    ri->workload = col_dup(st, 2);
    ri->model = col_dup(st, 3);
    ri->git_commit = col_dup(st, 4);
    ri->backend = col_dup(st, 5);
    ri->build_flags = col_dup(st, 6);
    ri->created = col_dup(st, 7);
    int64_t seed = sqlite3_column_int64(st, 8);
    memcpy(&ri->seed, &seed, sizeof seed);
    const char *r = strstr(ri->run_key, ";decode_rule=");
    ri->decode_rule = !r ? "hold (before --decode)" : !strncmp(r + 13, "append", 6) ? "append" : "hold";
}

kv_db *kv_report_open(const char *cmd, const char *path, int64_t run_id, kv_runinfo *ri) {
    memset(ri, 0, sizeof *ri);
    char err[512];
    kv_db *db = kvdb_open_readonly(path, err, sizeof err);
    if (!db) {
        fprintf(stderr, "kvbench %s: %s\n", cmd, err);
        return NULL;
    }
    sqlite3 *h = kvdb_sqlite(db);
    sqlite3_stmt *st = kvq_run_count(h);
    if (!st || sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "kvbench %s: results db '%s': %s\n", cmd, path, sqlite3_errmsg(h));
        goto bad;
    }
    ri->n_runs = sqlite3_column_int(st, 0);
    int64_t latest = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    st = NULL;
    if (ri->n_runs == 0) {
        fprintf(stderr, "kvbench %s: results db '%s' has no runs yet (kvbench run --db %s ...)\n", cmd, path, path);
        goto bad;
    }
    if (run_id <= 0) run_id = latest;
    if (!(st = kvq_run(h, run_id))) {
        fprintf(stderr, "kvbench %s: results db '%s': %s\n", cmd, path, sqlite3_errmsg(h));
        goto bad;
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "kvbench %s: results db '%s' has no run %lld (latest is %lld)\n", cmd, path,
                (long long)run_id, (long long)latest);
        goto bad;
    }
    read_run(st, ri);
    sqlite3_finalize(st);
    return db;
bad:
    sqlite3_finalize(st);
    kv_runinfo_free(ri);
    kvdb_close(db);
    return NULL;
}

kv_runinfo *kv_runinfo_all(const char *cmd, kv_db *db, int *n) {
    sqlite3 *h = kvdb_sqlite(db);
    sqlite3_stmt *st = NULL;
    kv_runinfo *all = NULL;
    int cap = 0, rc;
    *n = 0;
    if (!(st = kvq_runs(h))) goto sqlerr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            kv_runinfo *p = realloc(all, cap * sizeof *p);
            if (!p) {
                fprintf(stderr, "kvbench %s: out of memory\n", cmd);
                goto bad;
            }
            all = p;
        }
        memset(&all[*n], 0, sizeof *all);
        read_run(st, &all[(*n)++]);
    }
    if (rc != SQLITE_DONE) goto sqlerr;
    sqlite3_finalize(st);
    for (int i = 0; i < *n; i++) all[i].n_runs = *n;
    return all;
sqlerr:
    fprintf(stderr, "kvbench %s: results db '%s': %s\n", cmd, kvdb_path(db), sqlite3_errmsg(h));
bad:
    sqlite3_finalize(st);
    kv_runinfo_free_all(all, *n);
    *n = 0;
    return NULL;
}

void kv_runinfo_free_all(kv_runinfo *ri, int n) {
    for (int i = 0; ri && i < n; i++) kv_runinfo_free(&ri[i]);
    free(ri);
}

/* The value of ";name=" in a run key ("" when absent: files from before it was recorded). */
static void key_field(const char *key, const char *name, char *buf, size_t n) {
    const char *f = key ? strstr(key, name) : NULL;
    buf[0] = 0;
    if (f) snprintf(buf, n, "%.*s", (int)strcspn(f + strlen(name), ";"), f + strlen(name));
}

void kv_runinfo_line(const kv_runinfo *ri, char *buf, size_t n) {
    char split[16], hints[8], kvt[16], extra[64] = "";
    key_field(ri->run_key, ";split=", split, sizeof split);
    key_field(ri->run_key, ";kv_type=", kvt, sizeof kvt);   /* absent: before --kv-type, rows were f32 */
    if (!*kvt) key_field(ri->run_key, ";kv=", kvt, sizeof kvt);   /* kvbench sim's key spells it kv= */
    key_field(ri->run_key, ";oracle_hints=", hints, sizeof hints);
    if (*split) snprintf(extra, sizeof extra, ", split %s", split);
    if (*hints) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", oracle hints %s",
                         strcmp(hints, "0") ? "on" : "off");
    snprintf(buf, n, "run %lld: workload %s%s, model %s, git %s, seed %llu, backend %s, created %s, decode rule %s, "
             "K/V %s", (long long)ri->id, ri->workload, extra, ri->model, ri->git_commit, (unsigned long long)ri->seed,
             ri->backend, ri->created, ri->decode_rule, *kvt ? kvt : "f32");
    /* NIAH runs name their prompt settings (split, needles, samples, needle, answer prefix) */
    const char *ni = ri->run_key ? strstr(ri->run_key, ";niah=") : NULL;
    if (ni) {
        size_t k = strlen(buf), len = strcspn(ni + 6, ";");
        snprintf(buf + k, n > k ? n - k : 0, ", niah %.*s", (int)len, ni + 6);
    }
}

static int registry_rank(const char *name) {
    int n = kv_method_count();
    for (int i = 0; i < n; i++)
        if (strcasecmp(kv_method_at(i)->name, name) == 0) return i;
    return n;
}

int kv_method_cmp(const char *a, const char *b) {
    int ra = registry_rank(a), rb = registry_rank(b);
    if (ra != rb) return ra < rb ? -1 : 1;
    return strcmp(a, b);
}

void kv_human_bytes(double b, char *buf, size_t n) {
    if (b < 1024) snprintf(buf, n, "%.0f B", b);
    else if (b < 1024.0 * 1024) snprintf(buf, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

void kv_budget_str(double budget, char *buf, size_t n) { snprintf(buf, n, "%g", budget); }

/* By the method's place in the registry (the reports' order), so a method keeps its
 * colour across figures: the first eight built-in methods (FullKV black, then the
 * baselines and SeKV) get these. */
static const char *const method_colors[] = {"#000000", "#1f77b4", "#ff7f0e", "#2ca02c",
                                            "#d62728", "#9467bd", "#8c564b", "#e377c2"};

const char *kv_method_color(const char *name) {
    static const char *const spare[] = {"#17becf", "#bcbd22", "#7f7f7f", "#aec7e8", "#98df8a"};
    for (int i = 0; i < kv_method_count() && i < (int)(sizeof method_colors / sizeof method_colors[0]); i++)
        if (strcasecmp(kv_method_at(i)->name, name) == 0) return method_colors[i];
    unsigned h = 5381;   /* unknown names: a stable pick from spare colours */
    for (const char *p = name; *p; p++) h = h * 33 + (unsigned char)*p;
    return spare[h % (sizeof spare / sizeof spare[0])];
}
