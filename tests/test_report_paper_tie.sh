#!/usr/bin/env bash
# report --table paper, C2 niah: two baselines with the same mean over the cells are a tie,
# and a tie goes to the first baseline of the paper's list (streamingllm before snapkv),
# whatever the order of the sum does to the last bit. The tables fixture (seed from
# ${KVBENCH_TEST_SEED}) is cut down to sekv, streamingllm and snapkv of one model, one
# result per cell, and the two baselines get the same scores in two orders chosen so that
# an in-order float sum puts snapkv one rounding above streamingllm (the old code then paired
# sekv with snapkv: another interval and p). The p is checked against the exact sign test.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
TDB=$BUILD/tests/test_db
[ -x "$TDB" ] || { echo "test_report_paper_tie: $TDB is not built (make $TDB)"; exit 1; }
command -v "$KVBENCH" >/dev/null || { echo "test_report_paper_tie: $KVBENCH is not built (make)"; exit 1; }

export KVBENCH_TEST_SEED=${KVBENCH_TEST_SEED:-$(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 ))}
echo "seed $KVBENCH_TEST_SEED (KVBENCH_TEST_SEED to replay)"
"$TDB" --make-tables-fixture "$T/t.db" >/dev/null
python3 - "$T/t.db" <<'EOF' || fail "could not set up the tie"
import os, random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
x = db.execute
model = x("SELECT ru.model FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id"
          " WHERE r.method = 'sekv' GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()[0]
x("DELETE FROM results WHERE method NOT IN ('sekv', 'streamingllm', 'snapkv') OR case_id IN"
  " (SELECT c.id FROM cases c JOIN runs ru ON ru.id = c.run_id WHERE ifnull(ru.model, '?') != ?)", (model,))
# niah cells (case keys) at 10%, default params: one result per method and cell
sel = ("FROM results r JOIN cases c ON c.id = r.case_id WHERE c.workload = 'niah' AND abs(r.budget - 0.1) < 1e-9"
       " AND ifnull(r.params, '') = ''")
x(f"DELETE FROM results WHERE id IN (SELECT r.id {sel}) AND id NOT IN"
  f" (SELECT min(r.id) {sel} GROUP BY r.method, ifnull(c.variant, ''), c.case_key)")
x(f"DELETE FROM results WHERE id IN (SELECT r.id {sel} AND c.case_key NOT IN (SELECT c.case_key {sel}"
  f" GROUP BY c.case_key HAVING count(DISTINCT r.method) = 3))")
cells = [k for k, in x(f"SELECT c.case_key {sel} GROUP BY c.case_key ORDER BY min(c.id)")]
assert len(cells) >= 6, f"only {len(cells)} niah cells that all three ran"
def seq_mean(v):
    s = 0.0
    for t in v:
        s += t
    return s / len(v)
rng = random.Random(int(os.environ["KVBENCH_TEST_SEED"]))
for _ in range(10000):
    a = [rng.randrange(1, 20) / 20 for _ in cells]
    b = a[:]
    rng.shuffle(b)
    if seq_mean(b) > seq_mean(a):
        break
else:
    sys.exit("no order found whose in-order sum rounds snapkv above streamingllm")
se = [min(1.0, t + rng.choice((-0.15, 0.1, 0.2))) for t in a]   # sekv: some above, some below
for m, v in (("streamingllm", a), ("snapkv", b), ("sekv", se)):
    for k, s in zip(cells, v):
        x(f"UPDATE results SET status = 'ok', score = ? WHERE id IN (SELECT r.id {sel} AND r.method = ?"
          " AND c.case_key = ?)", (s, m, k))
db.commit()
open(sys.argv[1] + ".pairs", "w").write(" ".join(f"{s!r},{t!r}" for s, t in zip(se, a)))
EOF
"$KVBENCH" report --db "$T/t.db" --table paper --run all --csv "$T/p.csv" >"$T/p.md" || fail "report --table paper"
grep "^| C2 niah | .* | sekv | " "$T/p.md" | grep -q "vs best baseline streamingllm " ||
    fail "C2 niah of sekv is not against streamingllm (the first of a tie): $(grep '^| C2 niah' "$T/p.md" | head -1)"
python3 - "$T/p.csv" "$T/t.db.pairs" <<'EOF' || fail "C2 niah's n or p is not that of sekv against streamingllm"
import csv, math, sys
pairs = [tuple(map(float, p.split(","))) for p in open(sys.argv[2]).read().split()]
pos, neg = sum(s > t for s, t in pairs), sum(s < t for s, t in pairs)
want = min(1.0, 2 * sum(math.comb(pos + neg, i) for i in range(min(pos, neg) + 1)) / 2 ** (pos + neg))
row = [r for r in csv.DictReader(open(sys.argv[1])) if r["section"] == "claims" and r["method"] == "sekv"
       and r["column"] == "C2 niah:p" and abs(float(r["budget"]) - 0.1) < 1e-9]
assert len(row) == 1, row
assert int(row[0]["n"]) == len(pairs), (row[0]["n"], len(pairs))
assert abs(float(row[0]["value"]) - want) < 1e-12, (row[0]["value"], want)
print(f"C2 niah: sekv against streamingllm on {len(pairs)} cells, sign-test p {want:.4g}")
EOF
exit $((fails > 0))
