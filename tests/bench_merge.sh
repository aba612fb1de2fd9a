#!/usr/bin/env bash
# What merging a 100-node grid costs: writes SHARDS shard files of realistic size and times
# `kvbench merge` over them. Each file holds one run, CASES cases x 29 (method, budget)
# pairs (8 methods x 4 budgets, FullKV once) with the rows a SmolLM2 run writes per result
# (30 x 9 head_stats, 30 layer_err), and the whole grid's plan (SHARDS x CASES x 29 rows),
# as `kvbench run --shard K/SHARDS` would. The schema comes from a real kvbench file; the
# values are random.
#   bash tests/bench_merge.sh [SHARDS=100] [CASES=35]     (35 x 100 = 3500 cases, 101500 results)
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
SHARDS=${1:-100}
CASES=${2:-35}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$KVBENCH" run --workload synthetic-niah --methods fullkv --ctx 64 --depths 0.5 --layers 1 --quiet \
    --db "$T/template.db" >/dev/null
t0=$SECONDS
python3 - "$T" "$SHARDS" "$CASES" <<'EOF'
import random, shutil, sqlite3, sys
d, shards, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1)
methods = ["streamingllm", "h2o", "snapkv", "pyramidkv", "chunkkv", "sentencekv", "sekv"]
pairs = [("fullkv", 1.0)] + [(m, b) for m in methods for b in (0.05, 0.1, 0.2, 0.4)]
L, H = 30, 9
db = sqlite3.connect(f"{d}/template.db")
db.executescript("DELETE FROM layer_err; DELETE FROM head_stats; DELETE FROM results; DELETE FROM cases; DELETE FROM plan;")
run = db.execute("SELECT id FROM runs").fetchone()[0]
db.executemany("INSERT INTO plan VALUES (?,?,?,?)",
               [(run, f"niah/case-{c:06d}", m, b) for c in range(shards * cases) for m, b in pairs])
for c in range(cases):
    cid = db.execute("INSERT INTO cases(run_id, case_key, workload, ctx, depth, variant, seed, prefill_s) VALUES (?,?,?,?,?,?,?,?)",
                     (run, f"niah/case-{c:06d}", "niah", rng.choice([1024, 2048, 4096, 8192, 16384]), rng.random(), "niah", 42,
                      rng.random())).lastrowid
    for m, b in pairs:
        rid = db.execute("INSERT INTO results(case_id, method, params, status, budget, budget_tokens, score, rel_err, prefill_s,"
                         " compress_s, decode_s, decode_tokens, tokens_per_s, fast_bytes, fast_peak, fast_aux_bytes, slow_bytes,"
                         " slow_peak, fast_tokens, output) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         (cid, m, "", "ok", b, rng.randint(50, 5000), rng.random(), rng.random(), rng.random(), rng.random(),
                          rng.random(), 16, rng.random() * 100, rng.randint(1, 1 << 28), rng.randint(1, 1 << 28), 0, 0, 0,
                          rng.randint(1, 1 << 16), "The best thing to do in San Francisco is eating a sandwich.")).lastrowid
        db.executemany("INSERT INTO head_stats VALUES (?,?,?,?,?)",
                       [(rid, l, h, rng.random(), rng.random()) for l in range(L) for h in range(H)])
        db.executemany("INSERT INTO layer_err VALUES (?,?,?)", [(rid, l, rng.random()) for l in range(L)])
db.commit()
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
for s in range(shards):   # shard s: cases s*CASES .. s*CASES+CASES-1
    f = f"{d}/grid.shard-{s}-of-{shards}.db"
    shutil.copy(f"{d}/template.db", f)
    x = sqlite3.connect(f)
    x.execute("UPDATE cases SET case_key = printf('niah/case-%06d', CAST(substr(case_key, 11) AS INTEGER) + ?)", (s * cases,))
    x.commit()
    x.close()
EOF
size=$(du -b "$T/grid.shard-0-of-$SHARDS.db" | cut -f1)
echo "wrote $SHARDS shard files of $((size / 1024 / 1024)) MiB each ($CASES cases x 29 results, $((CASES * 29 * 300)) per-layer/head rows, $((SHARDS * CASES * 29)) plan rows) in $((SECONDS - t0))s"
start=$(date +%s.%N)
"$KVBENCH" merge --quiet "$T/grid.db" "$T"/grid.shard-*-of-"$SHARDS".db
end=$(date +%s.%N)
echo "merge of $SHARDS files: $(echo "$end - $start" | bc) s wall, output $(($(du -b "$T/grid.db" | cut -f1) / 1024 / 1024)) MiB"
start=$(date +%s.%N)
"$KVBENCH" merge --quiet "$T/grid.db" "$T"/grid.shard-*-of-"$SHARDS".db >/dev/null
end=$(date +%s.%N)
echo "the same merge again (all present): $(echo "$end - $start" | bc) s wall"
