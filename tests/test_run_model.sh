#!/usr/bin/env bash
# kvbench run through the real model (SmolLM2 from `make model`) on a tiny NIAH grid,
# with the real SQLite file and gnuplot:
#  - a run writes one row per (case, method, budget) with text, score, timings, memory
#    and head statistics; the score is recomputed here from the stored text; FullKV
#    finds the needle; the run config records the template and stop tokens;
#  - rerunning the same command adds nothing; kill -9 mid-run then a rerun ends with the
#    complete set and no duplicates; --jobs 2 splits the cases over two processes;
#  - SeKV that cannot fit its budget (8 tokens: the sinks and window alone) is recorded
#    infeasible; its zoom-ins are recorded per step and add up to its per-head counters;
#    the zoom figure draws them;
#  - FullKV answers the same whether the question is compressed or fed after (exact cache);
#  - the memory/latency/budget figures draw from the file;
#  - an unknown workload, a context beyond the model, a missing model file or haystack,
#    an unknown backend each give one line on stderr and a non-zero exit, before any work;
#  - --backend cuda without a usable device says so in one line and runs on the CPU,
#    recorded as cpu (a random model with a text workload).
# The haystack is a text written here (fixed), so the test does not need the download.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$MODEL" ]; then echo "SKIP: $MODEL is absent (make model)"; exit 0; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
q() { sqlite3 "$1" "$2"; }

# A plain-sentence haystack: 400 sentences from fixed word lists (no needle words).
subj=("The committee" "A farmer" "The old bridge" "Our neighbour" "The river" "A small shop" "The library")
verb=(repaired visited painted described ignored measured admired photographed)
obj=("the fence" "a map of the valley" "the station clock" "an empty warehouse" "the orchard" "a wooden boat")
tail=("in the morning." "before the storm." "after lunch." "on a quiet Sunday." "during the winter.")
for i in $(seq 0 399); do
    printf '%s %s %s %s ' "${subj[i % 7]}" "${verb[(i * 3) % 8]}" "${obj[(i * 5) % 6]}" "${tail[(i * 7) % 5]}"
done >"$T/hay.txt"

RUN=(run --model "$MODEL" --workload niah --ctx 512 --depths 50 --methods fullkv,snapkv,streamingllm
     --budget 0.2 --max-new 16 --haystack "$T/hay.txt" --threads 2)

# ---------------------------------------------------------------- a run, and its rows
"$KVBENCH" "${RUN[@]}" --db "$T/a.db" >"$T/out1" 2>"$T/err1" || { cat "$T/err1"; fail "run exited non-zero"; }
[ "$(q "$T/a.db" 'SELECT count(*) FROM results')" = 3 ] || fail "expected 3 results, got $(q "$T/a.db" 'SELECT count(*) FROM results')"
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE status='ok'")" = 3 ] || fail "not all ok: $(q "$T/a.db" 'SELECT method,status,output FROM results')"
[ "$(q "$T/a.db" "SELECT budget FROM results WHERE method='fullkv'")" = 1.0 ] || fail "fullkv not recorded once at budget 1"
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE method<>'fullkv' AND budget=0.2")" = 2 ] || fail "budget 0.2 rows"
[ "$(q "$T/a.db" "SELECT ctx || ' ' || depth || ' ' || variant FROM cases")" = "512 0.5 niah" ] \
    || fail "case row: $(q "$T/a.db" 'SELECT * FROM cases')"
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE prefill_s>0 AND compress_s>=0 AND decode_s>0 AND decode_tokens>0
       AND decode_tokens<=16 AND tokens_per_s>0 AND fast_peak>=fast_bytes AND fast_bytes>0 AND length(output)>0")" = 3 ] \
    || fail "timings/memory/output missing: $(q "$T/a.db" 'SELECT * FROM results')"
# Memory: FullKV holds every prompt and generated row, 30 layers x 3 kv heads x 64 x 2 x 4 bytes each.
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE method='fullkv' AND fast_tokens % 90 = 0 AND fast_tokens/90 > 300
       AND fast_bytes = fast_tokens * 64 * 2 * 4")" = 1 ] || fail "fullkv memory is not its rows: $(q "$T/a.db" "SELECT fast_tokens, fast_bytes FROM results WHERE method='fullkv'")"
[ "$(q "$T/a.db" "SELECT (SELECT fast_peak FROM results WHERE method='fullkv') > 3 * max(fast_peak) FROM results WHERE method<>'fullkv'")" = 1 ] \
    || fail "compressed methods do not hold far less than fullkv at budget 0.2"
[ "$(q "$T/a.db" 'SELECT count(*) FROM head_stats')" = $((3 * 30 * 9)) ] || fail "head_stats rows"
# The score, recomputed from the stored text: NIAH needs both references, case-insensitively.
while IFS='|' read -r m score out; do
    want=0
    if [[ "${out,,}" == *sandwich* && "${out,,}" == *"dolores park"* ]]; then want=1; fi
    [ "$(printf '%.0f' "$score")" = "$want" ] || fail "$m: score $score does not match its text '$out'"
done < <(q "$T/a.db" "SELECT method, score, replace(output, char(10), ' ') FROM results")
[ "$(q "$T/a.db" "SELECT score FROM results WHERE method='fullkv'")" = 1.0 ] \
    || fail "FullKV did not find the needle: $(q "$T/a.db" "SELECT output FROM results WHERE method='fullkv'")"
cfg=$(q "$T/a.db" "SELECT json_extract(config_json,'$.template') || ' ' || json_extract(config_json,'$.stop_ids')
       || ' ' || json_extract(config_json,'$.question_after') || ' ' || json_valid(config_json) FROM runs")
[ "$cfg" = "chatml [0,2] 0 1" ] || fail "run config lacks template/stop tokens: $cfg"
grep -q "^3 results written, 0 already present" "$T/out1" || fail "summary line: $(tail -2 "$T/out1")"
grep -q "ETA" "$T/err1" || fail "no progress lines with an ETA"

# ---------------------------------------------------------------- resume
"$KVBENCH" "${RUN[@]}" --db "$T/a.db" >"$T/out2" 2>&1 || fail "rerun exited non-zero"
[ "$(q "$T/a.db" 'SELECT count(*) FROM results')" = 3 ] || fail "rerun changed the row count"
grep -q "^0 results written, 3 already present" "$T/out2" || fail "rerun did not resume: $(tail -2 "$T/out2")"

# ---------------------------------------------------------------- SeKV: infeasible status, zoom events
# Same run (methods and budgets only select results): at 8 tokens SeKV's persistent part does
# not fit, which it finds at ingest; at 0.5 it runs and logs its zoom-ins.
"$KVBENCH" "${RUN[@]/fullkv,snapkv,streamingllm/sekv}" --budget 8,0.5 --db "$T/a.db" >/dev/null 2>"$T/errs" \
    || { cat "$T/errs"; fail "sekv run exited non-zero"; }
[ "$(q "$T/a.db" 'SELECT count(*) FROM runs')" = 1 ] || fail "the sekv results started a new run"
[ "$(q "$T/a.db" "SELECT status FROM results WHERE method='sekv' AND budget=8")" = infeasible ] \
    || fail "sekv at 8 tokens: $(q "$T/a.db" "SELECT status, output FROM results WHERE method='sekv' AND budget=8")"
q "$T/a.db" "SELECT output FROM results WHERE method='sekv' AND budget=8" | grep -q "exceeds" || fail "sekv infeasible without its reason"
[ "$(q "$T/a.db" "SELECT status FROM results WHERE method='sekv' AND budget=0.5")" = ok ] || fail "sekv at 0.5 not ok"
[ "$(q "$T/a.db" "SELECT count(*) > 0 FROM zoom_events z JOIN results r ON r.id = z.result_id WHERE r.method='sekv'")" = 1 ] \
    || fail "no zoom events recorded for sekv"
# The per-step log and the per-head counters are two records of the same zoom-ins.
[ "$(q "$T/a.db" "SELECT count(*) FROM head_stats h JOIN results r ON r.id = h.result_id
       LEFT JOIN (SELECT result_id, layer, head, sum(expanded) s FROM zoom_events GROUP BY 1, 2, 3) z
       ON z.result_id = h.result_id AND z.layer = h.layer AND z.head = h.head
       WHERE r.method='sekv' AND r.budget=0.5 AND h.events = ifnull(z.s, 0)")" = $((30 * 9)) ] \
    || fail "zoom events do not add up to the head_stats events"
[ "$(q "$T/a.db" "SELECT count(*) FROM zoom_events z JOIN results r ON r.id = z.result_id
       WHERE z.step < 0 OR z.step >= r.decode_tokens OR z.layer >= 30 OR z.head >= 9 OR z.expanded < 1")" = 0 ] \
    || fail "zoom events out of range"
"$KVBENCH" plot --db "$T/a.db" --figure zoom --out "$T/zoom" >/dev/null 2>"$T/perr" || fail "plot zoom: $(cat "$T/perr")"
[ "$(grep -c '^[0-9]' "$T/zoom.dat")" = $((30 * 9)) ] || fail "zoom figure: not one cell per layer and head"

# ---------------------------------------------------------------- question after the compressed context
"$KVBENCH" "${RUN[@]/fullkv,snapkv,streamingllm/fullkv}" --question-after --db "$T/a.db" >/dev/null 2>"$T/err3" \
    || { cat "$T/err3"; fail "--question-after run exited non-zero"; }
[ "$(q "$T/a.db" 'SELECT count(*) FROM runs')" = 2 ] || fail "--question-after is not its own run"
[ "$(q "$T/a.db" "SELECT count(DISTINCT output) FROM results WHERE method='fullkv'")" = 1 ] \
    || fail "FullKV answers differently with --question-after: $(q "$T/a.db" "SELECT output FROM results WHERE method='fullkv'")"

# ---------------------------------------------------------------- kill -9, resume; --jobs
KILL=(run --model "$MODEL" --workload niah --ctx 512 --depths 0,100 --methods fullkv,h2o,snapkv --budget 0.2
      --max-new 16 --haystack "$T/hay.txt" --quiet --db "$T/k.db")
"$KVBENCH" "${KILL[@]}" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    got=$(q "$T/k.db" 'SELECT count(*) FROM results' 2>/dev/null || echo 0)
    [ "${got:-0}" -ge 1 ] && break
    sleep 0.05
done
{ kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
got=$(q "$T/k.db" 'SELECT count(*) FROM results')
{ [ "$got" -ge 1 ] && [ "$got" -lt 6 ]; } || fail "kill -9 did not land mid-run ($got of 6 rows)"
"$KVBENCH" "${KILL[@]}" --jobs 2 >"$T/out4" 2>"$T/err4" || { cat "$T/err4"; fail "resume with --jobs 2 exited non-zero"; }
[ "$(q "$T/k.db" 'SELECT count(*) FROM results')" = 6 ] || fail "after resume: $(q "$T/k.db" 'SELECT count(*) FROM results') rows, expected 6"
[ "$(q "$T/k.db" 'SELECT count(*) FROM (SELECT 1 FROM results GROUP BY case_id, method, budget HAVING count(*) > 1)')" = 0 ] \
    || fail "duplicate results after resume"
grep -q "^$((6 - got)) results written, $got already present" "$T/out4" || fail "--jobs summary: $(tail -1 "$T/out4")"

# ---------------------------------------------------------------- figures
for fig in memory latency budget niah; do
    "$KVBENCH" plot --db "$T/k.db" --figure "$fig" --out "$T/$fig" >/dev/null 2>"$T/perr" || fail "plot $fig: $(cat "$T/perr")"
    head -c 8 "$T/$fig.png" | grep -q PNG || fail "plot $fig: no PNG"
    grep -q "<svg" "$T/$fig.svg" || fail "plot $fig: no SVG"
done
[ "$(grep -c '^[0-9]' "$T/memory.dat")" = 3 ] || fail "memory figure: expected one point per method"
if "$KVBENCH" plot --db "$T/k.db" --figure zoom --out "$T/zoom" 2>"$T/zerr"; then fail "zoom figure without sekv results"; fi
grep -q "sekv" "$T/zerr" || fail "zoom figure error does not name sekv"

# ---------------------------------------------------------------- bad input: one line, non-zero, no work
expect_fail() {   # expect_fail "message part" args...
    local want=$1; shift
    if "$KVBENCH" "$@" >"$T/o" 2>"$T/e"; then fail "'$*' succeeded"; return; fi
    [ "$(wc -l <"$T/e")" = 1 ] || fail "'$*': not one line on stderr: $(cat "$T/e")"
    grep -q -- "$want" "$T/e" || fail "'$*': '$(cat "$T/e")' lacks '$want'"
}
expect_fail "unknown workload" run --workload needles --db "$T/x.db"
expect_fail "beyond the context" run --model "$MODEL" --workload niah --ctx 512,9000 --db "$T/x.db"
expect_fail "no-such.gguf" run --model "$T/no-such.gguf" --workload niah --db "$T/x.db"
expect_fail "nohay" run --model "$MODEL" --workload niah --ctx 512 --haystack "$T/nohay" --db "$T/x.db"
expect_fail "unknown RULER task" run --model "$MODEL" --workload ruler:nope --db "$T/x.db"
expect_fail "percentage" run --model "$MODEL" --workload niah --depths 0.5,150 --db "$T/x.db"
expect_fail "expected cpu or cuda" run --model "$MODEL" --workload niah --backend gpu --db "$T/x.db"
[ ! -e "$T/x.db" ] || fail "a refused run created its results file"

# ---------------------------------------------------------------- --backend cuda where none is usable
# (this machine has no GPU; in a CPU-only build there is no CUDA backend at all): one line
# saying so, the run on the CPU, recorded as cpu. A random model with a text workload.
"$KVBENCH" run --model random:tiny-llama --backend cuda --workload niah --ctx 450 --depths 50 \
    --methods fullkv,sekv-spread --max-new 2 --haystack "$T/hay.txt" --db "$T/cuda.db" --quiet >"$T/co" 2>"$T/ce" ||
    fail "run --backend cuda without a device failed: $(cat "$T/ce")"
if ! command -v nvidia-smi >/dev/null 2>&1; then
    grep -q "^kvbench run: --backend cuda: .*running on the CPU" "$T/ce" || fail "--backend cuda fallback not said: $(cat "$T/ce")"
    [ "$(q "$T/cuda.db" "SELECT backend FROM runs")" = cpu ] || fail "fallback run not recorded as cpu"
    [ "$(q "$T/cuda.db" "SELECT count(*) FROM results WHERE status = 'ok' AND gpu_peak_bytes IS NULL")" = 2 ] ||
        fail "CPU results with device columns, or missing"
fi
"$KVBENCH" run --workload niah --help | grep -q -- "--question-after" || fail "run --workload niah --help"

if [ "$fails" -gt 0 ]; then echo "test_run_model: $fails failure(s)"; exit 1; fi
echo "test_run_model: all checks passed"
