#!/usr/bin/env bash
# kvbench run through the real model (SmolLM2 from `make model`) on a tiny NIAH grid,
# with the real SQLite file and gnuplot:
#  - a run writes one row per (case, method, budget) with text, score, timings, memory
#    and head statistics; the score is recomputed here from the stored text; FullKV
#    finds the needle; the run config records the template and stop tokens;
#  - ruler with --qa-data lists all 13 tasks (fixture SQuAD/HotpotQA files), without it the
#    11 synthetic ones and a note; qa_1/qa_2 run and score by string_match_part;
#  - --print-prompts writes the exact prompt (sha256sum agrees) and the hash the run stores;
#  - NIAH off the defaults (dev split, samples, distractors, own needle, answer prefix) is
#    in the cases, the run key, the configuration and the report header;
#  - rerunning the same command adds nothing; kill -9 mid-run then a rerun ends with the
#    complete set and no duplicates; --jobs 2 splits the cases over two processes;
#  - SeKV that cannot fit its budget (8 tokens: the sinks and window alone) is recorded
#    infeasible; its zoom-ins are recorded per step and add up to its per-head counters;
#    the zoom figure draws them;
#  - FullKV answers the same whether the question is compressed or fed after (exact cache);
#  - the memory/latency/budget figures draw from the file;
#  - fidelity against FullKV (answer NLL, KL, top-1, per-layer error; FullKV exactly 0 against
#    itself), report --metric, --table compare, plot --metric; --fidelity 0; --repeat 3;
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
     --budget 0.2 --max-new 16 --haystack "$T/hay.txt" --threads 2
     --answer-prefix "The best thing to do in San Francisco is")   # KVCache-Factory's: short answers

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
# The decode rule: append (default) keeps the compressed prompt and adds every decoded token;
# hold keeps B rows per layer and kv head; streamingllm evicts under both (its paper). Each
# rule is its own run, named in the report header; the steady (decode-time) fast tier and
# the measured peak RSS are recorded per result, the prefill's RSS per case.
[ "$(q "$T/a.db" "SELECT count(*) FROM runs WHERE run_key LIKE '%;decode_rule=append%' AND config_json LIKE '%\"decode_rule\":\"append\"%'")" = 1 ] \
    || fail "the run does not record decode_rule=append: $(q "$T/a.db" 'SELECT run_key FROM runs')"
[ "$(q "$T/a.db" "SELECT fast_tokens = 90 * (budget_tokens + decode_tokens) FROM results WHERE method='snapkv'")" = 1 ] \
    || fail "snapkv under append: $(q "$T/a.db" "SELECT fast_tokens, budget_tokens, decode_tokens FROM results WHERE method='snapkv'")"
[ "$(q "$T/a.db" "SELECT fast_tokens = 90 * budget_tokens FROM results WHERE method='streamingllm'")" = 1 ] \
    || fail "streamingllm must evict while decoding under append too"
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE fast_decode_peak >= fast_bytes AND fast_decode_peak <= fast_peak
       AND rss_peak > fast_decode_peak")" = 3 ] \
    || fail "steady/peak/RSS columns: $(q "$T/a.db" 'SELECT method, fast_bytes, fast_decode_peak, fast_peak, rss_peak FROM results')"
[ "$(q "$T/a.db" "SELECT count(*) FROM cases WHERE rss_peak > 0")" = 1 ] || fail "the case's prefill RSS is not recorded"
sqlite3 "$T/a.db" ".backup $T/h.db"
"$KVBENCH" "${RUN[@]}" --decode hold --db "$T/h.db" >"$T/outh" 2>"$T/errh" || { cat "$T/errh"; fail "run --decode hold exited non-zero"; }
grep -q "resuming" "$T/errh" && fail "--decode hold resumed the append run"
grep -q "decode rule: hold" "$T/outh" || fail "the run summary does not name the rule"
[ "$(q "$T/h.db" "SELECT count(*) FROM runs")" = 2 ] || fail "--decode hold is not a run of its own"
[ "$(q "$T/h.db" "SELECT r.fast_tokens = 90 * r.budget_tokens FROM results r JOIN cases c ON c.id = r.case_id
       JOIN runs u ON u.id = c.run_id WHERE u.run_key LIKE '%decode_rule=hold%' AND r.method='snapkv'")" = 1 ] \
    || fail "snapkv under hold does not keep B rows"
"$KVBENCH" report --db "$T/h.db" --run 1 >"$T/rep1" && head -1 "$T/rep1" | grep -q "decode rule append" \
    || fail "report header lacks the rule (append)"
"$KVBENCH" report --db "$T/h.db" --run 2 --table memory >"$T/rep2" && head -1 "$T/rep2" | grep -q "decode rule hold" \
    || fail "report header lacks the rule (hold)"
grep -q "### fast-tier KV at decode (steady)" "$T/rep2" || fail "memory table lacks the steady figure"
grep -q "### process peak RSS, measured" "$T/rep2" || fail "memory table lacks the RSS"
set +e
"$KVBENCH" "${RUN[@]}" --decode evict --db "$T/a.db" 2>"$T/errd"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--decode 'evict': expected append or hold" "$T/errd" || fail "a bad --decode: rc $rc, $(cat "$T/errd")"

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

# ---------------------------------------------------------------- fidelity against FullKV, load average
# FullKV against itself: KL 0, top-1 1, layer errors 0; the others: KL >= 0, top-1 in [0,1],
# an answer NLL for the same reference tokens, one layer error per layer; the case's load average.
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE method='fullkv' AND kl = 0 AND top1 = 1 AND rel_err = 0
       AND fid_steps BETWEEN 1 AND 16 AND ans_tokens > 5 AND ans_nll > 0")" = 1 ] \
    || fail "fullkv fidelity: $(q "$T/a.db" "SELECT kl, top1, rel_err, fid_steps, ans_tokens, ans_nll FROM results WHERE method='fullkv'")"
[ "$(q "$T/a.db" "SELECT count(*) FROM results WHERE method<>'fullkv' AND kl >= 0 AND top1 BETWEEN 0 AND 1 AND rel_err > 0
       AND fid_steps = (SELECT fid_steps FROM results WHERE method='fullkv')
       AND ans_tokens = (SELECT ans_tokens FROM results WHERE method='fullkv') AND ans_nll > 0")" = 2 ] \
    || fail "fidelity of the compressed methods: $(q "$T/a.db" 'SELECT method, kl, top1, rel_err, fid_steps, ans_tokens, ans_nll FROM results')"
[ "$(q "$T/a.db" "SELECT count(*) FROM layer_err")" = $((3 * 30)) ] || fail "per-layer errors: $(q "$T/a.db" 'SELECT count(*) FROM layer_err')"
[ "$(q "$T/a.db" "SELECT count(*) FROM results r WHERE abs(r.rel_err - (SELECT avg(rel_err) FROM layer_err l
       WHERE l.result_id = r.id)) < 1e-12")" = 3 ] || fail "rel_err is not the mean of the layer errors"
[ "$(q "$T/a.db" "SELECT count(*) FROM cases WHERE load_start >= 0 AND load_end >= 0")" = 1 ] || fail "load average not recorded"
"$KVBENCH" report --db "$T/a.db" --metric kl >"$T/kl.md" || fail "report --metric kl"
# one case: the value without an interval (no spread to estimate from one case)
grep -q "| fullkv | 1 | 0.000 n=1" "$T/kl.md" || fail "report --metric kl: $(grep fullkv "$T/kl.md")"
"$KVBENCH" report --db "$T/a.db" --table compare --base fullkv >"$T/cmp.md" || fail "report --table compare"
grep -q "^| snapkv | 0.2 | 1 |" "$T/cmp.md" || fail "compare table: $(cat "$T/cmp.md")"
"$KVBENCH" plot --db "$T/a.db" --metric nll --out "$T/nll" >/dev/null 2>"$T/perr" || fail "plot --metric nll: $(cat "$T/perr")"
[ "$(grep -c '^[0-9]' "$T/nll.dat")" = 3 ] || fail "nll heatmap: expected one cell per method"
# --fidelity 0: nothing measured (NULL); --repeat 3: the medians of three runs, with their spread
"$KVBENCH" "${RUN[@]/fullkv,snapkv,streamingllm/fullkv}" --fidelity 0 --repeat 3 --db "$T/r.db" >/dev/null 2>"$T/errr" \
    || { cat "$T/errr"; fail "--fidelity 0 --repeat 3 exited non-zero"; }
[ "$(q "$T/r.db" "SELECT count(*) FROM results WHERE kl IS NULL AND ans_nll IS NULL AND repeats = 3
       AND compress_spread >= 0 AND decode_spread >= 0 AND decode_s > 0")" = 1 ] \
    || fail "--fidelity 0 --repeat 3: $(q "$T/r.db" 'SELECT kl, ans_nll, repeats, compress_spread, decode_spread FROM results')"
[ "$(q "$T/r.db" "SELECT output FROM results")" = "$(q "$T/a.db" "SELECT output FROM results WHERE method='fullkv'")" ] \
    || fail "--repeat changed FullKV's answer"

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
# a rate: expanded over the spans available, in [0, 1], on the fixed 0-1 scale
[ "$(q "$T/a.db" "SELECT count(*) FROM zoom_events WHERE spans IS NULL OR spans < expanded")" = 0 ] \
    || fail "zoom events without the spans the head could expand"
awk '/^[0-9]/ && ($3 < 0 || $3 > 1) { bad = 1 } END { exit bad }' "$T/zoom.dat" || fail "zoom rate outside [0, 1]"
grep -q "set cbrange \[0:1\]" "$T/zoom.gp" || fail "zoom figure not on the fixed 0-1 scale"
"$KVBENCH" report --db "$T/a.db" --table zoom >"$T/zoom.md" || fail "report --table zoom"
grep -q "^| sekv | 0.5 | 1 | 270 |" "$T/zoom.md" || fail "zoom table: $(cat "$T/zoom.md")"
# sekv's alpha as fitted for this prompt, recorded with the result
q "$T/a.db" "SELECT n.text FROM result_notes n JOIN results r ON r.id = n.result_id
   WHERE r.method = 'sekv' AND r.budget = 0.5 AND n.key = 'params_used'" | grep -q "^alpha=[0-9.]*,.*,alpha_grid=0.5:8:0.25," \
    || fail "sekv's fitted alpha not recorded"

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
# ---------------------------------------------------------------- --print-prompts
# The printed text is exactly the prompt: its sha256sum is the header's and the one the run
# stored for the case, with the same token count; nothing is run or written.
"$KVBENCH" "${RUN[@]}" --print-prompts 5 --db "$T/pp.db" >"$T/pp" 2>"$T/ppe" || fail "--print-prompts: $(cat "$T/ppe")"
[ ! -e "$T/pp.db" ] || fail "--print-prompts wrote a results file"
read -r _ _ _ key ntok _ nbytes _ _ sha _ < <(head -1 "$T/pp" | tr -d ',')
[ "$(grep -c '^=== prompt ' "$T/pp")" = 1 ] || fail "--print-prompts 5 of 1 case: $(grep -c '^=== prompt ' "$T/pp") prompts"
[ "$(tail -n +2 "$T/pp" | head -c "$nbytes" | sha256sum | cut -d' ' -f1)" = "$sha" ] || fail "printed prompt vs its sha256"
[ "$(q "$T/a.db" "SELECT prompt_sha256 || ' ' || prompt_tokens || ' ' || case_key FROM cases WHERE run_id = 1")" = "$sha $ntok $key" ] ||
    fail "stored prompt hash: $(q "$T/a.db" 'SELECT prompt_sha256, prompt_tokens, case_key FROM cases') vs $sha $ntok $key"

# ---------------------------------------------------------------- RULER qa_1, qa_2 (--qa-data)
# All 13 tasks with the fixture files, 11 and a note without; the two qa tasks through the
# model, scored by string_match_part against the fixture's answers.
"$KVBENCH" run --model "$MODEL" --workload ruler --qa-data tests/fixtures/ruler_qa --haystack "$T/hay.txt" --ctx 1024 \
    --print-prompts 100 >"$T/r13" 2>"$T/r13e" || fail "ruler with --qa-data: $(cat "$T/r13e")"
[ "$(grep -o '^=== prompt [0-9]*/[0-9]*: ruler:[a-z_0-9]*' "$T/r13" | sed 's/.*ruler://' | tr '\n' ' ')" = \
  "niah_single_1 niah_single_2 niah_single_3 niah_multikey_1 niah_multikey_2 niah_multikey_3 niah_multivalue niah_multiquery vt cwe fwe qa_1 qa_2 " ] ||
    fail "ruler --qa-data tasks: $(grep '^=== prompt' "$T/r13")"
"$KVBENCH" run --model "$MODEL" --workload ruler --haystack "$T/hay.txt" --ctx 1024 --print-prompts 100 >"$T/r11" 2>"$T/r11e" ||
    fail "ruler without --qa-data: $(cat "$T/r11e")"
[ "$(grep -c '^=== prompt' "$T/r11")" = 11 ] && ! grep -q 'ruler:qa_' "$T/r11" || fail "ruler without --qa-data: not the 11 synthetic tasks"
grep -q "qa_1 and qa_2 need --qa-data DIR .*running the 11 synthetic tasks" "$T/r11e" || fail "no note on the left-out qa tasks: $(cat "$T/r11e")"
"$KVBENCH" run --model "$MODEL" --workload ruler:qa_1,qa_2 --qa-data tests/fixtures/ruler_qa --ctx 400 --methods fullkv \
    --max-new 8 --threads 2 --quiet --db "$T/qa.db" >/dev/null 2>"$T/qae" || fail "qa run: $(cat "$T/qae")"
[ "$(q "$T/qa.db" "SELECT group_concat(variant, ' ') FROM (SELECT variant FROM cases ORDER BY variant)")" = "ruler:qa_1 ruler:qa_2" ] ||
    fail "qa cases: $(q "$T/qa.db" 'SELECT variant FROM cases')"
while IFS='|' read -r v score out; do     # string_match_part, recomputed: 1 if an answer occurs (case-insensitive)
    want=0
    case $v in ruler:qa_1) ans="1874" ;; *) ans="the alder river" ;; esac
    case "$(printf '%s' "$out" | tr 'A-Z' 'a-z')" in *"$ans"*) want=1 ;; esac
    [ "$(printf '%.0f' "$score")" = "$want" ] || fail "$v: score $score for '$out' (answer '$ans')"
done < <(q "$T/qa.db" "SELECT c.variant, r.score, replace(r.output, char(10), ' ') FROM results r JOIN cases c ON c.id = r.case_id")
q "$T/qa.db" "SELECT run_key FROM runs" | grep -q "squad=[0-9a-f]\{16\};hotpotqa=[0-9a-f]\{16\}" || fail "qa data not in the run key"
expect_fail "needs --qa-data DIR holding squad.json" run --model "$MODEL" --workload ruler:qa_1 --db "$T/x.db"
expect_fail "hotpotqa.json" run --model "$MODEL" --workload ruler:qa_2 --qa-data "$T" --db "$T/x.db"
expect_fail "applies to ruler only" run --model "$MODEL" --workload niah --qa-data "$T" --db "$T/x.db"

expect_fail "unknown workload" run --workload needles --db "$T/x.db"
expect_fail "beyond the context" run --model "$MODEL" --workload niah --ctx 512,9000 --db "$T/x.db"
expect_fail "no-such.gguf" run --model "$T/no-such.gguf" --workload niah --db "$T/x.db"
expect_fail "nohay" run --model "$MODEL" --workload niah --ctx 512 --haystack "$T/nohay" --db "$T/x.db"
expect_fail "unknown RULER task" run --model "$MODEL" --workload ruler:nope --db "$T/x.db"
expect_fail "percentage" run --model "$MODEL" --workload niah --depths 0.5,150 --db "$T/x.db"
expect_fail "expected cpu or cuda" run --model "$MODEL" --workload niah --backend gpu --db "$T/x.db"
expect_fail "not in the needle" run --model "$MODEL" --workload niah --needle "The code is 12345." --question "Code?" \
    --answer 54321 --db "$T/x.db"
expect_fail "needs --question" run --model "$MODEL" --workload niah --needle "The code is 12345." --db "$T/x.db"
expect_fail "applies to niah only" run --model "$MODEL" --workload ruler:vt --samples 2 --db "$T/x.db"
expect_fail "expected dev or test" run --model "$MODEL" --workload niah --split train --db "$T/x.db"
expect_fail "distractor" run --model "$MODEL" --workload niah --needles 3 --needle "The best thing to do is X." \
    --question "What?" --answer "the best" --db "$T/x.db"
[ ! -e "$T/x.db" ] || fail "a refused run created its results file"

# ---------------------------------------------------------------- NIAH off the defaults
# dev split, two haystack starts, a distractor, a custom needle and an answer prefix: the
# cases, the run key, the configuration and the report header all carry them.
NI=(run --model random:tiny-llama --workload niah --ctx 450 --depths 50 --methods fullkv --max-new 2
    --haystack "$T/hay.txt" --quiet --split dev --samples 2 --needles 2 --needle "The secret code is 4242."
    --question "What is the secret code?" --answer 4242 --answer-prefix "The code is")
"$KVBENCH" "${NI[@]}" --db "$T/ni.db" >"$T/nio" 2>"$T/nie" || fail "off-default niah run failed: $(cat "$T/nie")"
[ "$(q "$T/ni.db" "SELECT group_concat(case_key, ' ') FROM (SELECT case_key FROM cases ORDER BY case_key)")" = \
  "niah/niah-L450-d50 niah/niah-L450-d50-s1" ] || fail "samples: $(q "$T/ni.db" 'SELECT case_key FROM cases')"
q "$T/ni.db" "SELECT run_key FROM runs" | grep -q ";niah=split:dev/needles:2/samples:2/needle:[0-9a-f]\{16\}/prefix:custom" ||
    fail "run key: $(q "$T/ni.db" 'SELECT run_key FROM runs')"
q "$T/ni.db" "SELECT config_json FROM runs" | grep -q '"split":"test"' && fail "config says test"
for want in '"split":"dev"' '"needle":"The secret code is 4242."' '"answer_keywords":"4242"' '"answer_prefix":"The code is"' \
            '"needles":2' '"samples":2'; do
    q "$T/ni.db" "SELECT config_json FROM runs" | grep -qF "$want" || fail "config lacks $want"
done
head -1 <<<"$("$KVBENCH" report --db "$T/ni.db")" | grep -q "niah split:dev/needles:2/samples:2" || fail "report header: $("$KVBENCH" report --db "$T/ni.db" | head -1)"
"$KVBENCH" "${NI[@]/--split/--split}" --split test --db "$T/ni.db" >/dev/null 2>"$T/nie" || fail "test split run: $(cat "$T/nie")"
[ "$(q "$T/ni.db" "SELECT count(*) FROM runs")" = 2 ] || fail "dev and test are not separate runs"

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
"$KVBENCH" run --workload niah --help >"$T/help" || fail "run --workload niah --help exited non-zero"
for f in --question-after --split --samples --needles --needle --answer-prefix; do
    grep -q -- "$f" "$T/help" || fail "run --workload niah --help lacks $f"
done
grep -q -- "--decode RULE" "$T/help" || fail "run --help lacks --decode"

if [ "$fails" -gt 0 ]; then echo "test_run_model: $fails failure(s)"; exit 1; fi
echo "test_run_model: all checks passed"
