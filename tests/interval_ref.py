"""The cells' 95% intervals, written again in numpy for the report references
(report_tables_ref.py, report_compare_ref.py, test_report.sh), from docs/statistics.md and
not from kernels/stats.c: Wilson as the roots of (p - q)^2 = z^2 q (1 - q) / n by bisection,
Student's t quantile from its integrated density, and the bootstrap-t with the reports'
splitmix64 draws (the whole stream at once: state_i = seed + i * golden, mixed).

  interval(score, x, g)  value, lo, hi of a cell: x in the report's order, g its groups
  paired(d)              value, lo, hi of a mean paired difference"""
import math

import numpy as np

Z = 1.959963984540054
SEED = 0x6B7662656E6368
B = 2000
_TQ = {}


def t_quantile(q, df):
    """Student's t: the density integrated by Simpson's rule (4000 panels), inverted by
    bisection; cached per df."""
    if (q, df) in _TQ:
        return _TQ[q, df]
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(t):
        u = np.linspace(0.0, t, 4001)
        f = c * (1 + u * u / df) ** (-(df + 1) / 2)
        w = np.ones(4001)
        w[1:-1:2], w[2:-1:2] = 4, 2
        return 0.5 + (w * f).sum() * (t / 4000) / 3

    a, b = 0.0, 1.0
    while cdf(b) < q:
        b *= 2
    for _ in range(64):
        m = (a + b) / 2
        a, b = (m, b) if cdf(m) < q else (a, m)
    _TQ[q, df] = (a + b) / 2
    return _TQ[q, df]


def draws(seed, sizes, reps):
    """The bootstrap's indices: reps x sum(sizes), a draw in [0, m) per slot of a group of m."""
    with np.errstate(over="ignore"):
        k = np.arange(1, reps * sum(sizes) + 1, dtype=np.uint64)
        z = np.uint64(seed) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    m = np.repeat(np.array(sizes, dtype=np.uint64), sizes)
    return (((z >> np.uint64(32)).reshape(reps, -1) * m) >> np.uint64(32)).astype(np.int64)


def est_se(groups):
    """groups: list of arrays (reps x m_k). Mean of group means and its standard error:
    group variances (ddof 1) over their size; a group of one takes the pooled within-group
    variance; a constant group exactly 0."""
    means, var, ss_all, df = [], 0.0, 0.0, 0
    singles = 0
    for v in groups:
        m = v.shape[1]
        mk = v.sum(axis=1) / m
        const = v.min(axis=1) == v.max(axis=1)
        ss = np.where(const, 0.0, ((v - mk[:, None]) ** 2).sum(axis=1))
        means.append(mk)
        if m > 1:
            var = var + ss / (m - 1) / m
            ss_all = ss_all + ss
            df += m - 1
        else:
            singles += 1
    pooled = ss_all / df if df else 0.0
    return sum(means) / len(groups), np.sqrt(var + pooled * singles) / len(groups)


def boot_t(x, g=None):
    """Bootstrap-t of the mean of group means (groups in ascending key order, each resampled
    within itself; resamples with se* = 0 left out), widened to est +- t_{n-G} se."""
    x = np.asarray(x, dtype=float)
    keys = sorted(set(g)) if g is not None else [0]
    members = [x[[i for i in range(len(x)) if (g[i] if g is not None else 0) == k]] for k in keys]
    est, se = est_se([m[None, :] for m in members])
    est, se = float(np.atleast_1d(est)[0]), float(np.atleast_1d(se)[0])
    df = len(x) - len(members)
    if df < 1:
        return est, math.nan, math.nan
    tq = t_quantile(0.975, df)
    lo, hi = est - tq * se, est + tq * se
    if se == 0:
        return est, lo, hi
    sizes = [len(m) for m in members]
    idx = draws(SEED, sizes, B)
    res, off = [], 0
    for m in members:
        res.append(m[idx[:, off:off + len(m)]])
        off += len(m)
    e, s = est_se(res)
    keep = s > 1e-9 * se   # se* = 0 up to rounding: every group drawn as one value
    t = np.sort((e[keep] - est) / s[keep])
    if len(t):
        lo = min(lo, est - np.quantile(t, 0.975) * se)
        hi = max(hi, est - np.quantile(t, 0.025) * se)
    return est, lo, hi


def wilson(p, n):
    f = lambda q: (p - q) ** 2 - Z * Z * q * (1 - q) / n

    def root(a, b):
        for _ in range(200):
            m = (a + b) / 2
            if (f(a) > 0) == (f(m) > 0):
                a = m
            else:
                b = m
        return (a + b) / 2

    return (0.0 if p == 0 else root(0.0, p)), (1.0 if p == 1 else root(p, 1.0))


def interval(score, x, g):
    """A cell: the mean of group means and its interval. Binary scores: Wilson (groups of
    different sizes: on the effective size G^2 / sum 1/n_k). Else bootstrap-t, over the
    pooled values in their order when the groups are of equal size, else stratified;
    lo >= 0 when no value is negative, hi <= 1 for a score."""
    sizes = {k: list(g).count(k) for k in set(g)}
    balanced = len(set(sizes.values())) == 1
    if score and all(v in (0.0, 1.0) for v in x):
        means = [sum(v for v, h in zip(x, g) if h == k) / sizes[k] for k in sorted(sizes)]
        p = sum(x) / len(x) if balanced else sum(means) / len(means)
        n = len(x) if balanced else len(sizes) ** 2 / sum(1 / m for m in sizes.values())
        return (p,) + wilson(p, n)
    est, lo, hi = boot_t(x, None if balanced else list(g))
    if not math.isnan(lo):
        if min(x) >= 0:
            lo = max(lo, 0.0)
        if score:
            hi = min(hi, 1.0)
    return est, lo, hi


def paired(d):
    return boot_t(d)
