#!/usr/bin/env bash
# `make demo`: set-up (tools/setup.sh), then every method at a 10% KV budget on needle-in-a-haystack with the default
# model (SmolLM2-135M-Instruct), end to end: build, fetch the model and the haystack,
# run the grid (progress and ETA on stderr; a rerun resumes), print the table, draw the
# figures. About 15-20 minutes on 2 CPU cores.
#   DEMO_CTX     context lengths in tokens   (default 1024,2048,4096)
#   DEMO_DEPTHS  needle depths in %          (default 0,25,50,75,100)
#   DEMO_DB      results file                (default results/demo.db)
#   DEMO_JOBS    processes (--jobs)          (default 1: the threads already use every core)
#   DEMO_PLOTS   directory of the figures    (default plots: plots/demo-niah.png, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n 2,10p "$0"; exit 0; fi
CTX=${DEMO_CTX:-1024,2048,4096}
DEPTHS=${DEMO_DEPTHS:-0,25,50,75,100}
DB=${DEMO_DB:-results/demo.db}
JOBS=${DEMO_JOBS:-1}
OUT=${DEMO_PLOTS:-plots}
MAKE=${MAKE:-make}

start=$(date +%s)
bash tools/setup.sh
"$MAKE" -s kvbench
mkdir -p "$(dirname "$DB")" "$OUT"

echo "demo: NIAH, ctx $CTX x depths $DEPTHS %, every method at budget 0.1 -> $DB"
# the original needle test's prompt (no answer prefix), the test split, decode rule append:
# kvbench's defaults, named in every report header
./kvbench run --workload niah --methods all --budget 0.1 --ctx "$CTX" --depths "$DEPTHS" --max-new 32 \
    --jobs "$JOBS" --db "$DB"
echo
./kvbench report --db "$DB"
echo
./kvbench report --db "$DB" --by ctx
echo
./kvbench report --db "$DB" --table compare --base fullkv
echo
./kvbench plot --db "$DB" --figure niah --out "$OUT"/demo-niah
./kvbench plot --db "$DB" --figure memory --out "$OUT"/demo-memory
./kvbench plot --db "$DB" --figure latency --out "$OUT"/demo-latency
echo "demo: done in $(($(date +%s) - start)) s; figures $OUT/demo-niah.png, $OUT/demo-memory.png, $OUT/demo-latency.png (and .svg)"
