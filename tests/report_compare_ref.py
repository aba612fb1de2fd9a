#!/usr/bin/env python3
"""Independent check of `kvbench report --table compare --base M[@B][:K=V,..]`: every row
against the base row of its model at the row's own budget (or at B; FullKV, which keeps every
token, at the row's budget if run, else its only row), of the base method's run whose params
hold every K=V given (the one with the fewest other settings), paired by case, recomputed from the raw
rows (sqlite3): the means over the common cases, the difference and its small-n interval
(interval_ref.py: bootstrap-t over the pairs widened to Student's t), the p-value (McNemar's
exact test with integer binomials on binary scores, else the paired permutation test: every
sign vector up to 20 non-zero pairs, else the same seeded splitmix64 draws), Holm's
adjustment, the signs, the header's base and the summary line.

usage: report_compare_ref.py DB BASE RUN CSV MD"""
import csv
import math
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interval_ref  # noqa: E402


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
    target = abs(sum(x for x in d if x != 0)) - 1e-9 * sum(a)   # ties: within 1e-9 of sum |d|
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


db_path, base_arg, run, csv_path, md_path = sys.argv[1:6]
head, _, settings = base_arg.partition(":")
want_set = set(x for x in settings.split(",") if x)
base, _, bb = head.partition("@")
bb = float(bb) if bb else None
keeps_all = base.lower() == "fullkv"
db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
q = ("SELECT coalesce(ru.model, '?'), r.method, r.params, r.budget, r.status, r.score,"
     " coalesce(c.workload, ru.workload, '?'), c.variant, c.case_key"
     " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id")
rows = db.execute(q + ("" if run == "all" else f" WHERE c.run_id = {int(run)}") + " ORDER BY c.id, r.id").fetchall()
vals, order = {}, {}
for model, m, params, b, st, sc, wl, var, key in rows:
    x = sc if st == "ok" else 0.0   # infeasible and failed count as 0
    if x is None:
        continue
    col = wl if var is None or var == wl else f"{wl}:{var}"
    order.setdefault((col, key), len(order))   # the report pairs cases in this order
    vals.setdefault((model, m, norm(params), b), {}).setdefault((col, key), []).append(x)
vals = {k: {c: sum(v) / len(v) for c, v in cs.items()} for k, cs in vals.items()}
want = {}
for k, cs in vals.items():
    rows_b = sorted((r for r in vals if r[0] == k[0] and r[1].lower() == base.lower()), key=lambda r: (r[2], r[3]))
    if want_set:   # the family holding every setting, with the fewest others
        have = [r for r in rows_b if want_set <= set(x for x in r[2].split(",") if x)]
        fewest = min((len([x for x in r[2].split(",") if x]) for r in have), default=0)
        rows_b = [r for r in have if len([x for x in r[2].split(",") if x]) == fewest]
        assert len(set(r[2] for r in rows_b)) <= 1, ("ambiguous base", rows_b)
    at = [r for r in rows_b if r[3] == (bb if bb is not None else k[3])]
    ref = at[0] if at else rows_b[0] if rows_b and keeps_all and bb is None else None
    if ref == k or (ref is None and k[1].lower() == base.lower()):
        continue
    if ref is None:
        want[k] = dict(n=0, base_budget=None, p=None, base_params="")
        continue
    common = sorted((c for c in cs if c in vals[ref]), key=lambda c: order[c])
    a, b = [cs[c] for c in common], [vals[ref][c] for c in common]
    pos, neg = sum(x > y for x, y in zip(a, b)), sum(x < y for x, y in zip(a, b))
    binary = all(x in (0.0, 1.0) for x in a + b)
    p = (sign_p(pos, neg) if binary else perm_p([x - y for x, y in zip(a, b)])) if common else None
    est, lo, hi = interval_ref.paired([x - y for x, y in zip(a, b)]) if common else (None, None, None)
    sc = lambda v: None if v is None or math.isnan(v) else 100 * v
    want[k] = dict(n=len(common), base_budget=ref[3], base_params=ref[2], base_mean=sc(sum(b) / len(b)) if b else None,
                   mean=sc(sum(a) / len(a)) if a else None, diff=sc(est), lo=sc(lo), hi=sc(hi), p=p, pos=pos,
                   neg=neg, binary=binary)
keys = [k for k in want if want[k]["p"] is not None]
for k, a in zip(keys, holm([want[k]["p"] for k in keys])):
    want[k]["p_holm"] = a
got = list(csv.DictReader(open(csv_path, newline="")))
assert len(got) == len(want), (run, len(got), len(want))
for g in got:
    k = (g["model"], g["method"], g["params"], float(g["budget"]))
    w = want[k]
    assert g["base"] == base, (run, k, g["base"], base)
    assert g["base_params"] == (w["base_params"] if w["base_budget"] is not None else ""), (run, k, g["base_params"])
    assert (g["base_budget"] == "") == (w["base_budget"] is None), (run, k, "base budget", g["base_budget"])
    if w["base_budget"] is not None:
        assert float(g["base_budget"]) == w["base_budget"], (run, k, g["base_budget"], w["base_budget"])
    assert int(float(g["n"])) == w["n"], (run, k, g["n"], w["n"])
    if not w["n"]:
        continue
    for name in ("base_mean", "mean", "diff", "lo", "hi", "p", "p_holm"):
        if w[name] is None:
            assert g[name] == "", (run, k, name, g[name])
            continue
        assert abs(float(g[name]) - w[name]) <= 1e-9 * max(1, abs(w[name])), (run, k, name, g[name], w[name])
    assert int(float(g["pos"])) == w["pos"] and int(float(g["neg"])) == w["neg"], (run, k, "signs")
    assert g["test"] == ("mcnemar" if w["binary"] else "perm"), (run, k, g["test"])
md = open(md_path).read()
sig = sum(1 for k in keys if want[k]["p_holm"] < 0.05)
assert f"{sig} of {len(want)} differences significant after Holm" in md, (run, "summary", sig)
where = f"{base} at budget {bb:g}" if bb is not None else f"{base} at each row's budget"
assert f"Each row against {where}" in md, (run, "header does not name the base and budget", where)
print(f"compare --base {base_arg} --run {run}: {len(want)} rows, {sig} significant, match the database")
