/* kvbench sim --check-run DB: the CPU engine's memory model (sim_engine_memory) against
 * the peak RSS a model run measured, per case (over the shared prefill) and per result
 * (over one method's compression and decode). The method term is the result's own
 * accounting (steady fast tier + slow-tier peak, f32 rows as the engine stores them);
 * in a batched run (--batch 1, the default) every pair of the case holds its store and
 * its logits row at once, so each result's peak has all of them. */
#include "sim.h"
#include "../../results/db.h"
#include "../../results/query.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "model" value of the run's configuration (the path or random: spec it was run with). */
static int config_model(const char *json, char *out, size_t n) {
    const char *k = json ? strstr(json, "\"model\":\"") : NULL;
    if (!k) return -1;
    k += 9;
    const char *e = strchr(k, '"');
    if (!e || (size_t)(e - k) >= n) return -1;
    memcpy(out, k, (size_t)(e - k));
    out[e - k] = 0;
    return 0;
}

static kv_needs case_needs(sqlite3 *s, int64_t case_id, const kv_model_config *c, int n) {
    kv_needs all = {0};
    sqlite3_stmt *st = kvq_case_results(s, case_id);
    if (!st) return all;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const kv_method *m = kv_method_find((const char *)sqlite3_column_text(st, 0));
        if (!m) continue;
        double b = sqlite3_column_double(st, 1);
        kv_setup su = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv,
                       .head_dim = c->head_dim, .n_prompt = n, .max_decode = 1,
                       .params = (const char *)sqlite3_column_text(st, 2)};
        if (b <= 1) su.budget_frac = b;
        else su.budget_tokens = (int)b;
        char err[256];
        kv_state *k = m->init(&su, err, sizeof err);
        if (!k) continue;
        kv_needs nd = {0};
        m->needs(&su, &nd);
        m->free(k);
        kv_needs_union(&all, &nd);
    }
    sqlite3_finalize(st);
    return all;
}

/* The stores of the case's finished methods, summed: all, and those that ingest only
 * after the last layer (late); *any_late: one such method is in the case; *most: the
 * largest one. */
static void case_stores(sqlite3 *s, int64_t case_id, double *all, double *late, int *any_late, double *most,
                        int *count) {
    *all = *late = *most = 0, *any_late = 0, *count = 0;
    sqlite3_stmt *st = kvq_case_stores(s, case_id);
    if (!st) return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const kv_method *m = kv_method_find((const char *)sqlite3_column_text(st, 0));
        double b = sqlite3_column_double(st, 1);
        *all += b, ++*count;
        if (b > *most) *most = b;
        if (m && m->needs_surprisal) *late += b, *any_late = 1;
    }
    sqlite3_finalize(st);
}

static double mib(double b) { return b / 1048576.0; }

int sim_check_run(const char *db_path, char *err, size_t errlen) {
    kv_db *db = kvdb_open_readonly(db_path, err, errlen);
    if (!db) return -1;
    sqlite3 *s = kvdb_sqlite(db);
    int rc = -1, rows = 0;
    sqlite3_stmt *st = kvq_rss_results(s);
    if (!st) {
        snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(s));
        kvdb_close(db);
        return -1;
    }
    printf("| case | n | prefill | method | measured RSS MiB | model MiB | error | weights | K/V held | stats | method"
           " (all methods) | runtime |\n|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int64_t last_case = -1;
    double sum_abs = 0, worst = 0, done_before = 0;   /* streamed: stores of the case's results freed so far */
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t cid = sqlite3_column_int64(st, 0);
        int n = sqlite3_column_int(st, 1);
        char model[512];
        if (config_model((const char *)sqlite3_column_text(st, 3), model, sizeof model)) continue;
        sim_shape sh;
        if (sim_shape_open(model, &sh, err, errlen)) goto done;
        sh.cfg.n_params = (int64_t)sh.n_params;
        kv_needs nd = case_needs(s, cid, &sh.cfg, n);
        const char *cfg = (const char *)sqlite3_column_text(st, 3);
        int streamed = cfg && strstr(cfg, "\"prefill\":\"streamed\""),
            batched = cfg && strstr(cfg, "\"decode_pairs\":\"batched\"");
        double own = sqlite3_column_double(st, 6) + sqlite3_column_double(st, 7), all, late, most;
        int any_late, pairs;
        case_stores(s, cid, &all, &late, &any_late, &most, &pairs);
        if (cid != last_case) done_before = 0;
        /* one at a time, streamed: each result frees its method's store when it ends, so
         * result i's peak holds the stores of results i, i+1, ... (in result order);
         * batched: every pair begins (its store and a logits row of the vocabulary) before
         * the first step, and each result's peak is measured from its own begin */
        double batch = batched ? all + 4.0 * pairs * sh.cfg.n_vocab : 0, method = batched ? batch : own;
        sim_engine_mem em;
        sim_engine_memory(&sh.cfg, sh.is_random ? sh.random_weight_bytes : sh.file_weight_bytes, n, &nd, method,
                          streamed, batched ? batch : all - done_before, late, any_late, &em);
        done_before += own;
        const char *mode = streamed ? "streamed" : "kept";
        if (cid != last_case && sqlite3_column_type(st, 2) != SQLITE_NULL) {
            /* cases.rss_peak: the whole case, its prefill and every result after it */
            sim_engine_mem big;
            sim_engine_memory(&sh.cfg, sh.is_random ? sh.random_weight_bytes : sh.file_weight_bytes, n, &nd,
                              batched ? batch : most, streamed, batched ? batch : all, late, any_late, &big);
            double model = em.peak_prefill > big.peak_method ? em.peak_prefill : big.peak_method;
            double meas = sqlite3_column_double(st, 2), e = model / meas - 1;
            printf("| %lld | %d | %s | (case) | %.1f | %.1f | %+.1f%% | %.1f | %.1f | %.1f | act %.1f (%.1f) | %.1f |\n",
                   (long long)cid, n, mode, mib(meas), mib(model), 100 * e, mib(em.weights_mapped),
                   mib(em.kv_held), mib(em.stats), mib(em.act_prefill + em.tiles), mib(em.methods_all), mib(em.runtime));
            sum_abs += fabs(e), worst = fabs(e) > worst ? fabs(e) : worst, rows++;
        }
        last_case = cid;
        double meas = sqlite3_column_double(st, 8), e = em.peak_method / meas - 1;
        printf("| %lld | %d | %s | %s | %.1f | %.1f | %+.1f%% | %.1f | %.1f | %.1f | %.1f (%.1f) | %.1f |\n",
               (long long)cid, n, mode, (const char *)sqlite3_column_text(st, 4), mib(meas), mib(em.peak_method),
               100 * e, mib(em.weights_mapped), streamed ? 0.0 : mib(em.kv_held), streamed ? 0.0 : mib(em.stats),
               mib(em.method), mib(em.methods_all), mib(em.runtime));
        sum_abs += fabs(e), worst = fabs(e) > worst ? fabs(e) : worst, rows++;
    }
    if (!rows) {
        snprintf(err, errlen, "%s: no finished model results with a measured peak RSS", db_path);
        goto done;
    }
    printf("\nmean |error| %.2f%%, worst %.2f%% over %d peaks\n", 100 * sum_abs / rows, 100 * worst, rows);
    rc = 0;
done:
    sqlite3_finalize(st);
    kvdb_close(db);
    return rc;
}
