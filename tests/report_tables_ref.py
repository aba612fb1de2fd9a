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
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interval_ref  # noqa: E402  (the cells' intervals, in numpy)

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


WL_ORDER = {}   # workload columns in the order of their first result (the report's group ids)


def load(run):
    cols = {c[1] for c in db.execute("PRAGMA table_info(results)")}
    v3 = "r.fast_decode_peak, r.rss_peak" if "fast_decode_peak" in cols else "NULL, NULL"
    q = ("SELECT c.id, coalesce(ru.model, '?'), coalesce(c.workload, ru.workload, '?'), c.variant,"
         " coalesce(c.ctx, 0), c.depth, r.method, r.params, r.budget, r.status, r.score, r.fast_peak, r.slow_peak,"
         f" r.fast_tokens, r.prefill_s, r.compress_s, r.decode_s, r.decode_tokens, r.tokens_per_s, {v3}, c.case_key"
         " FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id")
    args = ()
    if run != "all":
        q += " WHERE c.run_id = ?"
        args = (int(run),)
    q += " ORDER BY c.id, r.id"   # the report's order: the bootstrap draws follow it
    recs = []
    WL_ORDER.clear()
    for (cid, model, wl, var, ctx, depth, m, params, b, st, sc, fp, sp, ft, pf, cs, ds, dt, tps, fdp,
         rss, ckey) in db.execute(q, args):
        r = Rec()
        r.cid, r.model, r.ctx, r.depth, r.status = cid, model, ctx, depth, st
        r.wl = wl if var is None or var == wl else f"{wl}:{var}"
        WL_ORDER.setdefault(r.wl, len(WL_ORDER))
        r.fam = (model, m, norm_params(params))
        r.row = r.fam + (b,)
        r.ok = st == "ok"
        r.score = sc if r.ok else 0.0   # infeasible and failed results count as 0
        r.case = (r.wl, ckey)           # the same case for every method that saw it
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


class Cell:
    """The values of one cell: per group (workload, depth, ...) a list, per case a list."""
    def __init__(self):
        self.groups, self.cases, self.fail, self.inf, self.flat = {}, {}, 0, 0, []

    def add(self, r, x, g=0):
        self.fail += not r.ok
        self.inf += r.status == "infeasible"
        if x is None:
            return
        self.groups.setdefault(g, []).append(x)
        self.cases.setdefault(r.case, []).append(x)
        self.flat.append((g, x))

    def merge(self, other, g):
        for xs in other.groups.values():
            self.groups.setdefault(g, []).extend(xs)
        for c, xs in other.cases.items():
            self.cases.setdefault(c, []).extend(xs)
        self.flat += [(g, x) for _, x in other.flat]
        self.fail += other.fail
        self.inf += other.inf

    def interval(self, score):
        """(value, lo, hi) by tests/interval_ref.py: the values in the report's order, the
        groups numbered as the report numbers them (workloads by first result, depths and
        (context, depth) ascending)."""
        keys = sorted({g for g, _ in self.flat}, key=lambda k: WL_ORDER[k] if isinstance(k, str) else k)
        rank = {k: i for i, k in enumerate(keys)}
        return interval_ref.interval(score, [x for _, x in self.flat], [rank[g] for g, _ in self.flat])

    def n(self):
        return sum(len(xs) for xs in self.groups.values())

    def value(self):
        return mean([mean(xs) for xs in self.groups.values()]) if self.groups else None

    def per_case(self):
        return {c: mean(xs) for c, xs in self.cases.items()}


def cellv(c):
    """(value, n, failed, cell) as a section stores it."""
    return (c.value(), c.n(), (c.fail, c.inf), c)


def workload_section(recs, rows, labels, title=""):
    s = Section(title, True)
    byrow = {}
    first = {}
    for r in recs:
        first[r.wl] = min(first.get(r.wl, r.cid), r.cid)
        if r.row in rows:
            byrow.setdefault((r.row, r.wl), Cell()).add(r, r.score)
    wls = sorted({wl for (_, wl), c in byrow.items() if c.n()}, key=lambda w: first[w])
    s.cols = [(w, PCT, 1) for w in wls] + [("Avg", PCT, 1)]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], labels[i], row[3]))
        avg = Cell()
        for j, w in enumerate(wls):
            c = byrow.get((row, w), Cell())
            s.vals[i, j] = cellv(c)
            avg.merge(c, j)
        every = wls and all(s.vals[i, j][1] for j in range(len(wls)))
        s.vals[i, len(wls)] = cellv(avg) if every else (None, 0, (0, 0), None)
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
    cell, overall = {}, {}
    for r in needle:
        cell.setdefault((r.row, r.ctx), Cell()).add(r, r.score, r.depth)
        overall.setdefault(r.row, Cell()).add(r, r.score, (r.ctx, r.depth))
    s = Section("", True)
    s.cols = [(f"ctx {c}", PCT, 1) for c in ctxs] + [("overall", PCT, 1)]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], fam_label(row[:3]), row[3]))
        for j, c in enumerate(ctxs):
            s.vals[i, j] = cellv(cell.get((row, c), Cell()))
        every = all(s.vals[i, j][1] for j in range(len(ctxs)))
        s.vals[i, len(ctxs)] = cellv(overall[row]) if every else (None, 0, (0, 0), None)
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
        per.setdefault(r.row, Cell()).add(r, r.score, r.wl)
    s = Section("", False)
    s.cols = [(f"budget {gfmt(b)}", PCT, 1) for b in budgets]
    for i, f in enumerate(fams):
        s.rows.append((f, fam_label(f), None))
        for j, b in enumerate(budgets):
            s.vals[i, j] = cellv(per.get(f + (b,), Cell()))
    return [s], None


def ctx_means(recs, field):
    acc = {}
    for r in recs:
        v = getattr(r, field)
        if r.ok and v is not None:
            acc.setdefault((r.row, r.ctx), []).append(v)
    return acc


def ctx_cells(recs, field):
    acc = {}
    for r in recs:
        v = getattr(r, field)
        if r.ok and v is not None:
            acc.setdefault((r.row, r.ctx), Cell()).add(r, v)
    return acc


def ctx_section(recs, title, field, fmt, better):
    rows, ctxs = all_rows(recs), sorted({r.ctx for r in recs})
    acc = ctx_cells(recs, field) if field else {}
    s = Section(title, True)
    s.cols = [(f"ctx {c}", fmt, better) for c in ctxs]
    for i, row in enumerate(rows):
        s.rows.append((row[:3], fam_label(row[:3]), row[3]))
        for j, c in enumerate(ctxs):
            s.vals[i, j] = cellv(acc.get((row, c), Cell()))
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
                ratio.vals[i, j] = (None, 0, (0, 0), None)
            else:
                a, b = fm(row, c), fm(ref, c)
                ratio.vals[i, j] = (a / b if a is not None and b is not None else None,
                                    len(fast.get((row, c), [])), (0, 0), None)
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
        score.setdefault((r.row, r.ctx), Cell()).add(r, r.score, r.wl)
    fastc = ctx_cells(recs, "fast")
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
                        s.vals[i, 3 * j + k] = (None, 0, (0, 0), None)
                    continue
                s.vals[i, 3 * j] = cellv(score.get((pick, c), Cell()))
                s.vals[i, 3 * j + 1] = (pick[3], len(fast[pick, c]), (0, 0), None)
                s.vals[i, 3 * j + 2] = cellv(fastc[pick, c])
        secs.append(s)
    return secs, None


TABLES = {"main": t_main, "niah": t_niah, "budget": t_budget, "rank": t_rank, "ablation": t_ablation,
          "memory": t_memory, "latency": t_latency}
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def close(a, b, tol):
    return abs(a - b) <= tol


Z = 1.959963984540054


def wilson(k, n):
    p = k / n
    den = 1 + Z * Z / n
    mid, half = (p + Z * Z / (2 * n)) / den, Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / den
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


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


def sig_best(cells, b, better):
    """cells[b] better than every other non-empty cell: paired sign test per case, Holm."""
    mine, ps = cells[b].per_case(), []
    for k, c in enumerate(cells):
        if k == b or c is None or not c.n():
            continue
        other = c.per_case()
        common = [x for x in mine if x in other]
        if not common:
            return False
        pos = sum(better * (mine[x] - other[x]) > 0 for x in common)
        neg = sum(better * (mine[x] - other[x]) < 0 for x in common)
        ps.append(sign_p(pos, neg) if pos > neg else 1.0)
    return bool(ps) and all(p < 0.05 for p in holm(ps))


def parse_cell(t):
    """'v [lo, hi] n=N (i infeasible, e failed)' -> (v text, lo text, hi text, n, (i + e, i), bold)."""
    bold = t.startswith("**")
    t = t.replace("**", "")
    fail = inf = 0
    if t.endswith(" failed)") or t.endswith(" infeasible)"):
        t, f = t.rsplit(" (", 1)
        for part in f.rstrip(")").split(", "):
            k, what = part.split()
            if what == "infeasible": inf = int(k)
            fail += int(k)
    n = 0
    if " n=" in t:
        t, nn = t.rsplit(" n=", 1)
        n = int(nn)
    lo = hi = None
    if " [" in t:
        t, iv = t.split(" [", 1)
        lo, hi = iv.rstrip("]").split(", ")
    return t, lo, hi, n, (fail, inf), bold


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


def ceiling_labels(table, s):
    """The column labels with " (low ceiling)" where a FullKV row of a score table scores
    below 80% (where it has no value, as in the budget table, its mean over its columns)."""
    labels = [c[0] for c in s.cols]
    if table not in ("main", "niah", "budget", "rank", "ablation"):
        return labels
    for i, (fam, _, _) in enumerate(s.rows):
        if fam[1].lower() != "fullkv":
            continue
        xs = [s.vals[i, j][0] for j in range(len(s.cols))]
        have = [x for x in xs if x is not None]
        for j, x in enumerate(xs):
            y = x if x is not None else mean(have)
            if y is not None and y < 0.8 and not labels[j].endswith(" (low ceiling)"):
                labels[j] += " (low ceiling)"
    return labels


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
        assert f"Failed: {inf} infeasible and {err_n} failed results, in the cells' n as 0." in text, (
            table, run, "footnote")
    cases = {}
    for r in recs:
        cases.setdefault(r.row, set()).add(r.case)
    differ = any(cases[a] != cases[b] for a in cases for b in cases if a[0] == b[0])
    assert ("**Rows were run over different sets of cases**" in text) == differ, (table, run, "case-set note")
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
        assert tab[0] == lead + ceiling_labels(table, s), (where, tab[0], lead + ceiling_labels(table, s))
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
                v, n, nfail, cell = s.vals[i, j]
                t = body[i][k0 + j]
                vt, lo, hi, pn, pf, bold = parse_cell(t)
                w = where + (s.rows[i][1], label, t)
                check_md_value(w, vt, v, fmt)
                assert pn == n and pf == nfail, (w, "n / failed", n, nfail)
                # the interval: Wilson on binary scores, else the small-n interval, of the
                # same estimator as the value (tests/interval_ref.py); none for one case
                if cell is not None and cell.n() and fmt != BUDGET:
                    iv, il, ih = cell.interval(fmt == PCT)
                    assert close(iv, v, 1e-9 * max(1, abs(v))), (w, "the interval's estimator", iv, v)
                    if math.isnan(il):
                        assert lo is None, (w, "an interval for one case")
                    else:
                        check_md_value(w + ("lo",), lo, il, fmt)
                        check_md_value(w + ("hi",), hi, ih, fmt)
                        assert il - 1e-12 <= v <= ih + 1e-12, (w, "value outside its interval", il, v, ih)
                    xs = [x for g in cell.groups.values() for x in g]
                    if fmt == PCT and len({len(g) for g in cell.groups.values()}) == 1 and len(xs) > 1 and all(
                            x in (0, 1) for x in xs):   # equal groups of binary scores: plain Wilson
                        wl, wh = wilson(sum(x == 1 for x in xs), len(xs))
                        check_md_value(w + ("wilson lo",), lo, wl, fmt)
                        check_md_value(w + ("wilson hi",), hi, wh, fmt)
                else:
                    assert lo is None, (w, "an interval without values")
                # bold: the one best row of its model, better than every other by the paired
                # sign test over common cases, Holm-adjusted p < 0.05
                same = [k for k in range(len(s.rows)) if s.rows[k][0][0] == fam[0] and s.vals[k, j][0] is not None]
                vals = [s.vals[k, j][0] for k in same]
                best = (max(vals) if better > 0 else min(vals)) if better and vals else None
                tops = [k for k in same if close(s.vals[k, j][0], best, 1e-12 * max(1, abs(best)))] if best is not None else []
                want_bold = (len(tops) == 1 and tops[0] == i and cell is not None and
                             sig_best([s.vals[k, j][3] if k in same else None for k in range(len(s.rows))], i, better))
                assert bold == want_bold, (w, "bold", v, best)
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
                v, cnt, nfail, cell = s.vals[i, j]
                want = None if v is None else 100 * v if fmt == PCT else v
                assert (rec["value"] == "") == (want is None), (where, want)
                if want is not None:
                    assert close(float(rec["value"]), want, 1e-9 * max(1, abs(want))), (where, want)
                assert int(rec["n"]) == cnt and (int(rec["failed"]), int(rec["infeasible"])) == nfail, (where, "n", cnt, nfail)
                if cell is None or not cell.n():
                    assert rec["lo"] == "" and rec["hi"] == "", (where, "lo")
                else:
                    _, il, ih = cell.interval(fmt == PCT)
                    sc = 100 if fmt == PCT else 1
                    for name, want_b in (("lo", il), ("hi", ih)):
                        if math.isnan(want_b):
                            assert rec[name] == "", (where, name)
                        else:
                            assert close(float(rec[name]), sc * want_b, 1e-9 * max(1, abs(sc * want_b))), (
                                where, name, sc * want_b)
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
