/* snapkv-think (methods/snapkv_think.c) against a float64 reference on fresh random inputs:
 *   - the kept rows are SnapKV's with the same parameters, row for row;
 *   - the channels pruned are the floor(d * ratio) lowest of ThinK's score, recomputed here in
 *     float64 (the last channel_window pre-RoPE queries turned by a random RoPE, q^2 averaged
 *     over the rows and the group, times k^2 averaged over the kept rows): every pruned channel
 *     scores at most every kept one, and key_channels lists the kept ones ascending;
 *   - the stored rows: a prompt row's key is zero on the pruned channels and the element type's
 *     rounding of the prefill's key elsewhere, its value whole; decoded rows whole;
 *   - attend() (outputs poisoned first) equals a float64 softmax over the narrowed prompt keys
 *     and the full decoded ones;
 *   - memory() (poisoned first) is exactly prompt rows x (kc + d) + decoded rows x 2d elements,
 *     plus the 4-byte row scores and kc 4-byte channel indices per (layer, kv head);
 *   - ratio 0 prunes nothing and asks for no queries; a prefill without queries is refused with
 *     one line naming the method. Seeded (KVBENCH_TEST_SEED). */
#include "../methods/cacheset.h"
#include "../methods/method.h"
#include "check.h"

typedef struct {
    int L, H, Hkv, g, d, n, win, qwin, B, T, type, neox, n_rot;
    double ratio, mscale, inv_freq[64];
    float *K, *V, *P, *Q, *Kd, *Vd, *Qd;   /* K,V [L][Hkv][n][d]; P [L][H][win][n]; Q [L][H][n][d]; decode [T][L][Hkv|H][d] */
} scen;

static void make(scen *s) {
    memset(s, 0, sizeof *s);
    s->g = test_int(1, 3), s->Hkv = test_int(1, 3), s->H = s->g * s->Hkv, s->L = test_int(1, 2);
    s->d = 8 << test_int(0, 3), s->n = test_int(20, 200), s->win = 16, s->qwin = test_int(1, 48);
    s->B = test_int(s->win + 1, s->n), s->T = test_int(1, 6), s->type = test_int(0, 2);
    s->ratio = test_unif() * 0.9, s->neox = test_int(0, 1), s->mscale = 0.5 + test_unif();
    s->n_rot = test_int(1, s->d / 2) * 2;
    for (int i = 0; i < s->n_rot / 2; i++) s->inv_freq[i] = pow(10000.0, -2.0 * i / s->n_rot) * (0.5 + test_unif());
    size_t kv = (size_t)s->L * s->Hkv * s->n * s->d;
    s->K = malloc(kv * sizeof(float)), s->V = malloc(kv * sizeof(float));
    s->P = malloc((size_t)s->L * s->H * s->win * s->n * sizeof(float));
    s->Q = malloc((size_t)s->L * s->H * s->n * s->d * sizeof(float));
    s->Kd = malloc((size_t)s->T * s->L * s->Hkv * s->d * sizeof(float));
    s->Vd = malloc((size_t)s->T * s->L * s->Hkv * s->d * sizeof(float));
    s->Qd = malloc((size_t)s->T * s->L * s->H * s->d * sizeof(float));
    /* keys with channel scales of their own, so channel scores spread */
    for (size_t i = 0; i < kv; i++) s->K[i] = test_normal() * (float)(0.2 + 2 * ((i % s->d) * 7 % 5) / 5.0 + test_unif());
    test_fill(s->V, kv, 1);
    test_fill(s->Q, (size_t)s->L * s->H * s->n * s->d, 1.5f);
    test_fill(s->Kd, (size_t)s->T * s->L * s->Hkv * s->d, 1);
    test_fill(s->Vd, (size_t)s->T * s->L * s->Hkv * s->d, 1);
    test_fill(s->Qd, (size_t)s->T * s->L * s->H * s->d, 1);
    for (size_t r = 0; r < (size_t)s->L * s->H * s->win; r++) {   /* probability rows: positive, sum 1 */
        float *p = s->P + r * s->n;
        double sum = 0;
        for (int t = 0; t < s->n; t++) sum += (p[t] = (float)(test_unif() + 1e-3));
        for (int t = 0; t < s->n; t++) p[t] = (float)(p[t] / sum);
    }
}

static void unmake(scen *s) { free(s->K), free(s->V), free(s->P), free(s->Q), free(s->Kd), free(s->Vd), free(s->Qd); }

static kv_prefill prefill(const scen *s, int l, const kv_rope *rope, int qrows) {
    kv_prefill p = {.layer = l, .n = s->n, .K = s->K + (size_t)l * s->Hkv * s->n * s->d,
                    .V = s->V + (size_t)l * s->Hkv * s->n * s->d, .kv_stride = (size_t)s->n * s->d,
                    .win_probs = s->P + (size_t)l * s->H * s->win * s->n, .win = s->win};
    if (qrows > 0) {
        p.q_rows = qrows < s->n ? qrows : s->n;
        p.Q = s->Q + (size_t)l * s->H * s->n * s->d + (size_t)(s->n - p.q_rows) * s->d;
        p.q_stride = (size_t)s->n * s->d, p.rope = rope;
    }
    return p;
}

/* ThinK's channel score of kv head j, layer l, over the kept positions pos[0..np), in float64. */
static void ref_scores(const scen *s, int l, int j, const int32_t *pos, int np, double *sc) {
    int d = s->d, w = s->qwin < s->n ? s->qwin : s->n;
    double qn[512] = {0}, x[512];
    for (int h = j * s->g; h < (j + 1) * s->g; h++)
        for (int t = s->n - w; t < s->n; t++) {
            const float *q = s->Q + (((size_t)l * s->H + h) * s->n + t) * d;
            for (int c = 0; c < d; c++) x[c] = q[c];
            for (int i = 0; i < s->n_rot / 2; i++) {   /* the RoPE as kv_rope defines it */
                int a = s->neox ? i : 2 * i, b = s->neox ? i + s->n_rot / 2 : 2 * i + 1;
                double th = t * s->inv_freq[i], xa = x[a], xb = x[b];
                x[a] = s->mscale * (cos(th) * xa - sin(th) * xb), x[b] = s->mscale * (sin(th) * xa + cos(th) * xb);
            }
            for (int c = 0; c < d; c++) qn[c] += x[c] * x[c] / ((double)w * s->g);
        }
    for (int c = 0; c < d; c++) {
        double k2 = 0;
        for (int i = 0; i < np; i++) {
            double k = s->K[(((size_t)l * s->Hkv + j) * s->n + pos[i]) * d + c];
            k2 += k * k;
        }
        sc[c] = qn[c] * k2 / np;
    }
}

static void trial(int t) {
    scen s;
    make(&s);
    const kv_method *m = kv_method_find("snapkv-think"), *snap = kv_method_find("snapkv");
    CHECK(m && snap, "snapkv-think or snapkv not registered");
    if (!m || !snap) return unmake(&s);
    char params[256], sparams[128];
    snprintf(sparams, sizeof sparams, "window=%d,kernel=%d,pool=%d,agg=%d", test_int(1, s.win), test_int(1, 7),
             test_int(0, 1), test_int(0, 1));
    snprintf(params, sizeof params, "%s,key_channel_compression_ratio=%.17g,channel_window=%d", sparams, s.ratio, s.qwin);
    kv_setup su = {.n_layers = s.L, .n_heads = s.H, .n_kv_heads = s.Hkv, .head_dim = s.d, .n_prompt = s.n,
                   .max_decode = s.T, .budget_tokens = s.B, .kv_type = s.type, .params = params};
    kv_setup ss = su;
    ss.params = sparams;
    kv_rope rope = {.n_rot = s.n_rot, .neox = s.neox, .inv_freq = s.inv_freq, .mscale = s.mscale};
    int d = s.d, p = (int)floor(d * s.ratio), kc = d - p;
    char err[256] = "", tag[400];
    snprintf(tag, sizeof tag, "trial %d (L%d H%d/%d d%d n%d B%d %s, %s)", t, s.L, s.H, s.Hkv, d, s.n, s.B,
             kb_kvtype_name(s.type), params);
    kv_needs nd = {0};
    m->needs(&su, &nd);
    CHECK(nd.queries == (p ? s.qwin : 0) && !nd.wo && !nd.col_mass, "%s: needs queries %d wo %d", tag, nd.queries, nd.wo);
    kv_state *st = m->init(&su, err, sizeof err), *sn = snap->init(&ss, err, sizeof err);
    CHECK(st && sn, "%s: init: %s", tag, err);
    if (!st || !sn) {
        m->free(st), snap->free(sn);
        return unmake(&s);
    }
    int ok = 1;
    for (int l = 0; l < s.L && ok; l++) {
        kv_prefill pf = prefill(&s, l, &rope, nd.queries);
        ok = m->ingest(st, &pf, err, sizeof err) == 0;
        CHECK(ok, "%s: ingest layer %d: %s", tag, l, err);
        kv_prefill pn = prefill(&s, l, NULL, 0);
        CHECK(snap->ingest(sn, &pn, err, sizeof err) == 0, "%s: snapkv ingest: %s", tag, err);
    }
    int32_t *pos = malloc((size_t)(s.n + s.T) * sizeof *pos), *pos2 = malloc((size_t)(s.n + s.T) * sizeof *pos2);
    int32_t chan[512];
    double sc[512];
    float row[512];
    long prompt_rows = 0;
    for (int l = 0; l < s.L && ok; l++)
        for (int j = 0; j < s.Hkv; j++) {
            int np = 0, np2 = 0, r = m->rows(st, l, j, pos, s.n + s.T, &np), r2 = snap->rows(sn, l, j, pos2, s.n, &np2);
            CHECK(r == r2 && np == np2 && !memcmp(pos, pos2, (size_t)np * sizeof *pos),
                  "%s: layer %d kv head %d: %d rows, snapkv keeps %d (or other positions)", tag, l, j, r, r2);
            prompt_rows += r;
            for (int c = 0; c < d; c++) chan[c] = -7;
            int got = m->key_channels(st, l, j, chan);
            CHECK(got == kc, "%s: key_channels %d, want %d - %d", tag, got, d, p);
            if (got != kc) continue;
            ref_scores(&s, l, j, pos, np, sc);
            uint8_t kept[512] = {0};
            for (int i = 0; i < kc; i++) {
                CHECK(chan[i] >= 0 && chan[i] < d && (!i || chan[i] > chan[i - 1]), "%s: channel list %d: %d", tag, i,
                      chan[i]);
                if (chan[i] >= 0 && chan[i] < d) kept[chan[i]] = 1;
            }
            double worst_kept = INFINITY, best_pruned = -INFINITY;
            for (int c = 0; c < d; c++)
                if (kept[c]) worst_kept = fmin(worst_kept, sc[c]);
                else best_pruned = fmax(best_pruned, sc[c]);
            CHECK(!p || best_pruned <= worst_kept * (1 + 1e-12),
                  "%s: layer %d kv head %d: a pruned channel scores %.17g, a kept one %.17g", tag, l, j, best_pruned,
                  worst_kept);
            /* the stored rows */
            const kv_store *kv = kv_a_store(st, l, j);
            int bad = 0;
            for (int i = 0; i < kv->n && !bad; i++) {
                const float *k0 = s.K + (((size_t)l * s.Hkv + j) * s.n + kv->pos[i]) * d;
                const float *v0 = s.V + (((size_t)l * s.Hkv + j) * s.n + kv->pos[i]) * d;
                kvs_get_k(kv, i, row);
                for (int c = 0; c < d; c++) bad |= row[c] != (kept[c] ? kb_kv_round(s.type, k0[c]) : 0.0f);
                kvs_get_v(kv, i, row);
                for (int c = 0; c < d; c++) bad |= row[c] != kb_kv_round(s.type, v0[c]);
            }
            CHECK(!bad, "%s: layer %d kv head %d: a stored row is not the narrowed key and whole value", tag, l, j);
        }
    /* decode: appended rows whole; attention over the narrowed prompt keys */
    float *out = malloc((size_t)s.H * d * sizeof *out);
    double w[1024], acc[512];
    for (int step = 0; step < s.T && ok; step++)
        for (int l = 0; l < s.L; l++) {
            kv_token tok = {.pos = s.n + step};
            m->append(st, l, s.Kd + ((size_t)step * s.L + l) * s.Hkv * d, s.Vd + ((size_t)step * s.L + l) * s.Hkv * d,
                      &tok);
            const float *q = s.Qd + ((size_t)step * s.L + l) * s.H * d;
            test_poison(out, (size_t)s.H * d);
            m->attend(st, l, q, out);
            double err_max = 0;
            for (int h = 0; h < s.H; h++) {
                int j = h / s.g, np = 0;
                m->rows(st, l, j, pos, s.n + s.T, &np);
                uint8_t kept[512] = {0};
                int got = m->key_channels(st, l, j, chan);
                for (int i = 0; i < got; i++) kept[chan[i]] = 1;
                double mx = -INFINITY, sum = 0;
                for (int i = 0; i < np; i++) {
                    int t0 = pos[i];
                    const float *k = t0 < s.n ? s.K + (((size_t)l * s.Hkv + j) * s.n + t0) * d
                                              : s.Kd + (((size_t)(t0 - s.n) * s.L + l) * s.Hkv + j) * d;
                    double dot = 0;
                    for (int c = 0; c < d; c++)
                        if (t0 >= s.n || kept[c]) dot += (double)q[h * d + c] * kb_kv_round(s.type, k[c]);
                    w[i] = dot / sqrt((double)d);
                    mx = fmax(mx, w[i]);
                }
                for (int c = 0; c < d; c++) acc[c] = 0;
                for (int i = 0; i < np; i++) {
                    int t0 = pos[i];
                    const float *v = t0 < s.n ? s.V + (((size_t)l * s.Hkv + j) * s.n + t0) * d
                                              : s.Vd + (((size_t)(t0 - s.n) * s.L + l) * s.Hkv + j) * d;
                    double e = exp(w[i] - mx);
                    sum += e;
                    for (int c = 0; c < d; c++) acc[c] += e * kb_kv_round(s.type, v[c]);
                }
                for (int c = 0; c < d; c++) {
                    double e = fabs(out[h * d + c] - acc[c] / sum) / (1 + fabs(acc[c] / sum));
                    if (!(e <= err_max)) err_max = e;
                }
            }
            CHECK(err_max <= 1e-4, "%s: step %d layer %d: attention off the float64 reference by %.3g", tag, step, l,
                  err_max);
        }
    /* memory, exactly */
    kv_mem mem;
    memset(&mem, 0xff, sizeof mem);
    m->memory(st, &mem);
    size_t e = (size_t)kb_kvtype_bytes(s.type), rows = (size_t)prompt_rows + (size_t)s.T * s.L * s.Hkv;
    size_t aux = rows * 4 + (p ? (size_t)s.L * s.Hkv * kc * 4 : 0);
    size_t want = (size_t)prompt_rows * (kc + d) * e + (size_t)s.T * s.L * s.Hkv * 2 * d * e + aux;
    CHECK(ok && mem.fast_bytes == want && mem.fast_aux_bytes == aux && mem.fast_tokens == (long)rows &&
              mem.fast_peak >= mem.fast_bytes && mem.slow_bytes == 0,
          "%s: memory %zu (aux %zu, %ld rows), want %zu (aux %zu, %zu rows)", tag, mem.fast_bytes, mem.fast_aux_bytes,
          mem.fast_tokens, want, aux, rows);
    free(out), free(pos), free(pos2);
    m->free(st), snap->free(sn);
    unmake(&s);
}

/* ratio 0 asks for no queries and keeps every channel; a prefill without the queries it asked
 * for is refused, naming the method. */
static void edges(void) {
    const kv_method *m = kv_method_find("snapkv-think");
    if (!m) return;
    scen s;
    make(&s);
    kv_setup su = {.n_layers = s.L, .n_heads = s.H, .n_kv_heads = s.Hkv, .head_dim = s.d, .n_prompt = s.n,
                   .max_decode = s.T, .budget_tokens = s.B, .kv_type = KB_F32,
                   .params = "key_channel_compression_ratio=0,window=16"};
    kv_needs nd = {0};
    m->needs(&su, &nd);
    char err[256] = "";
    kv_state *st = m->init(&su, err, sizeof err);
    CHECK(st && nd.queries == 0, "ratio 0: init %s, queries %d", err, nd.queries);
    kv_prefill p = prefill(&s, 0, NULL, 0);
    CHECK(st && m->ingest(st, &p, err, sizeof err) == 0 && m->key_channels(st, 0, 0, NULL) == s.d,
          "ratio 0: ingest %s, key channels %d", err, st ? m->key_channels(st, 0, 0, NULL) : -9);
    m->free(st);
    su.params = "key_channel_compression_ratio=0.5,window=16";
    st = m->init(&su, err, sizeof err);
    err[0] = 0;
    CHECK(st && m->ingest(st, &p, err, sizeof err) != 0 && !strncmp(err, "snapkv-think: layer 0:", 22) &&
              !strchr(err, '\n'),
          "no queries: '%s'", err);
    m->free(st);
    unmake(&s);
}

int main(void) {
    test_seed();
    for (int t = 0; t < 40; t++) trial(t);
    edges();
    return check_done("test_think");
}
