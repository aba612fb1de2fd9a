#!/usr/bin/env python3
"""Independent check of `kvbench report --table compare --base fullkv`: every row against
the base row of its model, paired by case, recomputed from the raw rows (sqlite3): the
means over the common cases, the difference, the p-value (McNemar's exact test with integer
binomials on binary scores, else the paired permutation test: every sign vector up to 20
non-zero pairs, else the same seeded splitmix64 draws), Holm's adjustment, the signs and the summary line; the interval must hold the
difference.

usage: report_compare_ref.py DB DIR RUN...   (DIR holds compare_RUN.csv and compare_RUN.md)"""
import csv
import math
import sqlite3
import sys


def sign_p(pos, neg):
    n, k = pos + neg, min(pos, neg)
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


M64 = (1 << 64) - 1
SEED = 0x6b7662656e6368   # ST_SEED


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def perm_p(d, B=10000, seed=SEED):
    a = [abs(x) for x in d if x != 0]
    m = len(a)
    if m == 0:
        return 1.0
    target = abs(sum(x for x in d if x != 0)) * (1 - 1e-9) - 1e-300
    if m <= 20:   # the distribution of the signed sum, by convolution (exact)
        sums = {0.0: 1}
        for x in a:
            nxt = {}
            for sm, c in sums.items():
                for v in (sm + x, sm - x):
                    nxt[v] = nxt.get(v, 0) + c
            sums = nxt
        return sum(c for sm, c in sums.items() if abs(sm) >= target) / 2 ** m
    st, hits, bits = seed, 0, 0
    for _ in range(B):
        tot = 0.0
        for i in range(m):
            if i % 64 == 0:
                st, bits = splitmix(st)
            tot += a[i] if (bits >> (i % 64)) & 1 else -a[i]
        hits += abs(tot) >= target
    return (hits + 1) / (B + 1)


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adj, run = [0.0] * len(ps), 0.0
    for r, i in enumerate(order):
        run = max(run, min(1.0, (len(ps) - r) * ps[i]))
        adj[i] = run
    return adj


def norm(p):
    return ",".join(sorted(x.strip() for x in (p or "").split(",") if x.strip()))


db_path, d = sys.argv[1:3]
db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
for run in sys.argv[3:]:
    q = ("SELECT coalesce(ru.model, '?'), r.method, r.params, r.budget, r.status, r.score,"
         " coalesce(c.workload, ru.workload, '?'), c.variant, c.case_key"
         " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id")
    rows = db.execute(q + ("" if run == "all" else f" WHERE c.run_id = {int(run)}")).fetchall()
    vals = {}
    for model, m, params, b, st, sc, wl, var, key in rows:
        x = sc if st == "ok" else 0.0   # infeasible and failed count as 0
        if x is None:
            continue
        col = wl if var is None or var == wl else f"{wl}:{var}"
        vals.setdefault((model, m, norm(params), b), {}).setdefault((col, key), []).append(100 * x)
    vals = {k: {c: sum(v) / len(v) for c, v in cs.items()} for k, cs in vals.items()}
    want = {}
    for k, cs in vals.items():
        bases = [b for b in vals if b[0] == k[0] and b[1].lower() == "fullkv"]
        base = next((b for b in bases if not b[2]), bases[0] if bases else None)
        if base is None or base == k:
            continue
        common = [c for c in cs if c in vals[base]]
        a, b = [cs[c] for c in common], [vals[base][c] for c in common]
        pos, neg = sum(x > y for x, y in zip(a, b)), sum(x < y for x, y in zip(a, b))
        binary = all(x in (0.0, 100.0) for x in a + b)
        p = (sign_p(pos, neg) if binary else perm_p([x - y for x, y in zip(a, b)])) if common else None
        want[k] = dict(n=len(common), base_mean=sum(b) / len(b) if b else None, mean=sum(a) / len(a) if a else None,
                       diff=(sum(a) - sum(b)) / len(a) if a else None, p=p, pos=pos, neg=neg, binary=binary)
    keys = [k for k in want if want[k]["p"] is not None]
    for k, a in zip(keys, holm([want[k]["p"] for k in keys])):
        want[k]["p_holm"] = a
    got = list(csv.DictReader(open(f"{d}/compare_{run}.csv", newline="")))
    assert len(got) == len(want), (run, len(got), len(want))
    for g in got:
        k = (g["model"], g["method"], g["params"], float(g["budget"]))
        w = want[k]
        assert int(float(g["n"])) == w["n"], (run, k, g["n"], w["n"])
        if not w["n"]:
            continue
        for name in ("base_mean", "mean", "diff", "p", "p_holm"):
            assert abs(float(g[name]) - w[name]) <= 1e-9 * max(1, abs(w[name])), (run, k, name, g[name], w[name])
        assert int(float(g["pos"])) == w["pos"] and int(float(g["neg"])) == w["neg"], (run, k, "signs")
        assert float(g["lo"]) - 1e-9 <= float(g["diff"]) <= float(g["hi"]) + 1e-9, (run, k, "interval")
        assert g["test"] == ("mcnemar" if w["binary"] else "perm"), (run, k, g["test"])
    md = open(f"{d}/compare_{run}.md").read()
    sig = sum(1 for k in keys if want[k]["p_holm"] < 0.05)
    assert f"{sig} of {len(want)} differences significant after Holm" in md, (run, "summary", sig)
    print(f"compare {run}: {len(want)} rows, {sig} significant, match the database")
