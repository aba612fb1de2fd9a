/* The synthetic workload: deterministic for a seed, the promised structure is really in
 * the tensors (checked in double, independently of the generator's own bookkeeping where
 * possible), and the scoring functions agree with hand-checked cases. */
#include "check.h"
#include "../kernels/core.h"
#include "../workloads/synthetic.h"

typedef struct {
    syn_workload *w;
    float *Q, *K, *V;       /* one layer */
    size_t st;              /* kv stride */
} layer_buf;

static syn_workload *make(syn_config *c) {
    char err[256];
    syn_workload *w = syn_create(c, err, sizeof err);
    if (!w) fprintf(stderr, "syn_create: %s\n", err);
    return w;
}

static void gen(layer_buf *b, const syn_workload *w, int layer) {
    const syn_config *c = &w->cfg;
    b->st = (size_t)w->n_total * c->head_dim;
    size_t nq = (size_t)w->n_total * c->n_heads * c->head_dim, nk = (size_t)c->n_kv_heads * b->st;
    b->Q = realloc(b->Q, nq * sizeof(float));
    b->K = realloc(b->K, nk * sizeof(float));
    b->V = realloc(b->V, nk * sizeof(float));
    test_poison(b->Q, nq);
    test_poison(b->K, nk);
    test_poison(b->V, nk);
    syn_layer(w, layer, b->Q, b->K, b->V, b->st);
}

static void buf_free(layer_buf *b) {
    free(b->Q);
    free(b->K);
    free(b->V);
}

/* softmax(q.k/sqrt(d)) over keys [0, n) of one kv head, in double. */
static void attn_probs(const float *q, const float *K, int n, int d, double *p) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < d; k++) s += (double)q[k] * K[(size_t)i * d + k];
        p[i] = s / sqrt((double)d);
        if (p[i] > mx) mx = p[i];
    }
    for (int i = 0; i < n; i++) z += p[i] = exp(p[i] - mx);
    for (int i = 0; i < n; i++) p[i] /= z;
}

/* Eigenvalues of a symmetric n x n matrix (cyclic Jacobi, in place; diagonal out). */
static void jacobi_eig(double *A, int n, double *ev) {
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) off += A[i * n + j] * A[i * n + j];
        if (off < 1e-22) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = A[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (A[q * n + q] - A[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) {
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq;
                    A[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) {
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk;
                    A[q * n + k] = s * apk + c * aqk;
                }
            }
    }
    for (int i = 0; i < n; i++) ev[i] = A[i * n + i];
}

/* Share of the energy of rows K[rows[i]] carried by the top-r singular values. */
static double top_energy(const float *K, const int *rows, int n, int d, int r) {
    double *G = calloc((size_t)d * d, sizeof *G), *ev = malloc((size_t)d * sizeof *ev);
    for (int i = 0; i < n; i++) {
        const float *k = K + (size_t)rows[i] * d;
        for (int a = 0; a < d; a++)
            for (int b = 0; b < d; b++) G[a * d + b] += (double)k[a] * k[b];
    }
    jacobi_eig(G, d, ev);
    double total = 0, top = 0;
    for (int i = 0; i < d; i++) total += ev[i];
    for (int k = 0; k < r; k++) {   /* the r largest */
        int best = 0;
        for (int i = 1; i < d; i++)
            if (ev[i] > ev[best]) best = i;
        top += ev[best];
        ev[best] = -INFINITY;
    }
    free(G);
    free(ev);
    return top / total;
}

static void test_determinism(uint64_t seed) {
    syn_config c;
    syn_defaults(&c);
    c.ctx = 1024 + test_int(0, 1024);
    c.kind = (syn_kind)test_int(0, 2);
    c.depth = test_unif();
    c.seed = seed;
    syn_workload *a = make(&c), *b = make(&c);
    CHECK(a && b, "create");
    if (!a || !b) return;
    layer_buf x = {0}, y = {0};
    int layer = test_int(0, c.n_layers - 1);
    kb_set_threads(1);
    gen(&x, a, layer);
    kb_set_threads(2);
    gen(&y, b, layer);
    size_t nq = (size_t)a->n_total * c.n_heads * c.head_dim, nk = (size_t)c.n_kv_heads * x.st;
    CHECK(!memcmp(x.Q, y.Q, nq * 4) && !memcmp(x.K, y.K, nk * 4) && !memcmp(x.V, y.V, nk * 4),
          "same seed, layer %d, 1 vs 2 threads: tensors differ", layer);
    CHECK(!memcmp(a->surprisal, b->surprisal, (size_t)a->n_total * 4) &&
              !memcmp(a->sent_end, b->sent_end, (size_t)a->n_total) &&
              !memcmp(a->needle_pos, b->needle_pos, sizeof a->needle_pos),
          "same seed: structure differs");
    int finite = 1;
    for (size_t i = 0; i < nq; i++) finite &= isfinite(x.Q[i]);
    for (size_t i = 0; i < nk; i++) finite &= isfinite(x.K[i]) && isfinite(x.V[i]);
    CHECK(finite, "every element written and finite");
    /* A different layer and a different seed change the tensors. */
    gen(&y, b, (layer + 1) % c.n_layers);
    CHECK(memcmp(x.K, y.K, nk * 4) != 0, "layers %d and %d have identical keys", layer, (layer + 1) % c.n_layers);
    syn_config c2 = c;
    c2.seed = seed + 1;
    syn_workload *d = make(&c2);
    gen(&y, d, layer);
    CHECK(memcmp(x.K, y.K, nk * 4) != 0 && memcmp(x.Q, y.Q, nq * 4) != 0, "seed %llu and %llu give identical tensors",
          (unsigned long long)seed, (unsigned long long)seed + 1);
    CHECK(memcmp(a->surprisal, d->surprisal, (size_t)a->n_total * 4) != 0, "different seeds, same surprisal");
    syn_free(a);
    syn_free(b);
    syn_free(d);
    buf_free(&x);
    buf_free(&y);
}

static void test_structure(uint64_t seed) {
    syn_config c;
    syn_defaults(&c);
    c.ctx = 4096;
    c.depth = 0.05 + 0.9 * test_unif();
    c.seed = seed;
    syn_workload *w = make(&c);
    CHECK(w != NULL, "create");
    if (!w) return;
    const int d = c.head_dim, H = c.n_heads, g = H / c.n_kv_heads;
    layer_buf b = {0};
    int layer = test_int(1, c.n_layers - 1);
    gen(&b, w, layer);

    /* Topic segments are low-rank: top-4 singular values of a segment's keys carry > 90%
     * of the energy; keys spread over many segments do not (< 50%). */
    int *rows = malloc((size_t)c.ctx * sizeof *rows), n_seg_checked = 0;
    double worst = 1;
    for (int s = 1; s < w->n_segments - 1; s++) {
        int n = 0;
        for (int t = w->seg_start[s]; t < w->seg_start[s + 1]; t++)
            if (w->role[t] == SYN_ROLE_HAY) rows[n++] = t;
        if (n < 40) continue;
        for (int j = 0; j < c.n_kv_heads; j++) {
            double e = top_energy(b.K + (size_t)j * b.st, rows, n, d, 4);
            if (e < worst) worst = e;
        }
        n_seg_checked++;
    }
    CHECK(n_seg_checked >= 5, "only %d segments of >= 40 tokens", n_seg_checked);
    CHECK(worst > 0.90, "a segment's top-4 energy share is %.3f", worst);
    int n = 0;
    for (int t = w->n_sink; t < w->q_start; t += (w->q_start - w->n_sink) / 300)
        if (w->role[t] == SYN_ROLE_HAY) rows[n++] = t;
    double mixed = top_energy(b.K, rows, n, d, 4);
    CHECK(mixed < 0.5, "keys across segments: top-4 share %.3f (should not be low-rank)", mixed);

    /* Segment lengths 50..400 (the last may absorb a short remainder), surprisal spikes at
     * boundaries, sentence ends every 15..30 tokens inside segments. */
    double mu = 0, var = 0;
    for (int t = 1; t < c.ctx; t++) mu += w->surprisal[t];
    mu /= c.ctx - 1;
    for (int t = 1; t < c.ctx; t++) var += (w->surprisal[t] - mu) * (w->surprisal[t] - mu);
    double sd = sqrt(var / (c.ctx - 1));
    int spikes = 0, bounds = 0, bad_len = 0, max_gap = 0, n_gaps = 0, n_typical = 0;
    for (int s = 1; s < w->n_segments - 1; s++) {
        int a = w->seg_start[s], e = w->seg_start[s + 1];
        bounds++;
        spikes += w->surprisal[a] > mu + 2 * sd;
        bad_len += (e - a < 50 || e - a > 449);
        CHECK(w->sent_end[e - 1] || w->role[e - 1] != SYN_ROLE_HAY, "segment %d does not end a sentence", s);
        for (int t = a, last = a - 1; t < e; t++) {
            if (!w->sent_end[t]) continue;
            if (t - last > max_gap) max_gap = t - last;
            n_gaps++;
            n_typical += t - last >= 15 && t - last <= 30;
            last = t;
        }
    }
    CHECK(spikes >= bounds - 1, "only %d of %d segment starts are surprisal spikes (> mu + 2 sd)", spikes, bounds);
    CHECK(bad_len == 0, "%d segments outside 50..449 tokens", bad_len);
    CHECK(max_gap <= 30 && n_typical > 0.7 * n_gaps, "sentences: longest %d tokens, %d of %d in 15..30", max_gap,
          n_typical, n_gaps);
    CHECK(w->surprisal[0] == 0, "surprisal[0] = %g", w->surprisal[0]);

    /* The needle sits at the requested depth, and it is what the question looks for:
     * the key maximising a retrieval head's question query over the whole prompt. */
    int lo = w->n_sink, hi = w->q_start;
    double where = (double)(w->needle_pos[0] - lo) / (hi - lo);
    CHECK(fabs(where - c.depth) < 0.01, "needle at relative depth %.4f, asked %.4f", where, c.depth);
    CHECK(w->role[w->needle_pos[0]] == SYN_ROLE_NEEDLE, "needle role");
    for (int h = 0; h < H; h++) {
        if (!w->retrieval[layer * H + h]) continue;
        const float *q = b.Q + ((size_t)(c.ctx - 1) * H + h) * d, *K = b.K + (size_t)(h / g) * b.st;
        int best = -1;
        double bs = -INFINITY;
        for (int t = 0; t < c.ctx; t++) {
            double s = 0;
            for (int k = 0; k < d; k++) s += (double)q[k] * K[(size_t)t * d + k];
            if (s > bs) bs = s, best = t;
        }
        CHECK(best == w->needle_pos[0], "head %d: the question's best key is at %d, needle at %d", h, best,
              w->needle_pos[0]);
        /* The needle value is distinctive: larger than every haystack value. */
        const float *V = b.V + (size_t)(h / g) * b.st;
        double nv = 0, maxhay = 0;
        for (int k = 0; k < d; k++) nv += (double)V[(size_t)w->needle_pos[0] * d + k] * V[(size_t)w->needle_pos[0] * d + k];
        for (int t = 0; t < c.ctx; t++) {
            if (w->role[t] != SYN_ROLE_HAY) continue;
            double s = 0;
            for (int k = 0; k < d; k++) s += (double)V[(size_t)t * d + k] * V[(size_t)t * d + k];
            if (s > maxhay) maxhay = s;
        }
        CHECK(nv > 2 * maxhay, "needle value |v|^2 %.1f vs largest haystack %.1f", nv, maxhay);
    }

    /* Sinks and locality, for non-retrieval heads at random haystack positions. */
    double *p = malloc((size_t)c.ctx * sizeof *p);
    double sink = 0, per_sink = 0, per_other = 0, per_recent = 0, per_older = 0;
    int probes = 0;
    for (int i = 0; i < 96; i++) {
        int t = test_int(600, w->q_start - 1), h = test_int(0, H - 1);
        if (w->retrieval[layer * H + h]) continue;
        attn_probs(b.Q + ((size_t)t * H + h) * d, b.K + (size_t)(h / g) * b.st, t + 1, d, p);
        double s = 0, r = 0;
        for (int k = 0; k < w->n_sink; k++) s += p[k];
        for (int k = t - 255; k <= t; k++) r += p[k];
        sink += s;
        per_recent += r / 256;
        per_older += (1 - s - r) / (t + 1 - 256 - w->n_sink);
        per_sink += s / w->n_sink;
        per_other += (1 - s) / (t + 1 - w->n_sink);
        probes++;
    }
    CHECK(probes > 40, "probes %d", probes);
    sink /= probes;
    CHECK(sink > 0.15, "mean sink mass %.3f of local heads", sink);
    printf("local heads: sink mass %.3f, a sink token %.0fx an average token, a recent token %.0fx an older one\n",
           sink, per_sink / per_other, per_recent / per_older);
    CHECK(per_sink > 50 * per_other, "a sink token gets only %.1fx the weight of an average token",
          per_sink / per_other);
    CHECK(per_recent > 50 * per_older, "a token among the last 256 gets only %.1fx the weight of an older one",
          per_recent / per_older);
    free(p);
    free(rows);
    buf_free(&b);
    syn_free(w);
}

/* Attention outputs of every retrieval head at the scored steps, in double; every other
 * entry NaN, so syn_score must read exactly the probes it claims. drop_needles removes
 * the needle spans from the keys (an evicted needle). */
static double full_score(const syn_workload *w, int drop_needles, int *hits, int *probes) {
    const syn_config *c = &w->cfg;
    const int d = c->head_dim, H = c->n_heads, g = H / c->n_kv_heads, T = c->n_decode, L = c->n_layers;
    size_t per = (size_t)T * H * d;
    float *out = malloc((size_t)L * per * sizeof *out);
    test_poison(out, (size_t)L * per);
    layer_buf b = {0};
    float **V = calloc((size_t)L, sizeof *V);   /* calloc: gcc -O2 cannot see the loop fills it */
    double *p = malloc((size_t)w->n_total * sizeof *p);
    for (int l = 0; l < L; l++) {
        gen(&b, w, l);
        V[l] = malloc((size_t)c->n_kv_heads * b.st * sizeof(float));
        memcpy(V[l], b.V, (size_t)c->n_kv_heads * b.st * sizeof(float));
        for (int h = 0; h < H; h++) {
            if (!w->retrieval[l * H + h]) continue;
            for (int s = 0; s < T; s++) {
                if (syn_scored_needle(w, s) < 0) continue;
                int t = c->ctx + s;
                const float *K = b.K + (size_t)(h / g) * b.st, *Vj = b.V + (size_t)(h / g) * b.st;
                attn_probs(b.Q + ((size_t)t * H + h) * d, K, t + 1, d, p);
                if (drop_needles) {
                    double z = 0;
                    for (int i = 0; i <= t; i++) {
                        if (w->role[i] == SYN_ROLE_NEEDLE || w->role[i] == SYN_ROLE_NEEDLE_SPAN) p[i] = 0;
                        z += p[i];
                    }
                    for (int i = 0; i <= t; i++) p[i] /= z;
                }
                float *o = out + (size_t)l * per + ((size_t)s * H + h) * d;
                for (int k = 0; k < d; k++) {
                    double acc = 0;
                    for (int i = 0; i <= t; i++) acc += p[i] * Vj[(size_t)i * d + k];
                    o[k] = (float)acc;
                }
            }
        }
    }
    double score = syn_score(w, (const float *const *)V, b.st, out, hits, probes);
    for (int l = 0; l < L; l++) free(V[l]);
    free(V);
    free(p);
    free(out);
    buf_free(&b);
    return score;
}

static void test_fullkv_retrieves(uint64_t seed) {
    const double depths[] = {0, 0.25, 0.5, 0.75, 1};
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < 5; i++) {
            syn_config c;
            syn_defaults(&c);
            c.ctx = 2048;
            c.n_layers = 2;
            c.kind = (syn_kind)kind;
            c.depth = depths[i];
            c.seed = seed + (uint64_t)i;
            syn_workload *w = make(&c);
            if (!w) {
                CHECK(0, "create");
                continue;
            }
            int hits, probes;
            double s = full_score(w, 0, &hits, &probes);
            int want = (c.n_layers - 1) * c.n_kv_heads * (kind == SYN_MULTIVALUE ? c.n_needles : 1);
            CHECK(probes == want, "%s: %d probes, expected %d", syn_kind_name(c.kind), probes, want);
            CHECK(s == 1.0, "%s depth %.2f: FullKV retrieves %d/%d", syn_kind_name(c.kind), c.depth, hits, probes);
            if (i == 2) {
                double miss = full_score(w, 1, &hits, &probes);
                CHECK(miss == 0.0, "%s: needles evicted, yet %d/%d probes hit", syn_kind_name(c.kind), hits, probes);
            }
            syn_free(w);
        }
}

/* Without oracle hints (the default) the text statistics do not depend on where the
 * needles are: moving the needle leaves surprisal and sentence ends bit-identical. With
 * them (the ablation), each needle span is a sentence of its own with surprising start
 * and needle, as before. */
static void test_oracle_hints(uint64_t seed) {
    for (int kind = SYN_SINGLE; kind <= SYN_MULTIVALUE; kind++) {
        syn_config a, b;
        syn_defaults(&a);
        a.ctx = test_int(256, 3000);
        a.kind = (syn_kind)kind;
        a.seed = seed + (uint64_t)kind;
        a.depth = 0.1 * test_unif();
        b = a;
        b.depth = 0.9 + 0.1 * test_unif();
        syn_workload *wa = make(&a), *wb = make(&b);
        CHECK(wa && wb, "create");
        if (!wa || !wb) return;
        CHECK(wa->needle_pos[0] != wb->needle_pos[0], "the needle did not move");
        CHECK(!memcmp(wa->surprisal, wb->surprisal, (size_t)a.ctx * sizeof(float)),
              "%s: surprisal depends on the needle's place without oracle hints", syn_kind_name(a.kind));
        CHECK(!memcmp(wa->sent_end, wb->sent_end, (size_t)a.ctx), "%s: sentence ends depend on the needle's place",
              syn_kind_name(a.kind));
        syn_free(wb);

        syn_config h = a;
        h.oracle_hints = 1;
        syn_workload *wh = make(&h);
        CHECK(wh != NULL, "create with hints");
        if (!wh) { syn_free(wa); return; }
        for (int i = 0; i < wh->n_needles; i++) {
            int s = wh->span_start[i], e = s + wh->span_len - 1;
            CHECK(wh->surprisal[wh->needle_pos[i]] > 5.0f, "hints: needle %d surprisal %g", i,
                  wh->surprisal[wh->needle_pos[i]]);
            CHECK((s == 0 || wh->sent_end[s - 1]) && wh->sent_end[e], "hints: needle %d span is not a sentence", i);
            for (int t = s; t < e; t++) CHECK(!wh->sent_end[t], "hints: a sentence ends inside needle span %d", i);
        }
        /* the roles and the tensors' layout are the same with and without hints */
        CHECK(!memcmp(wa->role, wh->role, (size_t)wa->n_total) && wa->needle_pos[0] == wh->needle_pos[0],
              "hints changed the roles or the needle's place");
        syn_free(wa);
        syn_free(wh);
    }
}

static void test_scoring_by_hand(void) {
    /* syn_nearest in 2-D. */
    float o[2] = {0, 0}, target[2] = {1, 0};
    float far[4] = {2, 0, 0, -3}, near[2] = {0.5f, 0}, tie[2] = {-1, 0};
    CHECK(syn_nearest(o, target, far, 2, 2) == 1, "nearer the target than (2,0) and (0,-3)");
    CHECK(syn_nearest(o, target, near, 1, 2) == 0, "(0.5,0) is nearer than the target");
    CHECK(syn_nearest(o, target, tie, 1, 2) == 0, "a tie is not a retrieval");
    CHECK(syn_nearest(o, target, NULL, 0, 2) == 1, "no distractors");
    float nan_o[2] = {NAN, 0};
    CHECK(syn_nearest(nan_o, target, far, 2, 2) == 0, "NaN output never retrieves");

    /* Scored steps: single, 8 decode steps -> only the last step asks needle 0;
     * multivalue with 4 needles -> the phase is the last 5 steps, steps 4..7 ask 0..3. */
    syn_config c;
    syn_defaults(&c);
    c.ctx = 256;
    c.n_layers = 3;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    syn_workload *w = make(&c);
    for (int s = 0; s < 8; s++) CHECK(syn_scored_needle(w, s) == (s == 7 ? 0 : -1), "single step %d", s);
    c.kind = SYN_MULTIVALUE;
    syn_workload *mv = make(&c);
    for (int s = 0; s < 8; s++) CHECK(syn_scored_needle(mv, s) == (s >= 4 ? s - 4 : -1), "multivalue step %d", s);
    syn_free(mv);

    /* syn_score on hand-made outputs: V rows are set so the answer is known. Retrieval
     * heads of this shape: layers 1, 2 x kv heads 0, 1 -> 4 probes. */
    const int d = 8, H = 4, T = 8, L = 3, n = w->n_total;
    size_t st = (size_t)n * d;
    float *V[3], *out = malloc((size_t)L * T * H * d * sizeof *out);
    for (int l = 0; l < L; l++) {
        V[l] = malloc(2 * st * sizeof(float));
        for (size_t i = 0; i < 2 * st; i++) V[l][i] = (float)(0.1 * test_normal());
        for (int j = 0; j < 2; j++) V[l][j * st + (size_t)w->needle_pos[0] * d] = 10;   /* needle = 10 e0 */
    }
    test_poison(out, (size_t)L * T * H * d);
    int expect = 0, k = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            if (!w->retrieval[l * H + h]) continue;
            float *o = out + (((size_t)l * T + 7) * H + h) * d;
            for (int i = 0; i < d; i++) o[i] = 0;
            if (k++ % 2 == 0) {   /* every other probe: 6 e0, nearer the needle (dist 4) than any row (~6) */
                o[0] = 6;
                expect++;
            }                     /* others: the origin, nearer every small haystack value */
        }
    int hits, probes;
    double s = syn_score(w, (const float *const *)V, st, out, &hits, &probes);
    CHECK(probes == 4 && hits == expect && fabs(s - (double)expect / 4) < 1e-12, "score %g hits %d/%d, expected %d/4",
          s, hits, probes, expect);

    /* syn_layer_errors: layer 0 exact, layer 1 scaled by 1.1 (error 0.1), layer 2 zero (error 1). */
    size_t per = (size_t)T * H * d;
    float *ref = malloc((size_t)L * per * sizeof *ref), *got = malloc((size_t)L * per * sizeof *got);
    test_fill(ref, (size_t)L * per, 1.0f);
    for (size_t i = 0; i < per; i++) {
        got[i] = ref[i];
        got[per + i] = 1.1f * ref[per + i];
        got[2 * per + i] = 0;
    }
    double err[3];
    double mean = syn_layer_errors(w, got, ref, err);
    CHECK(err[0] == 0 && fabs(err[1] - 0.1) < 1e-6 && fabs(err[2] - 1) < 1e-12, "layer errors %g %g %g", err[0],
          err[1], err[2]);
    CHECK(fabs(mean - 1.1 / 3) < 1e-6, "mean layer error %g", mean);
    for (int l = 0; l < L; l++) free(V[l]);
    free(out);
    free(ref);
    free(got);
    syn_free(w);
}

static void test_check(void) {
    char err[256];
    syn_config c;
    syn_defaults(&c);
    c.ctx = 16;
    CHECK(syn_check(&c, err, sizeof err) == 0, "single at ctx 16: %s", err);
    syn_workload *w = syn_create(&c, err, sizeof err);
    CHECK(w && w->needle_pos[0] >= w->n_sink && w->needle_pos[0] < w->q_start, "tiny layout");
    syn_free(w);
    c.kind = SYN_MULTIKEY;
    CHECK(syn_check(&c, err, sizeof err) == -1 && strstr(err, "ctx 16"), "multikey at ctx 16: '%s'", err);
    c.ctx = 1024;
    c.n_decode = 1;
    CHECK(syn_check(&c, err, sizeof err) == -1 && strstr(err, "decode"), "1 decode step: '%s'", err);
    c.n_decode = 8;
    c.n_heads = 6;
    c.n_kv_heads = 4;
    CHECK(syn_check(&c, err, sizeof err) == -1, "6 heads over 4 kv heads");
    c.n_heads = 8;
    c.depth = 1.5;
    CHECK(syn_check(&c, err, sizeof err) == -1 && strstr(err, "depth"), "depth 1.5: '%s'", err);
    syn_kind k;
    CHECK(syn_kind_parse("synthetic-multivalue", &k) == 0 && k == SYN_MULTIVALUE, "parse");
    CHECK(syn_kind_parse("synthetic-bogus", &k) == -1, "parse bogus");
}

int main(void) {
    uint64_t seed = test_seed();
    test_determinism(seed);
    test_structure(seed ^ 0x5eed);
    test_fullkv_retrieves(seed * 3 + 1);
    test_oracle_hints(seed * 5 + 2);
    test_scoring_by_hand();
    test_check();
    return check_done("test_synthetic");
}
