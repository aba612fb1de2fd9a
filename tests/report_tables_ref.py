#!/usr/bin/env python3
"""Independent check of `kvbench report --table NAME`: every table is recomputed here from
the raw rows of the results file (sqlite3), without the report's C code, and compared
with its Markdown (values at the printed precision, bold = best per column within a model,
row order and labels, headers, notes) and its CSV (full precision, cases per cell).

usage: report_tables_ref.py DB REGISTRY METHODS OUTDIR TABLE:RUN...
  REGISTRY  method names in registry order (test_db --registry)
  METHODS   `kvbench methods` output (parameter defaults)
  OUTDIR    holds TABLE_RUN.md and TABLE_RUN.csv written by kvbench report"""
import csv
import math
import sqlite3
import sys

db_path, registry_path, methods_path, out = sys.argv[1:5]
specs = sys.argv[5:]
db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
registry = [l.strip() for l in open(registry_path) if l.strip()]

# parameter defaults per method, from `kvbench methods`
defaults, current = {}, None
for line in open(methods_path):
    if line and not line[0].isspace() and line.strip():
        current = line.strip()
        defaults[current] = {}
    elif current and " default " in line:
        name, rest = line.split(None, 1)
        defaults[current][name] = rest.split()[1]

PCT, BYTES, COUNT, RATIO, NUM, BUDGET = "pct", "bytes", "count", "ratio", "num", "budget"


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def method_key(m):
    low = [r.lower() for r in registry]
    return (low.index(m.lower()) if m.lower() in low else len(registry), m)


def norm_params(p):
    return ",".join(sorted(x.strip() for x in (p or "").split(",") if x.strip()))


def fam_label(f):
    return f[1] + (" " + f[2].replace(",", " ") if f[2] else "")


def gfmt(x):
    return f"{x:g}"


class Rec:
    pass


def load(run):
    cols = {c[1] for c in db.execute("PRAGMA table_info(results)")}
    v3 = "r.fast_decode_peak, r.rss_peak" if "fast_decode_peak" in cols else "NULL, NULL"
    q = ("SELECT c.id, coalesce(ru.model, '?'), coalesce(c.workload, ru.workload, '?'), c.variant,"
         " coalesce(c.ctx, 0), c.depth, r.method, r.params, r.budget, r.status, r.score, r.fast_peak, r.slow_peak,"
         f" r.fast_tokens, r.prefill_s, r.compress_s, r.decode_s, r.decode_tokens, r.tokens_per_s, {v3}"
         " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id")
    args = ()
    if run != "all":
        q += " WHERE c.run_id = ?"
        args = (int(run),)
    recs = []
    for (cid, model, wl, var, ctx, depth, m, params, b, st, sc, fp, sp, ft, pf, cs, ds, dt, tps, fdp,
         rss) in db.execute(q, args):
        r = Rec()
        r.cid, r.model, r.ctx, r.depth, r.status = cid, model, ctx, depth, st
        r.wl = wl if var is None or var == wl else f"{wl}:{var}"
        r.fam = (model, m, norm_params(params))
        r.row = r.fam + (b,)
        r.ok = st == "ok"
        r.score = sc if r.ok else None
        r.fast, r.slow, r.tok = fp, sp, ft
        r.dec, r.rss = fdp, rss
        r.pf, r.comp = pf, cs
        r.ms = 1000 * ds / dt if dt and dt > 0 and ds is not None else None
        r.tps = tps if dt and dt > 0 else None
        recs.append(r)
    return recs


def row_key(row):
    return (row[0],) + method_key(row[1]) + (row[2], row[3])


class Section:
    def __init__(self, title, has_budget):
        self.title, self.has_budget = title, has_budget
        self.rows, self.cols, self.vals, self.note = [], [], {}, None   # rows: (fam, label, budget or None)


def workload_section(recs, rows, labels, title=""):
    s = Section(title, True)
    byrow = {}
    first = {}
    for r in recs:
        first[r.wl] = min(first.get(r.wl, r.cid), r.cid)
        if r.row in rows and r.score is not None:
            byrow.setdefault((r.row, r.wl), []).append(r.score)
    wls = sorted({wl for (_, wl) in byrow}, key=lambda w: first[w])
    s.cols = [(w, PCT, 1) for w in wls] + [("Avg", PCT, 1)]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], labels[i], row[3]))
        vals = []
        for j, w in enumerate(wls):
            xs = byrow.get((row, w), [])
            s.vals[i, j] = (mean(xs), len(xs))
            vals.append(mean(xs))
        avg = sum(vals) / len(vals) if vals and all(v is not None for v in vals) else None
        s.vals[i, len(wls)] = (avg, sum(s.vals[i, j][1] for j in range(len(wls))))
    return s


def all_rows(recs):
    return sorted({r.row for r in recs}, key=row_key)


def t_main(recs):
    rows = all_rows(recs)
    return [workload_section(recs, rows, [fam_label(r[:3]) for r in rows])], None


def t_rank(recs):
    fams = {r.fam for r in recs}
    rank, dflt = {}, {}
    for f in fams:
        kv = dict(p.split("=", 1) for p in f[2].split(",")) if f[2] else {}
        d = defaults.get(f[1], {}).get("rank")
        if set(kv) - {"rank"} or ("rank" not in kv and d is None):
            continue
        try:
            rank[f] = float(kv.get("rank", d))
        except ValueError:
            continue
        dflt[f] = "rank" not in kv
    rows = [r for r in all_rows(recs) if r[:3] in rank]
    if not rows:
        return None, "rank parameter"
    rows.sort(key=lambda r: (r[0],) + method_key(r[1]) + (rank[r[:3]], r[2], r[3]))
    labels = [f"{r[1]} rank={gfmt(rank[r[:3]])}" + (" (default)" if dflt[r[:3]] else "") for r in rows]
    s = workload_section(recs, rows, labels)
    if len({rank[r[:3]] for r in rows}) < 2:
        s.note = "Only one rank setting was run"
    return [s], None


def t_ablation(recs):
    fams = {r.fam for r in recs}
    rows = [r for r in all_rows(recs) if sum(1 for f in fams if f[0] == r[0] and f[1] == r[1]) > 1]
    fallback = not rows
    if fallback:
        rows = all_rows(recs)
    labels = [fam_label(r[:3]) + (" (defaults)" if not r[2] and not fallback else "") for r in rows]
    s = workload_section(recs, rows, labels)
    if fallback:
        s.note = "No method was run with more than one params setting"
    return [s], None


def t_niah(recs):
    needle = [r for r in recs if r.depth is not None]
    if not needle:
        return None, "no needle cases"
    rows = sorted({r.row for r in needle}, key=row_key)
    ctxs = sorted({r.ctx for r in needle})
    cell = {}
    for r in needle:
        if r.score is not None:
            cell.setdefault((r.row, r.ctx), {}).setdefault(r.depth, []).append(r.score)
    s = Section("", True)
    s.cols = [(f"ctx {c}", PCT, 1) for c in ctxs] + [("overall", PCT, 1)]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], fam_label(row[:3]), row[3]))
        vals = []
        for j, c in enumerate(ctxs):
            by_depth = cell.get((row, c), {})
            v = mean([mean(xs) for xs in by_depth.values()])
            s.vals[i, j] = (v, sum(len(xs) for xs in by_depth.values()))
            vals.append(v)
        s.vals[i, len(ctxs)] = (sum(vals) / len(vals) if all(v is not None for v in vals) else None,
                                sum(s.vals[i, j][1] for j in range(len(ctxs))))
    return [s], None


def t_budget(recs):
    rows = all_rows(recs)
    fams = []
    for r in rows:
        if r[:3] not in fams:
            fams.append(r[:3])
    budgets = sorted({r[3] for r in rows})
    per = {}
    for r in recs:
        if r.score is not None:
            per.setdefault((r.row, r.wl), []).append(r.score)
    s = Section("", False)
    s.cols = [(f"budget {gfmt(b)}", PCT, 1) for b in budgets]
    for i, f in enumerate(fams):
        s.rows.append((f, fam_label(f), None))
        for j, b in enumerate(budgets):
            lists = [xs for (row, wl), xs in per.items() if row == f + (b,)]
            s.vals[i, j] = (mean([mean(xs) for xs in lists]), sum(len(xs) for xs in lists))
    return [s], None


def ctx_means(recs, field):
    acc = {}
    for r in recs:
        v = getattr(r, field)
        if r.ok and v is not None:
            acc.setdefault((r.row, r.ctx), []).append(v)
    return acc


def ctx_section(recs, title, field, fmt, better):
    rows, ctxs = all_rows(recs), sorted({r.ctx for r in recs})
    acc = ctx_means(recs, field) if field else {}
    s = Section(title, True)
    s.cols = [(f"ctx {c}", fmt, better) for c in ctxs]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], fam_label(row[:3]), row[3]))
        for j, c in enumerate(ctxs):
            xs = acc.get((row, c), [])
            s.vals[i, j] = (mean(xs), len(xs))
    return s


def t_latency(recs):
    return [ctx_section(recs, "prefill (s)", "pf", NUM, 0), ctx_section(recs, "compression (s)", "comp", NUM, -1),
            ctx_section(recs, "decode (ms/token)", "ms", NUM, -1),
            ctx_section(recs, "decode (tokens/s)", "tps", NUM, 1)], None


def t_memory(recs):
    secs = [ctx_section(recs, "fast-tier KV peak", "fast", BYTES, -1)]
    if any(r.ok and r.dec is not None for r in recs):
        secs.append(ctx_section(recs, "fast-tier KV at decode (steady)", "dec", BYTES, -1))
    if any(r.ok and r.rss is not None for r in recs):
        secs.append(ctx_section(recs, "process peak RSS, measured", "rss", BYTES, 0))
    secs += [ctx_section(recs, "slow-tier KV peak", "slow", BYTES, 0),
            ctx_section(recs, "fast-tier resident tokens", "tok", COUNT, 0)]
    rows, ctxs = all_rows(recs), sorted({r.ctx for r in recs})
    fast = ctx_means(recs, "fast")
    fm = lambda row, c: mean(fast.get((row, c), []))
    ratio = Section("fast-tier KV peak / FullKV's", True)
    ratio.cols = [(f"ctx {c}", RATIO, 0) for c in ctxs]
    any_full = False
    for i, row in enumerate(rows):
        ratio.rows.append((row[:3], fam_label(row[:3]), row[3]))
        ref = next((r for r in rows if r[1].lower() == "fullkv" and r[0] == row[0]), None)
        any_full |= ref is not None
        for j, c in enumerate(ctxs):
            if ref is None:
                ratio.vals[i, j] = (None, 0)
            else:
                a, b = fm(row, c), fm(ref, c)
                ratio.vals[i, j] = (a / b if a is not None and b is not None else None,
                                    len(fast.get((row, c), [])))
    if not any_full:
        ratio.note = "No FullKV results"
    secs.append(ratio)
    budgets = sorted({r[3] for r in rows if r[1].lower() != "fullkv"})
    if len(budgets) < 2:
        s = Section("iso-memory", False)
        s.note = "Only one budget" + (f" ({gfmt(budgets[0])})" if budgets else "") + " was run"
        return secs + [s], None
    models = {r[0] for r in rows}
    default_sekv = {r[0] for r in rows if r[1].lower() == "sekv" and not r[2]}
    refs = [r for r in rows if r[1].lower() == "sekv" and (not r[2] or r[0] not in default_sekv)
            and any(fm(r, c) is not None for c in ctxs)]
    if not refs:
        s = Section("iso-memory", False)
        s.note = "No finished sekv results"
        return secs + [s], None
    score = {}
    for r in recs:
        if r.score is not None:
            score.setdefault((r.row, r.ctx, r.wl), []).append(r.score)
    for ref in refs:
        title = f"iso-memory at {fam_label(ref[:3])} @ {gfmt(ref[3])}"
        if len(models) > 1:
            title += f", model {ref[0]}"
        s = Section(title, False)
        s.cols = []
        for c in ctxs:
            s.cols += [(f"ctx {c} score", PCT, 1), (f"ctx {c} budget", BUDGET, 0), (f"ctx {c} fast KV", BYTES, 0)]
        fams = []
        for r in rows:
            if r[0] == ref[0] and r[:3] not in fams:
                fams.append(r[:3])
        for i, f in enumerate(fams):
            s.rows.append((f, fam_label(f), None))
            for j, c in enumerate(ctxs):
                target, pick = fm(ref, c), None
                for r in rows:
                    m = fm(r, c)
                    if r[:3] == f and target is not None and m is not None and m <= target and (
                            pick is None or m > fm(pick, c)):
                        pick = r
                if pick is None:
                    for k in range(3):
                        s.vals[i, 3 * j + k] = (None, 0)
                    continue
                lists = [xs for (row, cc, wl), xs in score.items() if row == pick and cc == c]
                s.vals[i, 3 * j] = (mean([mean(xs) for xs in lists]), sum(len(xs) for xs in lists))
                s.vals[i, 3 * j + 1] = (pick[3], len(fast[pick, c]))
                s.vals[i, 3 * j + 2] = (fm(pick, c), len(fast[pick, c]))
        secs.append(s)
    return secs, None


TABLES = {"main": t_main, "niah": t_niah, "budget": t_budget, "rank": t_rank, "ablation": t_ablation,
          "memory": t_memory, "latency": t_latency}
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def close(a, b, tol):
    return abs(a - b) <= tol


def check_md_value(where, text, v, fmt):
    if v is None:
        assert text == "-", (where, text)
        return
    if fmt == PCT:
        assert close(float(text), 100 * v, 0.05 + 1e-9), (where, text, 100 * v)
    elif fmt == BYTES:
        num, unit = text.split()
        u = UNITS[unit]
        assert close(float(num) * u, v, 0.05 * u + 0.5), (where, text, v)
        assert unit == "B" or 1 <= v / u < 1024, (where, "unit", text, v)
    elif fmt == COUNT:
        assert close(float(text), v, 0.5 + 1e-9), (where, text, v)
    elif fmt == RATIO:
        assert close(float(text), v, 5e-4 + 1e-12), (where, text, v)
    elif fmt == NUM:
        assert close(float(text), v, max(0.5 if abs(v) >= 1000 else 0, 0.005 * abs(v)) + 1e-12), (where, text, v)
    else:
        assert close(float(text), v, 1e-6 * abs(v)), (where, text, v)


def parse_md(text):
    """Sections in order: (title, notes text, table rows as lists of cells)."""
    secs, cur = [], None
    for line in text.splitlines():
        if line.startswith("### "):
            cur = [line[4:], "", []]
            secs.append(cur)
        elif line.startswith("|"):
            if cur is None:
                cur = ["", "", []]
                secs.append(cur)
            cur[2].append([x.strip() for x in line.strip().strip("|").split("|")])
        elif cur is not None and not cur[2]:
            cur[1] += line + "\n"
    return secs


def check(table, run):
    recs = load(run)
    secs, err = TABLES[table](recs)
    assert secs is not None, (table, run, "expected an error:", err)
    text = open(f"{out}/{table}_{run}.md").read()
    lines = text.splitlines()
    runs = db.execute("SELECT id, workload, model, git_commit, seed, backend FROM runs ORDER BY id").fetchall()
    if run == "all":
        assert lines[0].startswith(f"## kvbench {table} table, runs "), lines[0]
        assert ", ".join(str(r[0]) for r in runs) in lines[0], lines[0]
        for rid, wl, model, git, seed, backend in runs:
            want = (f"- run {rid}: workload {wl}, model {model}, git {git}, seed {seed % 2 ** 64}, "
                    f"backend {backend}")
            assert any(l.startswith(want) for l in lines), (table, "no provenance line", want)
    else:
        rid, wl, model, git, seed, backend = next(r for r in runs if r[0] == int(run))
        want = (f"## kvbench {table} table, run {rid}: workload {wl}, model {model}, git {git}, "
                f"seed {seed % 2 ** 64}, backend {backend}")
        assert lines[0].startswith(want), (lines[0], want)
    inf = sum(r.status == "infeasible" for r in recs)
    err_n = sum(r.status == "error" for r in recs)
    if inf or err_n:
        assert f"Not in the means: {inf} infeasible and {err_n} failed results." in text, (table, run, "footnote")
    n_models = len({r.model for r in recs})
    got = parse_md(text)
    assert [g[0] for g in got] == [s.title for s in secs], (table, run, [g[0] for g in got], [s.title for s in secs])
    cells = 0
    for s, (title, notes, tab) in zip(secs, got):
        where = (table, run, title)
        if s.note:   # a section without a title has its note before the table, after the units
            assert s.note in (notes if title else text), (where, "note", s.note, notes)
        if not s.rows:
            assert not tab, (where, "table without rows")
            continue
        lead = (["model"] if n_models > 1 else []) + ["method"] + (["budget"] if s.has_budget else [])
        assert tab[0] == lead + [c[0] for c in s.cols], (where, tab[0], lead + [c[0] for c in s.cols])
        body = tab[2:]
        assert len(body) == len(s.rows), (where, "rows", len(body), len(s.rows))
        k0 = len(lead)
        for i, (fam, label, budget) in enumerate(s.rows):
            line = body[i]
            if n_models > 1:
                assert line[0] == fam[0], (where, line, fam)
            assert line[k0 - 1 - s.has_budget] == label, (where, "label", line, label)
            if s.has_budget:
                assert float(line[k0 - 1]) == budget, (where, "budget", line, budget)
        for j, (label, fmt, better) in enumerate(s.cols):
            for i, (fam, _, _) in enumerate(s.rows):
                v = s.vals[i, j][0]
                t = body[i][k0 + j]
                bold = t.startswith("**") and t.endswith("**")
                check_md_value(where + (s.rows[i][1], label), t.strip("*"), v, fmt)
                same = [s.vals[k, j][0] for k in range(len(s.rows))
                        if s.rows[k][0][0] == fam[0] and s.vals[k, j][0] is not None]
                best = (max(same) if better > 0 else min(same)) if better and same else None
                want_bold = v is not None and best is not None and close(v, best, 1e-9 * max(1, abs(best)))
                assert bold == want_bold, (where, s.rows[i][1], label, "bold", t, v, best)
                cells += 1
    # CSV: one line per cell of the sections with rows, in the same order, full precision
    recs_csv = list(csv.DictReader(open(f"{out}/{table}_{run}.csv", newline="")))
    it = iter(recs_csv)
    n = 0
    for s in secs:
        for i, (fam, label, budget) in enumerate(s.rows):
            for j, (col, fmt, _) in enumerate(s.cols):
                rec = next(it)
                n += 1
                where = (table, run, s.title, label, col, rec)
                assert rec["run"] == str(run) and rec["table"] == table and rec["section"] == s.title, where
                assert (rec["model"], rec["method"], rec["params"]) == fam, where
                assert (rec["budget"] == "") == (budget is None), where
                if budget is not None:
                    assert float(rec["budget"]) == budget, where
                assert rec["column"] == col, where
                v, cnt = s.vals[i, j]
                want = None if v is None else 100 * v if fmt == PCT else v
                assert (rec["value"] == "") == (want is None), (where, want)
                if want is not None:
                    assert close(float(rec["value"]), want, 1e-9 * max(1, abs(want))), (where, want)
                assert int(rec["n"]) == cnt, (where, "n", cnt)
    assert n == len(recs_csv), (table, run, "csv lines", len(recs_csv), n)
    return cells, secs


summary = []
for spec in specs:
    table, run = spec.split(":")
    cells, secs = check(table, run)
    summary.append(f"{table}:{run} {cells} cells")
    if table == "memory" and run == "1":
        # the fixture is meant to exercise the iso-memory choice: some method must land on a
        # budget other than SeKV's, and some context must have a method that does not fit
        iso = [s for s in secs if s.title.startswith("iso-memory at")]
        assert iso, "run 1 has several budgets: expected iso-memory sections"
        picks = [s.vals[i, 3 * j + 1][0] for s in iso for i in range(len(s.rows)) for j in range(len(s.cols) // 3)]
        assert any(p is None for p in picks) and len({p for p in picks if p is not None}) >= 2, picks
print("report --table numbers match the database:", ", ".join(summary))
