/* kvbench merge's database side: the input is ATTACHed to the output's connection and
 * copied with set-based SQL (one transaction per input), so that a hundred shard files of
 * a hundred thousand rows each merge in seconds. Column lists come from the schemas of
 * both files, never from a list written here. */
#include "merge.h"
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COLS = 128, NAME_LEN = 64, SQL_LEN = 32768 };

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

int merge_is_measurement(const char *c) {
    return ends_with(c, "_s") || ends_with(c, "_ms") || strstr(c, "_s_") || strstr(c, "rss") ||
           strstr(c, "peak_bytes") || !strncmp(c, "gpu_", 4) || !strcmp(c, "created") || ends_with(c, "_spread") ||
           !strncmp(c, "load_", 5);
}

static int say(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- columns */

typedef struct {
    int n;
    char name[MAX_COLS][NAME_LEN];
} cols;

/* The columns of schema.table in order; n = 0 when the table does not exist. */
static int table_cols(sqlite3 *h, const char *schema, const char *table, cols *c) {
    c->n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT name FROM pragma_table_info(?, ?)", -1, &st, NULL)) return -1;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, schema, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && c->n < MAX_COLS)
        snprintf(c->name[c->n++], NAME_LEN, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

static int has_col(const cols *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) return 1;
    return 0;
}

/* Columns of table in both schemas, minus those skip() refuses (skip may be NULL) and the
 * names in the NULL-terminated list `without`. */
static int common_cols(sqlite3 *h, const char *table, int (*skip)(const char *), const char *const *without,
                       cols *out) {
    cols a, b;
    if (table_cols(h, "main", table, &a) || table_cols(h, "src", table, &b)) return -1;
    out->n = 0;
    for (int i = 0; i < a.n; i++) {
        int drop = !has_col(&b, a.name[i]) || (skip && skip(a.name[i]));
        for (int k = 0; without && without[k] && !drop; k++) drop = !strcmp(a.name[i], without[k]);
        if (!drop) memcpy(out->name[out->n++], a.name[i], NAME_LEN);
    }
    return 0;
}

/* Appends to a fixed SQL buffer; returns -1 once it would overflow. */
typedef struct {
    char s[SQL_LEN];
    size_t n;
    int over;
} sqlbuf;

static void put(sqlbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sqlbuf *b, const char *fmt, ...) {
    if (b->over) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof b->s - b->n) b->over = 1;
    else b->n += (size_t)k;
}

/* "p.a, p.b, ..." (prefix may be empty) */
static void put_list(sqlbuf *b, const char *prefix, const cols *c) {
    for (int i = 0; i < c->n; i++) put(b, "%s%s\"%s\"", i ? ", " : "", prefix, c->name[i]);
}

/* ---------------------------------------------------------------- run identities */

static const char *const not_identity[] = {"id", "created", "host", "cpu", "config_json", NULL};

typedef struct {
    char *key, *workload;
    int n;
    char **name, **value;   /* value NULL for SQL NULL */
} run_ident;

struct merge_runs {
    int n;
    run_ident *v;
};

void merge_runs_free(merge_runs *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        for (int k = 0; k < r->v[i].n; k++) free(r->v[i].name[k]), free(r->v[i].value[k]);
        free(r->v[i].name), free(r->v[i].value), free(r->v[i].key), free(r->v[i].workload);
    }
    free(r->v);
    free(r);
}

int merge_runs_count(const merge_runs *r) { return r->n; }

static char *dup_or_null(const unsigned char *s) { return s ? strdup((const char *)s) : NULL; }

static merge_runs *runs_read_schema(sqlite3 *h, const char *schema, char *err, size_t errlen) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\".runs ORDER BY run_key", schema);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL)) {
        say(err, errlen, "reading the runs: %s", sqlite3_errmsg(h));
        return NULL;
    }
    merge_runs *r = calloc(1, sizeof *r);
    int cap = 0, rc;
    while (r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n == cap) {
            cap = cap ? 2 * cap : 8;
            run_ident *v = realloc(r->v, (size_t)cap * sizeof *v);
            if (!v) break;
            r->v = v;
        }
        run_ident *ri = &r->v[r->n++];
        memset(ri, 0, sizeof *ri);
        int nc = sqlite3_column_count(st);
        ri->name = calloc((size_t)nc + 1, sizeof *ri->name);
        ri->value = calloc((size_t)nc + 1, sizeof *ri->value);
        for (int c = 0; c < nc && ri->name && ri->value; c++) {
            const char *name = sqlite3_column_name(st, c);
            const unsigned char *val = sqlite3_column_text(st, c);
            if (!strcmp(name, "run_key")) ri->key = dup_or_null(val);
            if (!strcmp(name, "workload")) ri->workload = dup_or_null(val);
            int skip = 0;
            for (int k = 0; not_identity[k]; k++) skip |= !strcmp(name, not_identity[k]);
            if (skip) continue;
            ri->name[ri->n] = strdup(name);
            ri->value[ri->n++] = dup_or_null(val);
        }
        if (!ri->key) ri->key = strdup("");
        if (!ri->workload) ri->workload = strdup("?");
    }
    rc = sqlite3_errcode(h);
    sqlite3_finalize(st);
    if (!r || (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)) {
        say(err, errlen, "reading the runs: %s", r ? sqlite3_errmsg(h) : "out of memory");
        merge_runs_free(r);
        return NULL;
    }
    return r;
}

merge_runs *merge_runs_read(kv_db *db, char *err, size_t errlen) {
    return runs_read_schema(kvdb_sqlite(db), "main", err, errlen);
}

static const run_ident *find_run(const merge_runs *r, const char *key) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].key, key)) return &r->v[i];
    return NULL;
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* The first ';'-separated field where two run keys differ, into buf as "FIELD_A' vs 'FIELD_B". */
static void key_diff(const char *a, const char *b, const char *an, const char *bn, char *buf, size_t len) {
    const char *pa = a, *pb = b;
    while (*pa && *pb) {
        size_t la = strcspn(pa, ";"), lb = strcspn(pb, ";");
        if (la != lb || memcmp(pa, pb, la)) {
            snprintf(buf, len, "'%.*s' in %s, '%.*s' in %s", (int)(la > 200 ? 200 : la), pa, an,
                     (int)(lb > 200 ? 200 : lb), pb, bn);
            return;
        }
        pa += la + (pa[la] == ';');
        pb += lb + (pb[lb] == ';');
    }
    snprintf(buf, len, "'%.200s' in %s, '%.200s' in %s", *pa ? pa : "(end of key)", an, *pb ? pb : "(end of key)", bn);
}

/* Same key, different identity columns: 1 and why. */
static int ident_differ(const run_ident *a, const char *an, const run_ident *b, const char *bn, char *why, size_t len) {
    for (int i = 0; i < a->n; i++) {
        const char *bv = NULL;
        int found = 0;
        for (int k = 0; k < b->n && !found; k++)
            if (!strcmp(a->name[i], b->name[k])) bv = b->value[k], found = 1;
        if (!same_str(a->value[i], bv)) {
            snprintf(why, len, "run %s (%.60s...): %s is '%.200s' in %s, '%.200s' in %s", a->workload, a->key, a->name[i],
                     a->value[i] ? a->value[i] : "NULL", an, bv ? bv : "NULL", bn);
            return 1;
        }
    }
    return 0;
}

int merge_runs_differ(const merge_runs *a, const char *an, const merge_runs *b, const char *bn, char *why, size_t len) {
    if (a->n == 1 && b->n == 1 && strcmp(a->v[0].key, b->v[0].key)) {
        char d[512];
        key_diff(a->v[0].key, b->v[0].key, an, bn, d, sizeof d);
        snprintf(why, len, "the run identities differ: %s", d);
        return 1;
    }
    for (int i = 0; i < a->n; i++) {
        const run_ident *o = find_run(b, a->v[i].key);
        if (!o) {
            for (int k = 0; k < b->n && !o; k++)   /* the same workload under another key: say what differs */
                if (!strcmp(b->v[k].workload, a->v[i].workload)) o = &b->v[k];
            if (o) {
                char d[512];
                key_diff(a->v[i].key, o->key, an, bn, d, sizeof d);
                snprintf(why, len, "the run identities of %s differ: %s", a->v[i].workload, d);
            } else {
                snprintf(why, len, "%s holds run %s (%.60s...), %s does not (%d runs vs %d)", an, a->v[i].workload,
                         a->v[i].key, bn, a->n, b->n);
            }
            return 1;
        }
        if (ident_differ(&a->v[i], an, o, bn, why, len)) return 1;
    }
    for (int i = 0; i < b->n; i++)
        if (!find_run(a, b->v[i].key)) {
            snprintf(why, len, "%s holds run %s (%.60s...), %s does not (%d runs vs %d)", bn, b->v[i].workload, b->v[i].key,
                     an, b->n, a->n);
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- merging one file */

static int exec_sql(sqlite3 *h, const char *sql, char *err, size_t errlen) {
    char *e = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &e) != SQLITE_OK) {
        say(err, errlen, "%s", e ? e : sqlite3_errmsg(h));
        sqlite3_free(e);
        return -1;
    }
    return 0;
}

static int exec_buf(sqlite3 *h, const sqlbuf *b, char *err, size_t errlen) {
    if (b->over) return say(err, errlen, "too many columns for the merge's SQL buffer");
    return exec_sql(h, b->s, err, errlen);
}

static int64_t count_of(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Runs a conflict query whose row is (key columns..., then value pairs out, in); on a row,
 * names the first differing column in err and returns 1. n_key: leading key columns
 * described by `what` (a printf of them). 0 when no row, -1 on an SQL error. */
static int conflict(sqlite3 *h, const sqlbuf *q, const cols *v, int n_key, const char *in_name, const char *out_name,
                    char *err, size_t errlen) {
    if (q->over) return say(err, errlen, "too many columns for the merge's SQL buffer");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, q->s, -1, &st, NULL)) return say(err, errlen, "%s", sqlite3_errmsg(h));
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(st);
        return 0;
    }
    if (rc != SQLITE_ROW) {
        say(err, errlen, "%s", sqlite3_errmsg(h));
        sqlite3_finalize(st);
        return -1;
    }
    char where[512] = "";
    const unsigned char *k0 = sqlite3_column_text(st, 0);
    if (n_key == 1) snprintf(where, sizeof where, "case '%.300s'", k0 ? (const char *)k0 : "?");
    else {
        const unsigned char *m = sqlite3_column_text(st, 1);
        snprintf(where, sizeof where, "case '%.300s', method %.64s, budget %.10g", k0 ? (const char *)k0 : "?",
                 m ? (const char *)m : "?", sqlite3_column_double(st, 2));
    }
    for (int i = 0; i < v->n; i++) {
        int co = n_key + 2 * i, ci = co + 1;
        int to = sqlite3_column_type(st, co), ti = sqlite3_column_type(st, ci), same;
        if (to == SQLITE_FLOAT && ti == SQLITE_FLOAT) same = sqlite3_column_double(st, co) == sqlite3_column_double(st, ci);
        const unsigned char *so = sqlite3_column_text(st, co), *si = sqlite3_column_text(st, ci);
        if (!(to == SQLITE_FLOAT && ti == SQLITE_FLOAT)) same = to == ti && same_str((const char *)so, (const char *)si);
        if (!same) {
            say(err, errlen, "%s conflicts with %s: %s: %s is %.60s%s in %s, %.60s%s in %s", in_name, out_name, where,
                v->name[i], si ? (const char *)si : "NULL", si && strlen((const char *)si) > 60 ? "..." : "", in_name,
                so ? (const char *)so : "NULL", so && strlen((const char *)so) > 60 ? "..." : "", out_name);
            sqlite3_finalize(st);
            return 1;
        }
    }
    say(err, errlen, "%s conflicts with %s: %s differs", in_name, out_name, where);
    sqlite3_finalize(st);
    return 1;
}

/* Value pairs "m.c, s.c, ..." and the condition "NOT (m.c IS s.c AND ...)". */
static void put_pairs(sqlbuf *b, const cols *v) {
    for (int i = 0; i < v->n; i++) put(b, ", m.\"%s\", s.\"%s\"", v->name[i], v->name[i]);
}
static void put_differs(sqlbuf *b, const cols *v) {
    put(b, " WHERE NOT (1");
    for (int i = 0; i < v->n; i++) put(b, " AND m.\"%s\" IS s.\"%s\"", v->name[i], v->name[i]);
    put(b, ")");
}

/* Every table with a result_id column (head_stats, layer_err, zoom_events, ...) in src. */
static int child_tables(sqlite3 *h, char names[][NAME_LEN], int cap) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT name FROM src.sqlite_master WHERE type = 'table' ORDER BY name", -1, &st, NULL))
        return -1;
    char all[64][NAME_LEN];
    int n_all = 0, n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n_all < 64)
        snprintf(all[n_all++], NAME_LEN, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    for (int i = 0; i < n_all && n < cap; i++) {
        cols c;
        if (table_cols(h, "src", all[i], &c)) return -1;
        if (strcmp(all[i], "results") && has_col(&c, "result_id")) memcpy(names[n++], all[i], NAME_LEN);
    }
    return n;
}

static const char *const case_ids[] = {"id", "run_id", NULL};
static const char *const result_ids[] = {"id", "case_id", NULL};
static const char *const child_ids[] = {"id", "result_id", NULL};
static const char *const run_ids[] = {"id", NULL};

static int merge_body(sqlite3 *h, const char *in_name, const char *out_name, merge_stats *stats, char *err,
                      size_t errlen) {
    /* runs: the identities of runs with the same key must agree */
    merge_runs *a = runs_read_schema(h, "src", err, errlen), *b = a ? runs_read_schema(h, "main", err, errlen) : NULL;
    if (!a || !b) {
        merge_runs_free(a);
        return -1;
    }
    int bad = 0;
    for (int i = 0; i < a->n && !bad; i++) {
        const run_ident *o = find_run(b, a->v[i].key);
        char why[1024];
        if (o && ident_differ(&a->v[i], in_name, o, out_name, why, sizeof why))
            bad = say(err, errlen, "refusing a mixture of runs: %s", why);
    }
    merge_runs_free(a);
    merge_runs_free(b);
    if (bad) return -1;

    cols rc_, cc, cv, rsc, rsv;
    if (common_cols(h, "runs", NULL, run_ids, &rc_) || common_cols(h, "cases", NULL, case_ids, &cc) ||
        common_cols(h, "cases", merge_is_measurement, (const char *const[]){"id", "run_id", "case_key", NULL}, &cv) ||
        common_cols(h, "results", NULL, result_ids, &rsc) ||
        common_cols(h, "results", merge_is_measurement,
                    (const char *const[]){"id", "case_id", "method", "budget", NULL}, &rsv))
        return say(err, errlen, "reading the columns: %s", sqlite3_errmsg(h));

    sqlbuf *q = calloc(1, sizeof *q);
    if (!q) return say(err, errlen, "out of memory");
    int rc = -1;
#define RESET() (q->n = 0, q->over = 0, q->s[0] = 0)
    RESET();
    put(q, "DROP TABLE IF EXISTS temp.mrun; DROP TABLE IF EXISTS temp.mcase; DROP TABLE IF EXISTS temp.nres;"
           "DROP TABLE IF EXISTS temp.mres;"
           "CREATE TEMP TABLE mrun(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
           "CREATE TEMP TABLE mcase(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
           "CREATE TEMP TABLE nres(src INTEGER PRIMARY KEY, case_dst INTEGER NOT NULL);"
           "CREATE TEMP TABLE mres(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);");
    put(q, "INSERT INTO main.runs(");
    put_list(q, "", &rc_);
    put(q, ") SELECT ");
    put_list(q, "s.", &rc_);
    put(q, " FROM src.runs s WHERE NOT EXISTS (SELECT 1 FROM main.runs m WHERE m.run_key = s.run_key) ORDER BY s.id;");
    if (exec_buf(h, q, err, errlen)) goto done;
    stats->runs_new += sqlite3_changes(h);
    if (exec_sql(h, "INSERT INTO temp.mrun SELECT s.id, m.id FROM src.runs s JOIN main.runs m ON m.run_key = s.run_key",
                 err, errlen))
        goto done;

    /* cases: the same key must describe the same case */
    RESET();
    put(q, "SELECT s.case_key");
    put_pairs(q, &cv);
    put(q, " FROM src.cases s JOIN temp.mrun r ON r.src = s.run_id JOIN main.cases m ON m.run_id = r.dst AND "
           "m.case_key = s.case_key");
    put_differs(q, &cv);
    put(q, " LIMIT 1");
    int c = conflict(h, q, &cv, 1, in_name, out_name, err, errlen);
    if (c) goto done;
    RESET();
    put(q, "INSERT INTO main.cases(run_id");
    for (int i = 0; i < cc.n; i++) put(q, ", \"%s\"", cc.name[i]);
    put(q, ") SELECT r.dst");
    for (int i = 0; i < cc.n; i++) put(q, ", s.\"%s\"", cc.name[i]);
    put(q, " FROM src.cases s JOIN temp.mrun r ON r.src = s.run_id WHERE NOT EXISTS (SELECT 1 FROM main.cases m "
           "WHERE m.run_id = r.dst AND m.case_key = s.case_key) ORDER BY s.id;"
           "INSERT INTO temp.mcase SELECT s.id, m.id FROM src.cases s JOIN temp.mrun r ON r.src = s.run_id "
           "JOIN main.cases m ON m.run_id = r.dst AND m.case_key = s.case_key;");
    int64_t before = count_of(h, "SELECT count(*) FROM main.cases");
    if (exec_buf(h, q, err, errlen)) goto done;
    stats->cases_new += count_of(h, "SELECT count(*) FROM main.cases") - before;

    /* results: the same (case, method, budget) must hold the same values */
    RESET();
    put(q, "SELECT c.case_key, s.method, s.budget");
    put_pairs(q, &rsv);
    put(q, " FROM src.results s JOIN temp.mcase mc ON mc.src = s.case_id JOIN main.results m ON m.case_id = mc.dst "
           "AND m.method = s.method AND m.budget = s.budget JOIN src.cases c ON c.id = s.case_id");
    put_differs(q, &rsv);
    put(q, " LIMIT 1");
    c = conflict(h, q, &rsv, 3, in_name, out_name, err, errlen);
    if (c) goto done;
    if (exec_sql(h,
                 "INSERT INTO temp.nres SELECT s.id, mc.dst FROM src.results s JOIN temp.mcase mc ON mc.src = s.case_id "
                 "WHERE NOT EXISTS (SELECT 1 FROM main.results m WHERE m.case_id = mc.dst AND m.method = s.method AND "
                 "m.budget = s.budget)",
                 err, errlen))
        goto done;
    int64_t n_new = sqlite3_changes(h), n_src = count_of(h, "SELECT count(*) FROM src.results");
    stats->results_new += n_new;
    stats->results_present += n_src - n_new;
    RESET();
    put(q, "INSERT INTO main.results(case_id");
    for (int i = 0; i < rsc.n; i++) put(q, ", \"%s\"", rsc.name[i]);
    put(q, ") SELECT n.case_dst");
    for (int i = 0; i < rsc.n; i++) put(q, ", s.\"%s\"", rsc.name[i]);
    put(q, " FROM temp.nres n JOIN src.results s ON s.id = n.src ORDER BY n.src;"
           "INSERT INTO temp.mres SELECT n.src, m.id FROM temp.nres n JOIN src.results s ON s.id = n.src "
           "JOIN main.results m ON m.case_id = n.case_dst AND m.method = s.method AND m.budget = s.budget;");
    if (exec_buf(h, q, err, errlen)) goto done;

    /* the new results' children; a table the output lacks is created as the input has it */
    char kids[32][NAME_LEN];
    int nk = child_tables(h, kids, 32);
    if (nk < 0) {
        say(err, errlen, "listing the tables: %s", sqlite3_errmsg(h));
        goto done;
    }
    for (int t = 0; t < nk; t++) {
        cols have, kc;
        if (table_cols(h, "main", kids[t], &have)) goto sqlerr;
        if (!have.n) {
            sqlite3_stmt *st = NULL;
            int ok = sqlite3_prepare_v2(h, "SELECT sql FROM src.sqlite_master WHERE type = 'table' AND name = ?", -1,
                                        &st, NULL) == SQLITE_OK;
            if (ok) sqlite3_bind_text(st, 1, kids[t], -1, SQLITE_STATIC);
            ok = ok && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0);
            int made = ok && exec_sql(h, (const char *)sqlite3_column_text(st, 0), err, errlen) == 0;
            sqlite3_finalize(st);
            if (!made) {
                if (!ok) say(err, errlen, "copying table %s: %s", kids[t], sqlite3_errmsg(h));
                goto done;
            }
        }
        if (common_cols(h, kids[t], NULL, child_ids, &kc)) goto sqlerr;
        RESET();
        put(q, "INSERT INTO main.\"%s\"(result_id", kids[t]);
        for (int i = 0; i < kc.n; i++) put(q, ", \"%s\"", kc.name[i]);
        put(q, ") SELECT r.dst");
        for (int i = 0; i < kc.n; i++) put(q, ", x.\"%s\"", kc.name[i]);
        put(q, " FROM src.\"%s\" x JOIN temp.mres r ON r.src = x.result_id", kids[t]);
        if (exec_buf(h, q, err, errlen)) goto done;
    }

    /* the plan: what every input's command asked for */
    cols pl;
    if (table_cols(h, "src", "plan", &pl)) goto sqlerr;
    if (pl.n && exec_sql(h,
                         "INSERT OR IGNORE INTO main.plan(run_id, case_key, method, budget) SELECT r.dst, p.case_key, "
                         "p.method, p.budget FROM src.plan p JOIN temp.mrun r ON r.src = p.run_id",
                         err, errlen))
        goto done;
    rc = 0;
    goto done;
sqlerr:
    say(err, errlen, "%s", sqlite3_errmsg(h));
done:
#undef RESET
    free(q);
    return rc;
}

int merge_file(kv_db *out, const char *in_path, merge_stats *stats, char *err, size_t errlen) {
    sqlite3 *h = kvdb_sqlite(out);
    char e[1024] = "";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "ATTACH DATABASE ? AS src", -1, &st, NULL) != SQLITE_OK)
        return say(err, errlen, "results db '%s': %s", in_path, sqlite3_errmsg(h));
    sqlite3_bind_text(st, 1, in_path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return say(err, errlen, "results db '%s': cannot attach: %s", in_path, sqlite3_errmsg(h));
    merge_stats mine = {0};
    int bad = exec_sql(h, "BEGIN IMMEDIATE", e, sizeof e) ||
              merge_body(h, in_path, kvdb_path(out), &mine, e, sizeof e) || exec_sql(h, "COMMIT", e, sizeof e);
    if (bad) sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_exec(h, "DROP TABLE IF EXISTS temp.mrun; DROP TABLE IF EXISTS temp.mcase; DROP TABLE IF EXISTS temp.nres;"
                    "DROP TABLE IF EXISTS temp.mres; DETACH DATABASE src",
                 NULL, NULL, NULL);
    if (bad) return say(err, errlen, "%s", e);
    stats->runs_new += mine.runs_new;
    stats->cases_new += mine.cases_new;
    stats->results_new += mine.results_new;
    stats->results_present += mine.results_present;
    return 0;
}

/* ---------------------------------------------------------------- completeness */

int merge_missing_scan(kv_db *out, int64_t run_id, merge_missing *m,
                       void (*each)(const char *case_key, int missing, int planned, void *ctx), void *ctx, char *err,
                       size_t errlen) {
    sqlite3 *h = kvdb_sqlite(out);
    memset(m, 0, sizeof *m);
    m->run_id = run_id;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT coalesce(workload, '?') FROM runs WHERE id = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run_id);
        if (sqlite3_step(st) == SQLITE_ROW)
            snprintf(m->workload, sizeof m->workload, "%s", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    static const char *sql =
        "SELECT p.case_key, count(*), sum(NOT EXISTS (SELECT 1 FROM cases c JOIN results r ON r.case_id = c.id"
        " WHERE c.run_id = p.run_id AND c.case_key = p.case_key AND r.method = p.method AND r.budget = p.budget))"
        " FROM plan p WHERE p.run_id = ? GROUP BY p.case_key ORDER BY p.case_key";
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return say(err, errlen, "results db '%s': reading the plan: %s", kvdb_path(out), sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, run_id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int planned = sqlite3_column_int(st, 1), missing = sqlite3_column_int(st, 2);
        m->planned += planned;
        m->missing += missing;
        m->present += planned - missing;
        if (missing) {
            m->missing_cases++;
            if (each) each((const char *)sqlite3_column_text(st, 0), missing, planned, ctx);
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return say(err, errlen, "results db '%s': reading the plan: %s", kvdb_path(out), sqlite3_errmsg(h));
    /* results no plan lists: an input whose plan lacks them (edited, or cut short) would
     * otherwise pass for complete */
    static const char *extra =
        "SELECT c.case_key || ' ' || r.method || ' @ ' || r.budget FROM results r JOIN cases c ON c.id = r.case_id"
        " WHERE c.run_id = ?1 AND NOT EXISTS (SELECT 1 FROM plan p WHERE p.run_id = ?1 AND p.case_key = c.case_key"
        " AND p.method = r.method AND p.budget = r.budget) ORDER BY 1";
    if (sqlite3_prepare_v2(h, extra, -1, &st, NULL) != SQLITE_OK)
        return say(err, errlen, "results db '%s': reading the plan: %s", kvdb_path(out), sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, run_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (!m->unplanned++) snprintf(m->unplanned_eg, sizeof m->unplanned_eg, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return say(err, errlen, "results db '%s': reading the plan: %s", kvdb_path(out), sqlite3_errmsg(h));
    return 0;
}

void merge_speed_up(kv_db *out) {
    sqlite3_exec(kvdb_sqlite(out), "PRAGMA cache_size = -262144; PRAGMA temp_store = MEMORY", NULL, NULL, NULL);
}
