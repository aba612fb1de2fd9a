/* kvbench report: one table per run from the results file. Rows are methods (at each
 * budget), columns are workload variants (or budgets, or context lengths); each column
 * shows the mean score over the cases that finished ("ok"), the mean fast-tier peak KV
 * bytes and the decode latency. Markdown to stdout, or CSV through libcsv.
 * --table NAME prints one of the paper-style tables instead (report_tables.c). */
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "plot_cmds.h"
#include "report_tables.h"
#include "../methods/method.h"
#include "report_out.h"
#include "runinfo.h"
#include "../kernels/cli_opt.h"
#include "../kernels/stats.h"
#include "../results/query.h"

enum by { BY_VARIANT = KVQ_BY_VARIANT, BY_BUDGET = KVQ_BY_BUDGET, BY_CTX = KVQ_BY_CTX };

typedef struct {
    char *method;
    char *label;          /* "sekv (untrained)", or NULL: the method's name */
    double budget;        /* NAN when the columns are budgets */
} row_key;

typedef struct {
    char *match;          /* the value as SQLite prints it, to match query rows */
    double value;         /* the budget or context length */
    char label[64];
} col_key;

typedef struct {
    int n, nfail, ninf;   /* results in the mean; infeasible or failed among the results; infeasible */
    double score;         /* mean of the metric (score in [0,1]) */
    double lo, hi;        /* its 95% interval (stats.h) */
    double kv;            /* mean fast_peak bytes of the finished results, NAN if none */
    double ms;            /* mean decode ms per token, NAN if none */
    rt_samples s;         /* the values, for the paired test behind a bold */
} cell;

typedef struct {
    int nr, nc;
    row_key *rows;
    col_key *cols;
    cell *cells;          /* [nr][nc+1]; the last column is the row average */
    int n_infeasible, n_error;
    int metric;           /* RT_M_*: what the score column averages */
} table;

static int row_cmp(const void *a, const void *b) {
    const row_key *x = a, *y = b;
    int c = kv_method_cmp(x->method, y->method);
    if (c) return c;
    return (x->budget > y->budget) - (x->budget < y->budget);
}

static double col_real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static void table_free(table *t) {
    for (int i = 0; t->cells && i < t->nr * (t->nc + 1); i++) rt_samples_free(&t->cells[i].s);
    for (int i = 0; i < t->nr; i++) free(t->rows[i].method), free(t->rows[i].label);
    for (int j = 0; j < t->nc; j++) free(t->cols[j].match);
    free(t->rows), free(t->cols), free(t->cells);
    memset(t, 0, sizeof *t);
}

static int find_row(const table *t, const char *method, double budget) {
    for (int i = 0; i < t->nr; i++)
        if (!strcmp(t->rows[i].method, method) &&
            ((isnan(budget) && isnan(t->rows[i].budget)) || budget == t->rows[i].budget))
            return i;
    return -1;
}
static int find_col(const table *t, const char *match) {
    for (int j = 0; j < t->nc; j++)
        if (!strcmp(t->cols[j].match, match)) return j;
    return -1;
}

static const char *text_or(sqlite3_stmt *st, int i, const char *dflt) {
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : dflt;
}

static int load(sqlite3 *h, int64_t run, enum by by, table *t) {
    sqlite3_stmt *st = NULL;
    int cap;
    /* rows */
    if (!(st = kvq_report_rows(h, (enum kvq_by)by, run))) goto sqlerr;
    cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (t->nr == cap) {
            cap = cap ? 2 * cap : 16;
            row_key *r = realloc(t->rows, cap * sizeof *r);
            if (!r) goto oom;
            t->rows = r;
        }
        t->rows[t->nr].method = strdup(text_or(st, 0, "?"));
        t->rows[t->nr].label = NULL;
        t->rows[t->nr].budget = col_real(st, 1);
        t->nr++;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < t->nr; i++) {   /* SeKV's untrained router or a named parameter file: said in the row's name */
        char *params = t->rows[i].method ? kvq_method_params(h, run, t->rows[i].method) : NULL, suffix[160];
        rt_params_suffix(params, suffix, sizeof suffix);
        free(params);
        if (!*suffix) continue;
        char *l = malloc(strlen(t->rows[i].method) + strlen(suffix) + 1);
        if (!l) goto oom;
        sprintf(l, "%s%s", t->rows[i].method, suffix);
        t->rows[i].label = l;
    }
    if (t->nr) qsort(t->rows, t->nr, sizeof *t->rows, row_cmp);
    /* columns */
    if (!(st = kvq_report_cols(h, (enum kvq_by)by, run))) goto sqlerr;
    cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (t->nc == cap) {
            cap = cap ? 2 * cap : 16;
            col_key *c = realloc(t->cols, cap * sizeof *c);
            if (!c) goto oom;
            t->cols = c;
        }
        col_key *c = &t->cols[t->nc++];
        c->match = strdup(text_or(st, 0, "-"));
        c->value = col_real(st, 1);
        if (by == BY_VARIANT) snprintf(c->label, sizeof c->label, "%s", c->match);
        else if (by == BY_CTX) snprintf(c->label, sizeof c->label, "ctx %d", sqlite3_column_int(st, 1));
        else {
            char b[32];
            kv_budget_str(sqlite3_column_double(st, 1), b, sizeof b);
            snprintf(c->label, sizeof c->label, "budget %s", b);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    /* cells */
    t->cells = calloc((size_t)t->nr * (t->nc + 1) + 1, sizeof *t->cells);
    if (!t->cells) goto oom;
    for (int i = 0; i < t->nr * (t->nc + 1); i++) t->cells[i] = (cell){.score = NAN, .lo = NAN, .hi = NAN};
    if (!(st = kvq_report_cells(h, (enum kvq_by)by, run))) goto sqlerr;
    /* per cell: the metric of every result (failures 0, or left out), the means of the
     * finished results' KV bytes and ms/token */
    double *kv = calloc((size_t)t->nr * (t->nc + 1) * 4 + 1, sizeof *kv);
    if (!kv) goto oom;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int i = find_row(t, text_or(st, 0, "?"), col_real(st, 1));
        int j = find_col(t, text_or(st, 2, "-"));
        if (i < 0 || j < 0) continue;   /* cannot happen: rows and columns came from the same join */
        size_t k = (size_t)i * (t->nc + 1) + j;
        cell *c = &t->cells[k];
        rt_rec r = {.ok = !strcmp(text_or(st, 3, ""), "ok"), .score = col_real(st, 4), .nll = col_real(st, 8),
                    .kl = col_real(st, 9), .top1 = col_real(st, 10)};
        c->nfail += !r.ok;
        c->ninf += !strcmp(text_or(st, 3, ""), "infeasible");
        rt_samples_add(&c->s, rt_rec_value(&r, t->metric), 0, sqlite3_column_int(st, 7));
        double b = col_real(st, 5), ms = col_real(st, 6);
        if (r.ok && !isnan(b)) kv[4 * k] += b, kv[4 * k + 1]++;
        if (r.ok && !isnan(ms)) kv[4 * k + 2] += ms, kv[4 * k + 3]++;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < t->nr; i++) {
        /* the row average: the metric grouped by column (the mean of the column means, its
         * interval resampled within columns); bytes and ms: the mean of the column means */
        cell *avg = &t->cells[i * (t->nc + 1) + t->nc];
        double s[2] = {0};
        int k2[2] = {0};
        for (int j = 0; j < t->nc; j++) {
            size_t k = (size_t)i * (t->nc + 1) + j;
            cell *c = &t->cells[k];
            for (int q = 0; q < c->s.n; q++) rt_samples_add(&avg->s, c->s.x[q], j, c->s.cas[q]);
            avg->nfail += c->nfail;
            avg->ninf += c->ninf;
            c->kv = kv[4 * k + 1] ? kv[4 * k] / kv[4 * k + 1] : NAN;
            c->ms = kv[4 * k + 3] ? kv[4 * k + 2] / kv[4 * k + 3] : NAN;
            if (!isnan(c->kv)) s[0] += c->kv, k2[0]++;
            if (!isnan(c->ms)) s[1] += c->ms, k2[1]++;
        }
        avg->kv = k2[0] ? s[0] / k2[0] : NAN;
        avg->ms = k2[1] ? s[1] / k2[1] : NAN;
        for (int j = 0; j <= t->nc; j++) {
            cell *c = &t->cells[i * (t->nc + 1) + j];
            c->n = c->s.n;
            c->score = c->n ? st_interval(c->s.x, c->s.g, c->n, t->metric == RT_M_SCORE, &c->lo, &c->hi) : NAN;
        }
    }
    free(kv);
    /* what was left out */
    if (!(st = kvq_report_left_out(h, run))) goto sqlerr;
    if (sqlite3_step(st) == SQLITE_ROW) t->n_infeasible = sqlite3_column_int(st, 0), t->n_error = sqlite3_column_int(st, 1);
    sqlite3_finalize(st);
    return 0;
sqlerr:
    fprintf(stderr, "kvbench report: reading results: %s\n", sqlite3_errmsg(h));
    sqlite3_finalize(st);
    return -1;
oom:
    fprintf(stderr, "kvbench report: out of memory\n");
    sqlite3_finalize(st);
    return -1;
}

static void fmt_ms(double ms, char *buf, size_t n) {
    if (isnan(ms)) snprintf(buf, n, "-");
    else if (ms >= 0.1) snprintf(buf, n, "%.2f", ms);
    else snprintf(buf, n, "%.2g", ms);
}

static int lower_better(const table *t) { return t->metric == RT_M_NLL || t->metric == RT_M_KL; }

/* The row whose score is significantly best in column j (rt_significantly_best), or -1. */
static int column_best(const table *t, int j) {
    int best = -1, tie = 0, dir = lower_better(t) ? -1 : 1;
    for (int i = 0; i < t->nr; i++) {
        double s = t->cells[i * (t->nc + 1) + j].score, b = best < 0 ? NAN : t->cells[best * (t->nc + 1) + j].score;
        if (isnan(s)) continue;
        if (best < 0 || dir * (s - b) > 0) best = i, tie = 0;
        else if (s == b) tie = 1;
    }
    if (best < 0 || tie) return -1;
    const rt_samples **cells = malloc(sizeof *cells * (t->nr + 1));
    if (!cells) return -1;
    for (int i = 0; i < t->nr; i++) cells[i] = &t->cells[i * (t->nc + 1) + j].s;
    int ok = rt_significantly_best(cells, t->nr, best, dir);
    free(cells);
    return ok ? best : -1;
}

static void print_cell(FILE *f, const table *t, const cell *c, int bold) {
    char kv[32], ms[32];
    int pct = t->metric == RT_M_SCORE || t->metric == RT_M_TOP1, dec = pct ? 1 : 3;
    double sc = pct ? 100 : 1;
    if (isnan(c->score)) fprintf(f, " -");
    else if (isnan(c->lo)) fprintf(f, bold ? " **%.*f**" : " %.*f", dec, sc * c->score);   /* one case: no interval */
    else fprintf(f, bold ? " **%.*f** [%.*f, %.*f]" : " %.*f [%.*f, %.*f]", dec, sc * c->score, dec, sc * c->lo, dec,
                 sc * c->hi);
    if (c->n || c->nfail) fprintf(f, " n=%d", c->n);
    char why[64];
    rt_fail_note(why, sizeof why, c->nfail, c->ninf);
    fputs(why, f);
    fprintf(f, " |");
    if (isnan(c->kv)) snprintf(kv, sizeof kv, "-");
    else kv_human_bytes(c->kv, kv, sizeof kv);
    fmt_ms(c->ms, ms, sizeof ms);
    fprintf(f, " %s | %s |", kv, ms);
}

/* 1 when the reference (FullKV) scores below RT_CEILING in column j (with --by budget,
 * where it runs at budget 1 alone, its mean over the columns it has stands for it). */
static int low_ceiling(const table *t, int j) {
    const kv_method *ref = kv_method_reference();
    if (t->metric != RT_M_SCORE || !ref) return 0;
    for (int i = 0; i < t->nr; i++) {
        if (strcasecmp(t->rows[i].method, ref->name)) continue;
        double sum = 0, x = t->cells[i * (t->nc + 1) + j].score;
        int n = 0;
        for (int k = 0; k < t->nc; k++)
            if (!isnan(t->cells[i * (t->nc + 1) + k].score)) sum += t->cells[i * (t->nc + 1) + k].score, n++;
        if (n && rt_below_ceiling(isnan(x) ? sum / n : x)) return 1;
    }
    return 0;
}

static void print_markdown(FILE *f, const kv_runinfo *ri, const table *t, enum by by) {
    char line[1024], b[32];
    kv_runinfo_line(ri, line, sizeof line);
    fprintf(f, "## kvbench report, %s\n\n", line);
    static const char *what[] = {"mean task score over every case, % (infeasible and failed count as 0)",
                                 "mean -ln p per token of the reference answer, teacher-forced, nats (failures left out)",
                                 "mean KL(FullKV || method) over FullKV's greedy answer steps, nats (failures left out)",
                                 "top-1 agreement with FullKV's greedy answer, % (failures count as 0)"};
    fprintf(f, "%s: %s, [95%% interval: Wilson for binary scores, else bootstrap-t over cases widened to Student's t], n=cases, (k infeasible,"
               " e failed): results that did not finish; KV: mean fast-tier peak bytes, with the prefill's transient uncompressed layer (--table memory also gives the steady decode-time bytes), and ms/tok: decode time per token, of the"
               " finished results; avg: mean of the %s columns. Bold: best in its column and better than every other"
               " row by an exact paired sign test (McNemar's on binary scores), Holm-adjusted p < 0.05.\n\n",
            rt_metric_names[t->metric], what[t->metric], by == BY_VARIANT ? "variant" : by == BY_BUDGET ? "budget" : "context");
    fprintf(f, "| method |");
    if (by != BY_BUDGET) fprintf(f, " budget |");
    int low = 0;
    for (int j = 0; j <= t->nc; j++) {
        const char *l = j < t->nc ? t->cols[j].label : "avg";
        int lc = low_ceiling(t, j);
        low |= lc;
        fprintf(f, " %s %s%s | %s KV | %s ms/tok |", l, rt_metric_names[t->metric], lc ? RT_LOW_CEILING : "", l, l);
    }
    fprintf(f, "\n|---|");
    if (by != BY_BUDGET) fprintf(f, "---:|");
    for (int j = 0; j <= t->nc; j++) fprintf(f, "---:|---:|---:|");
    fprintf(f, "\n");
    int *best = malloc((t->nc + 1) * sizeof *best);
    for (int j = 0; best && j <= t->nc; j++) best[j] = column_best(t, j);
    for (int i = 0; i < t->nr; i++) {
        fprintf(f, "| %s |", t->rows[i].label ? t->rows[i].label : t->rows[i].method);
        if (by != BY_BUDGET) {
            kv_budget_str(t->rows[i].budget, b, sizeof b);
            fprintf(f, " %s |", b);
        }
        for (int j = 0; j <= t->nc; j++) print_cell(f, t, &t->cells[i * (t->nc + 1) + j], best && best[j] == i);
        fprintf(f, "\n");
    }
    free(best);
    if (t->n_infeasible || t->n_error)
        fprintf(f, "\nFailed: %d infeasible and %d failed results, %s.\n", t->n_infeasible, t->n_error,
                lower_better(t) ? "left out of the means" : "counted as 0 in the means");
    if (low) fprintf(f, "\n%s\n", RT_CEILING_NOTE);
}

/* every cell through kv_csv_cell: control bytes escaped, formulas neutralised */
static void csv_field(FILE *f, const char *s, int last) { kv_csv_cell(f, s, last); }
static void csv_num(FILE *f, double x, int last) {
    char b[64] = "";
    if (!isnan(x)) snprintf(b, sizeof b, "%.17g", x);
    csv_field(f, b, last);
}

/* One line per (row, column) and per row average. With --by budget the column is the
 * budget itself, so there is no separate budget field. */
static void print_csv(FILE *f, const kv_runinfo *ri, const table *t, enum by by) {
    const char *key = by == BY_VARIANT ? "variant" : by == BY_BUDGET ? "budget" : "ctx";
    csv_field(f, "run", 0);
    csv_field(f, "method", 0);
    if (by != BY_BUDGET) csv_field(f, "budget", 0);
    const char *head[] = {key,  "n",  "failed", "infeasible", "metric", "value", "lo", "hi", "fast_peak_bytes",
                          "decode_ms_per_token"};
    for (int k = 0; k < 10; k++) csv_field(f, head[k], k == 9);
    double sc = t->metric == RT_M_SCORE || t->metric == RT_M_TOP1 ? 100 : 1;
    char run[32];
    snprintf(run, sizeof run, "%lld", (long long)ri->id);
    for (int i = 0; i < t->nr; i++)
        for (int j = 0; j <= t->nc; j++) {
            const cell *c = &t->cells[i * (t->nc + 1) + j];
            csv_field(f, run, 0);
            csv_field(f, t->rows[i].method, 0);
            if (by != BY_BUDGET) csv_num(f, t->rows[i].budget, 0);
            if (j == t->nc) csv_field(f, "avg", 0);
            else if (by == BY_VARIANT) csv_field(f, t->cols[j].match, 0);
            else csv_num(f, t->cols[j].value, 0);
            csv_num(f, c->n, 0);
            csv_num(f, c->nfail, 0);
            csv_num(f, c->ninf, 0);
            csv_field(f, t->metric == RT_M_SCORE ? "score_pct" : t->metric == RT_M_TOP1 ? "top1_pct" : rt_metric_names[t->metric], 0);
            csv_num(f, sc * c->score, 0);
            csv_num(f, sc * c->lo, 0);
            csv_num(f, sc * c->hi, 0);
            csv_num(f, c->kv, 0);
            csv_num(f, c->ms, 1);
        }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench report --db FILE [--run ID] [--by variant|budget|ctx] [--metric M] [--csv [OUT]]\n"
            "       kvbench report --db FILE --table NAME [--run ID|all] [--metric M] [--csv [OUT]]\n"
            "       kvbench report --db FILE --table compare [--base METHOD[@BUDGET][:K=V,..]] [--metric M] [--run ID|all]\n"
            "  Prints a Markdown table of one run: a row per method and budget, and per workload variant\n"
            "  (or budget, or context length) the mean score (%%; infeasible and failed results count as 0)\n"
            "  with its 95%% interval (Wilson for binary scores, else the small-n interval: bootstrap-t\n"
            "  widened to Student's t; docs/statistics.md), n (cases) and the failures, the mean fast-tier\n"
            "  peak KV bytes and the decode ms per token, then their\n"
            "  averages. A score is bold only when it is significantly best in its column (exact paired\n"
            "  sign test / McNemar against every other row, Holm-adjusted p < 0.05).\n"
            "  --db FILE     results file written by kvbench run (never created here)\n"
            "  --run ID      run id (default: the latest run); with --table, all pools every run of the file\n"
            "                (rows by model, method, params and budget; columns by workload, context, ...);\n"
            "                runs that differ in code, split, oracle hints or method defaults are shown\n"
            "                side by side, the model labelled [git COMMIT, SPLIT, hints N, defaults HASH]\n"
            "  --by KEY      columns: variant (default), budget, or ctx\n"
            "  --metric M    what the score cells average: score (default, the task's metric), nll (the\n"
            "                reference answer's teacher-forced NLL, nats/token), kl (KL(FullKV || method) over\n"
            "                FullKV's greedy answer), top1 (agreement with FullKV's greedy tokens, %%); the\n"
            "                last three need runs with --fidelity (the default)\n"
            "  --base M[@B][:K=V,..]  --table compare: the method every row is compared with (default: the\n"
            "                reference), at each row's own budget, or at budget B when given (M@B); with :K=V,..\n"
            "                the run of M whose params hold those settings (the one with the fewest others), e.g.\n"
            "                M:params_file=none for SeKV's untrained router; else M's default params if run\n"
            "  --table NAME  a paper-style table instead, rows = methods (with their params) and budgets:\n"
            "                main      score per workload (workload:task), Avg of the workloads\n"
            "                niah      score per context length, averaged over needle depths, overall\n"
            "                budget    score per KV budget (mean over workloads)\n"
            "                rank      main's layout over a method's rank settings (params rank=N)\n"
            "                ablation  main's layout over every params setting of methods run with several\n"
            "                memory    per context: fast-tier and slow-tier KV peak bytes, fast-tier tokens,\n"
            "                          ratio to FullKV; iso-memory: each method at the budget whose fast-tier\n"
            "                          bytes are nearest to (not above) SeKV's, per context\n"
            "                latency   per context: prefill s, compression s, decode ms/token, tokens/s\n"
            "                compare   each row against --base, paired over the cases both saw: difference,\n"
            "                          its 95%% small-n interval, exact p (McNemar on binary scores, else the\n"
            "                          paired permutation test), Holm-adjusted over the table's rows, * where\n"
            "                          p < 0.05\n"
            "                paper     the SeKV paper's claims a NIAH run can test (NIAH at 10%% and 5%%, vs\n"
            "                          SentenceKV and ChunkKV, ablations zoom=0, trained_zoom=0, fixed_chunk,\n"
            "                          rank 8/32/64): the paper's figure, kvbench's number, n, whether the\n"
            "                          direction holds; plus SeKV uncapped=1 against every method at its\n"
            "                          measured fast-tier bytes (iso-memory). Pool runs with --run all\n"
            "                zoom      SeKV's zoom rate per (layer, head) (spans expanded / spans it could\n"
            "                          expand, over decode steps and cases): share of heads below 0.05, mean\n"
            "                          rate per third of the layers, share of expansions in the top 10%% heads\n"
            "  --csv [OUT]   the same numbers as CSV, to OUT (the table still goes to stdout) or to stdout;\n"
            "                with --table one line per cell: run, table, section, model, method, params,\n"
            "                budget, column, value (in the column's units, full precision), n (cases)\n");
}

/* Writes the CSV to out (NULL: stdout); 0 or -1 after printing why. */
static FILE *csv_open(const char *out) {
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) fprintf(stderr, "kvbench report: cannot write --csv '%s': %s\n", out, strerror(errno));
    return f;
}
static int csv_close(FILE *f, const char *out) {
    if (f == stdout || !f) return 0;
    if (fclose(f)) {
        fprintf(stderr, "kvbench report: error writing --csv '%s'\n", out);
        return -1;
    }
    return 0;
}

/* --table NAME of run `run` (0: the latest), or of every run of the file. */
static int report_tables(const char *path, const char *tname, int64_t run, int run_all, int csv, const char *csv_out,
                         int metric, const char *base) {
    kv_runinfo one;
    kv_db *db = kv_report_open("report", path, run, &one);
    if (!db) return 1;
    int n = 1, rc = -1;
    run = run_all ? 0 : one.id;
    kv_runinfo *all = run_all ? kv_runinfo_all("report", db, &n) : &one;
    FILE *f = NULL;
    kv_md md = {0};   /* the Markdown, printed with control bytes escaped (report_out.h) */
    if (all && (csv && !csv_out ? 0 : kv_md_open(&md))) fprintf(stderr, "kvbench report: out of memory\n");
    else if (all && (!csv || (f = csv_open(csv_out)))) {
        rc = rt_write(kvdb_sqlite(db), tname, all, n, run, metric, base, md.f, f);
        if (csv_close(f, csv_out)) rc = -1;
        if (rc && f && f != stdout) remove(csv_out);   /* no half-written CSV */
    }
    if (md.f && kv_md_close(&md, stdout)) rc = -1;
    if (fflush(stdout)) rc = -1;
    if (all != &one) kv_runinfo_free_all(all, n);
    kv_runinfo_free(&one);
    kvdb_close(db);
    return rc ? 1 : 0;
}

int cmd_report(int argc, char **argv) {
    const char *path = NULL, *csv_out = NULL, *tname = NULL, *base = NULL;
    int csv = 0, by_given = 0, run_all = 0, metric = RT_M_SCORE;
    long long run = 0;
    enum by by = BY_VARIANT;
    static const char *const bare[] = {"--help", "-h", NULL},
                             *const valued[] = {"--db", "--run", "--by", "--table", "--metric", "--base", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64];
        const char *v = NULL;
        /* --csv [FILE]: its value is optional, so "--csv=FILE" or a next word not an option */
        if (!strcmp(argv[i], "--csv") || !strncmp(argv[i], "--csv=", 6)) {
            csv = 1;
            if (argv[i][5] == '=') csv_out = argv[i] + 6;
            else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) csv_out = argv[++i];
            if (csv_out && !strcmp(csv_out, "-")) csv_out = NULL;   /* stdout */
            continue;
        }
        if (kb_opt_read("report", argc, argv, &i, bare, valued, 0, a, sizeof a, &v)) return 2;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--db")) {
            path = v;
        } else if (!strcmp(a, "--metric")) {
            metric = rt_metric_known(v);
            if (metric < 0) {
                fprintf(stderr, "kvbench report: --metric '%s' is not score, nll, kl or top1\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--base")) {
            base = v;
            rt_base bp;
            if (rt_base_parse(base, &bp)) return 2;
        } else if (!strcmp(a, "--table")) {
            tname = v;
            if (rt_table_known(tname) < 0) {
                fprintf(stderr, "kvbench report: unknown --table '%s' (valid: %s)\n", tname, rt_table_names);
                return 2;
            }
        } else if (!strcmp(a, "--run")) {
            char *end;
            run_all = !strcmp(v, "all");
            run = run_all ? 0 : strtoll(v, &end, 10);
            if (!run_all && (end == v || *end || run <= 0)) {
                fprintf(stderr, "kvbench report: --run '%s' is not a positive run id or all\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--by")) {
            by_given = 1;
            if (!strcmp(v, "variant")) by = BY_VARIANT;
            else if (!strcmp(v, "budget")) by = BY_BUDGET;
            else if (!strcmp(v, "ctx")) by = BY_CTX;
            else {
                fprintf(stderr, "kvbench report: --by '%s' is not variant, budget or ctx\n", v);
                return 2;
            }
        }
    }
    if (!path) {
        fprintf(stderr, "kvbench report: --db FILE is required (see --help)\n");
        return 2;
    }
    if (tname && by_given) {
        fprintf(stderr, "kvbench report: --by applies to the default table, not to --table %s\n", tname);
        return 2;
    }
    if (run_all && !tname) {
        fprintf(stderr, "kvbench report: --run all needs --table NAME (the default table is one run's)\n");
        return 2;
    }
    if (base && (!tname || strcmp(tname, "compare"))) {
        fprintf(stderr, "kvbench report: --base applies to --table compare\n");
        return 2;
    }
    if (tname) return report_tables(path, tname, run, run_all, csv, csv_out, metric, base);
    kv_runinfo ri;
    kv_db *db = kv_report_open("report", path, run, &ri);
    if (!db) return 1;
    table t = {.metric = metric};
    int rc = load(kvdb_sqlite(db), ri.id, by, &t);
    if (rc == 0 && t.nr == 0) {
        fprintf(stderr, "kvbench report: run %lld in '%s' has no results yet\n", (long long)ri.id, path);
        rc = -1;
    }
    if (rc == 0) {
        kv_md md;   /* the Markdown, printed with control bytes escaped (report_out.h) */
        if (!csv || csv_out) {
            if (kv_md_open(&md)) rc = -1;
            else print_markdown(md.f, &ri, &t, by), rc = kv_md_close(&md, stdout);
        }
        if (csv && rc == 0) {
            FILE *f = csv_open(csv_out);
            if (!f) rc = -1;
            else {
                print_csv(f, &ri, &t, by);
                if (csv_close(f, csv_out)) rc = -1;
            }
        }
    }
    if (fflush(stdout)) rc = -1;
    table_free(&t);
    kv_runinfo_free(&ri);
    kvdb_close(db);
    return rc ? 1 : 0;
}
