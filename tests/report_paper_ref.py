#!/usr/bin/env python3
"""Recomputes `kvbench report --table paper --csv` (the SeKV paper's claims) from the raw
rows of a results file and compares it value for value and n for n.

usage: report_paper_ref.py DB CSV

Independent of plots/report_paper.c: the NIAH cases of the model with the most sekv NIAH
results, per (workload, ctx, depth) cell the mean score of a (method, params, budget)
with infeasible and failed results counted 0, paired means over the cells both sides ran.
"""
import csv
import math
import sqlite3
import sys

BASELINES = ["streamingllm", "h2o", "snapkv", "pyramidkv", "chunkkv", "sentencekv"]
# (kind, budget, other) in the order of the table (report_paper.c's claims[])
CLAIMS = [("best", 0.10, None), ("margin", 0.10, "sentencekv"), ("best", 0.05, None),
          ("margin", 0.05, "sentencekv"), ("margin", 0.05, "chunkkv"), ("margin", 0.10, "chunkkv"),
          ("saturate", 0.10, None), ("drop", 0.10, "zoom=0"), ("drop", 0.10, "trained_zoom=0"),
          ("drop", 0.10, "fixed_chunk="), ("rank", 0.10, None)]


def norm(p):
    return sorted(x.strip() for x in (p or "").split(",") if x.strip())


def main(db_path, csv_path):
    db = sqlite3.connect(db_path)
    rows = db.execute(
        "SELECT coalesce(ru.model, '?'), coalesce(c.workload, ru.workload, '?'), c.variant, coalesce(c.ctx, 0),"
        " c.depth, r.method, r.params, r.budget, r.status, r.score"
        " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id").fetchall()
    recs = []
    for model, wl, var, ctx, depth, m, params, b, st, sc in rows:
        wl = wl if var is None or var == wl else f"{wl}:{var}"
        if depth is None or not wl.startswith("niah"):
            continue
        recs.append((model, (wl, ctx, depth), m, norm(params), b, sc if st == "ok" and sc is not None else 0.0))
    count = {}
    for r in recs:
        if r[2] == "sekv":
            count[r[0]] = count.get(r[0], 0) + 1
    model = max(count, key=lambda k: count[k])   # ties: report_paper.c takes the first family's model

    def scores(method, base, extra, budget):
        acc = {}
        for mo, cell, m, p, b, s in recs:
            if mo != model or m != method or (budget is not None and abs(b - budget) > 1e-9):
                continue
            want = norm(base)
            if extra is None:
                if p != want:
                    continue
            else:
                rest = [x for x in p if x not in want]
                if len(p) != len(want) + 1 or len(rest) != 1 or not rest[0].startswith(extra):
                    continue
            acc.setdefault(cell, []).append(s)
        return {k: sum(v) / len(v) for k, v in acc.items()}

    def paired(a, b=None):
        xs = [a[k] - (b[k] if b is not None else 0) for k in a if b is None or k in b]
        if not xs:
            return math.nan, 0
        return sum(xs) / len(xs), len(xs)

    out = []
    for kind, budget, other in CLAIMS:
        se = scores("sekv", "", None, budget)
        val, n = math.nan, 0
        if kind == "best":
            bs = [scores(m, "", None, budget) for m in BASELINES]
            bs = [b for b in bs if b]
            se = {k: v for k, v in se.items() if all(k in b for b in bs)}
            val, n = paired(se)
        elif kind in ("margin", "drop"):
            o = scores(other, "", None, budget) if kind == "margin" else scores("sekv", "", other, budget)
            val, n = paired(se, o)
            if kind == "drop":
                val = -val
        elif kind == "rank":
            r8, r64 = scores("sekv", "", "rank=8", budget), scores("sekv", "", "rank=64", budget)
            se = {k: v for k, v in se.items() if k in r8 and k in r64}
            val, n = paired(se, r8)
        else:
            s5, s20 = scores("sekv", "", None, 0.05), scores("sekv", "", None, 0.20)
            se = {k: v for k, v in se.items() if k in s5 and k in s20}
            _, n = paired(se, s5)
            val, _ = paired(s20, se)
        out.append((val, n))

    got = [r for r in csv.DictReader(open(csv_path)) if r["section"] == "claims"]
    fails = 0
    if len(got) != len(out):
        print(f"FAIL: {len(got)} claim rows in the CSV, expected {len(out)}")
        return 1
    for i, ((val, n), r) in enumerate(zip(out, got)):
        gv = float(r["value"]) if r["value"] not in ("", "nan", "-nan") else math.nan
        same = (math.isnan(val) and math.isnan(gv)) or (not math.isnan(val) and abs(gv - val) < 1e-9)
        if not same or int(r["n"]) != n:
            print(f"FAIL: claim row {i} ({r['column']}): kvbench {gv} n={r['n']}, reference {val} n={n}")
            fails += 1
    informative = sum(1 for v, n in out if n > 0)
    if informative < 5:
        print(f"FAIL: only {informative} claims had data in the fixture")
        fails += 1
    print(f"report_paper_ref: {len(out)} claims, {informative} with data, {fails} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
