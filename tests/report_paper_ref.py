#!/usr/bin/env python3
"""Recomputes `kvbench report --table paper --csv` (the SeKV paper's claims) from the raw
rows of a results file and compares it value for value, interval for interval and n for n.

usage: report_paper_ref.py DB CSV

Independent of plots/report_paper.c: the model with the most sekv, sekv-ref and
sekv-spread results; every claim judged for each of the three; NIAH cells are (workload
column, ctx, depth) with repeats averaged, C2's cells the cases of each workload;
infeasible and failed results count 0; a C2 workload where the row loses but FullKV
(any budget) scores below 0.8 over the same cells is undecidable, not counted; intervals are the small-n interval of the
paired differences (bootstrap-t widened to Student's t, recomputed in numpy by
tests/interval_ref.py), p the exact sign test; ablations match one parameter exactly (fixed_chunk=same is not
fixed_chunk=16); C15 from the zoom rates (head_stats and zoom_events).
"""
import csv
import math
import sqlite3
import os
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interval_ref  # noqa: E402

M64 = (1 << 64) - 1


def sign_p(pos, neg):
    n, k = pos + neg, min(pos, neg)
    if n == 0:
        return 1.0
    return float(min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)))

BASELINES = ["streamingllm", "h2o", "snapkv", "pyramidkv", "chunkkv", "sentencekv"]
SEKVS = ["sekv", "sekv-ref", "sekv-spread"]
REFERENCE = "fullkv"   # the method that keeps every token
CEILING = 0.8          # a claim that fails where FullKV scores below this is undecidable
# (id, kind, budget, other) in report_paper.c's claims[] order
CLAIMS = [("C3", "best", 0.10, None), ("C1", "margin", 0.10, "sentencekv"), ("C4", "best", 0.05, None),
          ("C4", "margin", 0.05, "sentencekv"), ("C4", "margin", 0.05, "chunkkv"), ("C2", "workloads", 0.10, None),
          ("C5", "saturate", 0.10, None), ("C6", "drop", 0.10, "zoom=0"), ("C7", "drop", 0.10, "trained_zoom=0"),
          ("C8", "drop", 0.10, None), ("C9", "rank", 0.10, None)]
NAN = math.nan


def norm(p):
    return sorted(x.strip() for x in (p or "").split(",") if x.strip())


# the SeKV rows whose params_file defaults to none (kvbench methods): their router is untrained
UNTRAINED_BY_DEFAULT = {"sekv-spread"}


def est(a, b=None):
    """mean of a - b over the keys both hold (ascending key order), bootstrap lo/hi, p, n"""
    keys = sorted(k for k in a if b is None or k in b)
    if not keys:
        return dict(mean=NAN, lo=NAN, hi=NAN, p=NAN, n=0)
    d = [a[k] - (b[k] if b is not None else 0) for k in keys]
    if b is None:   # a score: the cell interval (Wilson when binary, clipped to [0, 1])
        m, lo, hi = interval_ref.interval(1, d, [0] * len(d))
    else:
        m, lo, hi = interval_ref.paired(d)
    p = NAN
    if b is not None:
        p = sign_p(sum(1 for k in keys if a[k] > b[k]), sum(1 for k in keys if a[k] < b[k]))
    return dict(mean=m, lo=lo, hi=hi, p=p, n=len(keys))


def main(db_path, csv_path):
    db = sqlite3.connect(db_path)
    rows = db.execute(
        "SELECT ifnull(ru.model, '?'), ifnull(c.workload, ifnull(ru.workload, '?')), c.variant, ifnull(c.ctx, 0),"
        " c.depth, r.method, r.params, r.budget, r.status, r.score, c.case_key"
        " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id"
        " ORDER BY c.id, r.id").fetchall()
    wl_order, case_order, recs = [], [], []
    ctxs = sorted({r[3] for r in rows})
    depths = sorted({r[4] for r in rows if r[4] is not None})
    for model, wl, var, ctx, depth, m, params, b, st, sc, ckey in rows:
        col = wl if var is None or var == wl else f"{wl}:{var}"
        if col not in wl_order:
            wl_order.append(col)
        if (col, ckey) not in case_order:
            case_order.append((col, ckey))
        niah = (wl_order.index(col), ctxs.index(ctx), depths.index(depth)) \
            if depth is not None and col.startswith("niah") else None
        recs.append(dict(model=model, col=col, niah=niah, case=case_order.index((col, ckey)), m=m,
                         p=norm(params), b=b, inf=st == "infeasible",
                         s=sc if st == "ok" and sc is not None else 0.0))
    count = {}
    for r in recs:
        if r["m"] in SEKVS:
            count[r["model"]] = count.get(r["model"], 0) + 1
    model = sorted(count, key=lambda k: (-count[k], k))[0]

    def scores(sel, method, extra, budget, infeasible=None):
        acc = {}
        for r in recs:
            cell = sel(r)
            if cell is None or r["model"] != model or r["m"] != method or \
                    (budget is not None and abs(r["b"] - budget) > 1e-9):
                continue
            if r["p"] != ([extra] if extra else []):
                continue
            acc.setdefault(cell, []).append(r["s"])
            if infeasible is not None:
                infeasible[0] += r["inf"]
        return {k: sum(v) / len(v) for k, v in acc.items()}

    niah_sel = lambda r: r["niah"]

    def best(sel, m, budget):
        inf = [0]
        se = scores(sel, m, None, budget, inf)
        ran = len(se)
        bs = [(name, scores(sel, name, None, budget)) for name in BASELINES]
        bs = [(n, b) for n, b in bs if b]
        se = {k: v for k, v in se.items() if all(k in b for _, b in bs)}
        who, top = None, NAN
        for name, b in bs:
            b2 = {k: v for k, v in b.items() if k in se}
            mm = est(b2)["mean"]
            # equal means up to rounding (numpy sums pairwise, kvbench in order) are a tie,
            # and a tie goes to the first baseline in BASELINES
            if not math.isnan(mm) and (math.isnan(top) or mm > top + 1e-12 * max(1.0, abs(top))):
                who, top, bb = name, mm, b2
        if who is None:
            e = est({})
            e["n"] = len(se)
            return e, None, inf[0], ran
        e = est(se, bb)
        # decided only where the sign test's p < 0.05
        verdict = "not significant" if e["p"] >= 0.05 else "yes" if e["mean"] > 0 else "no"
        if verdict != "yes":   # FullKV below CEILING over those cells: the model cannot do the task
            f = scores(sel, REFERENCE, None, None)
            fk = [f[k] for k in sorted(se) if k in f]
            if fk and sum(fk) / len(fk) < CEILING:
                verdict = "undecidable"
        return e, verdict, inf[0], ran

    def holds(e_n, verdict, inf, ran):
        if not e_n:
            return "-"
        if ran and inf >= ran:
            return "untested (infeasible)"
        return verdict

    want = {}

    def put(section, m, budget, col, e, inf, n=None):
        n = e["n"] if n is None else n
        want[(section, m, f"{budget:g}", col)] = (e["mean"], n, e["lo"], e["hi"], inf)
        want[(section, m, f"{budget:g}", col + ":p")] = (e["p"], n, None, None, None)

    for m in SEKVS:
        if not any(r["m"] == m and r["model"] == model for r in recs):
            continue
        for cid, kind, budget, other in CLAIMS:
            if kind == "workloads":
                names = []
                for col in wl_order:
                    if col.split(":")[0] not in names:
                        names.append(col.split(":")[0])
                won = tested = 0
                for w in names:
                    e, verdict, inf, ran = best(lambda r, w=w: r["case"] if r["col"].split(":")[0] == w else None,
                                                m, budget)
                    if e["n"] == 0:
                        continue
                    h = holds(e["n"], verdict, inf, ran) if verdict else "-"
                    tested += h not in ("-", "untested (infeasible)", "undecidable")
                    won += h == "yes"
                    put("claims", m, budget, f"C2 {w}", e, inf)
                put("claims", m, budget, "C2", dict(mean=won / tested if tested else NAN, lo=NAN, hi=NAN, p=NAN,
                                                    n=tested), 0)
                continue
            if kind == "best":
                e, _, inf, _ = best(niah_sel, m, budget)
                put("claims", m, budget, cid, e, inf)
                continue
            if kind == "drop" and other and other.startswith("trained_") and m in UNTRAINED_BY_DEFAULT:
                # an ablation of the trained part on a router that has none: undecidable, no numbers
                put("claims", m, budget, cid, est({}), 0)
                continue
            settings = [other]
            if kind == "drop" and other is None:
                settings = sorted({x for r in recs if r["m"] == m and r["model"] == model
                                   for x in r["p"] if x.startswith("fixed_chunk=")})
            # the ablation claims (drop, rank) once more per workload other than NIAH where
            # the setting ran, over its cases: rows "C8 fixed_chunk=same ruler", "C9 ruler"
            others = []
            if kind in ("drop", "rank"):
                for col in wl_order:
                    w = col.split(":")[0]
                    if not w.startswith("niah") and w not in others:
                        others.append(w)
            for extra in settings:
                col = cid if kind != "drop" or other else f"C8 {extra}"
                for w in [None] + others:
                    sel = niah_sel if w is None else (lambda r, w=w: r["case"] if r["col"].split(":")[0] == w else None)
                    inf = [0]
                    se = scores(sel, m, None, budget, inf)
                    if kind == "margin":
                        e = est(se, scores(sel, other, None, budget))
                    elif kind == "drop":
                        o = scores(sel, m, extra, budget)
                        e = est(o, se)
                    elif kind == "rank":
                        r8, r64 = scores(sel, m, "rank=8", budget), scores(sel, m, "rank=64", budget)
                        se = {k: v for k, v in se.items() if k in r8 and k in r64}
                        e = est(se, r8)
                    else:
                        s5, s20 = scores(sel, m, None, 0.05), scores(sel, m, None, 0.20)
                        se = {k: v for k, v in se.items() if k in s5 and k in s20}
                        g1, e = est(se, s5), est(s20, se)
                        e["n"] = g1["n"]
                        # p: each cell's first gain against its second
                        e["p"] = est({k: se[k] - s5[k] for k in se}, {k: s20[k] - se[k] for k in se})["p"]
                    if w is None:
                        put("claims", m, budget, col, e, inf[0])
                    elif e["n"] > 0:
                        put("claims", m, budget, f"{col} {w}", e, inf[0])
        # C15: zoom rates of the model's results with default params
        res = db.execute(
            "SELECT r.id, r.budget, r.decode_tokens FROM results r JOIN cases c ON c.id = r.case_id"
            " JOIN runs ru ON ru.id = c.run_id WHERE r.method = ? AND (r.params IS NULL OR r.params = '')"
            " AND r.status = 'ok' AND r.decode_tokens > 0 AND ifnull(ru.model, '?') = ?", (m, model)).fetchall()
        by_b = {}
        for rid, b, steps in res:
            hs = db.execute("SELECT layer, head, events FROM head_stats WHERE result_id = ? AND events IS NOT NULL",
                            (rid,)).fetchall()
            if not hs:
                continue
            z = {}
            for l, h, e, s in db.execute("SELECT layer, head, expanded, spans FROM zoom_events WHERE result_id = ?",
                                         (rid,)):
                z[(l, h)] = z.get((l, h), 0) + e / s
            p = by_b.setdefault(b, dict(rate={}, exp={}, n=0))
            p["n"] += 1
            for l, h, e in hs:
                p["rate"][(l, h)] = p["rate"].get((l, h), 0) + z.get((l, h), 0) / steps
                p["exp"][(l, h)] = p["exp"].get((l, h), 0) + e
        for b, p in by_b.items():
            L = max(l for l, _ in p["rate"]) + 1
            H = max(h for _, h in p["rate"]) + 1
            rate = {k: p["rate"].get(k, 0) / p["n"] for k in [(l, h) for l in range(L) for h in range(H)]}
            quiet = sum(1 for v in rate.values() if v < 0.05) / len(rate)
            thirds = []
            for t in range(3):
                vals = [rate[(l, h)] for l in range(t * L // 3, (t + 1) * L // 3) for h in range(H)]
                thirds.append(sum(vals) / len(vals) if vals else NAN)
            ex = sorted((p["exp"].get(k, 0) for k in rate), reverse=True)
            tot = sum(ex)
            top = sum(ex[:math.ceil(0.1 * len(ex))]) / tot if tot > 0 else NAN
            for col, v in zip(["C15", "C15:early", "C15:middle", "C15:late", "C15:top10"],
                              [quiet] + thirds + [top]):
                want[("zoom", m, f"{b:g}", col)] = (v, p["n"], None, None, None)

    got = {}
    for r in csv.DictReader(open(csv_path)):
        if r["section"] in ("claims", "zoom"):
            got[(r["section"], r["method"], f"{float(r['budget']):g}", r["column"])] = r

    def num(x):
        return math.nan if x in (None, "", "nan", "-nan") else float(x)

    def same(a, b):
        return (math.isnan(a) and math.isnan(b)) or (not math.isnan(a) and not math.isnan(b) and abs(a - b) < 1e-9)

    fails = 0
    if set(got) != set(want):
        print(f"FAIL: rows differ: only in kvbench {sorted(set(got) - set(want))[:6]},"
              f" only in the reference {sorted(set(want) - set(got))[:6]}")
        fails += 1
    for k in sorted(set(got) & set(want)):
        val, n, lo, hi, inf = want[k]
        r = got[k]
        ok = same(num(r["value"]), val) and int(r["n"]) == n
        if lo is not None:
            ok = ok and same(num(r["lo"]), lo) and same(num(r["hi"]), hi) and int(r["infeasible"]) == inf
        if not ok:
            print(f"FAIL: {k}: kvbench {r['value']} [{r.get('lo')}, {r.get('hi')}] n={r['n']} inf={r.get('infeasible')},"
                  f" reference {val} [{lo}, {hi}] n={n} inf={inf}")
            fails += 1
    informative = sum(1 for k, v in want.items() if k[0] == "claims" and not k[3].endswith(":p") and v[1] > 0)
    # the fixes this file checks must be exercised by the fixture
    need = [("C8 fixed_chunk=same", "sekv"), ("C8 fixed_chunk=16", "sekv"), ("C2 ruler", "sekv"),
            ("C2 niah", "sekv-ref"), ("C15", "sekv"), ("C8 fixed_chunk=same ruler", "sekv"), ("C9 ruler", "sekv")]
    for col, m in need:
        if not any(k[1] == m and k[3] == col and want[k][1] > 0 for k in want):
            print(f"FAIL: the fixture does not exercise {col} for {m}")
            fails += 1
    if informative < 10:
        print(f"FAIL: only {informative} claim rows had data in the fixture")
        fails += 1
    print(f"report_paper_ref: {len(want)} values, {informative} claim rows with data, {fails} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
