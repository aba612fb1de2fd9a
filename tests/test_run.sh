#!/usr/bin/env bash
# kvbench run end to end: the real binary and real SQLite files (sqlite3 CLI).
#  - a small run writes the expected rows, with provenance and per-layer/head rows;
#  - rerunning the same command resumes and adds nothing;
#  - a run killed with kill -9 mid-way, then rerun, ends with the complete set, no
#    duplicates, and the same numbers as an uninterrupted run;
#  - every bad input exits non-zero with one line on stderr naming the problem;
#  - --help works for run and methods.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
q() { sqlite3 "$1" "$2"; }

# ---------------------------------------------------------------- help
"$KVBENCH" run --help >"$T/help" || fail "run --help exited non-zero"
grep -q -- "--workload" "$T/help" && grep -q -- "--budget" "$T/help" || fail "run --help lacks the options"
"$KVBENCH" methods --help >/dev/null || fail "methods --help exited non-zero"
"$KVBENCH" methods >"$T/methods" || fail "methods exited non-zero"
for m in fullkv snapkv streamingllm; do grep -q "^$m" "$T/methods" || fail "methods does not list $m"; done

# ---------------------------------------------------------------- small run + resume
SMALL=(run --workload synthetic-niah --methods fullkv,snapkv,streamingllm --budget 0.25,64 --ctx 256,512
       --depths 0.2,0.8 --layers 2 --seed 7 --db "$T/small.db" --quiet)
"$KVBENCH" "${SMALL[@]}" >"$T/out1" 2>"$T/err1" || { cat "$T/err1"; fail "small run exited non-zero"; }
[ ! -s "$T/err1" ] || fail "--quiet run wrote to stderr: $(head -c 300 "$T/err1")"
want=$((2 * 2 * 3 * 2))
[ "$(q "$T/small.db" 'SELECT count(*) FROM results')" = "$want" ] || fail "small run: $(q "$T/small.db" 'SELECT count(*) FROM results') results, expected $want"
[ "$(q "$T/small.db" 'SELECT count(*) FROM runs')" = 1 ] || fail "small run: not exactly one run"
[ "$(q "$T/small.db" 'SELECT count(*) FROM cases')" = 4 ] || fail "small run: not 4 cases"
[ "$(q "$T/small.db" "SELECT count(*) FROM results WHERE status='ok'")" = "$want" ] || fail "small run: not all ok"
[ "$(q "$T/small.db" "SELECT count(*) FROM results WHERE method='fullkv' AND score=1 AND rel_err<1e-5")" = $((want / 3)) ] \
    || fail "small run: FullKV does not retrieve everything exactly"
[ "$(q "$T/small.db" 'SELECT count(*) FROM layer_err')" = $((want * 2)) ] || fail "layer_err rows"
[ "$(q "$T/small.db" 'SELECT count(*) FROM head_stats')" = $((want * 2 * 8)) ] || fail "head_stats rows"
[ "$(q "$T/small.db" "SELECT count(*) FROM results WHERE budget=64 AND budget_tokens=64")" = $((want / 2)) ] \
    || fail "budget 64 is not resolved to 64 tokens"
[ "$(q "$T/small.db" "SELECT count(*) FROM results r JOIN cases c ON c.id=r.case_id WHERE budget=0.25 AND budget_tokens=c.ctx/4")" = $((want / 2)) ] \
    || fail "budget 0.25 is not resolved to ctx/4 tokens"
[ "$(q "$T/small.db" "SELECT count(*) FROM results WHERE compress_s>=0 AND decode_s>0 AND prefill_s>0 AND fast_bytes>0 AND decode_tokens=8")" = "$want" ] \
    || fail "timings / memory / decode tokens missing"
prov=$(q "$T/small.db" "SELECT git_commit<>'' AND build_flags<>'' AND host<>'' AND cpu<>'' AND backend='cpu' AND seed=7 AND json_valid(config_json) FROM runs")
[ "$prov" = 1 ] || fail "run provenance incomplete: $(q "$T/small.db" 'SELECT * FROM runs')"
grep -q "^$want results written" "$T/out1" || fail "no summary line: $(tail -3 "$T/out1")"
grep -q "kvbench report --db" "$T/out1" || fail "no pointer to kvbench report"

"$KVBENCH" "${SMALL[@]}" >"$T/out2" 2>"$T/err2" || fail "rerun exited non-zero"
[ "$(q "$T/small.db" 'SELECT count(*) FROM results')" = "$want" ] || fail "rerun changed the row count"
grep -q "0 results written, $want already present" "$T/out2" || fail "rerun did not report a full resume: $(tail -1 "$T/out2")"
# A wider sweep of the same run adds only the new rows to the same run.
"$KVBENCH" "${SMALL[@]/0.25,64/0.25,64,0.5}" >/dev/null 2>&1 || fail "extended rerun exited non-zero"
[ "$(q "$T/small.db" 'SELECT count(*) FROM results')" = $((want * 3 / 2)) ] || fail "extended rerun: wrong row count"
[ "$(q "$T/small.db" 'SELECT count(*) FROM runs')" = 1 ] || fail "extended rerun started a new run"

# ---------------------------------------------------------------- decode rule, steps
# --decode append|hold is part of the run; the step count is --steps. Under append SnapKV
# holds its B compressed rows plus every decoded token, under hold B; StreamingLLM evicts
# under both (its paper). fast_decode_peak is the most held while decoding.
RULE=(run --workload synthetic-niah --methods snapkv,streamingllm --budget 64 --ctx 512 --depths 0.5 --layers 2
      --seed 7 --steps 12 --quiet)
"$KVBENCH" "${RULE[@]}" --db "$T/rule.db" >/dev/null 2>"$T/errr" || { cat "$T/errr"; fail "--steps run exited non-zero"; }
"$KVBENCH" "${RULE[@]}" --decode hold --db "$T/rule.db" >/dev/null 2>>"$T/errr" || { cat "$T/errr"; fail "--decode hold exited non-zero"; }
[ "$(q "$T/rule.db" "SELECT group_concat(CASE WHEN run_key LIKE '%;decode_rule=append;%' THEN 'append'
                                            WHEN run_key LIKE '%;decode_rule=hold;%' THEN 'hold' END, ' ') FROM runs")" = \
  "append hold" ] || fail "runs by rule: $(q "$T/rule.db" 'SELECT run_key FROM runs')"
# 2 layers x 2 kv heads; rows x 64 dims x 2 (K, V) x 4 bytes + SnapKV's 4-byte score per row
got=$(q "$T/rule.db" "SELECT group_concat(r.method || ':' || r.decode_tokens || ':' || r.fast_tokens || ':' ||
      (r.fast_decode_peak = r.fast_bytes), ' ') FROM results r JOIN cases c ON c.id = r.case_id ORDER BY c.run_id, r.method")
[ "$got" = "snapkv:12:304:1 streamingllm:12:256:1 snapkv:12:256:1 streamingllm:12:256:1" ] \
    || fail "rows under append / hold: $got"
set +e
"$KVBENCH" "${RULE[@]}" --decode 8 --db "$T/rule.db" 2>"$T/errd"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "expected append or hold (the step count is --steps N; through the model, --max-new N)" "$T/errd" || fail "--decode 8: rc $rc $(cat "$T/errd")"

# ---------------------------------------------------------------- kill -9, resume, compare
BIG=(run --workload synthetic-niah,synthetic-multikey --methods all --budget 0.05,0.1,0.2,48 --ctx 1024,2048
     --depths 0,0.5,1 --layers 2 --seed 11 --quiet)
n_methods=$("$KVBENCH" methods | grep -c '^[a-z]')
total=$((2 * 2 * 3 * n_methods * 4))
"$KVBENCH" "${BIG[@]}" --db "$T/killed.db" >/dev/null 2>&1 &
pid=$!
got=0
for _ in $(seq 1 600); do
    got=$(q "$T/killed.db" 'SELECT count(*) FROM results' 2>/dev/null || echo 0)
    [ "${got:-0}" -ge 5 ] && break
    sleep 0.05
done
{ kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true   # quiet: bash reports the killed job
got=$(q "$T/killed.db" 'SELECT count(*) FROM results')
{ [ "$got" -ge 5 ] && [ "$got" -lt "$total" ]; } || fail "kill -9 did not land mid-run ($got of $total rows)"
"$KVBENCH" "${BIG[@]}" --db "$T/killed.db" >/dev/null 2>"$T/err3" || { cat "$T/err3"; fail "resume after kill exited non-zero"; }
[ "$(q "$T/killed.db" 'SELECT count(*) FROM results')" = "$total" ] || fail "after resume: $(q "$T/killed.db" 'SELECT count(*) FROM results') rows, expected $total"
[ "$(q "$T/killed.db" 'SELECT count(*) FROM (SELECT 1 FROM results GROUP BY case_id, method, budget HAVING count(*) > 1)')" = 0 ] \
    || fail "duplicate results after resume"
[ "$(q "$T/killed.db" 'SELECT count(*) FROM runs')" = 2 ] || fail "expected one run per workload"
"$KVBENCH" "${BIG[@]}" --db "$T/clean.db" >/dev/null 2>&1 || fail "uninterrupted run exited non-zero"
cols="ru.workload, c.case_key, r.method, r.budget, r.status, r.budget_tokens, quote(r.score), quote(r.rel_err), r.fast_bytes, r.fast_tokens, r.slow_bytes"
sel="SELECT $cols FROM results r JOIN cases c ON c.id = r.case_id JOIN runs ru ON ru.id = c.run_id ORDER BY 1, 2, 3, 4"
q "$T/killed.db" "$sel" >"$T/killed.txt"
q "$T/clean.db" "$sel" >"$T/clean.txt"
cmp -s "$T/killed.txt" "$T/clean.txt" || fail "killed+resumed results differ from an uninterrupted run: $(diff "$T/killed.txt" "$T/clean.txt" | head -3)"

# ---------------------------------------------------------------- bad input
# Each: non-zero exit, exactly one line on stderr, containing the expected text, and no
# results file created by a rejected command line.
bad() {
    local expect=$1; shift
    local db="$T/never.db"
    rm -f "$db"
    if "$KVBENCH" run "$@" >"$T/bad.out" 2>"$T/bad.err"; then fail "accepted: $*"; return; fi
    [ "$(wc -l <"$T/bad.err")" = 1 ] || fail "not one line on stderr for: $* -> $(cat "$T/bad.err")"
    grep -qF -- "$expect" "$T/bad.err" || fail "message for '$*' lacks '$expect': $(cat "$T/bad.err")"
}
OK=(--ctx 64 --layers 1 --db "$T/never.db")
bad "'bogus'" --methods fullkv,bogus "${OK[@]}"
bad "snapkv" --methods bogus "${OK[@]}"
bad "--budget '0'" --budget 0 "${OK[@]}"
bad "--budget '-3'" --budget -3 "${OK[@]}"
bad "--budget '1.5'" --budget 1.5 "${OK[@]}"
bad "--budget 'abc'" --budget abc "${OK[@]}"
bad "--ctx: empty list" --ctx "" --db "$T/never.db"
bad "--ctx '8'" --ctx 8 --db "$T/never.db"
bad "empty item" --ctx 100,,200 --db "$T/never.db"
bad "--depths '1.5'" --depths 1.5 "${OK[@]}"
bad "--depths '-0.1'" --depths -0.1 "${OK[@]}"
bad "--depths 'x'" --depths x "${OK[@]}"
bad "synthetic-bogus" --workload synthetic-bogus "${OK[@]}"
bad "--layers '0'" --layers 0 --ctx 64 --db "$T/never.db"
bad "--threads 'two'" --threads two "${OK[@]}"
bad "--backend 'tpu'" --backend tpu "${OK[@]}"
bad "--frobnicate" --frobnicate 1 "${OK[@]}"
bad "--db FILE is required" --ctx 64
bad "--seed" --seed -1 "${OK[@]}"
bad "ctx 16" --workload synthetic-multikey --ctx 16 --db "$T/never.db"
[ ! -e "$T/never.db" ] || fail "a rejected command line created the results file"
bad "$T/no/such/dir/x.db" --ctx 64 --layers 1 --db "$T/no/such/dir/x.db"
mkdir -p "$T/adir"
bad "$T/adir" --ctx 64 --layers 1 --db "$T/adir"
bad "unknown parameter 'bogus'" --params sekv:bogus=1 "${OK[@]}"
bad "unknown method 'nope'" --params nope:x=1 "${OK[@]}"
bad "expected METHOD:key=value" --params sekv "${OK[@]}"

# --params: an ablation is its own run, its params recorded with each result
P=(--workload synthetic-niah --methods sekv --ctx 96 --layers 2 --depths 0.5 --quiet --db "$T/abl.db")
"$KVBENCH" run "${P[@]}" >/dev/null 2>&1 || fail "default sekv run failed"
"$KVBENCH" run "${P[@]}" --params "sekv:zoom=0,rank=8" >/dev/null 2>&1 || fail "ablation run failed"
runs=$(sqlite3 "$T/abl.db" "select count(*) from runs")
[ "$runs" = 2 ] || fail "--params should make its own run: $runs runs"
got=$(sqlite3 "$T/abl.db" "select coalesce(params,'-') from results order by id" | tr '\n' ' ')
[ "$got" = "- zoom=0,rank=8 " ] || fail "recorded params: '$got'"
"$KVBENCH" run "${P[@]}" --params "sekv:zoom=0,rank=8" >/dev/null 2>&1
n=$(sqlite3 "$T/abl.db" "select count(*) from results")
[ "$n" = 2 ] || fail "rerun of the ablation should resume: $n results"

if [ "$fails" -gt 0 ]; then echo "test_run: $fails failures"; exit 1; fi
echo "test_run: all checks passed"
