/* The read side of a results file: one named function per question that report, plot,
 * sim and merge ask, so that SQL text lives in results/ only. Each function prepares its
 * statement with the parameters bound and hands it back; the caller steps it
 * (sqlite3_step, sqlite3_column_*) and finalizes it. The columns each row holds are listed
 * beside each function, in order. NULL when SQLite refuses the statement:
 * sqlite3_errmsg(h) then says why.
 *
 * h is any connection to a kvbench results file (kvdb_sqlite). A variant of NULL means
 * every variant. Files from older schema versions read as NULL where a column is newer
 * (the functions check the schema themselves). */
#ifndef KV_QUERY_H
#define KV_QUERY_H
#include <sqlite3.h>
#include <stdint.h>

/* ------------------------------------------------ schema (query.c) */

/* 1 if table has the column, else 0 (also when the table does not exist). */
int kvq_has_column(sqlite3 *h, const char *table, const char *column);
/* 1 if the file has the table, else 0. */
int kvq_has_table(sqlite3 *h, const char *table);

/* ------------------------------------------------ runs (query_runs.c) */

/* One row: the number of runs, the largest run id. */
sqlite3_stmt *kvq_run_count(sqlite3 *h);
/* The run's identity, one row or none: id, run_key, workload, model, git_commit, backend,
 * build_flags, created, seed. */
sqlite3_stmt *kvq_run(sqlite3 *h, int64_t run_id);
/* Every run, by id, with the columns of kvq_run. */
sqlite3_stmt *kvq_runs(sqlite3 *h);
/* Every run id, ascending. */
sqlite3_stmt *kvq_run_ids(sqlite3 *h);
/* The runs that hold at least one result: ifnull(git_commit, '?'), ifnull(run_key, ''). */
sqlite3_stmt *kvq_runs_with_results(sqlite3 *h);
/* Per (method, budget) of the run (the end-of-run summary): method, budget, results,
 * finished, then over the finished ones (NULL when none): mean score (failures 0, over
 * all), fast_peak, prefill_s, compress_s, decode ms/token, fast_decode_peak, rss_peak,
 * ans_nll, kl. */
sqlite3_stmt *kvq_run_summary(sqlite3 *h, int64_t run_id);

/* ------------------------------------------------ report (query_report.c) */

/* report's groupings of one run: the columns are variants, budgets or context lengths. */
enum kvq_by { KVQ_BY_VARIANT, KVQ_BY_BUDGET, KVQ_BY_CTX };
/* The table's rows: method, budget (NULL when grouped by budget). */
sqlite3_stmt *kvq_report_rows(sqlite3 *h, enum kvq_by by, int64_t run_id);
/* The table's columns, in order: the text to match, the value (variant: NULL). */
sqlite3_stmt *kvq_report_cols(sqlite3 *h, enum kvq_by by, int64_t run_id);
/* One row per result, case by case: method, budget (or NULL), column match, status,
 * score, fast_peak, decode ms/token (NULL without decode tokens), case id, ans_nll, kl,
 * top1 (the last three NULL before schema 3). */
sqlite3_stmt *kvq_report_cells(sqlite3 *h, enum kvq_by by, int64_t run_id);
/* One row: the run's infeasible and failed result counts. */
sqlite3_stmt *kvq_report_left_out(sqlite3 *h, int64_t run_id);
/* The params of the run's results of method (one setting per method in a run: it is part
 * of the run's identity), malloc'd, or NULL when it has none: report tables name the row
 * with rt_params_suffix ("METHOD (untrained)", "METHOD (params FILE)"). */
char *kvq_method_params(sqlite3 *h, int64_t run_id, const char *method);
/* Every result of run_id (<= 0: of every run), case by case, for the report's tables:
 *   0 model  1 workload  2 variant  3 ctx  4 depth  5 method  6 params  7 budget  8 status
 *   9 score  10 fast_peak  11 slow_peak  12 fast_tokens  13 prefill_s  14 compress_s
 *   15 decode_s  16 decode_tokens  17 tokens_per_s  18 results.gpu_peak_bytes  19 case_key
 *   20 case id  21 ans_nll  22 kl  23 top1  24 load_start  25 load_end
 *   26 fast_decode_peak  27 results.rss_peak  28 git_commit  29 run_key
 *   30 cases.gpu_peak_bytes  31 cases.gpu_driver_peak_bytes  32 cases.gpu_prefill_ms
 *   33 results.gpu_driver_peak_bytes
 * (model and workload '?' when unknown; columns newer than the file NULL). */
sqlite3_stmt *kvq_report_records(sqlite3 *h, int64_t run_id);

/* ------------------------------------------------ plot (query_plot.c) */

/* The NIAH heatmap's cell values, in the order of plot.c's metrics. */
enum kvq_niah { KVQ_NIAH_SCORE, KVQ_NIAH_NLL, KVQ_NIAH_KL, KVQ_NIAH_TOP1 };
/* The NIAH cases' distinct context lengths (axis 0) or depths (axis 1), ascending. */
sqlite3_stmt *kvq_niah_axis(sqlite3 *h, int axis, int64_t run_id, const char *variant);
/* The heatmap's panels: method, budget (distinct). */
sqlite3_stmt *kvq_niah_panels(sqlite3 *h, int64_t run_id, const char *variant);
/* Per (method, budget, ctx, depth): the metric's mean over its results (score and top1 in
 * %, failures 0; nll and kl over the finished results). */
sqlite3_stmt *kvq_niah_cells(sqlite3 *h, enum kvq_niah metric, int64_t run_id, const char *variant);

/* The line figures: method, budget, x, y per result, ordered by (method, budget, x). */
enum kvq_fig {
    KVQ_FIG_MEMORY,    /* x ctx, y fast_peak in MiB (finished) */
    KVQ_FIG_LATENCY,   /* x ctx, y decode ms/token (finished, with decode tokens) */
    KVQ_FIG_BUDGET     /* x budget, y score (failures 0) */
};
sqlite3_stmt *kvq_fig_points(sqlite3 *h, enum kvq_fig fig, int64_t run_id, const char *variant);

/* A kvbench sim run's finished results: method, budget, ctx, sim_mem.total_peak,
 * fast_decode_peak, ordered by (method, budget, ctx). */
sqlite3_stmt *kvq_sim_memory(sqlite3 *h, int64_t run_id);
/* The run's results that did not finish: "method status", distinct, sorted. */
sqlite3_stmt *kvq_unfinished(sqlite3 *h, int64_t run_id);

/* Zoom rates of the given methods (NULL when a name is not [a-z0-9_.-]): per finished
 * result with decode steps and default params, or params that only name a parameter file
 * (params_file=...), per (layer, head) of head_stats: method, budget, result id,
 * decode_tokens, layer, head, events, the sum over its zoom events of expanded / spans (0
 * without zoom_events, which with_zoom = 0 says), model ('?' if unknown), params ('' for
 * none); ordered by model, method, params, budget, result, layer, head; methods in the
 * order given. run_id <= 0: every run; model NULL: every model. Results with a zoom
 * event of unknown spans are left out. */
sqlite3_stmt *kvq_zoom_rates(sqlite3 *h, int with_zoom, int64_t run_id, const char *variant, const char *model,
                             const char *const *methods, int n_methods);

/* ------------------------------------------------ sim --check-run (query_sim.c) */

/* The case's results: method, budget, params. */
sqlite3_stmt *kvq_case_results(sqlite3 *h, int64_t case_id);
/* The case's finished results: method, fast_decode_peak + slow_peak. */
sqlite3_stmt *kvq_case_stores(sqlite3 *h, int64_t case_id);
/* Finished results with a measured peak RSS, of cases with a prompt token count, case by
 * case: case id, prompt_tokens, cases.rss_peak, config_json, method, budget,
 * fast_decode_peak, slow_peak, results.rss_peak. */
sqlite3_stmt *kvq_rss_results(sqlite3 *h);

#endif
