/* SeKV as a kv_method, on random K/V/Q (fresh seed) against float64 references written
 * here: with every span expanded at full rank it equals exact attention (also after
 * decode-time compaction); with zoom off it equals a softmax over full tokens and
 * surprisal-weighted coarse rows; a span the query targets is expanded; the budget holds
 * at every step; infeasible budgets and bad parameters are reported; auto alpha is the
 * smallest that fits; zoom events reach SQLite. */
#include "check.h"
#include "../methods/sekv/sekv.h"
#include "../results/db.h"
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int L, H, Hkv, g, d, n, steps;
    size_t stride;          /* floats between kv heads: (n + steps) * d */
    float *K, *V;           /* [L][Hkv][n+steps][d] */
    float *Q;               /* [steps][L][H][d] */
    float *surp;            /* [n+steps] */
} scen;

static float *krow(const scen *s, int l, int j, int t) {
    return s->K + ((size_t)l * s->Hkv + j) * s->stride + (size_t)t * s->d;
}
static float *vrow(const scen *s, int l, int j, int t) {
    return s->V + ((size_t)l * s->Hkv + j) * s->stride + (size_t)t * s->d;
}
static float *qrow(const scen *s, int step, int l) { return s->Q + ((size_t)step * s->L + l) * s->H * s->d; }

static scen make_scen(int L, int H, int Hkv, int d, int n, int steps) {
    scen s = {L, H, Hkv, H / Hkv, d, n, steps, (size_t)(n + steps) * d, NULL, NULL, NULL, NULL};
    size_t kv = (size_t)L * Hkv * s.stride;
    s.K = malloc(kv * sizeof *s.K), s.V = malloc(kv * sizeof *s.V);
    s.Q = malloc((size_t)steps * L * H * d * sizeof *s.Q);
    s.surp = malloc((size_t)(n + steps) * sizeof *s.surp);
    test_fill(s.K, kv, 1), test_fill(s.V, kv, 1);
    test_fill(s.Q, (size_t)steps * L * H * d, 1.5f);
    for (int t = 0; t < n + steps; t++) s.surp[t] = (float)(-log(test_unif() + 1e-9) * (test_unif() < 0.1 ? 5 : 1));
    s.surp[0] = 0;
    return s;
}
static void free_scen(scen *s) { free(s->K), free(s->V), free(s->Q), free(s->surp); }

/* The method under test: kvbench's fit (the sekv-spread variant) is what most tests here
 * exercise; the paper's defaults (kv_sekv) are tested at the end (test_paper_*). */
static const kv_method *M = &kv_sekv_spread;

/* The mechanism tests below were written for P <= B/2: sekv-spread's p_max is pinned at
 * 0.5 (its default before the dev-split retune) unless params set it. */
static kv_state *start(const scen *s, const char *params, int budget, char *err, size_t errlen) {
    static char pinned[1024];
    if (M == &kv_sekv_spread) {
        snprintf(pinned, sizeof pinned, "p_max=0.5%s%s", params && *params ? "," : "", params ? params : "");
        params = pinned;
    }
    kv_setup su = {.decode_rule = KV_DECODE_HOLD, .n_layers = s->L, .n_heads = s->H, .n_kv_heads = s->Hkv, .head_dim = s->d, .n_prompt = s->n,
                   .max_decode = s->steps, .budget_tokens = budget, .params = params};
    return M->init(&su, err, errlen);
}

static int ingest_all(kv_state *st, const scen *s, char *err, size_t errlen) {
    for (int l = 0; l < s->L; l++) {
        kv_prefill p = {.layer = l, .n = s->n, .K = krow(s, l, 0, 0), .V = vrow(s, l, 0, 0),
                        .kv_stride = s->stride, .surprisal = s->surp};
        if (M->ingest(st, &p, err, errlen)) return -1;
    }
    return 0;
}

/* Decode step: every layer appends token n+step and attends with its query. */
static void step(kv_state *st, const scen *s, int k, float *out) {
    int d = s->d;
    float *kk = malloc((size_t)s->Hkv * d * sizeof *kk), *vv = malloc((size_t)s->Hkv * d * sizeof *vv);
    for (int l = 0; l < s->L; l++) {
        for (int j = 0; j < s->Hkv; j++) {
            memcpy(kk + (size_t)j * d, krow(s, l, j, s->n + k), d * sizeof *kk);
            memcpy(vv + (size_t)j * d, vrow(s, l, j, s->n + k), d * sizeof *vv);
        }
        kv_token t = {s->n + k, s->surp[s->n + k], 0};
        M->append(st, l, kk, vv, &t);
        test_poison(out + (size_t)l * s->H * d, (size_t)s->H * d);
        M->attend(st, l, qrow(s, k, l), out + (size_t)l * s->H * d);
    }
    free(kk), free(vv);
}

/* Exact attention of head h of layer l over tokens 0..T-1, in double. */
static void ref_full(const scen *s, int l, int h, int T, const float *q, double *out) {
    int d = s->d;
    double *lg = malloc((size_t)T * sizeof *lg), mx = -INFINITY, sum = 0;
    for (int t = 0; t < T; t++) {
        const float *k = krow(s, l, h / s->g, t);
        double dot = 0;
        for (int c = 0; c < d; c++) dot += (double)q[c] * k[c];
        lg[t] = dot / sqrt((double)d);
        if (lg[t] > mx) mx = lg[t];
    }
    for (int c = 0; c < d; c++) out[c] = 0;
    for (int t = 0; t < T; t++) sum += (lg[t] = exp(lg[t] - mx));
    for (int t = 0; t < T; t++) {
        const float *v = vrow(s, l, h / s->g, t);
        for (int c = 0; c < d; c++) out[c] += lg[t] / sum * v[c];
    }
    free(lg);
}

/* Worst relative error of every head of every layer against exact attention over T tokens. */
static double err_vs_full(const scen *s, int k, int T, const float *out) {
    double worst = 0, ref[128];
    for (int l = 0; l < s->L; l++)
        for (int h = 0; h < s->H; h++) {
            ref_full(s, l, h, T, qrow(s, k, l) + (size_t)h * s->d, ref);
            double e = rel_l2(out + ((size_t)l * s->H + h) * s->d, ref, s->d);
            if (e > worst) worst = e;
        }
    return worst;
}

/* The persistent rows of every kv head of layer l cover positions 0..T-1 once each, in
 * order; full rows are the original tokens, coarse rows the surprisal-weighted means of
 * their span, and spans short enough for full rank (len <= min(d, rank)) rebuild their
 * tokens. Returns the worst relative error seen. */
static double check_structure(const kv_state *st, const scen *s, int l, int T, int rank) {
    int n = sekv_rows(st, l, NULL, NULL), d = s->d, ok = 1;
    int32_t *pos = malloc((size_t)n * sizeof *pos), *sp = malloc((size_t)n * sizeof *sp);
    sekv_rows(st, l, pos, sp);
    float *K = malloc((size_t)T * d * sizeof *K), *V = malloc((size_t)T * d * sizeof *V);
    double worst = 0, *ref = malloc((size_t)2 * T * d * sizeof *ref);
    int next = 0;
    for (int r = 0; r < n; r++) {
        int len = sp[r] < 0 ? 1 : sekv_span_at(st, l, sp[r]).len;
        ok &= pos[r] == next && (sp[r] < 0 || sekv_span_at(st, l, sp[r]).start == pos[r]);
        next = pos[r] + len;
        for (int j = 0; j < s->Hkv; j++) {
            const float *k, *v;
            sekv_row(st, l, j, r, &k, &v);
            if (sp[r] < 0) {
                ok &= memcmp(k, krow(s, l, j, pos[r]), d * sizeof *k) == 0 &&
                      memcmp(v, vrow(s, l, j, pos[r]), d * sizeof *v) == 0;
                continue;
            }
            double tot = 0;
            for (int t = pos[r]; t < next; t++) tot += s->surp[t];
            for (int c = 0; c < d; c++) {
                ref[c] = ref[d + c] = 0;
                for (int t = pos[r]; t < next; t++) {
                    double w = tot > 0 ? s->surp[t] / tot : 1.0 / len;
                    ref[c] += w * krow(s, l, j, t)[c];
                    ref[d + c] += w * vrow(s, l, j, t)[c];
                }
            }
            worst = fmax(worst, fmax(rel_l2(k, ref, d), rel_l2(v, ref + d, d)));
            if (len > d || len > rank) continue;
            test_poison(K, (size_t)len * d), test_poison(V, (size_t)len * d);
            sekv_span_tokens(st, l, j, sp[r], K, V);
            for (int t = 0; t < len; t++)
                for (int c = 0; c < d; c++) {
                    ref[(size_t)t * d + c] = krow(s, l, j, pos[r] + t)[c];
                    ref[(size_t)(len + t) * d + c] = vrow(s, l, j, pos[r] + t)[c];
                }
            worst = fmax(worst, fmax(rel_l2(K, ref, (size_t)len * d), rel_l2(V, ref + (size_t)len * d, (size_t)len * d)));
        }
    }
    CHECK(ok && next == T, "layer %d: rows do not tile positions 0..%d (end %d)", l, T, next);
    free(pos), free(sp), free(K), free(V), free(ref);
    return worst;
}

static int total_expanded(const kv_state *st, const scen *s, int32_t *buf) {
    int all = 1;
    for (int l = 0; l < s->L; l++)
        for (int h = 0; h < s->H; h++)
            all &= sekv_expanded(st, l, h, buf) == sekv_span_count(st, l);
    return all;
}

/* Every span expanded at full rank, gate open, budget large: SeKV is exact attention. */
static void test_exact(int gate) {
    scen s = make_scen(2, 4, 2, 32, test_int(150, 400), 10);
    char params[128], err[256];
    snprintf(params, sizeof params, "rank=32,gate=%d,tau=0,local=8,sinks=2,l_max=32", gate);
    kv_state *st = start(&s, params, 4 * (s.n + s.steps), err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    if (!st) return;
    CHECK(sekv_span_count(st, 0) > 3, "only %d spans", sekv_span_count(st, 0));
    float *out = malloc((size_t)s.L * s.H * s.d * sizeof *out);
    int32_t *buf = malloc((size_t)s.n * sizeof *buf);
    double worst = 0;
    int all = 1;
    for (int k = 0; k < s.steps; k++) {
        step(st, &s, k, out);
        all &= total_expanded(st, &s, buf);
        double e = err_vs_full(&s, k, s.n + k + 1, out);
        if (e > worst) worst = e;
    }
    CHECK(all, "not every span was expanded");
    CHECK(worst < 2e-5, "gate=%d: every span expanded at full rank differs from exact attention by %g", gate, worst);
    printf("exact (gate=%d, n=%d, %d spans): worst rel err %.2e\n", gate, s.n, sekv_span_count(st, 0), worst);
    M->free(st);
    free(out), free(buf);
    free_scen(&s);
}

/* Decode-time compaction: many decode steps push P past B/2 so decoded tokens become
 * spans; with room for everything and full rank the output stays exact. */
static void test_compaction_exact(void) {
    scen s = make_scen(2, 4, 2, 32, 100, 130);
    char err[256];
    kv_state *st = start(&s, "alpha=1,rank=32,gate=0,tau=0,local=8,sinks=2,l_max=16", 270, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    if (!st) return;
    int ns0 = sekv_span_count(st, 0);
    float *out = malloc((size_t)s.L * s.H * s.d * sizeof *out);
    int32_t *buf = malloc((size_t)(s.n + s.steps) * sizeof *buf);
    double worst = 0;
    int all = 1, over = 0;
    for (int k = 0; k < s.steps; k++) {
        step(st, &s, k, out);
        all &= total_expanded(st, &s, buf);
        double e = err_vs_full(&s, k, s.n + k + 1, out);
        if (e > worst) worst = e;
        for (int l = 0; l < s.L; l++) over |= sekv_resident(st, l, 0, NULL, NULL) > 270;
    }
    int ns1 = sekv_span_count(st, 0);
    for (int l = 0; l < s.L; l++) CHECK(check_structure(st, &s, l, s.n + s.steps, 32) < 1e-4, "structure");
    CHECK(ns1 > ns0, "no decoded tokens were folded into spans (%d -> %d)", ns0, ns1);
    CHECK(all && worst < 2e-5, "after compaction: all expanded %d, rel err %g", all, worst);
    CHECK(!over, "budget exceeded");
    printf("compaction: spans %d -> %d over %d steps, worst rel err %.2e\n", ns0, ns1, s.steps, worst);
    M->free(st);
    free(out), free(buf);
    free_scen(&s);
}

/* zoom=0: one softmax over full-resolution tokens (bias 0) and one coarse row per span
 * (surprisal-weighted mean, bias ln|S|), rebuilt here from the segmentation. */
static void test_coarse_only(void) {
    scen s = make_scen(1, 6, 3, 16, test_int(200, 500), 1);
    char err[256];
    kv_state *st = start(&s, "zoom=0,local=16,sinks=3", s.n, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    if (!st) return;
    const sekv_seg *sg = sekv_segmentation(st);
    float *out = malloc((size_t)s.H * s.d * sizeof *out);
    step(st, &s, 0, out);
    int d = s.d, T = s.n + 1;
    double worst = 0;
    for (int h = 0; h < s.H; h++) {
        int j = h / s.g;
        const float *q = qrow(&s, 0, 0) + (size_t)h * d;
        double *lg = malloc((size_t)T * sizeof *lg), *vs = malloc((size_t)T * d * sizeof *vs), mx = -INFINITY;
        int m = 0, si = 0;
        for (int t = 0; t < T; m++) {
            double kb[64], vb[64], bias = 0;
            int len = 1;
            if (t < s.n && si < sg->n_spans && sg->span[si].start == t) {
                len = sg->span[si++].len;
                double tot = 0;
                for (int u = t; u < t + len; u++) tot += s.surp[u];
                for (int c = 0; c < d; c++) {
                    kb[c] = vb[c] = 0;
                    for (int u = t; u < t + len; u++) {
                        double w = tot > 0 ? s.surp[u] / tot : 1.0 / len;
                        kb[c] += w * krow(&s, 0, j, u)[c];
                        vb[c] += w * vrow(&s, 0, j, u)[c];
                    }
                }
                bias = log(len);
            } else {
                for (int c = 0; c < d; c++) kb[c] = krow(&s, 0, j, t)[c], vb[c] = vrow(&s, 0, j, t)[c];
            }
            double dot = 0;
            for (int c = 0; c < d; c++) dot += q[c] * kb[c], vs[(size_t)m * d + c] = vb[c];
            lg[m] = dot / sqrt((double)d) + bias;
            if (lg[m] > mx) mx = lg[m];
            t += len;
        }
        double sum = 0, ref[64] = {0};
        for (int i = 0; i < m; i++) sum += (lg[i] = exp(lg[i] - mx));
        for (int i = 0; i < m; i++)
            for (int c = 0; c < d; c++) ref[c] += lg[i] / sum * vs[(size_t)i * d + c];
        double e = rel_l2(out + (size_t)h * d, ref, d);
        if (e > worst) worst = e;
        kv_headstat hs;
        M->head_stats(st, 0, h, &hs);
        CHECK(hs.kept == m && hs.events == 0, "head %d: kept %g (want %d), events %g", h, hs.kept, m, hs.events);
        free(lg), free(vs);
    }
    CHECK(worst < 1e-5, "coarse-only attention differs from the reference by %g", worst);
    M->free(st);
    free(out);
    free_scen(&s);
}

/* The queries of one group point at one long span's keys: that span is expanded, within
 * a room that holds only a few spans. */
/* scale > 1 makes the query loud: relevance sigmoids round to 1.0f for many spans, and
 * only the logits still tell the targeted span apart. */
static void test_targeted(int trained_zoom, int route, float scale, int sparse) {
    scen s = make_scen(1, 4, 2, 64, 1500, 1);
    char params[128];
    snprintf(params, sizeof params, "alpha=1,local=32,sinks=4,l_max=64,trained_zoom=%d,route=%d", trained_zoom, route);
    sekv_seg sg;
    sekv_segment_ex(s.surp, s.n, 1.0, 4, 64, 0, 4, 32, &sg);
    int P = sekv_seg_persistent(&sg), B = 2 * P + 2;
    /* the longest span in the middle half */
    int target = -1;
    for (int i = 0; i < sg.n_spans; i++)
        if (sg.span[i].start > s.n / 4 && sg.span[i].start < 3 * s.n / 4 &&
            (target < 0 || sg.span[i].len > sg.span[target].len))
            target = i;
    float u[64];
    test_fill(u, 64, 1);
    double nu = 0;
    for (int c = 0; c < 64; c++) nu += (double)u[c] * u[c];
    for (int c = 0; c < 64; c++) u[c] /= (float)sqrt(nu);
    int gj = test_int(0, 1);   /* the kv group whose heads look for the span */
    /* sparse: three keys of the span point along u (a needle: the span's mean barely
     * moves, but u is the main direction its keys spread along; the background keys are
     * shrunk to sd 0.5 so that it is), else all of them do */
    int t0 = sg.span[target].start, len = sg.span[target].len;
    if (sparse)
        for (int t = 0; t < s.n; t++)
            for (int c = 0; c < 64; c++) krow(&s, 0, gj, t)[c] *= 0.5f;
    for (int t = t0; t < t0 + len; t++)
        if (!sparse || t == t0 + len / 4 || t == t0 + len / 2 || t == t0 + 3 * len / 4)
            for (int c = 0; c < 64; c++) krow(&s, 0, gj, t)[c] = 6 * u[c] + 0.3f * test_normal();
    for (int h = 2 * gj; h < 2 * gj + 2; h++)
        for (int c = 0; c < 64; c++) qrow(&s, 0, 0)[h * 64 + c] = 6 * scale * u[c];
    char err[256];
    kv_state *st = start(&s, params, B, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    if (!st) return;
    CHECK(sekv_span_count(st, 0) == sg.n_spans, "segmentation differs from sekv_segment_ex");
    float *out = malloc((size_t)s.H * s.d * sizeof *out);
    step(st, &s, 0, out);
    int32_t ex[512];
    for (int h = 2 * gj; h < 2 * gj + 2; h++) {
        int n = sekv_expanded(st, 0, h, ex), hit = 0;
        for (int i = 0; i < n; i++) hit |= ex[i] == target;
        if (sparse && !(trained_zoom && route == 1)) {   /* mean-based routing: reported, not required */
            printf("sparse needle, trained_zoom=%d route=%d: span %s by head %d\n", trained_zoom, route,
                   hit ? "expanded" : "missed", h);
            continue;
        }
        CHECK(hit, "trained_zoom=%d route=%d scale %g sparse %d head %d: targeted span %d (len %d) not among %d expanded",
              trained_zoom, route, scale, sparse, h, target, sg.span[target].len, n);
        CHECK(n < sg.n_spans / 2, "head %d expanded %d of %d spans: room not limiting", h, n, sg.n_spans);
    }
    int Pst, R;
    sekv_resident(st, 0, gj, &Pst, &R);
    CHECK(R > 0 && Pst + R <= B, "group %d: P %d + reconstructed %d vs B %d", gj, Pst, R, B);
    /* zoom log and head stats agree */
    const sekv_zoom_event *ev;
    size_t nev = sekv_zoom_log(st, &ev);
    double per_head[4] = {0};
    double rate_sum = 0;
    int bad_spans = 0;
    for (size_t i = 0; i < nev; i++) {
        per_head[ev[i].head] += ev[i].expanded;
        rate_sum += (double)ev[i].expanded / ev[i].spans;
        /* spans: every compressed span of the layer is a candidate (no decode-time spans here) */
        bad_spans += ev[i].spans != sekv_span_count(st, ev[i].layer) || ev[i].expanded > ev[i].spans;
    }
    CHECK(!bad_spans, "%d zoom events whose spans is not the layer's span count (or below expanded)", bad_spans);
    for (int h = 0; h < 4; h++) {
        kv_headstat hs;
        M->head_stats(st, 0, h, &hs);
        CHECK(hs.events == per_head[h], "head %d: events %g vs zoom log %g", h, hs.events, per_head[h]);
    }
    if (trained_zoom && scale == 1) {   /* the zoom log into SQLite */
        char path[64], e2[512];
        snprintf(path, sizeof path, "/tmp/test_sekv_%d.db", (int)getpid());
        unlink(path);
        kv_db *db = kvdb_open(path, e2, sizeof e2);
        CHECK(db != NULL, "open: %s", e2);
        kvdb_run run = {.run_key = "k", .workload = "synthetic"};
        int64_t rid = kvdb_run_begin(db, &run, NULL);
        kvdb_case cs = {.case_key = "c", .workload = "synthetic", .ctx = s.n};
        int64_t cid = kvdb_case_get(db, rid, &cs);
        /* a file made before the spans column: the first put adds it */
        sqlite3_exec(kvdb_sqlite(db), "CREATE TABLE zoom_events(result_id INTEGER NOT NULL REFERENCES results(id) ON "
                     "DELETE CASCADE, step INTEGER NOT NULL, layer INTEGER NOT NULL, head INTEGER NOT NULL, expanded "
                     "INTEGER NOT NULL, PRIMARY KEY(result_id, step, layer, head))", NULL, NULL, NULL);
        kvdb_zoom *z = malloc((nev + 1) * sizeof *z);
        for (size_t i = 0; i < nev; i++) z[i] = (kvdb_zoom){ev[i].step, ev[i].layer, ev[i].head, ev[i].expanded, ev[i].spans};
        CHECK(kvdb_zoom_put(db, cid, "sekv", B, z, nev) == -1 && strstr(kvdb_errmsg(db), "no such result"),
              "zoom events without a result accepted: %s", kvdb_errmsg(db));
        kvdb_result r = {.method = "sekv", .status = "ok", .budget = B, .budget_tokens = B};
        CHECK(kvdb_result_put(db, cid, &r) == 0, "result: %s", kvdb_errmsg(db));
        CHECK(kvdb_zoom_put(db, cid, "sekv", B, z, nev) == 0, "zoom put: %s", kvdb_errmsg(db));
        CHECK(nev == 0 || kvdb_zoom_put(db, cid, "sekv", B, z, 1) == -1, "duplicate zoom rows accepted");
        char used[800], back[800] = "";
        sekv_params_used(st, used, sizeof used);
        CHECK(kvdb_note_put(db, cid, "sekv", B + 1, "params_used", used) == -1 &&
                  strstr(kvdb_errmsg(db), "no such result"), "note without a result accepted");
        CHECK(kvdb_note_put(db, cid, "sekv", B, "params_used", used) == 0, "note put: %s", kvdb_errmsg(db));
        sqlite3_stmt *nq;
        sqlite3_prepare_v2(kvdb_sqlite(db), "SELECT text FROM result_notes WHERE key = 'params_used'", -1, &nq, NULL);
        if (sqlite3_step(nq) == SQLITE_ROW) snprintf(back, sizeof back, "%s", (const char *)sqlite3_column_text(nq, 0));
        sqlite3_finalize(nq);
        CHECK(!strcmp(back, used), "note read back '%s', wrote '%s'", back, used);
        sqlite3_stmt *q;
        sqlite3_prepare_v2(kvdb_sqlite(db), "SELECT count(*), total(expanded), total(expanded * 1.0 / spans) FROM zoom_events",
                           -1, &q, NULL);
        CHECK(sqlite3_step(q) == SQLITE_ROW, "query");
        double tot = per_head[0] + per_head[1] + per_head[2] + per_head[3];
        CHECK(sqlite3_column_int64(q, 0) == (int64_t)nev && sqlite3_column_double(q, 1) == tot &&
                  fabs(sqlite3_column_double(q, 2) - rate_sum) < 1e-9,
              "zoom_events rows %lld sum %g rate sum %g, want %zu %g %g", (long long)sqlite3_column_int64(q, 0),
              sqlite3_column_double(q, 1), sqlite3_column_double(q, 2), nev, tot, rate_sum);
        sqlite3_finalize(q);
        kvdb_close(db);
        free(z);
        unlink(path);
    }
    M->free(st);
    sekv_seg_free(&sg);
    free(out);
    free_scen(&s);
}

/* P + reconstructed <= B for every (layer, group) over 30 steps with maximal zoom,
 * while decode tokens push P past B/2; memory() matches the resident rows. */
static void test_budget(void) {
    scen s = make_scen(2, 6, 2, 32, 800, 30);
    sekv_seg sg;
    sekv_segment_ex(s.surp, s.n, 1.0, 4, 16, 0, 4, 8, &sg);
    int B = 2 * sekv_seg_persistent(&sg) + 10;
    sekv_seg_free(&sg);
    char err[256];
    kv_state *st = start(&s, "alpha=1,tau=0,local=8,l_max=16", B, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    if (!st) return;
    int ns0 = sekv_span_count(st, 0), over = 0, zoomed = 0, bad_mem = 0;
    float *out = malloc((size_t)s.L * s.H * s.d * sizeof *out);
    for (int k = 0; k < s.steps; k++) {
        step(st, &s, k, out);
        long rows = 0;
        for (int l = 0; l < s.L; l++)
            for (int j = 0; j < s.Hkv; j++) {
                int P, R, tot = sekv_resident(st, l, j, &P, &R);
                over |= tot > B;
                zoomed |= R > 0;
                rows += tot;
            }
        kv_mem m;
        M->memory(st, &m);
        bad_mem |= m.fast_tokens != rows || m.fast_tokens > (long)s.L * s.Hkv * B ||
                   m.fast_bytes != (size_t)rows * 2 * s.d * sizeof(float) + m.fast_aux_bytes || m.fast_peak < m.fast_bytes ||
                   m.slow_bytes == 0 || m.slow_peak < m.slow_bytes;
        for (int l = 0; l < s.L; l++) {
            double e = check_structure(st, &s, l, s.n + k + 1, 32);
            CHECK(e < 1e-4, "step %d layer %d: rows off by %g", k, l, e);
        }
        int finite = 1;
        for (size_t i = 0; i < (size_t)s.L * s.H * s.d; i++) finite &= isfinite(out[i]);
        CHECK(finite, "step %d: output not finite", k);
    }
    CHECK(!over, "fast rows exceeded B=%d", B);
    CHECK(zoomed, "nothing was ever expanded");
    CHECK(!bad_mem, "memory() disagrees with the resident rows");
    CHECK(sekv_span_count(st, 0) > ns0, "P passed B/2 but nothing was folded (%d spans)", ns0);
    M->free(st);
    free(out);
    free_scen(&s);
}

/* Auto alpha is the smallest grid value whose P fits in B/2; too small a budget is
 * reported as infeasible. */
static void test_auto_and_infeasible(void) {
    scen s = make_scen(1, 2, 1, 16, 1000, 1);
    static const double grid[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0};
    sekv_seg sg;
    sekv_segment_ex(s.surp, s.n, 2.0, 4, 64, 0, 4, 32, &sg);
    int B = 2 * sekv_seg_persistent(&sg) + test_int(0, 1);
    sekv_seg_free(&sg);
    char err[256];
    kv_state *st = start(&s, "local=32,l_max=64", B, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "setup: %s", err);
    int lm;
    double a = sekv_chosen_alpha(st, &lm);
    CHECK(a <= 2.0 && lm == 4, "chose alpha %g l_min %d", a, lm);
    for (int i = 0; i < 10 && grid[i] <= a; i++) {
        sekv_segment_ex(s.surp, s.n, grid[i], 4, 64, 0, 4, 32, &sg);
        int P = sekv_seg_persistent(&sg);
        CHECK(grid[i] < a ? P > B / 2 : P <= B / 2, "alpha %g: P=%d, B/2=%d, chosen %g", grid[i], P, B / 2, a);
        sekv_seg_free(&sg);
    }
    char desc[256];
    sekv_describe(st, desc, sizeof desc);
    CHECK(strstr(desc, "(auto)") && strstr(desc, "untrained"), "describe: %s", desc);
    M->free(st);
    const char *cases[2] = {NULL, "alpha=1"};
    for (int i = 0; i < 2; i++) {
        st = start(&s, cases[i], 40, err, sizeof err);
        CHECK(st != NULL, "init: %s", err);
        err[0] = 0;
        CHECK(ingest_all(st, &s, err, sizeof err) == -1 && strstr(err, "infeasible") && strstr(err, "B=40"),
              "tiny budget (%s): '%s'", cases[i] ? cases[i] : "auto", err);
        M->free(st);
    }
    free_scen(&s);
}

/* The value of key in "k=v,k=v" as an int (-1 if absent). */
static int kv_int(const char *kv, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "%s=", key);
    for (const char *p = kv; (p = strstr(p, pat)); p++)
        if (p == kv || p[-1] == ',') return atoi(p + strlen(pat));
    return -1;
}

/* The automatic fit at small budgets, against the documented search order recomputed
 * here: l_max 32, 48, 64, 128, 256, each with local 32 and then clamp(B/8, 4, 32);
 * inside each, l_min 4 then 2; inside that, alpha 0.5 .. 4. The state must choose the
 * first setting whose P fits in B/2, report it in sekv_params_used, and reproduce the
 * same segmentation when those params are given back. Given values stay fixed. */
static void test_fit_order(void) {
    static const double grid[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0};
    int tried = 0, scaled = 0;
    /* 12 cases, and more until one needed a smaller window or longer spans (about a
     * third do; 12 alone missed for 1 seed in ~130) */
    for (int it = 0; it < 12 || (scaled == 0 && it < 200); it++) {
        scen s = make_scen(1, 2, 1, 16, test_int(700, 1500), 1);
        int B = test_int(s.n / 40, s.n / 8);
        /* reference: the first fitting setting in the documented order */
        int small = B / 8 < 4 ? 4 : B / 8 > 32 ? 32 : B / 8;
        int shp[10][2], caps[5] = {32, 48, 64, 128, 256};
        for (int c = 0; c < 10; c++) shp[c][0] = c % 2 ? small : 32, shp[c][1] = caps[c / 2];
        int want = 0, wl = 0, wloc = 0, wcap = 0;
        double wa = 0;
        for (int si = 0; si < 10 && !want; si++)
            for (int li = 0; li < 2 && !want; li++)
                for (int ai = 0; ai < 10 && !want; ai++) {
                    sekv_seg sg;
                    sekv_segment_ex(s.surp, s.n, grid[ai], li ? 2 : 4, shp[si][1], 0, 4, shp[si][0], &sg);
                    if (sekv_seg_persistent(&sg) <= B / 2)
                        want = 1, wa = grid[ai], wl = li ? 2 : 4, wloc = shp[si][0], wcap = shp[si][1];
                    sekv_seg_free(&sg);
                }
        char err[256], used[256] = "";
        kv_state *st = start(&s, NULL, B, err, sizeof err);
        int rc = st ? ingest_all(st, &s, err, sizeof err) : -1;
        tried++;
        if (!want) {
            CHECK(rc == -1 && strstr(err, "infeasible"), "n=%d B=%d: nothing fits, yet '%s'", s.n, B,
                  rc ? err : "accepted");
        } else {
            CHECK(rc == 0, "n=%d B=%d: the fit should find alpha=%g l_min=%d local=%d l_max=%d: %s", s.n, B, wa, wl, wloc,
                  wcap, err);
        }
        if (rc == 0) {
            sekv_params_used(st, used, sizeof used);
            int lm;
            double a = sekv_chosen_alpha(st, &lm);
            CHECK(a == wa && lm == wl && kv_int(used, "local") == wloc && kv_int(used, "l_max") == wcap &&
                      kv_int(used, "l_min") == wl,
                  "n=%d B=%d: chose %s, expected alpha=%g l_min=%d local=%d l_max=%d", s.n, B, used, wa, wl, wloc, wcap);
            scaled += wloc != 32 || wcap != 32;
            int P, R;
            sekv_resident(st, 0, 0, &P, &R);
            CHECK(P <= B / 2, "P=%d > B/2=%d after ingest", P, B / 2);
            /* the recorded params reproduce the segmentation, with nothing left to choose */
            kv_state *st2 = start(&s, used, B, err, sizeof err);
            CHECK(st2 && ingest_all(st2, &s, err, sizeof err) == 0, "params '%s' given back: %s", used, err);
            if (st2) {
                int same = sekv_span_count(st2, 0) == sekv_span_count(st, 0);
                for (int i = 0; same && i < sekv_span_count(st, 0); i++)
                    same = sekv_span_at(st, 0, i).start == sekv_span_at(st2, 0, i).start &&
                           sekv_span_at(st, 0, i).len == sekv_span_at(st2, 0, i).len;
                char desc[256];
                sekv_describe(st2, desc, sizeof desc);
                CHECK(same && !strstr(desc, "(auto)"), "'%s' given back: other spans, or still automatic (%s)", used,
                      desc);
                M->free(st2);
            }
            /* given values stay fixed: the defaults' shape made explicit must not scale */
            if (wloc != 32 || wcap != 32) {
                kv_state *st3 = start(&s, "local=32,l_max=32", B, err, sizeof err);
                CHECK(st3 && ingest_all(st3, &s, err, sizeof err) == -1 && strstr(err, "infeasible") &&
                          strstr(err, "local=32") && strstr(err, "l_max=32"),
                      "explicit local=32,l_max=32 at B=%d: '%s'", B, err);
                if (st3) M->free(st3);
            }
        }
        if (st) M->free(st);
        free_scen(&s);
    }
    CHECK(scaled > 0, "no case of %d needed a smaller window or longer spans (budgets too large)", tried);
    /* a given l_min is not lowered */
    scen s = make_scen(1, 2, 1, 16, 1000, 1);
    char err[256], used[256];
    kv_state *st = start(&s, "l_min=6", 400, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "l_min=6: %s", err);
    if (st) sekv_params_used(st, used, sizeof used), M->free(st);
    CHECK(kv_int(used, "l_min") == 6, "given l_min=6 became %s", used);
    free_scen(&s);
}

static void test_bad_params(void) {
    scen s = make_scen(2, 4, 2, 16, 50, 1);
    char err[512], path[64], params[160];
    const char *bad[][2] = {{"rank=16", "rank"}, {"alpha=0", "alpha"}, {"dprime=16", "dprime"},
                            {"nope=1", "unknown"}, {"l_min=9,l_max=4", "l_max"}, {"gate=3", "gate"},
                            {"tau=2", "tau"}, {"params_file=/nonexistent/p.bin", "/nonexistent/p.bin"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        kv_state *st = start(&s, bad[i][0], 10, err, sizeof err);
        CHECK(!st && strstr(err, bad[i][1]), "'%s' accepted or unclear: '%s'", bad[i][0], err);
        if (st) M->free(st);
    }
    snprintf(path, sizeof path, "/tmp/test_sekv_p_%d.bin", (int)getpid());
    sekv_params p;
    CHECK(sekv_params_init(&p, 2, 4, 16, 32, 5, err, sizeof err) == 0, "init");
    p.trained = 1;
    CHECK(sekv_params_save(&p, path, err, sizeof err) == 0, "save: %s", err);
    snprintf(params, sizeof params, "params_file=%s", path);
    kv_state *st = start(&s, params, 1000, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "with params file: %s", err);
    char desc[256] = "";
    if (st) sekv_describe(st, desc, sizeof desc), M->free(st);
    CHECK(strstr(desc, "trained") && !strstr(desc, "untrained"), "describe: %s", desc);
    snprintf(params, sizeof params, "params_file=%s,rank=8", path);   /* trained at R=32, run at 8 */
    st = start(&s, params, 1000, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "rank 8 with a rank-32 file: %s", err);
    desc[0] = 0;
    if (st) sekv_describe(st, desc, sizeof desc), M->free(st);
    CHECK(strstr(desc, "rank=8") && strstr(desc, "params: trained"), "rank vs file: %s", desc);
    scen s2 = make_scen(3, 4, 2, 16, 50, 1);
    snprintf(params, sizeof params, "params_file=%s", path);
    st = start(&s2, params, 1000, err, sizeof err);
    CHECK(!st && strstr(err, "shape mismatch") && strstr(err, path), "shape: '%s'", err);
    unlink(path);
    sekv_params_free(&p);
    free_scen(&s), free_scen(&s2);
}

/* The default params file ($KVBENCH_SEKV_PARAMS here), asked for with
 * params_file=default (sekv's default), is used only when it holds trained parameters
 * for this model (kv_setup.model_hash) and shape, at any rank cap; on another model file
 * the default is a refusal naming the file to train (where the trained router would run:
 * not with route=1 or the untrained zoom, nor on a synthetic stream or a random: model);
 * params_file=none forces untrained routing; an explicit file for another model is refused. */
static void test_default_params(void) {
    const kv_method *M = &kv_sekv;   /* the paper's method loads the default file by default */
    scen s = make_scen(2, 4, 2, 16, 300, 1);
    char err[512], path[64], desc[256], used[700];
    snprintf(path, sizeof path, "/tmp/test_sekv_d_%d.bin", (int)getpid());
    uint64_t mh = test_next() | 1;
    sekv_params p;
    CHECK(sekv_params_init(&p, 2, 4, 16, 32, 7, err, sizeof err) == 0, "init");
    p.trained = 1, p.model_hash = mh;
    CHECK(sekv_params_save(&p, path, err, sizeof err) == 0, "save: %s", err);
    setenv("KVBENCH_SEKV_PARAMS", path, 1);
    const uint64_t none = kv_model_hash(NULL, 0);   /* a random: model's hash: no file bytes */
    struct {
        uint64_t hash;
        const char *params;
        int trained;   /* 1 trained, 0 untrained, -1 refused */
    } cases[] = {{mh, "params_file=default", 1}, {mh ^ 2, "params_file=default", -1}, {0, "params_file=default", 0},
                 {none, "params_file=default", 0}, {mh ^ 2, NULL, -1}, {mh ^ 2, "params_file=none", 0},
                 {mh ^ 2, "route=1", 0}, {mh ^ 2, "trained_zoom=0", 0}, {mh ^ 2, "zoom=0", 0},
                 {mh, "params_file=none", 0}, {mh, "params_file=default,rank=8", 1},
                 {mh, "params_file=default,rank=32", 1}, {mh, NULL, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_setup su = {.decode_rule = KV_DECODE_HOLD, .n_layers = s.L, .n_heads = s.H, .n_kv_heads = s.Hkv, .head_dim = s.d, .n_prompt = s.n,
                       .max_decode = 1, .budget_tokens = 200, .params = cases[i].params,
                       .model_hash = cases[i].hash};
        kv_state *st = M->init(&su, err, sizeof err);
        if (cases[i].trained < 0) {   /* one line: what is missing, where, and the two ways on */
            const char *head = "sekv: no trained parameters for this model ($KVBENCH_SEKV_PARAMS=";
            char mine[128];   /* the file looked for (KVBENCH_SEKV_PARAMS's here), and the one to train */
            snprintf(mine, sizeof mine, "SEKV_PARAMS=%s`", path);
            CHECK(!st && kv_init_refused(err) && !strncmp(err, head, strlen(head)) && strstr(err, mine) && strstr(err, "make sekv-params SEKV_MODEL=") &&
                      strstr(err, "--params sekv:params_file=none") && !strchr(err, '\n'),
                  "case %zu: no refusal naming %s: %s", i, mine, st ? "accepted" : err);
            if (st) M->free(st);
            for (const kv_method *o = &kv_sekv_ref; o; o = o == &kv_sekv_ref ? &kv_sekv_spread : NULL) {
                kv_state *so = o->init(&su, err, sizeof err);   /* sekv-ref loads the default too; spread does not */
                CHECK((so == NULL) == (o == &kv_sekv_ref), "%s on another model: %s", o->name, so ? "accepted" : err);
                if (so) o->free(so);
            }
            continue;
        }
        CHECK(st != NULL, "case %zu: %s", i, err);
        if (!st) continue;
        sekv_describe(st, desc, sizeof desc);
        sekv_params_used(st, used, sizeof used);
        int trained = strstr(desc, "trained (default file)") != NULL;
        CHECK(trained == cases[i].trained && (strstr(used, path) != NULL) == cases[i].trained &&
                  (strstr(used, "params_file=none") != NULL) == !cases[i].trained,
              "case %zu (hash %s, %s): %s / %s", i, cases[i].hash == mh ? "match" : "other",
              cases[i].params ? cases[i].params : "defaults", desc, used);
        if (!cases[i].trained) {   /* what it records reproduces untrained routing */
            kv_setup s2 = su;
            s2.params = used;
            s2.model_hash = mh;
            kv_state *st2 = M->init(&s2, err, sizeof err);
            CHECK(st2 != NULL, "recorded params '%s' refused: %s", used, err);
            if (st2) sekv_describe(st2, desc, sizeof desc), M->free(st2);
            CHECK(strstr(desc, "untrained routing") != NULL, "'%s' given back: %s", used, desc);
        }
        M->free(st);
    }
    /* an untrained file is not a default; an explicit file for another model is refused */
    p.trained = 0;
    sekv_params_save(&p, path, err, sizeof err);
    kv_setup su = {.decode_rule = KV_DECODE_HOLD, .n_layers = s.L, .n_heads = s.H, .n_kv_heads = s.Hkv, .head_dim = s.d, .n_prompt = s.n,
                   .max_decode = 1, .budget_tokens = 200, .params = "params_file=default",
                   .model_hash = mh};
    kv_state *st = M->init(&su, err, sizeof err);
    if (st) M->free(st);
    CHECK(!st && strstr(err, "no trained parameters for this model"), "untrained default file used: %s",
          st ? "accepted" : err);
    char params[128];
    snprintf(params, sizeof params, "params_file=%s", path);
    su.params = params, su.model_hash = mh ^ 4;
    st = M->init(&su, err, sizeof err);
    CHECK(!st && strstr(err, "model hash mismatch") && strstr(err, path), "file for another model: '%s'",
          st ? "accepted" : err);
    if (st) M->free(st);
    unsetenv("KVBENCH_SEKV_PARAMS");
    /* without it: the file the refusal names, $KVBENCH_CACHE/sekv-HASH.params, is this
     * model's default once trained there */
    char dir[64], mine[128], *was = getenv("KVBENCH_CACHE") ? strdup(getenv("KVBENCH_CACHE")) : NULL;
    snprintf(dir, sizeof dir, "/tmp/test_sekv_c_%d", (int)getpid());
    mkdir(dir, 0700);
    setenv("KVBENCH_CACHE", dir, 1);
    snprintf(mine, sizeof mine, "%s/sekv-%016llx.params", dir, (unsigned long long)(mh ^ 8));
    su.params = NULL, su.model_hash = mh ^ 8;
    st = M->init(&su, err, sizeof err);
    CHECK(!st && strstr(err, "no trained parameters for this model (") && strstr(err, mine), "refusal without the env: %s",
          st ? "accepted" : err);
    if (st) M->free(st);
    p.trained = 1, p.model_hash = mh ^ 8;
    CHECK(sekv_params_save(&p, mine, err, sizeof err) == 0, "save: %s", err);
    st = M->init(&su, err, sizeof err);
    desc[0] = 0;
    if (st) sekv_describe(st, desc, sizeof desc), M->free(st);
    CHECK(st && strstr(desc, "params: trained (default file)"), "the model's cache file was not its default: %s",
          st ? desc : err);
    unlink(mine);
    rmdir(dir);
    if (was) setenv("KVBENCH_CACHE", was, 1), free(was);
    else unsetenv("KVBENCH_CACHE");
    unlink(path);
    sekv_params_free(&p);
    free_scen(&s);
}

/* Tiny prompts and budgets: no spans at first, decoded tokens folded under a budget of
 * a few rows; the budget holds and outputs stay exact while everything fits. */
static void test_tiny(void) {
    for (int it = 0; it < 6; it++) {
        scen s = make_scen(1, 2, 1, 64, test_int(1, 6), 40);
        int B = test_int(2 * (s.n < 5 ? s.n : 5) + 2, 24);
        char err[256];
        kv_state *st = start(&s, "sinks=1,local=4,rank=64,gate=0,tau=0", B, err, sizeof err);
        CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "n=%d B=%d: %s", s.n, B, err);
        if (!st) continue;
        float out[128];
        int over = 0;
        double worst = 0;
        for (int k = 0; k < s.steps; k++) {
            step(st, &s, k, out);
            over |= sekv_resident(st, 0, 0, NULL, NULL) > B;
            worst = fmax(worst, check_structure(st, &s, 0, s.n + k + 1, 64));
            if (s.n + k + 1 <= B / 2 + 1)   /* nothing folded yet: exact */
                CHECK(err_vs_full(&s, k, s.n + k + 1, out) < 1e-5, "n=%d step %d not exact", s.n, k);
            CHECK(isfinite(out[0]) && isfinite(out[127]), "not finite");
        }
        CHECK(worst < 1e-4, "n=%d B=%d: folded/merged rows off by %g", s.n, B, worst);
        CHECK(!over, "n=%d: budget B=%d exceeded", s.n, B);
        CHECK(sekv_span_count(st, 0) > 0, "n=%d B=%d: 40 decoded tokens but no span", s.n, B);
        M->free(st);
        free_scen(&s);
    }
}


/* ---------------------------------------------------------------- the paper's defaults */

/* Brute-force segmentation (no span cap, no sinks): mu, sigma (population) of the
 * surprisal in double; anchors = token 0 and H_t > mu + alpha*sigma; the last `local`
 * tokens stay at full resolution; spans = maximal runs between anchors (cut at the
 * window) of at least l_min = 4 tokens. Writes the spans' (start, len) to sp and returns
 * their count; *P gets the persistent rows. */
static int paper_spans_at(const scen *s, double alpha, int local, int32_t (*sp)[2], int *P) {
    double mu = 0, var = 0;
    for (int t = 0; t < s->n; t++) mu += s->surp[t];
    mu /= s->n;
    for (int t = 0; t < s->n; t++) var += (s->surp[t] - mu) * (s->surp[t] - mu);
    double thr = mu + alpha * sqrt(var / s->n);
    int ns = 0, full = 0, end = s->n - local > 1 ? s->n - local : 1;
    for (int t = 0; t < end;) {
        if (t == 0 || s->surp[t] > thr) {
            full++, t++;
            continue;
        }
        int e = t;
        while (e < end && s->surp[e] <= thr) e++;
        if (e - t >= 4) sp[ns][0] = t, sp[ns++][1] = e - t;
        else full += e - t;
        t = e;
    }
    *P = full + (s->n - end) + ns;
    return ns;
}

/* The authors' code (sekv-ref): alpha 1, no window. */
static int paper_spans(const scen *s, int32_t (*sp)[2], int *P) { return paper_spans_at(s, 1.0, 0, sp, P); }

/* sekv (the paper's text): alpha is the smallest on 0.5:8:0.25 whose P (anchors + the
 * 32-token window + one coarse row per span) fits p_max*B, found here by brute force for
 * random budgets and p_max; the chosen alpha and the grid are recorded, the segmentation
 * is that alpha's, and a budget below the smallest P on the grid is infeasible. */
static void test_paper_alpha_fit(void) {
    M = &kv_sekv;
    int32_t(*sp)[2] = NULL;
    int moved = 0;   /* a case whose fitted alpha is not the grid's first */
    for (int it = 0; it < 6; it++) {
        scen s = make_scen(1, 2, 1, 16, test_int(500, 1500), 1);
        sp = realloc(sp, (size_t)s.n * sizeof *sp);
        int Pg[31], P_min = 1 << 30;
        for (int i = 0; i <= 30; i++) {
            paper_spans_at(&s, 0.5 + 0.25 * i, 32, sp, &Pg[i]);
            P_min = Pg[i] < P_min ? Pg[i] : P_min;
        }
        double p = it % 2 ? 0.5 : 0.2 + 0.7 * test_unif();
        int B = test_int(P_min, Pg[0] * 2), cap = (int)floor(p * B), want = -1;
        for (int i = 0; i <= 30 && want < 0; i++)
            if (Pg[i] <= cap) want = i;
        char prm[96], err[512], used[800] = "";
        snprintf(prm, sizeof prm, "params_file=none,local=32,p_max=%.17g", p);
        /* uncapped=1 segments as the capped method does at this budget (issue 32: it took
         * the grid's first alpha, 307 spans where capped sekv had 16), the smallest P when
         * nothing fits */
        char unc[128];
        snprintf(unc, sizeof unc, "%s,uncapped=1", prm);
        kv_state *su = start(&s, unc, B, err, sizeof err);
        int rcu = su ? ingest_all(su, &s, err, sizeof err) : -2, first_min = 0;
        while (Pg[first_min] != P_min) first_min++;
        int wu = want >= 0 ? want : first_min;
        double au = su && rcu == 0 ? sekv_chosen_alpha(su, NULL) : NAN;
        const sekv_seg *sgu = su && rcu == 0 ? sekv_segmentation(su) : NULL;
        CHECK(rcu == 0 && au == 0.5 + 0.25 * wu && sgu && sekv_seg_persistent(sgu) == Pg[wu],
              "n=%d B=%d p=%g uncapped: want alpha %g P=%d, got rc %d alpha %g P=%d", s.n, B, p, 0.5 + 0.25 * wu,
              Pg[wu], rcu, au, sgu ? sekv_seg_persistent(sgu) : -1);
        moved |= wu > 0;
        if (su) M->free(su);
        kv_state *st = start(&s, prm, B, err, sizeof err);
        int rc = st ? ingest_all(st, &s, err, sizeof err) : -2;
        if (want < 0) {
            CHECK(rc == -1 && strstr(err, "infeasible"), "n=%d B=%d p=%g: no alpha fits (min P %d), got rc %d '%s'",
                  s.n, B, p, P_min, rc, err);
        } else {
            char a[64];
            snprintf(a, sizeof a, "alpha=%.17g,", 0.5 + 0.25 * want);
            if (st) sekv_params_used(st, used, sizeof used);
            const sekv_seg *sg = st ? sekv_segmentation(st) : NULL;
            CHECK(rc == 0 && strstr(used, a) && strstr(used, "alpha_grid=0.5:8:0.25") && sg &&
                      sekv_seg_persistent(sg) == Pg[want] && strstr(used, "local=32,"),
                  "n=%d B=%d p=%g: want %s P=%d, got rc %d '%s' P=%d", s.n, B, p, a, Pg[want], rc,
                  rc ? err : used, sg ? sekv_seg_persistent(sg) : -1);
        }
        if (st) M->free(st);
        free_scen(&s);
    }
    free(sp);
    CHECK(moved, "every case fitted the grid's first alpha: the uncapped check says nothing");
    char err[256];
    scen s = make_scen(1, 2, 1, 16, 200, 1);
    kv_state *st = start(&s, "alpha_grid=2:1:0.5", 50, err, sizeof err);
    CHECK(!st && strstr(err, "alpha_grid"), "alpha_grid=2:1:0.5 accepted: %s", st ? "" : err);
    if (st) M->free(st);
    free_scen(&s);
    M = &kv_sekv_spread;
}

/* sekv-ref's defaults segment as the authors' code does; a budget one row short of P is infeasible
 * (never evicted), P itself fits; the recorded params say alpha=1, l_max=none, route=0. */
static void test_paper_segmentation(void) {
    M = &kv_sekv_ref;
    /* a scenario with a span longer than 32 tokens (redrawn until one has it: 1 seed in
     * ~130 drew none), so the check below says something about the cap */
    int32_t (*sp)[2] = malloc((size_t)700 * sizeof *sp);
    int P = 0, ns = 0;
    scen s = make_scen(2, 4, 2, 16, 700, 1);
    for (int tries = 0;; tries++) {
        ns = paper_spans(&s, sp, &P);
        int lg = 0;
        for (int i = 0; i < ns; i++) lg = sp[i][1] > lg ? sp[i][1] : lg;
        if (lg > 32 || tries == 100) break;
        free_scen(&s);
        s = make_scen(2, 4, 2, 16, 700, 1);
    }
    char err[512], used[700];
    kv_state *st = start(&s, "params_file=none", P, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "B=P=%d: %s", P, err);
    const sekv_seg *sg = st ? sekv_segmentation(st) : NULL;
    int same = sg && sg->n_spans == ns && sekv_seg_persistent(sg) == P;
    for (int i = 0; same && i < ns; i++) same = sg->span[i].start == sp[i][0] && sg->span[i].len == sp[i][1];
    CHECK(same, "spans differ from the maximal runs between anchors (%d spans, P=%d expected; got %d, P=%d)", ns, P,
          sg ? sg->n_spans : -1, sg ? sekv_seg_persistent(sg) : -1);
    int longest = 0;
    for (int i = 0; i < ns; i++) longest = sp[i][1] > longest ? sp[i][1] : longest;
    CHECK(longest > 32, "no span longer than 32 tokens (longest %d): the test says nothing about the cap", longest);
    if (st) sekv_params_used(st, used, sizeof used), M->free(st);
    CHECK(st && strstr(used, "alpha=1,") && strstr(used, "l_max=none") && strstr(used, "route=0") &&
              strstr(used, "gate=2") && strstr(used, "p_max=1,") && strstr(used, "uncapped=0"),
          "recorded params: %s", used);
    st = start(&s, "params_file=none", P - 1, err, sizeof err);
    int rc = st ? ingest_all(st, &s, err, sizeof err) : 0;
    CHECK(st && rc == -1 && strstr(err, "infeasible") && strstr(err, "l_max=none"), "B=P-1=%d: rc %d '%s'", P - 1, rc,
          err);
    if (st) M->free(st);
    free(sp);
    free_scen(&s);
    M = &kv_sekv_spread;
}

/* uncapped=1 with a budget far below P: feasible, every span over tau (0 here) expands,
 * the rows grow past B, and at full rank without the gate attention is exact. */
static void test_paper_uncapped(void) {
    M = &kv_sekv_ref;
    scen s = make_scen(2, 4, 2, 16, 500, 3);
    char err[512];
    kv_state *st = start(&s, "params_file=none,uncapped=1,tau=0,rank=64,gate=0", 10, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "uncapped: %s", err);
    if (!st) return free_scen(&s), (void)(M = &kv_sekv_spread);
    float *out = malloc((size_t)s.L * s.H * s.d * sizeof *out);
    double worst = 0;
    for (int k = 0; k < s.steps; k++) {
        step(st, &s, k, out);
        worst = fmax(worst, err_vs_full(&s, k, s.n + k + 1, out));
    }
    int P, R, lens = 0;
    sekv_resident(st, 1, 1, &P, &R);
    for (int i = 0; i < sekv_span_count(st, 1); i++) lens += sekv_span_at(st, 1, i).len;
    CHECK(R == lens && P + R > 10, "uncapped: %d rebuilt rows, the spans hold %d (P=%d, B=10)", R, lens, P);
    CHECK(worst < 2e-5, "uncapped, every span expanded at full rank: off exact attention by %g", worst);
    M->free(st);
    free(out);
    free_scen(&s);
    M = &kv_sekv_spread;
}

/* The slow tier holds, per span and kv head, the smaller of the rank-r factors (len*r + r
 * + r*d floats, r = min(len, d, R)) and the raw rows (len*d), K and V: the bytes it
 * reports are recomputed here, both kinds occur, nothing costs more than its rows, and a
 * span stored as rows at full rank gives back its tokens exactly. */
static void test_paper_storage(void) {
    M = &kv_sekv_ref;
    scen s = make_scen(2, 4, 2, 16, 900, 1);
    char err[512];
    kv_state *st = start(&s, "params_file=none,rank=8,gate=0,uncapped=1", 10, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "storage: %s", err);
    if (!st) return free_scen(&s), (void)(M = &kv_sekv_spread);
    size_t want = 0, raw = 0;
    int n_rows = 0, n_fac = 0, d = s.d;
    double worst = 0;
    float *K = malloc((size_t)s.n * d * sizeof *K), *V = malloc((size_t)s.n * d * sizeof *V);
    for (int l = 0; l < s.L; l++)
        for (int i = 0; i < sekv_span_count(st, l); i++) {
            sekv_span sp = sekv_span_at(st, l, i);
            size_t r = sp.len < d ? sp.len : d;
            r = r < 8 ? r : 8;
            size_t fac = (size_t)sp.len * r + r + r * d, rows = (size_t)sp.len * d;
            int as_rows = rows <= fac;
            n_rows += as_rows, n_fac += !as_rows;
            want += (size_t)s.Hkv * 2 * (as_rows ? rows : fac) * sizeof(float);
            raw += (size_t)s.Hkv * 2 * rows * sizeof(float);
            if (!as_rows || sp.len > 8) continue;
            for (int j = 0; j < s.Hkv; j++) {
                test_poison(K, (size_t)sp.len * d), test_poison(V, (size_t)sp.len * d);
                sekv_span_tokens(st, l, j, i, K, V);
                for (int t = 0; t < sp.len; t++) {
                    double rk[64], rv[64];
                    for (int c = 0; c < d; c++) rk[c] = krow(&s, l, j, sp.start + t)[c], rv[c] = vrow(&s, l, j, sp.start + t)[c];
                    worst = fmax(worst, fmax(rel_l2(K + (size_t)t * d, rk, d), rel_l2(V + (size_t)t * d, rv, d)));
                }
            }
        }
    kv_mem m;
    M->memory(st, &m);
    CHECK(m.slow_bytes == want, "slow tier %zu bytes, expected %zu (min of factors and rows per span)", m.slow_bytes,
          want);
    CHECK(n_rows > 0 && n_fac > 0, "storage kinds: %d spans as rows, %d as factors (want both)", n_rows, n_fac);
    CHECK(m.slow_bytes <= raw, "slow tier %zu bytes exceeds the spans' raw rows %zu", m.slow_bytes, raw);
    CHECK(worst < 1e-5, "full-rank spans stored as rows: off their tokens by %g", worst);
    M->free(st);
    free(K), free(V);
    free_scen(&s);
    M = &kv_sekv_spread;
}

/* fixed_chunk=same (claim C8) through the method: recorded as "same" in the params used,
 * and the state's segmentation is sekv_segment_even's at the paper's defaults (as many
 * anchors as the surprisal segmentation, placed evenly). A bad value is refused. */
static void test_fixed_chunk_same(void) {
    M = &kv_sekv_ref;
    scen s = make_scen(1, 2, 1, 16, test_int(300, 600), 1);
    char err[256], used[512] = "";
    kv_state *st = start(&s, "fixed_chunk=same,uncapped=1,params_file=none", s.n / 10, err, sizeof err);
    CHECK(st && ingest_all(st, &s, err, sizeof err) == 0, "fixed_chunk=same: %s", err);
    if (st) {
        sekv_params_used(st, used, sizeof used);
        CHECK(strstr(used, "fixed_chunk=same") != NULL, "params used: %s", used);
        sekv_seg ref, even;
        sekv_segment_ex(s.surp, s.n, 1.0, 4, SEKV_LMAX_NONE, 0, 0, 0, &ref);
        sekv_segment_even(s.surp, s.n, 1.0, 4, SEKV_LMAX_NONE, 0, 0, &even);
        const sekv_seg *sg = sekv_segmentation(st);
        CHECK(sg && sg->n_anchors == ref.n_anchors && sg->n_spans == even.n_spans &&
                  !memcmp(sg->kind, even.kind, (size_t)s.n),
              "segmentation is not the even one (%d anchors, surprisal %d)", sg ? sg->n_anchors : -1, ref.n_anchors);
        sekv_seg_free(&ref), sekv_seg_free(&even);
        M->free(st);
    }
    CHECK(!start(&s, "fixed_chunk=-2", s.n / 10, err, sizeof err) && strstr(err, "fixed_chunk"),
          "fixed_chunk=-2 accepted: %s", err);
    free_scen(&s);
    M = &kv_sekv_spread;
}

int main(void) {
    test_seed();
    test_exact(0);
    test_exact(1);
    test_compaction_exact();
    test_coarse_only();
    for (int sparse = 0; sparse <= 1; sparse++) {
        for (int route = 0; route <= 1; route++) {
            test_targeted(1, route, 1, sparse);
            test_targeted(1, route, 60, sparse);
        }
        test_targeted(0, 0, 1, sparse);
        test_targeted(0, 0, 60, sparse);
    }
    test_budget();
    test_auto_and_infeasible();
    test_fit_order();
    test_fixed_chunk_same();
    test_bad_params();
    test_default_params();
    test_tiny();
    test_paper_segmentation();
    test_paper_uncapped();
    test_paper_storage();
    test_paper_alpha_fit();
    return check_done("test_sekv");
}
