/* SeKV building blocks (sekv_spans.h, sekv_params.h) against independent references:
 * segmentation checked by brute-force recomputation of its rules, factors against a
 * matrix built from a known SVD in double (Eckart-Young error at every rank), coarse
 * entries, gate MLP, routing and the mixed-resolution softmax against float64 loops
 * written here, and the params file: bit-exact round trip and every corrupt-file error. */
#include "check.h"
#include "../methods/sekv/sekv_params.h"
#include "../methods/sekv/sekv_spans.h"
#include <math.h>
#include <unistd.h>

/* ------------------------------------------------------------ segmentation */

/* Checks seg against the rules in sekv_spans.h, recomputed from scratch. */
static void check_seg(const float *H, int n, double alpha, int l_min, int l_max, int fixed,
                      int sinks, int local, const sekv_seg *sg) {
    double mu = 0, var = 0;
    for (int t = 0; t < n; t++) mu += H[t];
    mu /= n;
    for (int t = 0; t < n; t++) var += (H[t] - mu) * (H[t] - mu);
    double thr = mu + alpha * sqrt(var / n);
    /* expected full-resolution flags before run splitting */
    int *kind = malloc((size_t)n * sizeof *kind);   /* 1 anchor, 2 forced, 0 other */
    int na = 0, nfo = 0;
    for (int t = 0; t < n; t++) {
        int forced = t < sinks || t >= n - local;
        int anchor = t == 0 || (!fixed && H[t] > thr);
        kind[t] = forced ? 2 : anchor ? 1 : 0;
        na += kind[t] == 1;
        nfo += kind[t] == 2;
    }
    int ok_kind = 1;
    for (int t = 0; t < n; t++) {
        int want_full = kind[t] != 0;
        int got = sg->kind[t];
        if (want_full && got != (kind[t] == 1 ? SEKV_ANCHOR : SEKV_FORCED)) ok_kind = 0;
        if (!want_full && got != SEKV_SPAN && got != SEKV_SHORT) ok_kind = 0;
    }
    CHECK(ok_kind, "anchor/forced flags differ from brute force (n=%d alpha=%g)", n, alpha);
    CHECK(sg->n_anchors == na && sg->n_forced == nfo, "counts %d/%d vs %d/%d", sg->n_anchors,
          sg->n_forced, na, nfo);
    /* every non-full token is covered by exactly one piece: a span or a SHORT token */
    int *cover = calloc((size_t)n, sizeof *cover);
    int prev_end = 0, ok_spans = 1;
    for (int s = 0; s < sg->n_spans; s++) {
        sekv_span sp = sg->span[s];
        if (sp.start < prev_end || sp.len < l_min || sp.start + sp.len > n) ok_spans = 0;
        if (!fixed && sp.len > l_max) ok_spans = 0;
        if (fixed && sp.len > fixed) ok_spans = 0;
        for (int t = sp.start; t < sp.start + sp.len && t < n; t++) {
            cover[t]++;
            if (kind[t] != 0 || sg->kind[t] != SEKV_SPAN) ok_spans = 0;
        }
        prev_end = sp.start + sp.len;
    }
    CHECK(ok_spans, "spans out of order, too short/long or crossing an anchor");
    int nshort = 0, ok_cover = 1;
    for (int t = 0; t < n; t++) {
        if (sg->kind[t] == SEKV_SHORT) cover[t]++, nshort++;
        if (cover[t] != (kind[t] == 0)) ok_cover = 0;
    }
    CHECK(ok_cover && nshort == sg->n_short, "pieces do not partition the non-anchor tokens");
    /* per maximal run: piece count and balance */
    int ok_runs = 1;
    for (int t = 0; t < n;) {
        if (kind[t]) {
            t++;
            continue;
        }
        int e = t;
        while (e < n && !kind[e]) e++;
        int m = e - t;
        /* the pieces of this run, from the spans and SHORT stretches (SHORT pieces are
         * shorter than l_min, so lengths come from the expected cut points) */
        int k = fixed ? (m + fixed - 1) / fixed : (m + l_max - 1) / l_max;
        int start = t;
        for (int i = 0; i < k; i++) {
            int len = fixed ? (m - i * fixed < fixed ? m - i * fixed : fixed) : m / k + (i < m % k);
            int is_span = 0;
            for (int s = 0; s < sg->n_spans; s++)
                if (sg->span[s].start == start && sg->span[s].len == len) is_span = 1;
            if (is_span != (len >= l_min)) ok_runs = 0;
            start += len;
        }
        if (start != e) ok_runs = 0;
        t = e;
    }
    CHECK(ok_runs, "run splitting differs (n=%d l_min=%d l_max=%d fixed=%d)", n, l_min, l_max, fixed);
    CHECK(sekv_seg_persistent(sg) == na + nfo + nshort + sg->n_spans, "persistent count");
    free(kind);
    free(cover);
}

static void test_segment(void) {
    for (int it = 0; it < 200; it++) {
        int n = test_int(1, 600);
        float *H = malloc((size_t)n * sizeof *H);
        for (int t = 0; t < n; t++) {
            double u = test_unif();
            H[t] = u < 0.1 ? 0.0f : (float)(-log(test_unif() + 1e-9) * (u < 0.2 ? 6 : 1));
        }
        H[0] = 0;
        double alpha = 0.2 + 2.5 * test_unif();
        int l_min = test_int(1, 6), l_max = test_int(l_min, 40);
        int fixed = it % 4 == 3 ? test_int(2, 30) : 0;
        int sinks = it % 2 ? test_int(0, 5) : 0, local = it % 2 ? test_int(0, 40) : 0;
        sekv_seg sg;
        int rc = sinks || local ? sekv_segment_ex(H, n, alpha, l_min, l_max, fixed, sinks, local, &sg)
                                : sekv_segment(H, n, alpha, l_min, l_max, fixed, &sg);
        CHECK(rc == 0, "segment failed");
        if (!rc) {
            CHECK(sg.kind[0] != SEKV_SPAN && sg.kind[0] != SEKV_SHORT, "token 0 not full resolution");
            check_seg(H, n, alpha, l_min, l_max, fixed, sinks, local, &sg);
        }
        sekv_seg_free(&sg);
        free(H);
    }
    /* constant surprisal: sigma = 0, only token 0 is an anchor */
    float c[100];
    for (int t = 0; t < 100; t++) c[t] = 2.5f;
    sekv_seg sg;
    CHECK(sekv_segment(c, 100, 1.0, 4, 64, 0, &sg) == 0, "segment");
    CHECK(sg.n_anchors == 1 && sg.n_spans == 2 && sg.span[0].start == 1, "constant: %d anchors %d spans",
          sg.n_anchors, sg.n_spans);
    sekv_seg_free(&sg);
    CHECK(sekv_segment(c, 0, 1.0, 4, 64, 0, &sg) == -1 && sekv_segment(c, 10, 1.0, 0, 64, 0, &sg) == -1,
          "bad arguments accepted");
}

/* fixed_chunk=same (claim C8): the surprisal segmentation's anchor count, placed evenly,
 * each anchor opening a chunk of equal length (+-1) whose rest is one span (l_max off) or
 * SHORT tokens; sinks and the local window as before. */
static void test_segment_even(void) {
    for (int it = 0; it < 200; it++) {
        int n = test_int(1, 600), l_min = test_int(1, 6), l_max = SEKV_LMAX_NONE;
        int sinks = it % 2 ? test_int(0, 5) : 0, local = it % 3 ? test_int(0, 40) : 0;
        float *H = malloc((size_t)n * sizeof *H);
        for (int t = 0; t < n; t++) H[t] = (float)(-log(test_unif() + 1e-9) * (test_unif() < 0.1 ? 6 : 1));
        double alpha = 0.2 + 2.5 * test_unif();
        sekv_seg ref, sg;
        CHECK(sekv_segment_ex(H, n, alpha, l_min, l_max, 0, sinks, local, &ref) == 0, "segment");
        CHECK(sekv_segment_even(H, n, alpha, l_min, l_max, sinks, local, &sg) == 0, "segment_even");
        int lo = sinks < n ? sinks : n, hi = n - local > lo ? n - local : lo;
        CHECK(sg.n_anchors == (hi > lo ? ref.n_anchors : 0) && sg.n_forced == ref.n_forced,
              "n=%d: %d anchors (surprisal %d), %d forced (%d)", n, sg.n_anchors, ref.n_anchors, sg.n_forced,
              ref.n_forced);
        CHECK(sg.threshold == ref.threshold, "threshold not the surprisal one");
        if (sinks == 0 && hi > 0) CHECK(sg.kind[0] == SEKV_ANCHOR, "token 0 not an anchor");
        /* chunk lengths: anchor to next anchor (or the window), all within 1 of each other */
        int mn = n + 1, mx = -1, ok = 1, spans = 0, shorts = 0;
        int prev = lo < hi && sg.kind[lo] != SEKV_ANCHOR ? lo - 1 : -1;   /* no anchor: one run after the sinks */
        for (int t = lo; t <= hi; t++) {
            if (t < hi && sg.kind[t] == SEKV_FORCED) ok = 0;
            if (t == hi || sg.kind[t] == SEKV_ANCHOR) {
                if (prev >= 0) {
                    int len = t - prev, rest = len - 1;
                    mn = len < mn ? len : mn, mx = len > mx ? len : mx;
                    /* the rest of the chunk: one span, or SHORT tokens */
                    int is_span = 0;
                    for (int s = 0; s < sg.n_spans; s++)
                        is_span |= sg.span[s].start == prev + 1 && sg.span[s].len == rest;
                    if (rest > 0 && is_span != (rest >= l_min)) ok = 0;
                    spans += rest > 0 && rest >= l_min, shorts += rest < l_min ? rest : 0;
                }
                prev = t;
            }
        }
        CHECK(ok && spans == sg.n_spans && shorts == sg.n_short, "chunks are not anchor + one span (n=%d)", n);
        CHECK(mx < 0 || mx - mn <= 1, "chunk lengths %d..%d differ by more than 1", mn, mx);
        sekv_seg_free(&ref), sekv_seg_free(&sg);
        free(H);
    }
}

/* ------------------------------------------------------------ factors */

/* Orthonormal columns: Q [rows][k] by Gram-Schmidt in double. */
static void orthonormal(double *Q, int rows, int k) {
    for (int c = 0; c < k; c++) {
        for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] = test_normal();
        for (int pass = 0; pass < 2; pass++)
            for (int p = 0; p < c; p++) {
                double dot = 0;
                for (int i = 0; i < rows; i++) dot += Q[(size_t)i * k + c] * Q[(size_t)i * k + p];
                for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] -= dot * Q[(size_t)i * k + p];
            }
        double nn = 0;
        for (int i = 0; i < rows; i++) nn += Q[(size_t)i * k + c] * Q[(size_t)i * k + c];
        for (int i = 0; i < rows; i++) Q[(size_t)i * k + c] /= sqrt(nn);
    }
}

static void test_factors(void) {
    int len = test_int(40, 64), d = 64, k = len < d ? len : d;
    double *U = malloc((size_t)len * k * sizeof *U), *Vm = malloc((size_t)d * k * sizeof *Vm);
    double *sig = malloc((size_t)k * sizeof *sig), *A = calloc((size_t)len * d, sizeof *A);
    orthonormal(U, len, k);
    orthonormal(Vm, d, k);
    for (int i = 0; i < k; i++) sig[i] = 10.0 * exp(-0.08 * i) * (1 + 0.01 * test_unif());
    float *Af = malloc((size_t)len * d * sizeof *Af), *out = malloc((size_t)len * d * sizeof *out);
    for (int t = 0; t < len; t++)
        for (int c = 0; c < d; c++) {
            double s = 0;
            for (int i = 0; i < k; i++) s += U[(size_t)t * k + i] * sig[i] * Vm[(size_t)c * k + i];
            Af[(size_t)t * d + c] = (float)s;
        }
    double tot = 0;
    for (int i = 0; i < k; i++) tot += sig[i] * sig[i];
    double prev = INFINITY;
    int Rs[3] = {8, 32, 64};
    for (int ri = 0; ri < 3; ri++) {
        int R = Rs[ri];
        float *buf = malloc(sekv_factor_floats(len, d, R) * sizeof *buf);
        sekv_factor f;
        CHECK(sekv_factorize(Af, len, d, R, buf, &f) == 0, "factorize R=%d", R);
        CHECK(f.r == (R < k ? R : k), "rank %d for R=%d", f.r, R);
        test_poison(out, (size_t)len * d);
        sekv_reconstruct(&f, NULL, out);
        double e2 = 0;
        for (size_t i = 0; i < (size_t)len * d; i++) e2 += ((double)out[i] - Af[i]) * ((double)out[i] - Af[i]);
        double tail = 0;   /* Eckart-Young: the best rank-r error is the dropped singular values */
        for (int i = f.r; i < k; i++) tail += sig[i] * sig[i];
        double err = sqrt(e2 / tot), want = sqrt(tail / tot);
        CHECK(fabs(err - want) < 1e-4 + 1e-3 * want, "R=%d: error %g, Eckart-Young %g", R, err, want);
        CHECK(err < prev || err < 1e-5, "error did not fall with rank (R=%d: %g after %g)", R, err, prev);
        if (f.r == k) CHECK(err < 1e-5, "full rank not exact: %g", err);
        for (int i = 0; i < f.r; i++)
            CHECK(fabs(f.s[i] - sig[i]) < 1e-4 * sig[0], "singular value %d: %g vs %g", i, f.s[i], sig[i]);
        /* a gate mask scales the components: m = 0 beyond 3 keeps the first 3 */
        float m[SEKV_RMAX];
        for (int i = 0; i < f.r; i++) m[i] = i < 3 ? 1.0f : 0.0f;
        sekv_reconstruct(&f, m, out);
        e2 = 0;
        for (size_t i = 0; i < (size_t)len * d; i++) e2 += ((double)out[i] - Af[i]) * ((double)out[i] - Af[i]);
        tail = 0;
        for (int i = 3; i < k; i++) tail += sig[i] * sig[i];
        CHECK(fabs(sqrt(e2 / tot) - sqrt(tail / tot)) < 1e-4, "masked reconstruction");
        prev = err;
        free(buf);
    }
    free(U), free(Vm), free(sig), free(A), free(Af), free(out);
}

/* ------------------------------------------------------------ coarse, gate, routing */

static void test_coarse(void) {
    int len = test_int(2, 64), d = test_int(4, 80);
    float *K = malloc((size_t)len * d * sizeof *K), *V = malloc((size_t)len * d * sizeof *V);
    float H[64], w[64], kb[80], vb[80];
    test_fill(K, (size_t)len * d, 1);
    test_fill(V, (size_t)len * d, 1);
    for (int mode = 0; mode < 2; mode++) {
        double tot = 0;
        for (int t = 0; t < len; t++) {
            H[t] = mode ? 0.0f : (float)(test_unif() * 5 - (t == 1 ? 10 : 0));   /* one negative */
            tot += H[t] > 0 ? H[t] : 0;
        }
        test_poison(kb, d), test_poison(vb, d), test_poison(w, len);
        sekv_coarse(K, V, H, len, d, kb, vb, w);
        double err = 0, wsum = 0;
        for (int t = 0; t < len; t++) wsum += w[t];
        for (int c = 0; c < d; c++) {
            double a = 0, b = 0;
            for (int t = 0; t < len; t++) {
                double wt = tot > 0 ? (H[t] > 0 ? H[t] : 0) / tot : 1.0 / len;
                a += wt * K[(size_t)t * d + c];
                b += wt * V[(size_t)t * d + c];
            }
            err = fmax(err, fmax(fabs(kb[c] - a), fabs(vb[c] - b)));
        }
        CHECK(err < 1e-5 && fabs(wsum - 1) < 1e-5, "coarse (mode %d): err %g, weights sum %g", mode, err, wsum);
    }
    free(K), free(V);
}

static double gelu_ref(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

static void test_gate_route(void) {
    sekv_params p;
    char err[256];
    int d = 32;
    CHECK(sekv_params_init(&p, 2, 3, d, 32, test_next(), err, sizeof err) == 0, "init: %s", err);
    /* random (non-initial) gate weights so every layer matters */
    size_t off = (size_t)p.n_layers * p.n_heads * (p.dp * d + 1);
    test_fill(p.W + off, sekv_params_count(&p) - off, 0.3f);
    int R = 32, r = test_int(1, 32), hid = p.hidden;
    float s[32], kb[32], m[32], work[32 + 32 + 5 * 64];
    for (int i = 0; i < r; i++) s[i] = (float)(10 * exp(-0.2 * i));
    test_fill(kb, d, 1);
    test_poison(m, R), test_poison(work, sizeof work / sizeof *work);
    sekv_gate_forward(&p, s, r, kb, m, work);
    double x[64], h1[64], h2[64], nk = 0;
    for (int i = 0; i < d; i++) nk += (double)kb[i] * kb[i];
    for (int i = 0; i < R; i++) x[i] = i < r ? (double)s[i] / s[0] : 0;
    for (int i = 0; i < d; i++) x[R + i] = kb[i] / sqrt(nk);
    for (int o = 0; o < hid; o++) {
        double a = p.g_b1[o];
        for (int i = 0; i < R + d; i++) a += (double)p.g_w1[(size_t)o * (R + d) + i] * x[i];
        h1[o] = gelu_ref(a);
    }
    for (int o = 0; o < hid; o++) {
        double a = p.g_b2[o];
        for (int i = 0; i < hid; i++) a += (double)p.g_w2[(size_t)o * hid + i] * h1[i];
        h2[o] = gelu_ref(a);
    }
    double em = 0;
    for (int o = 0; o < R; o++) {
        double a = p.g_b3[o];
        for (int i = 0; i < hid; i++) a += (double)p.g_w3[(size_t)o * hid + i] * h2[i];
        double want = o < r ? 1 / (1 + exp(-a)) : 0;
        em = fmax(em, fabs(m[o] - want));
    }
    CHECK(em < 1e-5, "gate forward off by %g (r=%d)", em, r);
    CHECK(fabs(work[R + d + hid] - gelu_ref(work[R + d])) < 1e-5 && work[0] == (float)x[0],
          "gate work cache: h1 = gelu(a1)");
    double eg = 0;
    for (int i = 0; i < 50; i++) {
        double xx = test_normal() * 3, h = 1e-3;
        double num = (gelu_ref(xx + h) - gelu_ref(xx - h)) / (2 * h);
        eg = fmax(eg, fabs(sekv_gelu_grad((float)xx) - num));
    }
    CHECK(eg < 1e-4, "gelu grad off by %g", eg);
    /* routing */
    float q[32], qh[32], kh[32];
    test_fill(q, d, 1);
    const float *W = p.W + (size_t)(1 * p.n_heads + 2) * p.dp * d;
    test_poison(qh, 32), test_poison(kh, 32);
    sekv_route_query(W, q, d, p.dp, qh);
    sekv_route_key(W, kb, d, p.dp, kh);
    double qd[32], kd[32], kn = 0, dot = 0, eq = 0;
    for (int o = 0; o < p.dp; o++) {
        qd[o] = kd[o] = 0;
        for (int i = 0; i < d; i++) qd[o] += (double)W[o * d + i] * q[i], kd[o] += (double)W[o * d + i] * kb[i];
        kn += kd[o] * kd[o];
    }
    for (int o = 0; o < p.dp; o++) {
        eq = fmax(eq, fmax(fabs(qh[o] - qd[o]), fabs(kh[o] - kd[o] / sqrt(kn))));
        dot += qd[o] * kd[o] / sqrt(kn);
    }
    int len = test_int(1, 64);
    double want = 1 / (1 + exp(-(dot / sqrt(32.0) + log(len))));
    CHECK(eq < 1e-5, "routing projections off by %g", eq);
    CHECK(fabs(sekv_route_score(qh, kh, p.dp, len) - want) < 1e-6, "route score");
    sekv_params_free(&p);
}

/* ------------------------------------------------------------ mixed attention */

static void test_mix(void) {
    int d = test_int(8, 64), nf = test_int(0, 20), ns = test_int(1, 8);
    float *Kf = malloc((size_t)(nf + 1) * d * sizeof *Kf), *Vf = malloc((size_t)(nf + 1) * d * sizeof *Vf);
    test_fill(Kf, (size_t)nf * d, 1), test_fill(Vf, (size_t)nf * d, 1);
    int32_t len[8];
    float kb[8 * 64], vb[8 * 64], z[8], q[64], out[64], probs[2000];
    float *Kr[8], *Vr[8];
    for (int s = 0; s < ns; s++) {
        len[s] = test_int(1, 30);
        Kr[s] = malloc((size_t)len[s] * d * sizeof(float));
        Vr[s] = malloc((size_t)len[s] * d * sizeof(float));
        test_fill(Kr[s], (size_t)len[s] * d, 1), test_fill(Vr[s], (size_t)len[s] * d, 1);
        int c = test_int(0, 2);
        z[s] = c == 0 ? 0.0f : c == 1 ? 1.0f : (float)test_unif();
    }
    test_fill(kb, (size_t)ns * d, 1), test_fill(vb, (size_t)ns * d, 1), test_fill(q, d, 1);
    test_poison(out, d), test_poison(probs, 2000);
    sekv_mix_args a = {d, q, nf, Kf, Vf, ns, len, kb, vb, z, (const float *const *)Kr, (const float *const *)Vr, out, probs};
    int n = sekv_mix_attend(&a);
    /* reference: the entry list written out, then a double softmax */
    double lg[2000], vv[2000][64];
    int m = 0;
    for (int i = 0; i < nf; i++, m++) {
        double dt = 0;
        for (int c = 0; c < d; c++) dt += (double)q[c] * Kf[i * d + c], vv[m][c] = Vf[i * d + c];
        lg[m] = dt / sqrt((double)d);
    }
    for (int s = 0; s < ns; s++) {
        if (z[s] < 1) {
            double dt = 0;
            for (int c = 0; c < d; c++) dt += (double)q[c] * kb[s * d + c], vv[m][c] = vb[s * d + c];
            lg[m++] = dt / sqrt((double)d) + log(len[s]) + log(fmax(1 - z[s], 1e-6));
        }
        if (z[s] > 0)
            for (int t = 0; t < len[s]; t++, m++) {
                double dt = 0;
                for (int c = 0; c < d; c++) dt += (double)q[c] * Kr[s][t * d + c], vv[m][c] = Vr[s][t * d + c];
                lg[m] = dt / sqrt((double)d) + log(fmax(z[s], 1e-6));
            }
    }
    double mx = -INFINITY, sum = 0, ref[64] = {0}, ep = 0;
    for (int i = 0; i < m; i++) mx = fmax(mx, lg[i]);
    for (int i = 0; i < m; i++) sum += exp(lg[i] - mx);
    for (int i = 0; i < m; i++) {
        double pi = exp(lg[i] - mx) / sum;
        ep = fmax(ep, fabs(probs[i] - pi));
        for (int c = 0; c < d; c++) ref[c] += pi * vv[i][c];
    }
    CHECK(n == m, "entries %d vs %d", n, m);
    CHECK(rel_l2(out, ref, d) < 1e-5 && ep < 1e-6, "mix attend: rel %g, probs %g", rel_l2(out, ref, d), ep);

    /* a coarse row with bias ln n stands exactly for n identical tokens */
    int nn = test_int(2, 40);
    float *Kc = malloc((size_t)(nf + nn) * d * sizeof *Kc), *Vc = malloc((size_t)(nf + nn) * d * sizeof *Vc);
    memcpy(Kc, Kf, (size_t)nf * d * sizeof *Kc), memcpy(Vc, Vf, (size_t)nf * d * sizeof *Vc);
    for (int t = 0; t < nn; t++)
        memcpy(Kc + (size_t)(nf + t) * d, kb, d * sizeof *Kc), memcpy(Vc + (size_t)(nf + t) * d, vb, d * sizeof *Vc);
    float Hs[40], kbar[64], vbar[64], zero = 0, out2[64];
    for (int t = 0; t < nn; t++) Hs[t] = (float)test_unif();
    sekv_coarse(Kc + (size_t)nf * d, Vc + (size_t)nf * d, Hs, nn, d, kbar, vbar, NULL);
    int32_t ln = nn;
    sekv_mix_args c1 = {d, q, nf, Kf, Vf, 1, &ln, kbar, vbar, &zero, NULL, NULL, out, NULL};
    sekv_mix_args c2 = {d, q, nf + nn, Kc, Vc, 0, NULL, NULL, NULL, NULL, NULL, NULL, out2, NULL};
    test_poison(out, d), test_poison(out2, d);
    sekv_mix_attend(&c1);
    sekv_mix_attend(&c2);
    double o2[64];
    for (int c = 0; c < d; c++) o2[c] = out2[c];
    CHECK(rel_l2(out, o2, d) < 1e-5, "coarse row with bias ln n vs n identical tokens: %g", rel_l2(out, o2, d));
    for (int s = 0; s < ns; s++) free(Kr[s]), free(Vr[s]);
    free(Kf), free(Vf), free(Kc), free(Vc);
}

/* ------------------------------------------------------------ params file */

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    CHECK(fread(b, 1, *n, f) == *n, "read");
    fclose(f);
    return b;
}
static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* Writes a variant of the good file and checks load fails naming the file and why. */
static void expect_load_error(const char *path, const unsigned char *b, size_t n, uint64_t hash,
                              const char *why) {
    spit(path, b, n);
    sekv_params p;
    char err[512] = "";
    int rc = sekv_params_load(&p, path, hash, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, why), "expected '%s', got rc=%d '%s'", why, rc, err);
    CHECK(p.W == NULL, "failed load left arrays behind");
}

static void test_params_file(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sekv_%d.bin", (int)getpid());
    sekv_params p, q;
    char err[512];
    CHECK(sekv_params_init(&p, 3, 4, 16, 8, test_next(), err, sizeof err) == 0, "init: %s", err);
    test_fill(p.W, sekv_params_count(&p), 1);   /* arbitrary values, one subnormal bit pattern */
    uint32_t nanbits = 0x7fc12345u, subbits = 0x00012345u;
    memcpy(&p.g_b3[3], &nanbits, 4);
    p.trained = 1, p.train_steps = 1234, p.model_hash = test_next() | 1;
    CHECK(sekv_params_save(&p, path, err, sizeof err) == -1 && strstr(err, "not finite"),
          "a NaN parameter was saved (%s)", err);   /* never written: a diverged run */
    memcpy(&p.g_b3[3], &subbits, 4);
    CHECK(sekv_params_save(&p, path, err, sizeof err) == 0, "save: %s", err);
    CHECK(sekv_params_load(&q, path, p.model_hash, err, sizeof err) == 0, "load: %s", err);
    CHECK(q.n_layers == 3 && q.n_heads == 4 && q.head_dim == 16 && q.rank_cap == 8 && q.dp == 32 &&
              q.hidden == 64 && q.trained == 1 && q.train_steps == 1234 && q.model_hash == p.model_hash,
          "header fields differ after the round trip");
    CHECK(sekv_params_count(&q) == sekv_params_count(&p) &&
              memcmp(p.W, q.W, sekv_params_count(&p) * sizeof(float)) == 0,
          "arrays not bit-exact after the round trip");
    CHECK(q.g_b3 - q.W == p.g_b3 - p.W, "array layout differs");
    CHECK(sekv_params_check_shape(&q, path, 3, 4, 16, err, sizeof err) == 0, "check_shape");
    CHECK(sekv_params_check_shape(&q, path, 3, 4, 32, err, sizeof err) == -1 && strstr(err, "shape mismatch") &&
              strstr(err, path), "shape mismatch vs the model: '%s'", err);
    sekv_params_free(&q);

    size_t n;
    unsigned char *good = slurp(path, &n), *b = malloc(n);
    memcpy(b, good, n), b[0] ^= 0x20;
    expect_load_error(path, b, n, 0, "bad magic");
    memcpy(b, good, n), b[8] = 2;
    expect_load_error(path, b, n, 0, "wrong version");
    expect_load_error(path, good, n - 1 - (size_t)test_int(0, (int)n / 2), 0, "truncated");
    expect_load_error(path, good, 30, 0, "truncated");
    memcpy(b, good, n), b[64 + test_int(0, (int)n - 80)] ^= 0x01;
    expect_load_error(path, b, n, 0, "checksum mismatch");
    memcpy(b, good, n), b[32] = 16;   /* rank_cap 8 -> 16 */
    expect_load_error(path, b, n, 0, "shape mismatch");
    memcpy(b, good, n), b[24] = 5;    /* n_heads 4 -> 5: float count no longer matches */
    expect_load_error(path, b, n, 0, "shape mismatch");
    expect_load_error(path, good, n, p.model_hash ^ 0xff, "model hash mismatch");
    unsigned char *big = malloc(n + 3);
    memcpy(big, good, n), memset(big + n, 0, 3);
    expect_load_error(path, big, n + 3, 0, "unexpected bytes");
    unlink(path);
    CHECK(sekv_params_load(&q, path, 0, err, sizeof err) == -1 && strstr(err, path) && strstr(err, "cannot open"),
          "missing file: '%s'", err);
    CHECK(sekv_params_save(&p, "/nonexistent-dir/x.bin", err, sizeof err) == -1 && strstr(err, "/nonexistent-dir/x.bin"),
          "unwritable path: '%s'", err);
    CHECK(sekv_params_init(&q, 2, 2, 16, 16, 1, err, sizeof err) == -1 && strstr(err, "rank"), "rank 16 accepted");
    /* same seed, same initial values */
    sekv_params a, c;
    sekv_params_init(&a, 2, 3, 16, 32, 77, err, sizeof err);
    sekv_params_init(&c, 2, 3, 16, 32, 77, err, sizeof err);
    CHECK(memcmp(a.W, c.W, sekv_params_count(&a) * sizeof(float)) == 0, "init not deterministic");
    CHECK(fabs(1 / (1 + exp(-a.g_b3[0])) - 0.95) < 1e-6 && a.tau[5] == 0.05f, "init gate bias / tau");
    sekv_params_free(&a), sekv_params_free(&c), sekv_params_free(&p);
    free(good), free(b), free(big);
}

int main(void) {
    test_seed();
    test_segment();
    test_segment_even();
    test_factors();
    test_coarse();
    test_gate_route();
    test_mix();
    test_params_file();
    return check_done("test_sekv_parts");
}
