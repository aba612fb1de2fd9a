/* Statistics for verdicts; see stats.h. Double precision throughout; binomial tails in
 * log space (lgamma) so n in the thousands stays exact to ~1e-12 relative. */
#include "stats.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t st_rng(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int st_draw(uint64_t *s, int n) { return (int)(((st_rng(s) >> 32) * (uint64_t)n) >> 32); }

void st_wilson_p(double p, double n, double z, double *lo, double *hi) {
    if (!(n > 0) || !(p >= 0 && p <= 1)) {
        *lo = *hi = NAN;
        return;
    }
    double z2 = z * z, den = 1 + z2 / n;
    double mid = (p + z2 / (2.0 * n)) / den, half = z * sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / den;
    *lo = p == 0 ? 0 : fmax(0, mid - half);
    *hi = p == 1 ? 1 : fmin(1, mid + half);
}

void st_wilson(int k, int n, double z, double *lo, double *hi) {
    if (n <= 0 || k < 0 || k > n) {
        *lo = *hi = NAN;
        return;
    }
    st_wilson_p((double)k / n, n, z, lo, hi);
}

/* ln B(a, b) */
static double lbeta(double a, double b) { return lgamma(a) + lgamma(b) - lgamma(a + b); }

/* The continued fraction of I_x(a, b) (modified Lentz), good for x < (a + 1) / (a + b + 2). */
static double beta_cf(double a, double b, double x) {
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double f = d;
    for (int m = 1; m <= 1000; m++) {
        double m2 = 2.0 * m, num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        for (int k = 0; k < 2; k++) {   /* the even step, then the odd one */
            d = 1 + num * d;
            c = 1 + num / c;
            if (fabs(d) < tiny) d = tiny;
            if (fabs(c) < tiny) c = tiny;
            d = 1 / d;
            f *= c * d;
            num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        }
        if (fabs(c * d - 1) < 1e-15) break;
    }
    return f;
}

/* The regularised incomplete beta function I_x(a, b). */
static double ibeta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double front = exp(a * log(x) + b * log1p(-x) - lbeta(a, b));
    if (x < (a + 1) / (a + b + 2)) return front * beta_cf(a, b, x) / a;
    return 1 - exp(b * log1p(-x) + a * log(x) - lbeta(a, b)) * beta_cf(b, a, 1 - x) / b;
}

/* P(T <= t), T ~ Student t with df degrees of freedom. */
static double t_cdf(double t, int df) {
    double tail = 0.5 * ibeta(df / 2.0, 0.5, df / (df + t * t));
    return t > 0 ? 1 - tail : tail;
}

double st_t_quantile(double q, int df) {
    if (df < 1 || !(q > 0 && q < 1)) return NAN;
    if (q == 0.5) return 0;
    if (q < 0.5) return -st_t_quantile(1 - q, df);
    double a = 0, b = 1;
    while (t_cdf(b, df) < q && b < 1e12) b *= 2;
    for (int i = 0; i < 200 && b - a > 1e-14 * b; i++) {
        double m = 0.5 * (a + b);
        if (t_cdf(m, df) < q) a = m;
        else b = m;
    }
    return 0.5 * (a + b);
}

double st_quantile(const double *s, int n, double q) {
    if (n <= 0) return NAN;
    double h = (n - 1) * q;
    int i = (int)floor(h);
    if (i >= n - 1) return s[n - 1];
    if (i < 0) return s[0];
    return s[i] + (h - i) * (s[i + 1] - s[i]);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double st_boot_mean(const double *x, const int *g, int n, int B, uint64_t seed, double level, double *lo, double *hi) {
    *lo = *hi = NAN;
    if (n <= 0) return NAN;
    /* members of each group, contiguous: order[start[k] .. start[k+1]) */
    int ng = 1;
    for (int i = 0; g && i < n; i++)
        if (g[i] + 1 > ng) ng = g[i] + 1;
    int *start = calloc((size_t)ng + 1, sizeof *start), *order = malloc(sizeof(int) * n), *fill = calloc(ng, sizeof *fill);
    double *stat = malloc(sizeof(double) * (B > 0 ? B : 1));
    double est = NAN;
    if (!start || !order || !fill || !stat) goto done;
    for (int i = 0; i < n; i++) start[(g ? g[i] : 0) + 1]++;
    for (int k = 0; k < ng; k++) start[k + 1] += start[k];
    for (int i = 0; i < n; i++) {
        int k = g ? g[i] : 0;
        order[start[k] + fill[k]++] = i;
    }
    int groups = 0;
    double s = 0;
    for (int k = 0; k < ng; k++) {
        int m = start[k + 1] - start[k];
        if (!m) continue;
        double t = 0;
        for (int j = start[k]; j < start[k + 1]; j++) t += x[order[j]];
        s += t / m, groups++;
    }
    est = s / groups;
    uint64_t st = seed;
    for (int b = 0; b < B; b++) {
        double sum = 0;
        for (int k = 0; k < ng; k++) {
            int m = start[k + 1] - start[k];
            if (!m) continue;
            double t = 0;
            for (int j = 0; j < m; j++) t += x[order[start[k] + st_draw(&st, m)]];
            sum += t / m;
        }
        stat[b] = sum / groups;
    }
    if (B > 0) {
        qsort(stat, B, sizeof *stat, cmp_d);
        *lo = st_quantile(stat, B, (1 - level) / 2);
        *hi = st_quantile(stat, B, 1 - (1 - level) / 2);
    }
done:
    free(start), free(order), free(fill), free(stat);
    return est;
}

/* The estimate (mean of group means) and standard error of values v[0..n) split into
 * groups: member j of group k at v[start[k] + j]. Groups of one take the pooled variance
 * of the others. Constant groups have variance exactly 0 (no rounding left in their sum
 * of squares), so se is exactly 0 when every group is constant. */
static void est_se(const double *v, const int *start, int ng, int groups, double *est, double *se) {
    double s = 0, vsum = 0, ss_all = 0;
    int df = 0;
    for (int k = 0; k < ng; k++) {
        int m = start[k + 1] - start[k];
        if (!m) continue;
        double t = 0, lo = v[start[k]], hi = lo, ss = 0;
        for (int j = start[k]; j < start[k + 1]; j++) t += v[j], lo = fmin(lo, v[j]), hi = fmax(hi, v[j]);
        double mk = t / m;
        for (int j = start[k]; j < start[k + 1] && hi > lo; j++) ss += (v[j] - mk) * (v[j] - mk);
        s += mk;
        if (m > 1) vsum += ss / (m - 1) / m, ss_all += ss, df += m - 1;
    }
    double pooled = df ? ss_all / df : 0;
    for (int k = 0; k < ng; k++)
        if (start[k + 1] - start[k] == 1) vsum += pooled;
    *est = s / groups;
    *se = sqrt(vsum) / groups;
}

double st_boot_t(const double *x, const int *g, int n, int B, uint64_t seed, double level, double *lo, double *hi) {
    *lo = *hi = NAN;
    if (n <= 0) return NAN;
    int ng = 1;
    for (int i = 0; g && i < n; i++)
        if (g[i] + 1 > ng) ng = g[i] + 1;
    int *start = calloc((size_t)ng + 1, sizeof *start), *fill = calloc(ng, sizeof *fill);
    double *v = calloc((size_t)n, sizeof(double)), *r = calloc((size_t)n, sizeof(double)), *t = malloc(sizeof(double) * (B > 0 ? B : 1));
    double est = NAN, se;
    if (!start || !fill || !v || !r || !t) goto done;
    for (int i = 0; i < n; i++) start[(g ? g[i] : 0) + 1]++;
    for (int k = 0; k < ng; k++) start[k + 1] += start[k];
    for (int i = 0; i < n; i++) {
        int k = g ? g[i] : 0;
        v[start[k] + fill[k]++] = x[i];
    }
    int groups = 0;
    for (int k = 0; k < ng; k++) groups += start[k + 1] > start[k];
    est_se(v, start, ng, groups, &est, &se);
    int df = n - groups;
    if (df < 1) goto done;   /* one case per group: no spread to go by */
    double a = (1 - level) / 2, tq = st_t_quantile(1 - a, df);
    *lo = est - tq * se, *hi = est + tq * se;
    if (se == 0) goto done;
    uint64_t st = seed;
    int kept = 0;
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < ng; k++) {
            int m = start[k + 1] - start[k];
            for (int j = 0; j < m; j++) r[start[k] + j] = v[start[k] + st_draw(&st, m)];
        }
        double e, s;
        est_se(r, start, ng, groups, &e, &s);
        if (s > 1e-9 * se) t[kept++] = (e - est) / s;   /* se* = 0 up to rounding: every group drawn as one value */
    }
    if (kept) {
        qsort(t, kept, sizeof *t, cmp_d);
        *lo = fmin(*lo, est - st_quantile(t, kept, 1 - a) * se);
        *hi = fmax(*hi, est - st_quantile(t, kept, a) * se);
    }
done:
    free(start), free(fill), free(v), free(r), free(t);
    return est;
}

double st_boot_paired(const double *a, const double *b, int n, int B, uint64_t seed, double level, double *lo,
                      double *hi) {
    double *d = malloc(sizeof(double) * (n > 0 ? n : 1));
    if (!d) {
        *lo = *hi = NAN;
        return NAN;
    }
    for (int i = 0; i < n; i++) d[i] = a[i] - b[i];
    double m = st_boot_t(d, NULL, n, B, seed, level, lo, hi);
    free(d);
    return m;
}

/* ln C(n, k) */
static double lchoose(int n, int k) { return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0); }

double st_sign_p(int npos, int nneg) {
    int n = npos + nneg, k = npos < nneg ? npos : nneg;
    if (n <= 0) return 1;
    /* P(X <= k) = sum_i C(n, i) / 2^n, summed from the largest term down for accuracy */
    double tail = 0, ln2n = n * log(2.0);
    for (int i = k; i >= 0; i--) {
        double t = exp(lchoose(n, i) - ln2n);
        tail += t;
        if (t < tail * 1e-18) break;
    }
    double p = 2 * tail;
    return p > 1 ? 1 : p;
}

double st_paired_p(const double *a, const double *b, int n) {
    int pos = 0, neg = 0;
    for (int i = 0; i < n; i++) pos += a[i] > b[i], neg += a[i] < b[i];
    return st_sign_p(pos, neg);
}

double st_perm_p(const double *d, int n, int B, uint64_t seed) {
    double *a = malloc(sizeof *a * (n > 0 ? n : 1)), obs = 0, tot = 0;
    int m = 0;
    if (!a) return 1;
    for (int i = 0; i < n; i++)
        if (d[i] != 0) a[m++] = fabs(d[i]), obs += d[i], tot += fabs(d[i]);
    /* ties: sums equal in exact arithmetic count as hits; 1e-9 of sum |d| covers the
     * rounding the Gray-code update accumulates over 2^20 steps (1e-12 did not), and an
     * observed sum that is 0 but for rounding (0.1 + 0.2 - 0.3) reaches every sum: p = 1 */
    double target = fabs(obs) - 1e-9 * tot;
    double p = 1;
    if (m > 0 && m <= ST_PERM_EXACT) {
        /* Gray code: one sign flips per step; s[i] = +1 / -1 */
        signed char *sg = malloc((size_t)m);
        if (sg) {
            memset(sg, 1, (size_t)m);
            double sum = tot;
            long long hits = fabs(sum) >= target, total = 1LL << m;
            for (long long k = 1; k < total; k++) {
                int i = __builtin_ctzll((unsigned long long)k);
                sum -= 2.0 * sg[i] * a[i];
                sg[i] = (signed char)-sg[i];
                hits += fabs(sum) >= target;
            }
            p = (double)hits / (double)total;
            free(sg);
        }
    } else if (m > 0) {
        uint64_t st = seed, bits = 0;
        long long hits = 0;
        for (int b = 0; b < B; b++) {
            double sum = 0;
            for (int i = 0; i < m; i++) {
                if (i % 64 == 0) bits = st_rng(&st);
                sum += (bits >> (i % 64) & 1) ? a[i] : -a[i];
            }
            hits += fabs(sum) >= target;
        }
        p = (hits + 1.0) / (B + 1.0);
    }
    free(a);
    return p;
}

static const double *holm_p;
static int cmp_idx(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    double x = holm_p[i], y = holm_p[j];
    if (x != y) return (x > y) - (x < y);
    return (i > j) - (i < j);
}

void st_holm(const double *p, int m, double *adj) {
    if (m <= 0) return;
    int *idx = malloc(sizeof(int) * m);
    double *tmp = malloc(sizeof(double) * m);
    if (!idx || !tmp) {
        for (int i = 0; i < m; i++) adj[i] = 1;   /* no claim without the arithmetic */
        free(idx), free(tmp);
        return;
    }
    for (int i = 0; i < m; i++) idx[i] = i;
    holm_p = p;
    qsort(idx, m, sizeof *idx, cmp_idx);
    double run = 0;
    for (int r = 0; r < m; r++) {
        double v = (m - r) * p[idx[r]];
        if (v > 1) v = 1;
        if (v > run) run = v;
        tmp[idx[r]] = run;
    }
    memcpy(adj, tmp, sizeof(double) * m);
    free(idx), free(tmp);
}

int st_is_binary(const double *x, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] != 0 && x[i] != 1) return 0;
    return 1;
}

double st_interval(const double *x, const int *g, int n, int score, double *lo, double *hi) {
    /* Groups of equal size: the mean of group means is the plain mean, and resampling
     * within groups of one or two cases would hide the spread, so the groups are pooled.
     * Unequal groups: the value is the mean of group means, and so is its interval's. */
    int ng = 1, balanced = 1;
    for (int i = 0; g && i < n; i++)
        if (g[i] + 1 > ng) ng = g[i] + 1;
    int *size = calloc((size_t)ng, sizeof *size);
    if (!size) {
        *lo = *hi = NAN;
        return NAN;
    }
    for (int i = 0; i < n; i++) size[g ? g[i] : 0]++;
    int first = -1, groups = 0;
    double inv = 0;
    for (int k = 0; k < ng; k++) {
        if (!size[k]) continue;
        if (first < 0) first = size[k];
        balanced &= size[k] == first;
        groups++, inv += 1.0 / size[k];
    }
    free(size);
    const int *gg = balanced ? NULL : g;
    if (n > 0 && score && st_is_binary(x, n)) {
        double lb, hb, p = st_boot_mean(x, gg, n, 0, 0, 0.95, &lb, &hb);   /* B = 0: the estimate alone */
        st_wilson_p(p, balanced ? n : groups * (double)groups / inv, ST_Z95, lo, hi);
        return p;
    }
    double est = st_boot_t(x, gg, n, ST_BOOT_B, ST_SEED, 0.95, lo, hi), mn = x[0];
    /* Within what the quantity can be: every cell holds a nonnegative quantity (scores,
     * bytes, seconds, NLL, KL, top-1), and a task score is at most 1. Clipping keeps every
     * value the interval held that the mean can take. */
    for (int i = 1; i < n; i++) mn = fmin(mn, x[i]);
    if (mn >= 0 && *lo < 0) *lo = 0;
    if (score && *hi > 1) *hi = 1;
    return est;
}
