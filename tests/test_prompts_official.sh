#!/usr/bin/env bash
# The prompts are the official text byte for byte, shown with `kvbench run --print-prompts`
# (SmolLM2's tokenizer and chat template) and rebuilt by tests/prompts_ref.py from the
# official template strings in tests/fixtures/prompts:
#  - LongBench narrativeqa keeps dataset2prompt.json's "asconcisely";
#  - InfiniteBench Code.Debug is gpt4_templates' wording ("inspect the options");
#  - RULER vt: "VAR Y = VAR X " lines keep their trailing space, the worked example ends
#    "they are:  A B C D E" (answer prefix + " " + variables) and a blank line;
#  - RULER cwe: the worked example is a whole chat turn of its own, then "\n", then ours;
#  - RULER qa: the document count is the largest that fits (qa.py's binary search), not a
#    multiple of 10: over a sweep of lengths every prompt fits and leaves less than one
#    document's tokens unused, and counts that are not multiples of 10 occur.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$MODEL" ]; then echo "SKIP: $MODEL is absent (make model)"; exit 0; fi
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
FX=tests/fixtures/prompts
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

show() {   # show NAME ARGS...: the first prompt of `run --print-prompts 1 ARGS` into $T/NAME
    local name=$1; shift
    "$KVBENCH" run --model "$MODEL" "$@" --print-prompts 1 >"$T/$name" 2>"$T/$name.err" || fail "$name: $(cat "$T/$name.err")"
}
show nqa --workload "longbench:$FX/longbench"
"$PY" tests/prompts_ref.py narrativeqa "$T/nqa" "$FX" "$FX/longbench/narrativeqa.jsonl" || fail "LongBench narrativeqa prompt"
show cd --workload "infinitebench:$FX/infinitebench"
"$PY" tests/prompts_ref.py code_debug "$T/cd" "$FX" "$FX/infinitebench/code_debug.jsonl" || fail "InfiniteBench Code.Debug prompt"
for L in 1024 2048; do
    show "vt$L" --workload ruler:vt --ctx "$L"
    "$PY" tests/prompts_ref.py vt "$T/vt$L" "$FX" || fail "RULER vt prompt at $L"
done
for L in 2048 4096; do    # below 4096 and from 4096 on RULER uses other repeat counts
    show "cwe$L" --workload ruler:cwe --ctx "$L"
    "$PY" tests/prompts_ref.py cwe "$T/cwe$L" "$FX" || fail "RULER cwe prompt at $L"
done

# qa_1 over 120 short paragraphs of one form (similar token counts), one question each.
mkdir "$T/qa"
"$PY" - "$T/qa/squad.json" <<'EOF'
import json, sys
names = ["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel", "Juniper", "Larch", "Maple", "Oak"]
paras = []
for k in range(120):
    town = f"{names[k % 12]}ton {k // 12 + 1}"
    year = 1800 + 7 * k
    paras.append({"context": f"The bridge at {town} was finished in {year} and painted green.",
                  "qas": [{"id": f"q{k}", "question": f"When was the bridge at {town} finished?",
                           "answers": [{"text": str(year), "answer_start": 0}], "is_impossible": False}]})
json.dump({"version": "v2.0", "data": [{"title": "Bridges", "paragraphs": paras}]}, open(sys.argv[1], "w"))
EOF
not10=0
for L in $(seq 600 23 1060); do
    "$KVBENCH" run --model "$MODEL" --workload ruler:qa_1 --qa-data "$T/qa" --ctx "$L" --print-prompts 1 >"$T/qa.out" \
        2>"$T/qa.err" || { fail "qa_1 at $L: $(cat "$T/qa.err")"; continue; }
    n=$(grep -c '^Document [0-9]*:$' "$T/qa.out")
    tok=$(sed -n '1s/.*, \([0-9]*\) tokens, .*/\1/p' "$T/qa.out")
    [ $((tok + 32)) -le "$L" ] || fail "qa_1 at $L: $tok prompt tokens + 32 generated do not fit"
    # fewer unused tokens than one document takes (the prompt over its documents overestimates one)
    [ $((L - 32 - tok)) -lt $((tok / n)) ] || fail "qa_1 at $L: $n documents leave $((L - 32 - tok)) tokens unused (~$((tok / n)) a document)"
    [ $((n % 10)) -ne 0 ] && not10=$((not10 + 1))
done
[ "$not10" -ge 5 ] || fail "qa_1: only $not10 of 21 lengths gave a document count off the multiples of 10"

[ "$fails" = 0 ] || exit 1
echo "test_prompts_official: ok"
