#!/usr/bin/env bash
# The grid-speed targets (issue 33), measured side by side in one run, for the default model
# and the judge model (Qwen2.5-Coder-0.5B, when `make model-qwen` has cached it):
#   - a batch of 33 sequences at 4K decodes >= 10x the tokens/s of one (build/tests/bench_batch,
#     snapkv at 0.1, f32 activations, both sides in the same process);
#   - against llama.cpp on the same file and threads at 512, 4096 and 8192 tokens
#     (tools/bench_llamacpp.sh; only when its llama-bench is built: `make bench-llamacpp`):
#     decode in llama.cpp's configuration (q8 activations, f16 K/V) >= 1.2x, the exact
#     default (f32 activations) >= 1.0x, prefill >= 1.2x, each against flash attention off.
# `make demo` 3x and the 45-minute paper grid take too long for a bench: their rows say where
# they are measured. The last column says whether each target is met.
#
# Usage: tools/bench_targets.sh [--help]
#   env: BUILD (default build), THREADS (default 2), REPS (llama.cpp comparison runs a side, default 1),
#        STEPS (bench_batch decode steps, default 4), KVBENCH_CACHE (default ~/.cache/kvbench),
#        SKIP_LLAMACPP=1 (leave the llama.cpp rows out even when llama-bench is built)
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
[ $# -eq 0 ] || { echo "bench_targets: unknown argument '$1' (only --help)" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
REPS=${REPS:-1}
STEPS=${STEPS:-4}
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
LLAMA_BIN=$CACHE/llamacpp/build-${LLAMACPP_PY_VERSION:-0.3.36}/bin/llama-bench
SMOL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
QWEN=$CACHE/Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf
BATCH=$ROOT/$BUILD/tests/bench_batch
[ -x "$BATCH" ] || { echo "bench_targets: build $BUILD/tests/bench_batch first (make bench does)" >&2; exit 2; }
[ -r "$SMOL" ] || { echo "bench_targets: no default model at $SMOL: run \`make model\`" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
models=("$SMOL")
if [ -r "$QWEN" ]; then models+=("$QWEN"); else echo "bench_targets: no judge model at $QWEN (make model-qwen): its rows are left out" >&2; fi

i=0
for m in "${models[@]}"; do
    echo "bench_targets: ${m##*/}: bench_batch --n 33 --ctx 4096 --steps $STEPS ..." >&2
    KVBENCH_THREADS=$THREADS "$BATCH" --model "$m" --n 33 --ctx 4096 --steps "$STEPS" > "$out/batch$i.txt"
    cat "$out/batch$i.txt" >&2
    i=$((i + 1))
done
llama_dir=""
if [ "${SKIP_LLAMACPP:-0}" != 1 ] && [ -x "$LLAMA_BIN" ]; then
    # bench_llamacpp.sh runs the default model always and KVBENCH_MODEL as its second block
    # the targets compare against flash attention off only: FA=0 (make bench-llamacpp runs both)
    KVBENCH_MODEL=${QWEN} THREADS=$THREADS REPS=$REPS DEPTHS="512 4096 8192" BUILD=$BUILD FA=0 \
        bash "$ROOT/tools/bench_llamacpp.sh" >&2
    llama_dir=$CACHE/llamacpp/last-run
fi

python3 - "$out" "$llama_dir" "$THREADS" "$REPS" "${models[@]}" <<'PY'
import csv, os, re, sys
out, llama_dir, threads, reps, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
rows = []   # (model, target, measured, goal, met)

def verdict(x, goal):
    return "yes" if x >= goal else "no"

for i, path in enumerate(models):
    name = os.path.basename(path)
    text = open(f"{out}/batch{i}.txt").read()
    m = re.search(r"batch of 33\s+[\d.]+\s+[\d.]+\s+([\d.]+)x\s+([\d.]+)x", text)
    if m:
        wall, cpu = float(m.group(1)), float(m.group(2))
        rows.append((name, "batch of 33 at 4K / one sequence (tokens/s)", f"{wall:.2f}x (CPU {cpu:.2f}x)", ">= 10x",
                     verdict(wall, 10)))
    else:
        rows.append((name, "batch of 33 at 4K / one sequence (tokens/s)", "no result", ">= 10x", "?"))

def llama(p, key):
    got = {}
    with open(p) as f:
        for r in csv.DictReader(f):
            got[int(r[key])] = float(r["avg_ts"])
    return got

if llama_dir:
    for i in range(len(models)):
        d = f"{llama_dir}/{i}"
        if not os.path.exists(f"{d}/model"):
            continue
        name = os.path.basename(open(f"{d}/model").read().strip())
        pp, tg = llama(f"{d}/pp0.csv", "n_prompt"), llama(f"{d}/tg0.csv", "n_depth")
        kv = {}
        with open(f"{d}/kv.csv") as f:
            for r in csv.DictReader(f):
                kv[int(r["depth"])] = r
        for depth in sorted(pp):
            k = kv.get(depth) or kv[min(kv, key=lambda x: abs(x - depth))]   # the deepest prompt is shortened to fit
            for label, col, ref, goal in (("decode, q8 over f16 K/V (llama.cpp's configuration)", "decode_f16kv_tok_s", tg, 1.2),
                                          ("decode, f32 activations (exact default)", "decode_f32_tok_s", tg, 1.0),
                                          ("prefill", "prefill_tok_s", pp, 1.2)):
                if depth not in ref or not ref[depth]:
                    continue
                x = float(k[col]) / ref[depth]
                rows.append((name, f"{label} / llama.cpp -fa 0 at {depth}",
                             f"{float(k[col]):.1f} / {ref[depth]:.1f} = {x:.2f}x", f">= {goal}x", verdict(x, goal)))
else:
    rows.append(("both", "against llama.cpp (prefill, decode q8+f16, decode f32)", "not measured",
                 "1.2x / 1.2x / 1.0x", "llama-bench not built: make bench-llamacpp"))
rows.append(("SmolLM2", "make demo end to end / at d5489af", "not timed here", ">= 3x",
             "time both: docs/results.md"))
rows.append(("Qwen 0.5B", "paper grid (NIAH 4K+8K x 11 depths, 3 budgets) wall time", "not timed here",
             "<= 45 min", "tools/paper_grid.sh: docs/paper-grid.md"))

print(f"\nGrid-speed targets ({threads} threads; llama.cpp rows: the mean of {reps} runs a side)")
W = [max(len(r[j]) for r in rows + [("model", "target", "measured", "goal", "met")]) for j in range(5)]
line = lambda r: " | ".join(f"{c:<{W[j]}}" for j, c in enumerate(r))
print(line(("model", "target", "measured", "goal", "met")))
print("-+-".join("-" * w for w in W))
for r in rows:
    print(line(r))
PY
