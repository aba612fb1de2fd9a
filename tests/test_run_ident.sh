#!/usr/bin/env bash
# Run identity = code + configuration. Rerunning "the same command" resumes only when
# the code and every method's effective parameters are the same:
#  - a rerun resumes; --params equal to a default is the default (same run, recorded as
#    the defaults);
#  - a changed default (KVBENCH_TEST_DEFAULTS, the test hook that stands for an edit of a
#    method's source) starts a new run, computed with the new default;
#  - another commit (KVBENCH_GIT_COMMIT, the hook that stands for one) starts a new run,
#    and so do other compiled sources (KVBENCH_SOURCE_HASH; tests/test_source_ident.sh
#    edits a real untracked file);
#  - --split dev and --oracle-hints 1 are runs of their own, with other generator seeds
#    and other text statistics;
#  - report puts the runs side by side (never pooled into one row) and names split and
#    hints in its headers.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
q() { sqlite3 "$T/id.db" "$1"; }

R=(run --workload synthetic-niah --methods snapkv --budget 0.1 --ctx 512 --layers 2 --depths 0.3,0.7 --seed 7
   --db "$T/id.db")
"$KVBENCH" "${R[@]}" >/dev/null 2>"$T/err" || fail "first run failed: $(cat "$T/err")"
[ "$(q 'SELECT count(*) FROM runs')" = 1 ] || fail "first run: not one run"
key=$(q 'SELECT run_key FROM runs WHERE id = 1')
case "$key" in *";code="*";methods="*"snapkv:window=32,kernel=7,pool=0,agg=0"*) ;;
     *) fail "the run key lacks the code or the effective params: $key" ;; esac
commit=$(q 'SELECT git_commit FROM runs WHERE id = 1')
case "$key" in *";code=$commit+src."[0-9a-f]*";"*) ;; *) fail "the run key's code is not the recorded commit $commit + the source hash" ;; esac

"$KVBENCH" "${R[@]}" >"$T/out" 2>"$T/err" || fail "rerun failed"
grep -q "resuming run 1" "$T/err" || fail "rerun did not resume run 1: $(cat "$T/err")"
grep -q "^0 results written, 2 already present" "$T/out" || fail "rerun recomputed: $(tail -1 "$T/out")"

# --params equal to the default is the default.
"$KVBENCH" "${R[@]}" --params "snapkv:window=32" >"$T/out" 2>"$T/err" || fail "default-valued --params failed"
grep -q "resuming run 1" "$T/err" || fail "--params snapkv:window=32 (the default) did not resume run 1"
[ "$(q 'SELECT count(*) FROM runs')" = 1 ] || fail "--params equal to the default made a new run"

# A changed default: a new run, computed with it (the old run keeps its results).
KVBENCH_TEST_DEFAULTS="snapkv:window=8" "$KVBENCH" "${R[@]}" >"$T/out" 2>"$T/err" || fail "changed-default run failed"
grep -q "resuming" "$T/err" && fail "a changed default resumed an old run: $(cat "$T/err")"
[ "$(q 'SELECT count(*) FROM runs')" = 2 ] || fail "a changed default did not start a new run"
grep -q "^2 results written" "$T/out" || fail "the changed-default run did not compute its results"
case "$(q 'SELECT run_key FROM runs WHERE id = 2')" in *"snapkv:window=8,kernel=7"*) ;;
     *) fail "run 2's key lacks the changed default" ;; esac
# the new default changed what was computed (window 8 scores differently from 32 on these cases)
d=$(q "SELECT count(*) FROM results a JOIN cases ca ON ca.id = a.case_id JOIN results b JOIN cases cb ON cb.id = b.case_id
       WHERE ca.run_id = 1 AND cb.run_id = 2 AND ca.case_key = cb.case_key AND a.rel_err <> b.rel_err")
[ "$d" -ge 1 ] || fail "the changed default computed the same numbers (was it applied?)"
# and the same changed default resumes its own run
KVBENCH_TEST_DEFAULTS="snapkv:window=8" "$KVBENCH" "${R[@]}" >/dev/null 2>"$T/err" || fail "changed-default rerun failed"
grep -q "resuming run 2" "$T/err" || fail "the changed-default rerun did not resume run 2"

# Another commit: a new run, with that commit recorded.
KVBENCH_GIT_COMMIT=0123456789abcdef0123456789abcdef01234567 "$KVBENCH" "${R[@]}" >/dev/null 2>"$T/err" \
    || fail "other-commit run failed"
[ "$(q 'SELECT count(*) FROM runs')" = 3 ] || fail "another commit did not start a new run"
[ "$(q 'SELECT git_commit FROM runs WHERE id = 3')" = 0123456789abcdef0123456789abcdef01234567 ] || fail "commit not recorded"

# Splits: disjoint generator seeds (2*seed for test, 2*seed+1 for dev), other numbers.
"$KVBENCH" "${R[@]}" --split dev >/dev/null 2>"$T/err" || fail "--split dev run failed"
[ "$(q 'SELECT count(*) FROM runs')" = 4 ] || fail "--split dev did not start a new run"
[ "$(q 'SELECT group_concat(DISTINCT seed) FROM cases WHERE run_id = 1')" = 14 ] || fail "test split seed is not 2*7"
[ "$(q 'SELECT group_concat(DISTINCT seed) FROM cases WHERE run_id = 4')" = 15 ] || fail "dev split seed is not 2*7+1"
"$KVBENCH" "${R[@]}" --split test >/dev/null 2>"$T/err" || fail "--split test run failed"
grep -q "resuming run 1" "$T/err" || fail "--split test (the default) did not resume run 1"
"$KVBENCH" "${R[@]}" --split val >/dev/null 2>"$T/err" && fail "--split val accepted"
grep -q "split 'val': expected dev or test" "$T/err" || fail "--split val: $(cat "$T/err")"

# Oracle hints: a run of its own.
"$KVBENCH" "${R[@]}" --oracle-hints 1 >/dev/null 2>"$T/err" || fail "--oracle-hints 1 run failed"
[ "$(q 'SELECT count(*) FROM runs')" = 5 ] || fail "--oracle-hints 1 did not start a new run"

# Report: pooled runs of different identity side by side, one row each; headers name them.
"$KVBENCH" report --db "$T/id.db" --run all --table main >"$T/rep" 2>"$T/err" || fail "report --run all failed: $(cat "$T/err")"
rows=$(grep -c "^| .*snapkv" "$T/rep" || true)
[ "$rows" = 5 ] || fail "report --run all: $rows snapkv rows for 5 runs of different identity: $(cat "$T/rep")"
grep -q "git 0123456789ab, test, hints 0" "$T/rep" || fail "the other commit's row is not labelled: $(cat "$T/rep")"
grep -q "split dev, oracle hints off" "$T/rep" || fail "the header does not name the dev split"
grep -q "split test, oracle hints on" "$T/rep" || fail "the header does not name the oracle hints"
"$KVBENCH" report --db "$T/id.db" --run 4 >"$T/rep1" || fail "report --run 4 failed"
head -1 "$T/rep1" | grep -q "split dev" || fail "report header of run 4 lacks its split: $(head -1 "$T/rep1")"

# An ablation (--params) of the same code is not another identity: the report pools it
# with its baseline, rows by params, as before.
A=("${R[@]/$T\/id.db/$T/abl.db}")
"$KVBENCH" "${A[@]}" >/dev/null 2>&1 || fail "ablation baseline failed"
"$KVBENCH" "${A[@]}" --params "snapkv:window=16" >/dev/null 2>&1 || fail "ablation run failed"
[ "$(sqlite3 "$T/abl.db" 'SELECT count(*) FROM runs')" = 2 ] || fail "the ablation is not a run of its own"
"$KVBENCH" report --db "$T/abl.db" --run all --table ablation >"$T/rep" 2>&1 || fail "ablation report failed: $(cat "$T/rep")"
grep -q "^| snapkv (defaults) " "$T/rep" && grep -q "^| snapkv window=16 " "$T/rep" \
    || fail "ablation rows not pooled by params: $(cat "$T/rep")"
grep -q "\[git" "$T/rep" && fail "the ablation was split by identity: $(cat "$T/rep")"

# The model driver: RULER's split is in the run key; --split is refused where it has no meaning.
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ -f "$MODEL" ]; then
    M=(run --workload ruler:niah_single_1 --ctx 512 --budget 0.5 --methods streamingllm --quiet --db "$T/m.db")
    "$KVBENCH" "${M[@]}" >/dev/null 2>&1 || fail "ruler test-split run failed"
    "$KVBENCH" "${M[@]}" --split dev >/dev/null 2>&1 || fail "ruler dev-split run failed"
    [ "$(sqlite3 "$T/m.db" "SELECT (SELECT run_key LIKE '%;split=test;%' FROM runs WHERE id = 1),
                                   (SELECT run_key LIKE '%;split=dev;%' FROM runs WHERE id = 2)")" = "1|1" ] \
        || fail "ruler runs: the split is not in the run keys"
fi
for w in longbench:/tmp gsm8k:/tmp/x.jsonl; do
    "$KVBENCH" run --workload "$w" --split dev --db "$T/never.db" 2>"$T/err" && fail "--split accepted for $w"
    grep -q "split applies to the generated workloads" "$T/err" || fail "--split on $w: $(cat "$T/err")"
done
# niah's split: another haystack start, so another prompt (nothing is run or written)
for s in dev test; do
    "$KVBENCH" run --workload niah --ctx 512 --depths 50 --split $s --print-prompts 1 2>"$T/err" |
        grep -o 'sha256 [0-9a-f]*' >"$T/niah-$s" || fail "niah --split $s --print-prompts: $(cat "$T/err")"
done
[ -s "$T/niah-dev" ] && ! cmp -s "$T/niah-dev" "$T/niah-test" || fail "niah dev and test prompts are the same"

# Other sources (the build-time hash of every compiled file): a new run.
n=$(q 'SELECT count(*) FROM runs')
KVBENCH_SOURCE_HASH=00000000000000000000000000000000000000000000000000000000000000aa "$KVBENCH" "${R[@]}" >"$T/out" \
    2>"$T/err" || fail "other-sources run failed"
grep -q "resuming" "$T/err" && fail "other sources resumed an old run: $(cat "$T/err")"
[ "$(q 'SELECT count(*) FROM runs')" = $((n + 1)) ] || fail "other sources did not start a new run"

if [ "$fails" -gt 0 ]; then echo "test_run_ident: $fails failures"; exit 1; fi
echo "test_run_ident: all checks passed"
