#!/usr/bin/env bash
# One case loop for `kvbench run` (issue 35, harness/drivers/case_loop.c): the model's
# cases go through the loop's selection as the synthetic ones do. Through the model (a
# random tiny model, so it runs without downloads), one command's results are the same in
# every column but timings (tests/same_results.py) whether the loop runs them in one
# process, in two --jobs, in two --shard files joined by `kvbench merge` (plans included),
# batched or one at a time, or resumed after a cut; the synthetic source is sharded and
# merged the same way. The synthetic rows keep what the workload and the run say.
#
# With KVBENCH_BASELINE=/path/to/an/older/kvbench (e.g. a build of the commit before the
# loop), both the model grid and a synthetic grid are also run by that binary and must
# hold the same results (runs matched whatever their code version: --any-code).
source "$(dirname "$0")/lib.sh"

for i in $(seq 0 199); do printf 'The committee %s the old bridge in the morning. ' "$([ $((i % 3)) = 0 ] && echo repaired || echo visited)"; done >"$T/hay.txt"
M=(run --model random:tiny-llama --workload niah --ctx 300 --depths 0,50,100 --methods fullkv,snapkv,streamingllm,h2o
   --budget 0.2,0.4 --max-new 3 --fidelity 2 --haystack "$T/hay.txt" --threads 1 --quiet)
S=(run --workload synthetic-niah,synthetic-multikey --ctx 64,128 --depths 0.2,0.8 --methods fullkv,snapkv,tova
   --budget 0.25,0.5 --layers 2 --steps 3 --threads 1 --quiet)
same() {   # what, A.db, B.db, options of same_results.py
    local what=$1 a=$2 b=$3
    shift 3
    python3 tests/same_results.py "$@" "$a" "$b" >"$T/cmp" 2>&1 || fail "$what: $(head -c 2000 "$T/cmp")"
}

"$KVBENCH" "${M[@]}" --db "$T/one.db" >"$T/out" 2>"$T/err" || fail "model run: $(tail -3 "$T/err")"
n=$(q "$T/one.db" "SELECT count(*) FROM results")
[ "$n" = 21 ] || fail "model run: $n results, want 21 (3 cases x (fullkv + 3 methods x 2 budgets))"
grep -q "^21 results written, 0 already present" "$T/out" || fail "model run's count: $(tail -1 "$T/out")"
"$KVBENCH" "${M[@]}" --jobs 2 --db "$T/jobs.db" >"$T/out" 2>"$T/err" || fail "--jobs 2: $(tail -3 "$T/err")"
same "--jobs 2 and one process" "$T/one.db" "$T/jobs.db" --plan
grep -q "^21 results written, 0 already present" "$T/out" || fail "--jobs 2's count: $(tail -1 "$T/out")"
"$KVBENCH" "${M[@]}" --batch 0 --db "$T/serial.db" >/dev/null 2>"$T/err" || fail "--batch 0: $(tail -3 "$T/err")"
same "--batch 0 and --batch 1" "$T/one.db" "$T/serial.db" --plan
for k in 0 1; do
    "$KVBENCH" "${M[@]}" --shard $k/2 --db "$T/m$k.db" >/dev/null 2>"$T/err" || fail "--shard $k/2: $(tail -3 "$T/err")"
done
[ "$(q "$T/m0.db" "SELECT count(*) FROM cases")" -ge 1 ] && [ "$(q "$T/m1.db" "SELECT count(*) FROM cases")" -ge 1 ] ||
    fail "a model shard holds no case"
"$KVBENCH" merge --quiet "$T/merged.db" "$T/m0.db" "$T/m1.db" >/dev/null 2>&1 || fail "merging the model shards"
same "two model shards merged and one run" "$T/one.db" "$T/merged.db" --plan
# resume: a file holding only some results gets the rest, the same ones
q "$T/m0.db" "DELETE FROM results WHERE method = 'snapkv'"
cp "$T/m0.db" "$T/cut.db"
"$KVBENCH" "${M[@]}" --db "$T/cut.db" >"$T/out" 2>"$T/err" || fail "resume: $(tail -3 "$T/err")"
same "a resumed run and one run" "$T/one.db" "$T/cut.db"

"$KVBENCH" "${S[@]}" --db "$T/syn.db" >/dev/null 2>"$T/err" || fail "synthetic run: $(tail -3 "$T/err")"
[ "$(q "$T/syn.db" "SELECT count(*) FROM runs")" = 2 ] || fail "synthetic run: not one run per workload"
[ "$(q "$T/syn.db" "SELECT count(*) FROM results")" = 48 ] || fail "synthetic run: $(q "$T/syn.db" "SELECT count(*) FROM results") results, want 48"
for k in 0 1; do
    "$KVBENCH" "${S[@]}" --shard $k/2 --db "$T/s$k.db" >/dev/null 2>"$T/err" || fail "synthetic --shard $k/2: $(tail -3 "$T/err")"
done
"$KVBENCH" merge --quiet "$T/smerged.db" "$T/s0.db" "$T/s1.db" >/dev/null 2>&1 || fail "merging the synthetic shards"
same "two synthetic shards merged and one run" "$T/syn.db" "$T/smerged.db" --plan

if [ -n "${KVBENCH_BASELINE:-}" ]; then
    "$KVBENCH_BASELINE" "${M[@]}" --db "$T/base-m.db" >/dev/null 2>"$T/err" || fail "baseline model run: $(tail -3 "$T/err")"
    same "the baseline's model run and this one" "$T/base-m.db" "$T/one.db" --any-code --plan
    "$KVBENCH_BASELINE" "${S[@]}" --db "$T/base-s.db" >/dev/null 2>"$T/err" || fail "baseline synthetic run: $(tail -3 "$T/err")"
    same "the baseline's synthetic run and this one" "$T/base-s.db" "$T/syn.db" --any-code --plan
    echo "test_one_loop: compared with $KVBENCH_BASELINE"
fi
[ "$fails" = 0 ] && echo "test_one_loop: one loop, the same results in one process, --jobs, --shard + merge, --batch 0 and a resume"
exit $((fails > 0))
