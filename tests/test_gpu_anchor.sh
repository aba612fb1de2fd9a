#!/usr/bin/env bash
# The GPU check's transformers anchor and its table, without torch or a GPU (CI):
#  - tests/gpu/anchor_hf.py --dry-run (no torch imported) prints the plan for the 8B
#    config at 8K and 32K and writes a JSON with the parameter count of Llama 3 8B;
#    a bad --ctx or a length past the config exits 2 with one line;
#  - tests/gpu/paper_table.py joins a real results file (a CPU model run), a `kvbench sim`
#    log for the same shape and an anchor JSON: one row per method with the sim's figures
#    beside it, and FullKV's decode tok/s as a ratio to the anchor's, recomputed here;
#  - with torch and transformers importable (not in CI): the tiny config on the CPU.
source "$(dirname "$0")/lib.sh"
A=tests/gpu/anchor_hf.py

python3 -S -c 'import sys; sys.exit(0)' || { echo "skip: no python3"; exit 0; }
# --dry-run must not import torch: run it where importing torch fails
mkdir -p "$T/notorch/torch"
echo 'raise ImportError("torch must not be imported by --dry-run")' >"$T/notorch/torch/__init__.py"
PYTHONPATH="$T/notorch" python3 $A --dry-run --json "$T/plan.json" >"$T/plan" 2>&1 || fail "--dry-run failed: $(cat "$T/plan")"
grep -q "plan ctx 8192: FullKV cache 1.07 GB" "$T/plan" || fail "--dry-run: no 8K plan: $(cat "$T/plan")"
grep -q "plan ctx 32768: FullKV cache 4.30 GB" "$T/plan" || fail "--dry-run: no 32K plan"
python3 - "$T/plan.json" <<'PY' || fail "--dry-run JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["dry_run"] is True and j["results"] == [], j
assert j["params"] == 8030261248, j["params"]   # Llama 3 8B
PY
for bad in "--ctx 8k,x" "--ctx 8" "--device tpu" "--config tiny --device cpu --ctx 16384"; do
    rc=0
    # shellcheck disable=SC2086
    python3 $A --dry-run $bad >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] || fail "anchor_hf.py $bad: exit $rc, expected 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "anchor_hf.py $bad: $(wc -l <"$T/err") stderr lines: $(cat "$T/err")"
done

# the table: a small real run on the CPU, the sim's table, an anchor with known numbers
"$KVBENCH" run --model random:tiny-llama --workload niah --ctx 400 --depths 50 --methods fullkv,h2o --budget 0.1 \
    --max-new 4 --fidelity 0 --quiet --db "$T/r.db" >/dev/null 2>&1 || fail "the tiny model run failed"
"$KVBENCH" sim --model random:tiny-llama --ctx 400 --methods fullkv,h2o --budget 0.1 --decode 4 --quiet \
    >"$T/sim.log" 2>&1 || fail "kvbench sim failed"
echo '{"results": [{"ctx": 400, "prefill_tok_s": 1000.0, "decode_tok_s": 50.0, "max_memory_allocated": 1073741824}]}' \
    >"$T/anchor.json"
python3 tests/gpu/paper_table.py --db "$T/r.db" --sim "$T/sim.log" --anchor "$T/anchor.json" >"$T/table" 2>&1 ||
    fail "paper_table.py failed: $(cat "$T/table")"
want=$(q "$T/r.db" "select printf('%.2f', r.decode_tokens / r.decode_s / 50.0) from results r where method = 'fullkv'")
grep -qE "^  400 +fullkv +ok .* $want\$" "$T/table" || fail "no fullkv row ending in the ratio $want: $(cat "$T/table")"
grep -qE "^  400 +h2o +ok " "$T/table" || fail "no h2o row"
simfast=$(awk -F'|' '$3 ~ /fullkv/ { gsub(/ /, "", $7); print $7 }' "$T/sim.log" | head -n 1)
[ -n "$simfast" ] && grep -qE "^  400 +fullkv .*\| +[0-9.]+ [KMG] +$(awk -v g="$simfast" 'BEGIN { b = g * 2^30; if (b >= 2^30) printf "%.2f G", g; else if (b >= 2^20) printf "%.1f M", b / 2^20; else printf "%.0f K", b / 2^10 }') \|" "$T/table" ||
    fail "the fullkv row lacks the sim's fast peak ($simfast GiB): $(cat "$T/table")"
grep -q "ctx 400 .*HF prefill 1000 tok/s, decode 50.0 tok/s, max_memory_allocated 1.00 G" "$T/table" ||
    fail "no anchor line: $(cat "$T/table")"

# the tiny config for real, where torch is installed (not in CI)
if python3 -c 'import torch, transformers' 2>/dev/null; then
    python3 $A --device cpu --config tiny --ctx 128,256 --decode 2 --json "$T/tiny.json" >"$T/tiny" 2>&1 ||
        fail "the tiny CPU run failed: $(tail -3 "$T/tiny")"
    python3 -c "import json; j = json.load(open('$T/tiny.json')); assert len(j['results']) == 2 and all(r['prefill_tok_s'] > 0 and r['decode_tok_s'] > 0 for r in j['results'])" ||
        fail "the tiny run's JSON"
else
    echo "note: torch not importable here: the tiny CPU run is skipped (dry run and table tested)"
fi
[ "$fails" = 0 ] || exit 1
echo "test_gpu_anchor: all checks passed"
