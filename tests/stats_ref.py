"""Independent Python reference for kernels/stats.c (tests/test_stats_ref.sh), standard
library only: Wilson bounds as the roots of (p - q)^2 = z^2 q (1 - q) / n by bisection,
exact sign-test / McNemar p-values with integer binomials (fractions), Holm from its
definition, Student's t quantiles from the integrated density, and the bootstraps
(percentile, and the small-n bootstrap-t interval of the cells and paired differences)
with the same splitmix64 draws and type-7 quantiles.
  stats_ref.py make --seed S --cases FILE --ref FILE
  stats_ref.py compare --ref FILE --got FILE
"""
import argparse
import itertools
import math
import random
import sys
from fractions import Fraction

Z = 1.959963984540054
M64 = (1 << 64) - 1


def wilson(k, n):
    p = k / n
    f = lambda q: (p - q) ** 2 - Z * Z * q * (1 - q) / n
    def root(a, b):   # f(a) and f(b) of opposite signs (or a root at an end)
        for _ in range(200):
            m = (a + b) / 2
            if (f(a) > 0) == (f(m) > 0):
                a = m
            else:
                b = m
        return (a + b) / 2
    lo = 0.0 if k == 0 else root(0.0, p)
    hi = 1.0 if k == n else root(p, 1.0)
    return [lo, hi]


def sign_p(a, b):
    n, k = a + b, min(a, b)
    if n == 0:
        return [1.0]
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)
    return [float(min(Fraction(1), 2 * tail))]


def holm(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    adj, run = [0.0] * m, 0.0
    for r, i in enumerate(order):
        run = max(run, min(1.0, (m - r) * p[i]))
        adj[i] = run
    return adj


class SplitMix:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def draw(self, n):
        return ((self.next() >> 32) * n) >> 32


def perm_p(d, B, seed):
    """Paired sign-flip permutation p: exact over every sign vector (itertools) for up to
    20 non-zero differences, else the same splitmix64 bits as the C code."""
    a = [abs(x) for x in d if x != 0]
    m = len(a)
    if m == 0:
        return 1.0
    target = abs(sum(x for x in d if x != 0)) - 1e-9 * sum(a)   # ties: within 1e-9 of sum |d|
    if m <= 20:
        hits = sum(abs(sum(s * x for s, x in zip(signs, a))) >= target
                   for signs in itertools.product((1, -1), repeat=m))
        return hits / 2 ** m
    rng, hits, bits = SplitMix(seed), 0, 0
    for _ in range(B):
        tot = 0.0
        for i in range(m):
            if i % 64 == 0:
                bits = rng.next()
            tot += a[i] if (bits >> (i % 64)) & 1 else -a[i]
        hits += abs(tot) >= target
    return (hits + 1) / (B + 1)


def quantile(s, q):
    h = (len(s) - 1) * q
    i = math.floor(h)
    if i >= len(s) - 1:
        return s[-1]
    return s[i] + (h - i) * (s[i + 1] - s[i])


def boot(B, seed, x, g):
    groups = sorted(set(g))
    members = {k: [x[i] for i in range(len(x)) if g[i] == k] for k in groups}
    est = sum(sum(members[k]) / len(members[k]) for k in groups) / len(groups)
    rng, stats = SplitMix(seed), []
    for _ in range(B):
        tot = 0.0
        for k in groups:
            m = members[k]
            t = 0.0
            for _ in range(len(m)):
                t += m[rng.draw(len(m))]
            tot += t / len(m)
        stats.append(tot / len(groups))
    stats.sort()
    return [est, quantile(stats, 0.025), quantile(stats, 0.975)]


def t_quantile(q, df):
    """Student's t quantile from its density, integrated here (Simpson on 20000 panels of
    [0, t]) and inverted by bisection: no incomplete beta function, unlike the C code."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    dens = lambda t: c * (1 + t * t / df) ** (-(df + 1) / 2)
    def cdf(t):
        m, h = 20000, t / 20000
        s = dens(0) + dens(t) + sum((4 if i % 2 else 2) * dens(i * h) for i in range(1, m))
        return 0.5 + s * h / 3
    if q < 0.5:
        return -t_quantile(1 - q, df)
    a, b = 0.0, 1.0
    while cdf(b) < q:
        b *= 2
    for _ in range(60):
        mid = (a + b) / 2
        a, b = (mid, b) if cdf(mid) < q else (a, mid)
    return (a + b) / 2


TQ = {}


def est_se(groups):
    """mean of group means and its standard error: group variances (ddof 1), a group of
    one taking the pooled within-group variance; constant groups exactly 0."""
    means, var, ss_all, df = [], [], 0.0, 0
    for m in groups:
        mk = sum(m) / len(m)
        ss = 0.0 if min(m) == max(m) else sum((x - mk) ** 2 for x in m)
        means.append(mk)
        var.append(None if len(m) == 1 else ss / (len(m) - 1) / len(m))
        if len(m) > 1:
            ss_all += ss
            df += len(m) - 1
    pooled = ss_all / df if df else 0.0
    vs = sum(v for v in var if v is not None) + pooled * sum(v is None for v in var)
    return sum(means) / len(groups), math.sqrt(vs) / len(groups)


def boot_t(B, seed, x, g):
    """The small-n interval: bootstrap-t (resamples with se* = 0 left out) widened to
    Student's t on n - G degrees of freedom."""
    keys = sorted(set(g))
    groups = [[x[i] for i in range(len(x)) if g[i] == k] for k in keys]
    est, se = est_se(groups)
    df = len(x) - len(groups)
    if df < 1:
        return [est, math.nan, math.nan]
    if df not in TQ:
        TQ[df] = t_quantile(0.975, df)
    lo, hi = est - TQ[df] * se, est + TQ[df] * se
    if se == 0:
        return [est, lo, hi]
    rng, ts = SplitMix(seed), []
    for _ in range(B):
        r = [[m[rng.draw(len(m))] for _ in range(len(m))] for m in groups]
        e, s = est_se(r)
        if s > 0:
            ts.append((e - est) / s)
    if ts:
        ts.sort()
        lo, hi = min(lo, est - quantile(ts, 0.975) * se), max(hi, est - quantile(ts, 0.025) * se)
    return [est, lo, hi]


def interval(score, x, g):
    """A cell: Wilson (effective size) on binary scores, else boot_t, pooled when the
    groups are of equal size, clipped to the quantity's range."""
    sizes = {k: g.count(k) for k in set(g)}
    balanced = len(set(sizes.values())) == 1
    gg = [0] * len(x) if balanced else g
    if score and all(v in (0.0, 1.0) for v in x):
        keys = sorted(set(gg))
        p = sum(sum(v for v, h in zip(x, gg) if h == k) / gg.count(k) for k in keys) / len(keys)
        n = len(x) if balanced else len(keys) ** 2 / sum(1 / sizes[k] for k in keys)
        return [p] + wilson_p(p, n)
    est, lo, hi = boot_t(2000, 0x6b7662656e6368, x, gg)
    if not math.isnan(lo):   # within what the quantity can be: nonnegative, a score at most 1
        lo = max(lo, 0.0) if min(x) >= 0 else lo
        hi = min(hi, 1.0) if score else hi
    return [est, lo, hi]


def wilson_p(p, n):
    f = lambda q: (p - q) ** 2 - Z * Z * q * (1 - q) / n
    def root(a, b):
        for _ in range(200):
            m = (a + b) / 2
            if (f(a) > 0) == (f(m) > 0):
                a = m
            else:
                b = m
        return (a + b) / 2
    return [0.0 if p == 0 else root(0.0, p), 1.0 if p == 1 else root(p, 1.0)]


def make(args):
    rnd = random.Random(args.seed)
    cases, ref = [], []
    for _ in range(60):
        n = rnd.randint(1, 300)
        k = rnd.choice([0, n, rnd.randint(0, n)])
        cases.append(f"wilson {k} {n}")
        ref.append(wilson(k, n))
    for _ in range(60):
        a, b = rnd.randint(0, 400), rnd.randint(0, 60)
        if rnd.random() < 0.5:
            a, b = b, a
        cases.append(f"sign {a} {b}")
        ref.append(sign_p(a, b))
    for _ in range(20):
        p = [rnd.choice([rnd.random(), rnd.random() * 0.01, 0.05]) for _ in range(rnd.randint(1, 9))]
        cases.append("holm %d %s" % (len(p), " ".join(repr(v) for v in p)))
        ref.append(holm(p))
    for _ in range(8):
        n, B, seed = rnd.randint(1, 60), rnd.randint(50, 400), rnd.getrandbits(64)
        x = [rnd.choice([0.0, 1.0, round(rnd.gauss(0, 2), 6)]) for _ in range(n)]
        g = [rnd.randint(0, 3) for _ in range(n)]
        cases.append("boot %d %d %d %s %s" % (B, seed, n, " ".join(repr(v) for v in x), " ".join(map(str, g))))
        ref.append(boot(B, seed, x, g))
    for _ in range(8):
        n, B, seed = rnd.randint(1, 60), rnd.randint(50, 400), rnd.getrandbits(64)
        a = [float(rnd.randint(0, 1)) for _ in range(n)]
        b = [float(rnd.randint(0, 1)) if rnd.random() < 0.5 else a[i] for i in range(n)]
        d = [a[i] - b[i] for i in range(n)]
        pos, neg = sum(v > 0 for v in d), sum(v < 0 for v in d)
        cases.append("paired %d %d %d %s %s" % (B, seed, n, " ".join(repr(v) for v in a), " ".join(repr(v) for v in b)))
        ref.append(boot_t(B, seed, d, [0] * n) + sign_p(pos, neg))
    for _ in range(10):
        n, B, seed = rnd.randint(1, 40), rnd.randint(50, 300), rnd.getrandbits(64)
        x = [rnd.choice([0.0, 1.0, round(rnd.expovariate(1), 6), round(rnd.gauss(0, 2), 6)]) for _ in range(n)]
        ng = rnd.randint(1, 4)
        g = [i if i < ng else rnd.randint(0, ng - 1) for i in range(n)]
        cases.append("boott %d %d %d %s %s" % (B, seed, n, " ".join(repr(v) for v in x), " ".join(map(str, g))))
        ref.append(boot_t(B, seed, x, g))
    for _ in range(10):
        n, score = rnd.randint(1, 30), rnd.randint(0, 1)
        binary = rnd.random() < 0.5
        x = [float(rnd.randint(0, 1)) if binary else round(rnd.random(), 6) for _ in range(n)]
        ng = rnd.randint(1, 4)
        g = [i if i < ng else rnd.randint(0, ng - 1) for i in range(n)]
        cases.append("interval %d %d %s %s" % (score, n, " ".join(repr(v) for v in x), " ".join(map(str, g))))
        ref.append(interval(score, x, g))
    for df in sorted({1, 2, rnd.randint(3, 30), rnd.randint(31, 500)}):
        q = rnd.choice([0.975, 0.995, 0.9, 0.025])
        cases.append(f"tq {q!r} {df}")
        ref.append([t_quantile(q, df)])
    for _ in range(10):
        m = rnd.choice([rnd.randint(1, 12), rnd.randint(21, 40)])
        B, seed = rnd.randint(100, 400), rnd.getrandbits(64)
        d = [rnd.choice([0.0, round(rnd.gauss(0.3, 1), 4), float(rnd.randint(-1, 1))]) for _ in range(m)]
        cases.append("perm %d %d %d %s" % (B, seed, m, " ".join(repr(v) for v in d)))
        ref.append([perm_p(d, B, seed)])
    open(args.cases, "w").write("\n".join(cases) + "\n")
    open(args.ref, "w").write("\n".join(" ".join(repr(v) for v in r) for r in ref) + "\n")


def compare(args):
    ref = [list(map(float, l.split())) for l in open(args.ref) if l.strip()]
    got = [list(map(float, l.split())) for l in open(args.got) if l.strip()]
    if len(ref) != len(got):
        sys.exit(f"stats_ref: {len(got)} answers for {len(ref)} cases")
    bad = 0
    for i, (r, g) in enumerate(zip(ref, got)):
        ok = len(r) == len(g) and all((math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1e-300, abs(a))
                                      or abs(a - b) <= 1e-12 for a, b in zip(r, g))
        if not ok:
            bad += 1
            print(f"case {i + 1}: want {r} got {g}")
    print(f"stats_ref: {len(ref)} cases, {bad} differ")
    sys.exit(1 if bad else 0)


ap = argparse.ArgumentParser()
ap.add_argument("cmd", choices=["make", "compare"])
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--cases")
ap.add_argument("--ref")
ap.add_argument("--got")
a = ap.parse_args()
make(a) if a.cmd == "make" else compare(a)
