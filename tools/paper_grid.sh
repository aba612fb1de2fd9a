#!/usr/bin/env bash
# `make paper-grid`: the SeKV paper's grid on the judge model (docs/paper-grid.md), step by
# step, each a `kvbench run` that resumes where it stopped; then the tables.
#   GRID_MODEL   model file or short name   (default qwen2.5-coder-0.5b: `make model-qwen`)
#   GRID_STEPS   which steps, in order      (default "niah ruler ablation tables")
#                niah      NIAH, GRID_CTX x 11 depths, --methods paper at 5/10/20%
#                ruler     RULER at GRID_RULER_CTX, every task x GRID_RULER_LIMIT samples
#                ablation  C6-C9 at NIAH 8K, 10%: zoom=0, fixed_chunk=same, rank=8 and rank=64 on
#                          sekv and sekv-spread (rank 32 is the niah step's rows), and
#                          trained_zoom=0 on a trained sekv
#                tables    the report tables of docs/paper-grid.md, to stdout
#   GRID_CTX     NIAH lengths               (default 4096,8192,16384)
#   GRID_RULER_CTX, GRID_RULER_LIMIT         (default 4096,8192 and 5)
#   GRID_QA      RULER qa_1/qa_2 data directory (kvbench run --workload ruler --help)
#   GRID_DB      results file               (default results/paper-grid.db)
#   GRID_THREADS threads                    (default: every core)
#   GRID_PRINT   slurm: print each step's `kvbench slurm-script` form instead of running it
#                (GRID_SHARDS shards, default 8)
# sekv and sekv-ref run the untrained router (params_file=none, labelled "untrained") until
# SeKV is trained for the model: `make sekv-params SEKV_MODEL=...` (set GRID_SEKV_PARAMS=default).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n 2,20p "$0"; exit 0; fi
MODEL=${GRID_MODEL:-qwen2.5-coder-0.5b}
STEPS=${GRID_STEPS:-niah ruler ablation tables}
CTX=${GRID_CTX:-4096,8192,16384}
RCTX=${GRID_RULER_CTX:-4096,8192}
RLIMIT=${GRID_RULER_LIMIT:-5}
DB=${GRID_DB:-results/paper-grid.db}
SEKV_PARAMS=${GRID_SEKV_PARAMS:-none}
KV=${KVBENCH:-./kvbench}
mkdir -p "$(dirname "$DB")"

common=(--model "$MODEL" --db "$DB")
[ -n "${GRID_THREADS:-}" ] && common+=(--threads "$GRID_THREADS")
params="sekv:params_file=$SEKV_PARAMS;sekv-ref:params_file=$SEKV_PARAMS"

step() {   # one kvbench run, or its SLURM form
    if [ "${GRID_PRINT:-}" = slurm ]; then
        echo "# $1"
        shift
        "$KV" slurm-script --shards "${GRID_SHARDS:-8}" -- "$KV" run "$@" "${common[@]}"
        echo
    else
        echo "paper-grid: $1" >&2
        shift
        "$KV" run "$@" "${common[@]}"
    fi
}

for s in $STEPS; do
    case "$s" in
    niah)
        step "NIAH $CTX x 11 depths, the paper's methods at 5/10/20%" \
            --workload niah --ctx "$CTX" --methods paper --budget 0.05,0.1,0.2 --params "$params" ;;
    ruler)
        qa=()
        [ -n "${GRID_QA:-}" ] && qa=(--qa-data "$GRID_QA")
        step "RULER $RCTX x $RLIMIT samples per task, the paper's methods at 5/10/20%" \
            --workload ruler --ctx "$RCTX" --limit "$RLIMIT" "${qa[@]}" --methods paper --budget 0.05,0.1,0.2 \
            --params "$params" ;;
    ablation)
        # each setting on the paper's row and on kvbench's variant, one prefill per case for both;
        # trained_zoom=0 only where sekv is trained (untrained, there is nothing to remove)
        for a in zoom=0 fixed_chunk=same rank=8 rank=64 trained_zoom=0; do
            if [ "$a" = trained_zoom=0 ]; then
                [ "$SEKV_PARAMS" = none ] && continue
                step "ablation $a at NIAH 8K, 10%" --workload niah --ctx 8192 --methods fullkv,sekv --budget 0.1 \
                    --params "sekv:params_file=$SEKV_PARAMS,$a"
                continue
            fi
            step "ablation $a at NIAH 8K, 10%" --workload niah --ctx 8192 --methods fullkv,sekv,sekv-spread --budget 0.1 \
                --params "sekv:params_file=$SEKV_PARAMS,$a;sekv-spread:$a"
        done ;;
    tables)
        [ "${GRID_PRINT:-}" = slurm ] && continue
        for t in niah budget main compare paper zoom; do
            echo "## --table $t"
            "$KV" report --db "$DB" --table "$t" --run all
            echo
        done ;;
    *) echo "paper-grid: unknown step '$s' (niah, ruler, ablation, tables)" >&2; exit 2 ;;
    esac
done
