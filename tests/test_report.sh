#!/usr/bin/env bash
# kvbench report and plot against a results file written through the real kvdb API
# (build/tests/test_db --make-fixture, fresh random numbers each run). Every number in the
# Markdown table, the CSV and the plot data is recomputed here in Python from the raw rows
# of the database, without the report's SQL.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
T=$BUILD/tests/test_db
[ -x "$T" ] || { echo "test_report: $T is not built (make $T)"; exit 1; }
dir=$(mktemp -d /tmp/kvbench_test_report_XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The subcommands through ./kvbench; while main.c still links them weakly, through test_db.
KVBENCH=${KVBENCH:-./kvbench}
probe=$("$KVBENCH" report --help 2>&1 || true)
if [[ "$probe" == *usage* ]]; then
    KV=("$KVBENCH")
else
    KV=("$T" --cmd)
    echo "note: ./kvbench does not link report/plot yet; testing them through $T --cmd"
fi
fail() { echo "test_report: FAIL: $*" >&2; exit 1; }

"$T" --make-fixture "$dir/f.db"
"$T" --registry >"$dir/registry"

"${KV[@]}" report --db "$dir/f.db" >"$dir/variant.md"
"${KV[@]}" report --db "$dir/f.db" --csv >"$dir/variant.csv"
"${KV[@]}" report --db "$dir/f.db" --by budget --csv "$dir/budget.csv" >"$dir/budget.md"
"${KV[@]}" report --db "$dir/f.db" --run 1 --by ctx --csv "$dir/ctx1.csv" >"$dir/ctx1.md"
cat "$dir/variant.md"

"${KV[@]}" plot --db "$dir/f.db" --out "$dir/niah"
for f in niah.png niah.svg niah.gp niah.dat; do [ -s "$dir/$f" ] || fail "plot did not write $f"; done
[ "$(head -c 8 "$dir/niah.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "niah.png is not a PNG"
grep -q '<svg' "$dir/niah.svg" || fail "niah.svg is not SVG"

python3 - "$dir" <<'EOF'
import csv, math, sqlite3, sys
d = sys.argv[1]
db = sqlite3.connect(f"file:{d}/f.db?mode=ro", uri=True)
registry = [l.strip() for l in open(f"{d}/registry") if l.strip()]
def rank(m):
    return (registry.index(m) if m in registry else len(registry), m)
def mean(xs):
    return sum(xs) / len(xs) if xs else None

def expected(run, by):
    raw = db.execute("SELECT r.method, r.budget, r.status, r.score, r.fast_peak, r.decode_s, r.decode_tokens,"
                     " c.variant, c.ctx, c.id FROM results r JOIN cases c ON c.id = r.case_id WHERE c.run_id = ?",
                     (run,)).fetchall()
    rows, cols, first, acc = set(), set(), {}, {}
    for m, b, st, sc, peak, ds, dt, var, ctx, cid in raw:
        row = m if by == "budget" else (m, b)
        col = {"variant": var, "budget": b, "ctx": ctx}[by]
        rows.add(row); cols.add(col); first[col] = min(first.get(col, cid), cid)
        a = acc.setdefault((row, col), ([], [], []))
        if st == "ok":
            if sc is not None: a[0].append(100 * sc)
            a[1].append(peak)
            if dt > 0: a[2].append(1000 * ds / dt)
    rows = sorted(rows, key=lambda r: rank(r) if by == "budget" else rank(r[0]) + (r[1],))
    cols = sorted(cols, key=lambda c: first[c]) if by == "variant" else sorted(cols)
    cell = {}
    for r in rows:
        for c in cols:
            a = acc.get((r, c), ([], [], []))
            cell[r, c] = (len(a[0]), mean(a[0]), mean(a[1]), mean(a[2]))
        vals = [cell[r, c] for c in cols]
        cell[r, "avg"] = (sum(v[0] for v in vals),) + tuple(
            mean([v[k] for v in vals if v[k] is not None]) for k in (1, 2, 3))
    nonok = {s: n for s, n in db.execute("SELECT r.status, count(*) FROM results r JOIN cases c ON c.id = r.case_id"
                                        " WHERE c.run_id = ? GROUP BY 1", (run,))}
    return rows, cols + ["avg"], cell, nonok

def close(a, b, tol):
    return abs(a - b) <= tol

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
def check_md(path, run, by):
    rows, cols, cell, nonok = expected(run, by)
    text = open(path).read()
    (seed, model, git, backend, workload), = db.execute(
        "SELECT seed, model, git_commit, backend, workload FROM runs WHERE id = ?", (run,))
    head = text.splitlines()[0]
    for want in (f"run {run}:", f"workload {workload}", f"model {model}", f"git {git}", f"seed {seed % 2**64}",
                 f"backend {backend}"):
        assert want in head, (path, "header lacks", want, head)
    lines = [l for l in text.splitlines() if l.startswith("|")]
    hdr = [h.strip() for h in lines[0].strip("|").split("|")]
    body = [[x.strip() for x in l.strip("|").split("|")] for l in lines[2:]]
    assert len(body) == len(rows), (path, "rows", len(body), len(rows))
    for r, line in zip(rows, body):
        m = r if by == "budget" else r[0]
        assert line[0] == m, (path, "row order", line[0], m)
        if by != "budget": assert float(line[1]) == r[1], (path, "budget", line, r)
    for c in cols:
        label = ("avg" if c == "avg" else str(c) if by == "variant" else f"budget {c:g}" if by == "budget"
                 else f"ctx {c}")
        js, jk, jm = (hdr.index(f"{label} {k}") for k in ("score", "KV", "ms/tok"))
        scores = [cell[r, c][1] for r in rows if cell[r, c][1] is not None]
        best = max(scores) if scores else None
        for r, line in zip(rows, body):
            n, sc, kv, ms = cell[r, c]
            s = line[js]
            if sc is None:
                assert s == "-", (path, r, c, s)
            else:
                bold = s.startswith("**")
                assert close(float(s.strip("*")), sc, 0.05 + 1e-9), (path, r, c, s, sc)
                assert bold == close(sc, best, 1e-9), (path, r, c, "bold", s, sc, best)
            if kv is None:
                assert line[jk] == "-", (path, r, c, line[jk])
            else:
                num, unit = line[jk].split()
                u = UNITS[unit]
                assert close(float(num) * u, kv, 0.05 * u + 0.5), (path, r, c, line[jk], kv)
                assert unit == "B" or 1 <= kv / u < 1024, (path, "unit", line[jk], kv)
            if ms is None:
                assert line[jm] == "-", (path, r, c, line[jm])
            else:
                assert close(float(line[jm]), ms, 0.005 + 0.01 * ms), (path, r, c, line[jm], ms)
    if nonok.get("infeasible") or nonok.get("error"):
        want = f"{nonok.get('infeasible', 0)} infeasible and {nonok.get('error', 0)} failed"
        assert want in text, (path, "footnote", want)
    return rows, cols

def num(x):
    return None if x == "" else float(x)
def check_csv(path, run, by):
    rows, cols, cell, _ = expected(run, by)
    recs = list(csv.DictReader(open(path, newline="")))
    assert len(recs) == len(rows) * len(cols), (path, len(recs))
    it = iter(recs)
    for r in rows:
        for c in cols:
            rec = next(it)
            assert int(rec["run"]) == run
            assert rec["method"] == (r if by == "budget" else r[0]), (path, rec, r)
            if by != "budget": assert float(rec["budget"]) == r[1], (path, rec, r)
            key = rec[by]
            assert key == "avg" if c == "avg" else (key == c if by == "variant" else float(key) == c), (path, key, c)
            n, sc, kv, ms = cell[r, c]
            assert int(float(rec["n"])) == n, (path, rec, n)
            for got, want in ((rec["score_pct"], sc), (rec["fast_peak_bytes"], kv), (rec["decode_ms_per_token"], ms)):
                g = num(got)
                assert (g is None) == (want is None), (path, rec, want)
                if g is not None: assert close(g, want, 1e-9 * max(1, abs(want))), (path, rec, want)

run2 = db.execute("SELECT max(id) FROM runs").fetchone()[0]
rows, cols = check_md(f"{d}/variant.md", run2, "variant")
assert len(cols) == 3 and len(rows) >= 9, ("fixture too small", rows, cols)
check_csv(f"{d}/variant.csv", run2, "variant")
check_md(f"{d}/budget.md", run2, "budget")
check_csv(f"{d}/budget.csv", run2, "budget")
check_md(f"{d}/ctx1.md", 1, "ctx")
check_csv(f"{d}/ctx1.csv", 1, "ctx")

# The heatmap data: one block per (method, budget) with finished cases, in report order,
# each cell the mean score (%) of its (ctx, depth) over the ok results.
want = {}
for m, b, ctx, depth, sc in db.execute(
        "SELECT r.method, r.budget, c.ctx, c.depth, r.score FROM results r JOIN cases c ON c.id = r.case_id"
        " WHERE c.run_id = ? AND r.status = 'ok' AND r.score IS NOT NULL", (run2,)):
    want.setdefault((m, b), {}).setdefault((ctx, round(100 * depth, 6)), []).append(100 * sc)
blocks = open(f"{d}/niah.dat").read().split("\n\n\n")
panels = sorted(want, key=lambda p: rank(p[0]) + (p[1],))
assert len(blocks) == len(panels), ("panels", len(blocks), len(panels))
for p, blk in zip(panels, blocks):
    title = [l for l in blk.splitlines() if l.startswith("# ") and "@" in l][0]
    assert title == f"# {p[0]} @ {p[1]:g}", (title, p)
    pts = [l.split() for l in blk.splitlines() if l and not l.startswith("#")]
    got = {(int(x[3]), round(float(x[4]), 6)): float(x[2]) for x in pts}
    assert set(got) == set(want[p]), (p, sorted(got), sorted(want[p]))
    for k, v in got.items():
        assert close(v, mean(want[p][k]), 1e-5), (p, k, v, mean(want[p][k]))
gp = open(f"{d}/niah.gp").read()
for s in ("context length (tokens)", "needle depth (%)", "cbrange [0:100]", "multiplot"):
    assert s in gp, ("gnuplot script lacks", s)
print("report/plot numbers match the database:", len(rows), "rows,", len(panels), "panels")
EOF

# The paper-style tables (--table) against a fixture of several runs: methods, budgets,
# contexts, workloads, SeKV params (ablations, ranks), a second model and an empty run.
# Every table is recomputed in Python from the raw rows (tests/report_tables_ref.py).
"$T" --make-tables-fixture "$dir/t.db"
mkdir "$dir/tables"
"$KVBENCH" methods >"$dir/methods" || fail "kvbench methods"
grep -q "^sekv" "$dir/methods" || fail "kvbench methods lists no sekv (needed for the rank defaults)"
specs=(main:1 main:2 main:all niah:1 niah:3 niah:all budget:1 budget:all rank:all rank:1 ablation:all ablation:1
       memory:1 memory:10 memory:all latency:1 latency:all)
for s in "${specs[@]}"; do
    "${KV[@]}" report --db "$dir/t.db" --table "${s%%:*}" --run "${s#*:}" --csv "$dir/tables/${s/:/_}.csv" \
        >"$dir/tables/${s/:/_}.md" || fail "report --table ${s%%:*} --run ${s#*:}"
done
cat "$dir/tables/memory_1.md"
python3 tests/report_tables_ref.py "$dir/t.db" "$dir/registry" "$dir/methods" "$dir/tables" "${specs[@]}"
# --csv alone: the same CSV on stdout and no Markdown
"${KV[@]}" report --db "$dir/t.db" --table niah --run all --csv >"$dir/niah_stdout.csv"
cmp -s "$dir/niah_stdout.csv" "$dir/tables/niah_all.csv" || fail "--csv to stdout differs from --csv FILE"

# Errors: a clear message and a non-zero status; a missing file is not created.
expect_fail() {   # expect_fail "message part" command...
    local want=$1; shift
    local rc=0
    "$@" >"$dir/out" 2>"$dir/err" || rc=$?
    [ "$rc" -ne 0 ] || fail "'$*' succeeded"
    grep -q -- "$want" "$dir/err" || fail "'$*': stderr lacks '$want': $(cat "$dir/err")"
    echo "ok (exit $rc): $* -> $(head -n1 "$dir/err")"
}
expect_fail "no such file" "${KV[@]}" report --db "$dir/missing.db"
expect_fail "no such file" "${KV[@]}" plot --db "$dir/missing.db"
[ ! -e "$dir/missing.db" ] || fail "report created the missing file"
"$T" --make-empty "$dir/empty.db"
expect_fail "no runs" "${KV[@]}" report --db "$dir/empty.db"
expect_fail "no runs" "${KV[@]}" plot --db "$dir/empty.db" --out "$dir/e"
expect_fail "no run 99" "${KV[@]}" report --db "$dir/f.db" --run 99
expect_fail "not a kvbench results file" "${KV[@]}" report --db "$dir/niah.dat"
expect_fail "--by" "${KV[@]}" report --db "$dir/f.db" --by method
expect_fail "unknown option" "${KV[@]}" report --db "$dir/f.db" --frobnicate
expect_fail "needs a value" "${KV[@]}" report --db
expect_fail "--figure" "${KV[@]}" plot --db "$dir/f.db" --figure pie
expect_fail "gnuplot not found" env PATH=/nonexistent "${KV[@]}" plot --db "$dir/f.db" --out "$dir/nognuplot"
# the latest run (the default) recorded nothing yet
expect_fail "run 11 has no results yet" "${KV[@]}" report --db "$dir/t.db" --table main
expect_fail "unknown --table 'pie' (valid: main, niah, budget, rank, ablation, memory, latency)" \
    "${KV[@]}" report --db "$dir/t.db" --table pie
expect_fail "needs a value" "${KV[@]}" report --db "$dir/t.db" --table
expect_fail "no needle cases" "${KV[@]}" report --db "$dir/t.db" --table niah --run 2
expect_fail "rank parameter" "${KV[@]}" report --db "$dir/f.db" --table rank --run 2
expect_fail "--by applies to the default table" "${KV[@]}" report --db "$dir/t.db" --table main --by ctx
expect_fail "--run all needs --table" "${KV[@]}" report --db "$dir/t.db" --run all
expect_fail "not a positive run id or all" "${KV[@]}" report --db "$dir/t.db" --table main --run some
expect_fail "no run 99" "${KV[@]}" report --db "$dir/t.db" --table main --run 99
expect_fail "no runs" "${KV[@]}" report --db "$dir/empty.db" --table main
expect_fail "cannot write --csv" "${KV[@]}" report --db "$dir/t.db" --table main --run 1 --csv "$dir/no/such/dir.csv"
"${KV[@]}" report --help | grep -q -- "--table NAME" || fail "report --help lacks --table"
"${KV[@]}" report --help | grep -q usage || fail "report --help"
"${KV[@]}" plot --help | grep -q usage || fail "plot --help"
echo "test_report: all checks passed"
