/* kernels/stats.c against hand-computed values (Wilson bounds, exact McNemar/sign-test
 * p-values, Holm), bootstrap determinism and behaviour on fresh random data.
 * test_stats --eval FILE answers the cases of tests/stats_ref.py (test_stats_ref.sh). */
#include "../kernels/stats.h"
#include "check.h"

static int close_to(double x, double y, double tol) { return fabs(x - y) <= tol * fmax(1, fabs(y)); }

static int eval(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "test_stats: cannot read %s\n", path), 1;
    char op[16];
    while (fscanf(f, "%15s", op) == 1) {
        if (!strcmp(op, "wilson")) {
            int k, n;
            double lo, hi;
            if (fscanf(f, "%d %d", &k, &n) != 2) return 1;
            st_wilson(k, n, ST_Z95, &lo, &hi);
            printf("%.17g %.17g\n", lo, hi);
        } else if (!strcmp(op, "sign")) {
            int a, b;
            if (fscanf(f, "%d %d", &a, &b) != 2) return 1;
            printf("%.17g\n", st_sign_p(a, b));
        } else if (!strcmp(op, "holm")) {
            int m;
            if (fscanf(f, "%d", &m) != 1 || m < 1) return 1;
            double *p = malloc(sizeof(double) * m);
            for (int i = 0; i < m; i++)
                if (fscanf(f, "%lf", &p[i]) != 1) return 1;
            st_holm(p, m, p);
            for (int i = 0; i < m; i++) printf("%.17g%c", p[i], i == m - 1 ? '\n' : ' ');
            free(p);
        } else if (!strcmp(op, "boot") || !strcmp(op, "paired")) {
            int B, n;
            unsigned long long seed;
            if (fscanf(f, "%d %llu %d", &B, &seed, &n) != 3 || n < 1) return 1;
            double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
            int *g = malloc(sizeof(int) * n);
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%lf", &a[i]) != 1) return 1;
            for (int i = 0; i < n; i++)
                if (op[0] == 'b' ? fscanf(f, "%d", &g[i]) != 1 : fscanf(f, "%lf", &b[i]) != 1) return 1;
            double lo, hi, est;
            if (op[0] == 'b') {
                est = st_boot_mean(a, g, n, B, seed, 0.95, &lo, &hi);
                printf("%.17g %.17g %.17g\n", est, lo, hi);
            } else {
                est = st_boot_paired(a, b, n, B, seed, 0.95, &lo, &hi);
                printf("%.17g %.17g %.17g %.17g\n", est, lo, hi, st_paired_p(a, b, n));
            }
            free(a), free(b), free(g);
        } else if (!strcmp(op, "boott")) {
            int B, n;
            unsigned long long seed;
            if (fscanf(f, "%d %llu %d", &B, &seed, &n) != 3 || n < 1) return 1;
            double *a = malloc(sizeof(double) * n), lo, hi;
            int *g = malloc(sizeof(int) * n);
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%lf", &a[i]) != 1) return 1;
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%d", &g[i]) != 1) return 1;
            double est = st_boot_t(a, g, n, B, seed, 0.95, &lo, &hi);
            printf("%.17g %.17g %.17g\n", est, lo, hi);
            free(a), free(g);
        } else if (!strcmp(op, "interval")) {   /* a cell: score flag, n, values, groups */
            int score, n;
            if (fscanf(f, "%d %d", &score, &n) != 2 || n < 1) return 1;
            double *a = malloc(sizeof(double) * n), lo, hi;
            int *g = malloc(sizeof(int) * n);
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%lf", &a[i]) != 1) return 1;
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%d", &g[i]) != 1) return 1;
            double est = st_interval(a, g, n, score, &lo, &hi);
            printf("%.17g %.17g %.17g\n", est, lo, hi);
            free(a), free(g);
        } else if (!strcmp(op, "tq")) {
            double q;
            int df;
            if (fscanf(f, "%lf %d", &q, &df) != 2) return 1;
            printf("%.17g\n", st_t_quantile(q, df));
        } else if (!strcmp(op, "perm")) {
            int B, n;
            unsigned long long seed;
            if (fscanf(f, "%d %llu %d", &B, &seed, &n) != 3 || n < 1) return 1;
            double *d = malloc(sizeof(double) * n);
            for (int i = 0; i < n; i++)
                if (fscanf(f, "%lf", &d[i]) != 1) return 1;
            printf("%.17g\n", st_perm_p(d, n, B, seed));
            free(d);
        } else return fprintf(stderr, "test_stats: unknown op %s\n", op), 1;
    }
    fclose(f);
    return 0;
}

/* Coverage of the cells' 95% interval by simulation: how often st_interval (graded
 * values) and st_boot_paired (x minus normal noise of sd 0.5) hold the true mean, over
 * reps samples of n from a normal, an exponential (skewness 2) and a gamma(2)
 * distribution (skewness 1.4), from fixed seeds.
 * Into cov[dist][n index][paired]. */
enum { COV_REPS = 1000 };
static int cov_old;   /* --coverage: also the percentile bootstrap, for comparison */
static const int cov_n[] = {5, 15};
static const char *const cov_dist[] = {"normal", "exponential", "gamma(2)"};
static double cov_draw(int dist) {
    double u;
    switch (dist) {
    case 0: return test_normal();
    case 1: u = test_unif(); return -log(1 - u);
    default: u = test_unif(); return -log(1 - u) - log(1 - test_unif());   /* sum of two exponentials */
    }
}
static void coverage(double cov[3][2][3], int reps) {
    double mean[3] = {0, 1, 2}, x[32], y[32];
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2; k++) {
            int n = cov_n[k], hit[3] = {0, 0, 0};
            test_rng_state = 0x5eed0000ULL + 16 * d + k;   /* a fixed seed per setting */
            for (int r = 0; r < reps; r++) {
                double lo, hi;
                for (int i = 0; i < n; i++) x[i] = cov_draw(d), y[i] = 0.5 * test_normal();
                st_interval(x, NULL, n, 0, &lo, &hi);
                hit[0] += lo <= mean[d] && mean[d] <= hi;
                st_boot_paired(x, y, n, ST_BOOT_B, ST_SEED, 0.95, &lo, &hi);   /* x - y: mean mean[d] */
                hit[1] += lo <= mean[d] && mean[d] <= hi;
                if (cov_old) {   /* the percentile bootstrap the reports showed before */
                    st_boot_mean(x, NULL, n, ST_BOOT_B, ST_SEED, 0.95, &lo, &hi);
                    hit[2] += lo <= mean[d] && mean[d] <= hi;
                }
            }
            for (int c = 0; c < 3; c++) cov[d][k][c] = (double)hit[c] / reps;
        }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--eval")) return eval(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "--coverage")) {   /* the table of docs/statistics.md */
        int reps = argc == 3 ? atoi(argv[2]) : 10000;
        double cov[3][2][3];
        cov_old = 1;
        coverage(cov, reps);
        printf("95%% interval coverage, %d samples each (seeds fixed)\n| data | n | mean (st_interval) | paired"
               " difference (st_boot_paired) | percentile bootstrap (before) |\n|---|---:|---:|---:|---:|\n", reps);
        for (int d = 0; d < 3; d++)
            for (int k = 0; k < 2; k++)
                printf("| %s | %d | %.3f | %.3f | %.3f |\n", cov_dist[d], cov_n[k], cov[d][k][0], cov[d][k][1],
                       cov[d][k][2]);
        return 0;
    }
    test_seed();
    const double z = ST_Z95, z2 = z * z;
    double lo, hi;
    /* Wilson: k = 0 and k = n have closed forms z^2/(n+z^2) and n/(n+z^2) */
    for (int n = 1; n <= 40; n += 13) {
        lo = hi = NAN;
        st_wilson(0, n, z, &lo, &hi);
        CHECK(lo == 0 && close_to(hi, z2 / (n + z2), 1e-14), "wilson 0/%d = [%g, %g]", n, lo, hi);
        st_wilson(n, n, z, &lo, &hi);
        CHECK(hi == 1 && close_to(lo, n / (n + z2), 1e-14), "wilson %d/%d = [%g, %g]", n, n, lo, hi);
    }
    st_wilson(5, 10, z, &lo, &hi);   /* the textbook 0.2366 - 0.7634 */
    CHECK(close_to(lo, 0.236593090, 1e-8) && close_to(hi, 0.763406910, 1e-8), "wilson 5/10 = [%.9f, %.9f]", lo, hi);
    st_wilson(7, 15, z, &lo, &hi);   /* 46.7% of 15: roots of (p - q)^2 = z^2 q(1-q)/n, by bisection */
    CHECK(close_to(lo, 0.248095353657, 1e-10) && close_to(hi, 0.698830199745, 1e-10), "wilson 7/15 = [%.6f, %.6f]", lo, hi);
    st_wilson(0, 0, z, &lo, &hi);
    CHECK(isnan(lo) && isnan(hi), "wilson of nothing is undefined");

    /* exact McNemar / sign test: 2 * sum_{i<=k} C(n,i) / 2^n */
    CHECK(st_sign_p(0, 5) == 0.0625, "p(0,5) = %.17g", st_sign_p(0, 5));
    CHECK(close_to(st_sign_p(1, 9), 22.0 / 1024, 1e-13), "p(1,9) = %.17g", st_sign_p(1, 9));
    CHECK(close_to(st_sign_p(8, 2), 112.0 / 1024, 1e-13), "p(8,2) = %.17g", st_sign_p(8, 2));
    CHECK(st_sign_p(0, 0) == 1 && st_sign_p(3, 3) == 1 && st_sign_p(0, 1) == 1, "no evidence gives p = 1");
    CHECK(close_to(st_sign_p(0, 20), 2.0 / 1048576, 1e-12), "p(0,20) = %.17g", st_sign_p(0, 20));
    double a8[] = {1, 1, 0, 1, 0.5, 1, 0, 1}, b8[] = {0, 1, 0, 0, 0.25, 0, 0, 0};
    CHECK(st_paired_p(a8, b8, 8) == 0.0625, "paired signs 5:0 give 0.0625, got %g", st_paired_p(a8, b8, 8));

    /* paired permutation: {1, 2, 3} -> 2 of 8 sign vectors reach |6|; ones -> the sign test */
    double d3[] = {1, 0, -2, 3};
    CHECK(st_perm_p((double[]){1, 2, 3}, 3, 0, 1) == 0.25, "perm {1,2,3}: %g", st_perm_p((double[]){1, 2, 3}, 3, 0, 1));
    CHECK(st_perm_p(d3, 4, 0, 1) == 0.75, "perm {1,0,-2,3}: 6 of 8 sums reach |2|, got %g", st_perm_p(d3, 4, 0, 1));
    for (int t = 0; t < 20; t++) {
        int m = test_int(1, ST_PERM_EXACT), pos = 0, neg = 0;
        double d[ST_PERM_EXACT + 5];
        for (int i = 0; i < m; i++) {
            d[i] = test_int(0, 2) - 1.0;
            pos += d[i] > 0, neg += d[i] < 0;
        }
        CHECK(close_to(st_perm_p(d, m, 0, 1), st_sign_p(pos, neg), 1e-12), "perm on 0/1 = sign test (%d/%d): %g vs %g", pos,
              neg, st_perm_p(d, m, 0, 1), st_sign_p(pos, neg));
    }
    double d40[40];
    for (int i = 0; i < 40; i++) d40[i] = i < 27 ? 1 : -1;   /* 27:13 -> exact sign p 0.0385 */
    double pm = st_perm_p(d40, 40, 20000, 5), ps = st_sign_p(27, 13);
    CHECK(fabs(pm - ps) < 0.01 && pm == st_perm_p(d40, 40, 20000, 5), "Monte Carlo perm %g vs exact %g", pm, ps);
    CHECK(st_perm_p(d40, 0, 100, 5) == 1, "no pairs: p = 1");

    /* Holm */
    double p[] = {0.01, 0.04, 0.03, 0.005}, want[] = {0.03, 0.06, 0.06, 0.02}, adj[4];
    st_holm(p, 4, adj);
    for (int i = 0; i < 4; i++) CHECK(close_to(adj[i], want[i], 1e-15), "holm[%d] = %g, want %g", i, adj[i], want[i]);
    double big[] = {0.5, 0.6}, adjb[2];
    st_holm(big, 2, adjb);
    CHECK(adjb[0] == 1 && adjb[1] == 1, "holm caps at 1: %g %g", adjb[0], adjb[1]);

    /* bootstrap: deterministic for a seed, different for another, degenerate on constants */
    enum { N = 400 };
    static double x[N], y[N];
    static int g[N];
    double s = 0, ss = 0;
    for (int i = 0; i < N; i++) {
        x[i] = 3 + test_normal();
        g[i] = i % 3;
        s += x[i];
    }
    double mean = s / N;
    for (int i = 0; i < N; i++) ss += (x[i] - mean) * (x[i] - mean);
    double se = sqrt(ss / (N - 1) / N), l1, h1, l2, h2, l3, h3;
    double e1 = st_boot_mean(x, NULL, N, 4000, 7, 0.95, &l1, &h1);
    double e2 = st_boot_mean(x, NULL, N, 4000, 7, 0.95, &l2, &h2);
    st_boot_mean(x, NULL, N, 4000, 8, 0.95, &l3, &h3);
    CHECK(e1 == e2 && l1 == l2 && h1 == h2, "same seed, same interval");
    CHECK(l1 != l3 || h1 != h3, "another seed, another interval");
    CHECK(close_to(e1, mean, 1e-12), "estimate is the mean: %g vs %g", e1, mean);
    CHECK(fabs((h1 - l1) / (2 * z * se) - 1) < 0.12, "width %g vs normal theory %g", h1 - l1, 2 * z * se);
    CHECK(l1 < mean && mean < h1, "the mean inside its interval");
    /* stratified: the mean of group means */
    double gm[3] = {0}, gn[3] = {0};
    for (int i = 0; i < N; i++) gm[g[i]] += x[i], gn[g[i]]++;
    double want_s = (gm[0] / gn[0] + gm[1] / gn[1] + gm[2] / gn[2]) / 3;
    CHECK(close_to(st_boot_mean(x, g, N, 100, 1, 0.95, &l1, &h1), want_s, 1e-12), "stratified estimate");
    for (int i = 0; i < N; i++) y[i] = 0.25;
    double ec = st_boot_mean(y, NULL, N, 500, 3, 0.95, &l1, &h1);
    CHECK(ec == 0.25 && l1 == 0.25 && h1 == 0.25, "constant data: [%g, %g]", l1, h1);
    /* paired: a shift of 0.5 plus noise is found, with its interval around it */
    for (int i = 0; i < N; i++) y[i] = x[i] - 0.5 + 0.1 * test_normal();
    double d = st_boot_paired(x, y, N, 2000, ST_SEED, 0.95, &l1, &h1);
    CHECK(l1 < d && d < h1 && l1 > 0.45 && h1 < 0.55, "paired diff %g [%g, %g]", d, l1, h1);
    CHECK(st_paired_p(x, y, N) < 1e-50, "a clear shift is significant: p %g", st_paired_p(x, y, N));
    /* the cell interval: Wilson on binary, bootstrap on graded */
    double bin[10] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    double m = st_interval(bin, NULL, 10, 1, &l1, &h1);
    CHECK(m == 0.5 && close_to(l1, 0.236593090, 1e-8), "binary cell uses Wilson: %g [%g, %g]", m, l1, h1);
    bin[0] = 0.5;
    m = st_interval(bin, NULL, 10, 1, &l1, &h1);
    CHECK(close_to(m, 0.45, 1e-15) && l1 < m && m < h1 && !close_to(l1, 0.236593090, 1e-3), "graded cell: %g [%g, %g]", m,
          l1, h1);
    /* balanced groups are pooled: the same as no groups (one case per depth must not give a
     * zero-width interval) */
    int g10[10] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
    double a10[10] = {0, 1, 0, 0, 1, 1, 0, 1, 0, 0}, ml, mh;
    m = st_interval(a10, g10, 10, 1, &l1, &h1);
    st_wilson(4, 10, ST_Z95, &ml, &mh);
    CHECK(m == 0.4 && l1 == ml && h1 == mh, "balanced binary groups use Wilson: %g [%g, %g]", m, l1, h1);
    int g5[5] = {0, 1, 2, 3, 4};
    double c5[5] = {0.1, 0.9, 0.4, 0.7, 0.2};
    m = st_interval(c5, g5, 5, 1, &l1, &h1);
    CHECK(close_to(m, 0.46, 1e-15) && h1 - l1 > 0.2, "one case per group: %g [%g, %g]", m, l1, h1);
    /* unequal groups: the stratified estimate and its small-n interval */
    int gu[6] = {0, 0, 0, 0, 1, 1};
    double xu[6] = {1, 1, 1, 0, 0, 0.5};
    double su = st_boot_t(xu, gu, 6, ST_BOOT_B, ST_SEED, 0.95, &ml, &mh);
    m = st_interval(xu, gu, 6, 1, &l1, &h1);
    CHECK(close_to(m, 0.5, 1e-15) && m == su && l1 == ml && h1 == mh, "unequal groups: %g [%g, %g]", m, l1, h1);
    double zeros[4] = {0, 0, 0, 0};
    m = st_interval(zeros, NULL, 4, 0, &l1, &h1);
    CHECK(m == 0 && l1 == 0 && h1 == 0, "a measurement of zeros is not a proportion: [%g, %g]", l1, h1);

    /* Student's t quantiles (tables): df 1, 4, 14, 100 */
    double tq_df[] = {1, 4, 14, 100}, tq_want[] = {12.706204736174707, 2.7764451051977934, 2.1447866879169273,
                                                   1.9839715184496334};
    for (int i = 0; i < 4; i++)
        CHECK(close_to(st_t_quantile(0.975, (int)tq_df[i]), tq_want[i], 1e-10), "t(0.975, %g) = %.15g", tq_df[i],
              st_t_quantile(0.975, (int)tq_df[i]));
    CHECK(close_to(st_t_quantile(0.025, 4), -tq_want[1], 1e-10), "t quantiles are symmetric");

    /* columns with different case counts (issue 27): binary scores keep a Wilson interval.
     * Equal counts: 6/6 is [60.97%, 100%]; unequal (1 and 5 cases): the mean of the two
     * columns, Wilson on the effective size 2^2 / (1/1 + 1/5) = 3.33 */
    double ones[6] = {1, 1, 1, 1, 1, 1};
    int g33[6] = {0, 0, 0, 1, 1, 1}, g15[6] = {0, 1, 1, 1, 1, 1};
    m = st_interval(ones, g33, 6, 1, &l1, &h1);
    CHECK(m == 1 && close_to(l1, 6 / (6 + z2), 1e-14) && h1 == 1, "6/6 in two equal columns: %g [%g, %g]", m, l1, h1);
    CHECK(fabs(100 * l1 - 61.0) < 0.05, "6/6: lower bound %.2f%%, want 61.0", 100 * l1);
    m = st_interval(ones, g15, 6, 1, &l1, &h1);
    double neff = 4 / (1 + 0.2);
    CHECK(m == 1 && close_to(l1, neff / (neff + z2), 1e-14) && h1 == 1, "6/6 in columns of 1 and 5: %g [%g, %g]", m, l1, h1);
    double mix[6] = {0, 1, 1, 0, 1, 1};   /* column 0: 0/1, column 1: 4/5 -> 0.4 */
    m = st_interval(mix, g15, 6, 1, &l1, &h1);
    st_wilson_p(0.4, neff, z, &ml, &mh);
    CHECK(close_to(m, 0.4, 1e-15) && l1 == ml && h1 == mh && l1 < m && m < h1, "0/1 and 4/5: %g [%g, %g]", m, l1, h1);
    /* graded values, a column of one case: the value and its interval of one estimator */
    for (int t = 0; t < 200; t++) {
        int n = test_int(2, 12), gs[16], G = test_int(2, n < 4 ? n : 4);
        double xs[16], gsum[4] = {0}, gcnt[4] = {0};
        for (int i = 0; i < n; i++) {
            gs[i] = i < G ? i : test_int(0, G - 1);   /* every group present, some of one case */
            xs[i] = test_int(0, 3) ? test_unif() : (double)test_int(0, 1);
            gsum[gs[i]] += xs[i], gcnt[gs[i]]++;
        }
        double want = 0;
        for (int k = 0; k < G; k++) want += gsum[k] / gcnt[k] / G;
        int score = test_int(0, 1);
        m = st_interval(xs, gs, n, score, &l1, &h1);
        CHECK(close_to(m, want, 1e-12), "value %g, mean of group means %g", m, want);
        CHECK(isnan(l1) || (l1 <= m && m <= h1), "value %g outside its interval [%g, %g] (n %d, %d groups)", m, l1, h1, n, G);
        CHECK(!isnan(l1) || n == G, "no interval for %d values in %d groups", n, G);
    }
    m = st_interval((double[]){0.692}, NULL, 1, 0, &l1, &h1);
    CHECK(m == 0.692 && isnan(l1) && isnan(h1), "one value has no interval: %g [%g, %g]", m, l1, h1);

    /* coverage by simulation (docs/statistics.md; test_stats --coverage prints the table):
     * the percentile bootstrap these intervals replace covered 85% at n = 5 */
    double cov[3][2][3];
    /* fixed seeds per setting (not the test's): the same simulation for every seed */
    if (test_seed_only("the coverage simulation")) return check_done("test_stats");
    coverage(cov, COV_REPS);
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2; k++)
            for (int p2 = 0; p2 < 2; p2++) {
                double want_lo = d == 1 ? 0.90 : 0.93;   /* exponential (skewness 2) at n = 5: 0.92 */
                CHECK(cov[d][k][p2] >= want_lo && cov[d][k][p2] <= 0.98, "coverage %s n=%d %s: %.3f", cov_dist[d],
                      cov_n[k], p2 ? "paired" : "mean", cov[d][k][p2]);
            }
    return check_done("test_stats");
}
