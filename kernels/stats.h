/* Statistics for verdicts: how sure a table can be of a mean, and of a difference
 * between two methods that saw the same cases (docs/statistics.md).
 *
 *   Wilson        95% interval of a proportion (binary scores); of a mean of group
 *                 proportions with the groups' effective sample size
 *   small-n       the interval of a mean of graded values: the studentised bootstrap
 *   interval      (bootstrap-t, also stratified: the mean of group means, each group
 *                 resampled within itself), widened to at least Student's t-interval;
 *                 the percentile bootstrap it replaced covered 85% at n = 5
 *   paired        the mean difference of paired values and its small-n interval
 *   sign test     exact two-sided binomial p on the signs of paired differences; on
 *                 binary scores this is the exact McNemar test (discordant pairs)
 *   permutation   exact paired sign-flip test of a mean difference
 *   Holm          step-down adjustment of a family of p-values
 *
 * Every resampling is driven by splitmix64 from a fixed seed: same inputs, same numbers. */
#ifndef KV_STATS_H
#define KV_STATS_H
#include <stdint.h>

#define ST_Z95 1.959963984540054    /* the 97.5% normal quantile */
#define ST_BOOT_B 2000              /* resamples behind every bootstrap interval of a report */
#define ST_SEED 0x6b7662656e6368ULL /* "kvbench": the reports' fixed bootstrap seed */

/* splitmix64: the next 64-bit value of state *s. */
uint64_t st_rng(uint64_t *s);
/* A draw in [0, n) from the top 32 bits: (r >> 32) * n >> 32. */
int st_draw(uint64_t *s, int n);

/* Wilson score interval for k successes in n trials at normal quantile z; NAN when n = 0. */
void st_wilson(int k, int n, double z, double *lo, double *hi);

/* The same for a proportion p of an effective sample size n (not an integer for a mean of
 * group proportions: n = G^2 / sum_k 1/n_k, Kish's effective size for equal weights). */
void st_wilson_p(double p, double n, double z, double *lo, double *hi);

/* The q-quantile of Student's t with df degrees of freedom (df >= 1), from the
 * regularised incomplete beta function, to ~1e-12. */
double st_t_quantile(double q, int df);

/* The q-quantile (type 7, linear between order statistics) of sorted s[0..n). */
double st_quantile(const double *s, int n, double q);

/* Percentile bootstrap interval (level, e.g. 0.95) of the mean of group means of x[0..n):
 * x[i] belongs to group g[i] in [0, n) (g NULL: one group); each resample draws, per
 * group, as many values as it has, with replacement, from that group. B resamples from
 * seed. Returns the statistic on the data (NAN when n = 0; lo = hi = NAN too). */
double st_boot_mean(const double *x, const int *g, int n, int B, uint64_t seed, double level, double *lo, double *hi);

/* The small-n interval (level, e.g. 0.95) of the mean of group means of x[0..n) (g as
 * above; NULL: one group). The standard error: sqrt(sum_k v_k / n_k) / G, v_k the
 * sample variance of group k (a group of one case takes the pooled within-group
 * variance), df = n - G. Bootstrap-t: B resamples from seed, each group drawn within
 * itself as in st_boot_mean; t* = (est* - est) / se*, resamples with se* = 0 (every group
 * drawn as one repeated value; below 1e-9 se, where only rounding is left) left out; [est - t*(1-a/2) se, est - t*(a/2) se], widened to
 * hold est +- t_df(1-a/2) se. Returns est; lo = hi = NAN when df = 0 (one case per group,
 * nothing to estimate the spread from); lo = hi = est when every group is constant. */
double st_boot_t(const double *x, const int *g, int n, int B, uint64_t seed, double level, double *lo, double *hi);

/* Paired difference mean(a - b) over n pairs with its small-n interval (st_boot_t of the
 * differences: pairs resampled together). */
double st_boot_paired(const double *a, const double *b, int n, int B, uint64_t seed, double level, double *lo,
                      double *hi);

/* Exact two-sided sign test: npos positive and nneg negative differences (ties dropped
 * before): p = min(1, 2 P(X <= min(npos, nneg))), X ~ Binomial(npos + nneg, 1/2). 1 when
 * there are no discordant pairs. On 0/1 scores this is McNemar's exact test. */
double st_sign_p(int npos, int nneg);
/* The sign test of paired values: counts a[i] > b[i] and a[i] < b[i]. */
double st_paired_p(const double *a, const double *b, int n);

/* Paired permutation (sign-flip) test of mean(d) = 0, two-sided: the share of the 2^m
 * sign assignments of the m non-zero |d[i]| whose |sum| reaches the observed |sum| (ties
 * within 1e-9 of sum |d[i]| count). Exact enumeration when m <= ST_PERM_EXACT, else B random
 * assignments from seed, p = (hits + 1) / (B + 1). 1 when m = 0. On 0/1 differences the
 * exact test is the sign test. */
#define ST_PERM_EXACT 20
#define ST_PERM_B 10000
double st_perm_p(const double *d, int n, int B, uint64_t seed);

/* Holm's step-down adjusted p-values of p[0..m) into adj (may alias p): with p sorted
 * ascending p(1) <= .. <= p(m), adj(i) = max over j <= i of min(1, (m - j + 1) p(j)). */
void st_holm(const double *p, int m, double *adj);

/* 1 if every x is 0 or 1 (a binary score). */
int st_is_binary(const double *x, int n);
/* A cell's value (the mean of group means, g NULL: one group) and 95% interval, both of
 * the same estimator. Binary scores (score: 1; a measurement of zeros is not a
 * proportion): Wilson, on the effective sample size when the groups differ in size.
 * Otherwise st_boot_t (ST_BOOT_B resamples, ST_SEED): over the pooled cases when the
 * groups are of equal size (the value is then the plain mean), else stratified; then
 * clipped to what the quantity can be: lo >= 0 when no value is negative, hi <= 1 for a
 * score. No interval (NAN) for a single case. */
double st_interval(const double *x, const int *g, int n, int score, double *lo, double *hi);

#endif
