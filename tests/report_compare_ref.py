#!/usr/bin/env python3
"""Independent check of `kvbench report --table compare --base fullkv`: every row against
the base row of its model, paired by case, recomputed from the raw rows (sqlite3): the
means over the common cases, the difference, the exact sign / McNemar p-value (integer
binomials), Holm's adjustment, the signs and the summary line; the interval must hold the
difference.

usage: report_compare_ref.py DB DIR RUN...   (DIR holds compare_RUN.csv and compare_RUN.md)"""
import csv
import math
import sqlite3
import sys


def sign_p(pos, neg):
    n, k = pos + neg, min(pos, neg)
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


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
        want[k] = dict(n=len(common), base_mean=sum(b) / len(b) if b else None, mean=sum(a) / len(a) if a else None,
                       diff=(sum(a) - sum(b)) / len(a) if a else None, p=sign_p(pos, neg) if common else None,
                       pos=pos, neg=neg, binary=all(x in (0.0, 100.0) for x in a + b))
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
        assert g["test"] == ("mcnemar" if w["binary"] else "sign"), (run, k, g["test"])
    md = open(f"{d}/compare_{run}.md").read()
    sig = sum(1 for k in keys if want[k]["p_holm"] < 0.05)
    assert f"{sig} of {len(want)} differences significant after Holm" in md, (run, "summary", sig)
    print(f"compare {run}: {len(want)} rows, {sig} significant, match the database")
