#!/usr/bin/env bash
# Sharded runs and kvbench merge, with the real SQLite files (tests/slurm/test_slurm.sh
# does the same on a real SLURM cluster: make test-slurm):
#  - run --shard K/N: the shards' cases are disjoint and together the whole grid, every
#    shard file holds the same run and the whole plan; the merged file equals the
#    unsharded run by key and value (tests/same_results.py, timings aside), plan included;
#    a shard without a case of its own still records every run and the plan;
#  - merge reports the missing cases of a partial merge (exit 3), is idempotent, resumes
#    with the rest; a conflicting duplicate stops it naming case, method, budget and
#    column, and leaves the output as it was; a mixture of runs (another seed, another git
#    commit) is refused before anything is written; bad arguments give one line;
#  - the model driver: 2 shards, one with --jobs 2, merge to the unsharded run;
#  - slurm-script: the script is valid bash with the array, requeue, per-shard files and
#    a GPU only for --backend cuda; its shard branch, run here as SLURM would run each
#    task (SLURM_ARRAY_TASK_ID=k), gives files that merge to the unsharded run.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
KB=$(readlink -f "$KVBENCH")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
q() { sqlite3 "$1" "$2"; }
same() { python3 tests/same_results.py "$@" >"$T/same.out" 2>&1 || { cat "$T/same.out" >&2; return 1; }; }

SYN=(run --workload synthetic-niah,synthetic-multikey --methods fullkv,snapkv,h2o,chunkkv --budget 0.1,0.25
     --ctx 256,384,512 --depths 0.1,0.5,0.9 --layers 2 --steps 4 --quiet)
"$KVBENCH" "${SYN[@]}" --db "$T/full.db" >/dev/null || fail "unsharded run"
for k in 0 1 2; do "$KVBENCH" "${SYN[@]}" --shard $k/3 --db "$T/s$k.db" >/dev/null || fail "shard $k/3"; done

# ---------------------------------------------------------------- the split
all=$(q "$T/full.db" "SELECT case_key FROM cases" | sort)
union=$(for k in 0 1 2; do q "$T/s$k.db" "SELECT case_key FROM cases"; done | sort)
[ "$all" = "$union" ] || fail "the shards' cases are not the grid's: $(diff <(echo "$all") <(echo "$union") | head -3)"
[ "$(echo "$union" | uniq -d | wc -l)" = 0 ] || fail "a case in two shards: $(echo "$union" | uniq -d | head -2)"
[ "$(echo "$all" | wc -l)" = 18 ] || fail "expected 18 cases, got $(echo "$all" | wc -l)"
for k in 0 1 2; do
    n=$(q "$T/s$k.db" "SELECT count(*) FROM cases")
    [ "$n" -ge 5 ] && [ "$n" -le 7 ] || fail "shard $k has $n of 18 cases (unbalanced)"
    [ "$(q "$T/s$k.db" "SELECT group_concat(run_key, '|') FROM (SELECT run_key FROM runs ORDER BY run_key)")" = \
      "$(q "$T/full.db" "SELECT group_concat(run_key, '|') FROM (SELECT run_key FROM runs ORDER BY run_key)")" ] \
        || fail "shard $k: run identity differs from the unsharded run"
    [ "$(q "$T/s$k.db" "SELECT count(*) FROM plan")" = $((18 * 8)) ] || fail "shard $k: plan is not the whole grid"
done
# the split depends on the cost: the three 512-token cases of a workload never share a shard
for v in single multikey; do
    [ "$(for k in 0 1 2; do q "$T/s$k.db" "SELECT count(*) FROM cases WHERE ctx = 512 AND variant = '$v'"; done | sort | tr '\n' ' ')" = "1 1 1 " ] \
        || fail "the 512-token $v cases are not spread over the 3 shards"
done
# the same command finds the same split: a rerun of a shard adds nothing
"$KVBENCH" "${SYN[@]}" --shard 1/3 --db "$T/s1.db" >"$T/rerun" || fail "rerun of shard 1"
grep -q "^0 results written, 48 already present" "$T/rerun" || fail "rerun of shard 1: $(tail -1 "$T/rerun")"

# a shard with no case of its own still records every run and the whole plan
"$KVBENCH" "${SYN[@]}" --shard 39/40 --db "$T/empty.db" >/dev/null || fail "shard 39/40"
[ "$(q "$T/empty.db" "SELECT count(*) FROM runs") $(q "$T/empty.db" "SELECT count(*) FROM results") $(q "$T/empty.db" "SELECT count(*) FROM plan")" = "2 0 144" ] \
    || fail "an empty shard: runs, results, plan = $(q "$T/empty.db" "SELECT count(*) FROM runs") $(q "$T/empty.db" "SELECT count(*) FROM results") $(q "$T/empty.db" "SELECT count(*) FROM plan")"
set +e
"$KVBENCH" merge "$T/e.db" "$T/empty.db" "$T/s1.db" >"$T/e" 2>&1; rc=$?
set -e
[ $rc = 3 ] && [ "$(grep -c "24 of 72 planned results present; 48 missing in 6 cases" "$T/e")" = 2 ] || fail "merging an empty shard: exit $rc, $(cat "$T/e")"

# ---------------------------------------------------------------- merge: partial, idempotent, complete
set +e
"$KVBENCH" merge "$T/m.db" "$T/s0.db" "$T/s1.db" >"$T/m1" 2>"$T/m1e"; rc=$?
set -e
[ $rc = 3 ] || fail "partial merge: exit $rc, expected 3"
want=$(q "$T/s2.db" "SELECT case_key FROM cases" | sort)
got=$(sed -n 's/^  missing: \([^ ]*\) (8 of 8 results)$/\1/p' "$T/m1" | sort)
[ "$want" = "$got" ] || fail "missing cases listed: $(cat "$T/m1")"
grep -q "run 1 (synthetic-niah): 48 of 72 planned results present; 24 missing in 3 cases" "$T/m1" \
    || fail "missing summary: $(grep '^run' "$T/m1")"
cp "$T/m.db" "$T/m_before.db"
set +e
"$KVBENCH" merge "$T/m.db" "$T/s1.db" "$T/s0.db" >"$T/m2" 2>"$T/m2e"; rc=$?
set -e
[ $rc = 3 ] || fail "second partial merge: exit $rc"
grep -q "0 new, 96 already present" "$T/m2" || fail "merging twice added rows: $(tail -1 "$T/m2")"
same "$T/m.db" "$T/m_before.db" --plan || fail "merging twice changed the file"
"$KVBENCH" merge "$T/m.db" "$T/s2.db" >"$T/m3" 2>&1 || fail "merging the last shard: $(cat "$T/m3")"
[ "$(grep -c "72 of 72 planned results present, complete" "$T/m3")" = 2 ] || fail "not complete: $(cat "$T/m3")"
same "$T/m.db" "$T/full.db" --plan || fail "merged shards differ from the unsharded run"
"$KVBENCH" merge "$T/m2.db" "$T/s2.db" "$T/s0.db" "$T/s1.db" >/dev/null 2>&1 || fail "merge in another order"
same "$T/m2.db" "$T/full.db" --plan || fail "merge in another order differs"
"$KVBENCH" merge "$T/m3.db" "$T/full.db" "$T/m.db" "$T/s1.db" >/dev/null 2>&1 || fail "merging overlapping files"
same "$T/m3.db" "$T/full.db" --plan || fail "merging overlapping files differs"
"$KVBENCH" report --db "$T/m.db" >/dev/null || fail "report on the merged file"

# ---------------------------------------------------------------- conflicts, mixtures, bad input
cp "$T/s0.db" "$T/bad.db"
key=$(q "$T/bad.db" "SELECT c.case_key FROM results r JOIN cases c ON c.id = r.case_id WHERE r.method = 'snapkv' AND r.budget = 0.25 LIMIT 1")
q "$T/bad.db" "UPDATE results SET rel_err = rel_err * 1.5 + 1e-3 WHERE method = 'snapkv' AND budget = 0.25 AND case_id = (SELECT id FROM cases WHERE case_key = '$key')"
cp "$T/m.db" "$T/m_before.db"
set +e
"$KVBENCH" merge "$T/m.db" "$T/bad.db" >/dev/null 2>"$T/err"; rc=$?
set -e
[ $rc = 1 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "case '$key', method snapkv, budget 0.25: rel_err is" "$T/err" \
    || fail "conflict: exit $rc, '$(cat "$T/err")'"
same "$T/m.db" "$T/m_before.db" --plan || fail "a refused merge changed the output"
# timings may differ between two computations of one result
cp "$T/s0.db" "$T/slow.db"
q "$T/slow.db" "UPDATE results SET decode_s = decode_s + 1, compress_s = 7, tokens_per_s = 1; UPDATE cases SET prefill_s = 9"
"$KVBENCH" merge "$T/m.db" "$T/slow.db" >/dev/null 2>&1 || fail "other timings were taken for a conflict"

"$KVBENCH" "${SYN[@]}" --shard 0/3 --seed 2 --db "$T/seed2.db" >/dev/null || fail "shard with another seed"
set +e
"$KVBENCH" merge "$T/new.db" "$T/s1.db" "$T/seed2.db" >/dev/null 2>"$T/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "refusing a mixture of runs" "$T/err" && grep -q "seed=1" "$T/err" && grep -q "seed=2" "$T/err" \
    || fail "another seed: exit $rc, '$(cat "$T/err")'"
[ ! -e "$T/new.db" ] || fail "a refused merge created its output"
cp "$T/s2.db" "$T/commit.db"
q "$T/commit.db" "UPDATE runs SET git_commit = 'deadbeef'"
set +e
"$KVBENCH" merge "$T/new.db" "$T/s1.db" "$T/commit.db" >/dev/null 2>"$T/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "git_commit is '.*' in .*s1.db, 'deadbeef' in .*commit.db" "$T/err" \
    || fail "another commit: exit $rc, '$(cat "$T/err")'"
set +e
"$KVBENCH" merge "$T/m.db" "$T/commit.db" >/dev/null 2>"$T/err"; rc=$?
set -e
[ $rc = 1 ] && grep -q "mixture" "$T/err" || fail "another commit into an existing output: exit $rc, '$(cat "$T/err")'"
echo "not sqlite" >"$T/junk.db"
for args in "$T/x.db" "$T/x.db $T/nosuch.db" "$T/x.db $T/junk.db" "$T/s0.db $T/s0.db" "--frobnicate $T/x.db $T/s0.db"; do
    set +e
    # shellcheck disable=SC2086
    "$KVBENCH" merge $args >/dev/null 2>"$T/err"; rc=$?
    set -e
    [ $rc = 1 ] || [ $rc = 2 ] || fail "merge $args: exit $rc"
    grep -q "^kvbench merge: " "$T/err" || fail "merge $args: no one-line reason: $(cat "$T/err")"
done
grep -q "usage: kvbench merge" <<<"$("$KVBENCH" merge --help)" || fail "merge --help"   # captured: no SIGPIPE under pipefail

# ---------------------------------------------------------------- the model driver, with --jobs in a shard
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ -f "$MODEL" ]; then
    for i in $(seq 0 199); do printf 'The river %d passed the old mill in the morning. ' "$i"; done >"$T/hay.txt"
    MR=(run --model "$MODEL" --workload niah --ctx 288,320 --depths 0,100 --methods fullkv,snapkv --budget 0.25
        --max-new 4 --haystack "$T/hay.txt" --threads 1 --quiet)
    "$KVBENCH" "${MR[@]}" --db "$T/mfull.db" >/dev/null || fail "model run"
    "$KVBENCH" "${MR[@]}" --shard 0/2 --jobs 2 --db "$T/ms0.db" >/dev/null || fail "model shard 0/2 --jobs 2"
    "$KVBENCH" "${MR[@]}" --shard 1/2 --db "$T/ms1.db" >/dev/null || fail "model shard 1/2"
    [ "$(q "$T/ms0.db" "SELECT count(*) FROM cases")" = 2 ] && [ "$(q "$T/ms1.db" "SELECT count(*) FROM cases")" = 2 ] \
        || fail "model shards: $(q "$T/ms0.db" "SELECT count(*) FROM cases") + $(q "$T/ms1.db" "SELECT count(*) FROM cases") cases"
    "$KVBENCH" merge "$T/mm.db" "$T/ms0.db" "$T/ms1.db" >"$T/mm" 2>&1 || fail "model merge: $(cat "$T/mm")"
    same "$T/mm.db" "$T/mfull.db" --plan || fail "merged model shards differ from the unsharded run"
else
    echo "SKIP the model part: $MODEL is absent (make model)"
fi

# ---------------------------------------------------------------- slurm-script
mkdir -p "$T/w/res"
"$KVBENCH" slurm-script --shards 4 --cpus 2 --time 1:00:00 --chdir "$T/w" --out "$T/job.sh" -- \
    "$KB" "${SYN[@]}" --db res/grid.db 2>/dev/null || fail "slurm-script"
bash -n "$T/job.sh" || fail "the script is not valid bash"
for line in "#SBATCH --array=0-3" "#SBATCH --requeue" "#SBATCH --output=res/grid.shard-%a-of-4.log" \
            "#SBATCH --cpus-per-task=2" "#SBATCH --time=1:00:00" "#SBATCH --chdir=$T/w" "--dependency=afterok:"; do
    grep -qF -- "$line" "$T/job.sh" || fail "the script lacks '$line'"
done
! grep -q "gres" "$T/job.sh" || fail "a CPU run asks for a GPU"
[ -x "$T/job.sh" ] || fail "the script is not executable"
grep -q "^#SBATCH --gres=gpu:1$" <<<"$("$KVBENCH" slurm-script --shards 2 -- "$KB" run --workload niah --backend cuda --db x.db)" \
    || fail "--backend cuda does not ask for a GPU"
for k in 3 1 0 2; do SLURM_ARRAY_TASK_ID=$k SLURM_JOB_ID=1 bash "$T/job.sh" >/dev/null 2>&1 || fail "array task $k"; done
ls "$T/w/res"/grid.shard-{0,1,2,3}-of-4.db >/dev/null || fail "per-shard files: $(ls "$T/w/res")"
(cd "$T/w" && "$KB" merge res/grid.db res/grid.shard-*-of-4.db >/dev/null 2>&1) || fail "merging the script's shards"
same "$T/w/res/grid.db" "$T/full.db" --plan || fail "the script's shards differ from the unsharded run"
for bad in "--shards 0" "--shards 2 -- $KB report --db x.db" "--shards 2 -- $KB run --workload niah" \
           "--shards 2 -- $KB run --shard 0/2 --db x.db" "-- $KB run --db x.db" "--shards 2 --bogus 1 -- $KB run --db x.db"; do
    set +e
    # shellcheck disable=SC2086
    "$KVBENCH" slurm-script $bad >/dev/null 2>"$T/err"; rc=$?
    set -e
    [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] || fail "slurm-script $bad: exit $rc, '$(cat "$T/err")'"
done

[ $fails = 0 ] && echo "test_shard.sh: all checks passed"
exit $((fails > 0))
