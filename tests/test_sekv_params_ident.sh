#!/usr/bin/env bash
# SeKV's shipped parameters are found by every build of this tree, and the file a run
# loaded is part of its identity (issue 27 item 21: build-san/kvbench ran SeKV untrained
# under the release build's run key, so resuming a release run with it mixed trained and
# untrained results):
#  - a copy of the binary in a folder of its own below the tree's root, as build-san/
#    and build-vg/ hold theirs, loads the shipped file, and its run resumes the release
#    run (the same code, the same file);
#  - the run key and config carry the sha256 of the file loaded, the shipped file's;
#  - with no file for the model (KVBENCH_SEKV_PARAMS pointing nowhere) sekv refuses before
#    the first case (exit 2, one line naming the file and the command that trains it,
#    nothing stored; issue 32), and a run of other methods keeps its key (sha256 none);
#  - params_file=none (the untrained router) is a run of its own, never a resume.
source "$(dirname "$0")/lib.sh"
PARAMS=methods/sekv/params/sekv-smollm2-135m.params
[ -f "$MODEL" ] || { echo "SKIP: $MODEL is absent (make model)"; exit 0; }
want=$(sha256sum "$PARAMS" | cut -d' ' -f1)
other=$PWD/build-ident-$$   # a build folder as build-san/ (ignored by git), removed on exit
trap 'rm -rf "$T" "$other"' EXIT
mkdir -p "$other"
cp "$KVBENCH" "$other/kvbench"
R=(run --workload niah --ctx 256 --depths 50 --max-new 4 --budget 0.5 --methods sekv --quiet --db "$T/r.db")

"$KVBENCH" "${R[@]}" >/dev/null 2>"$T/err" || fail "release run: $(cat "$T/err")"
grep -q "no trained parameters" "$T/err" && fail "the release binary did not find the shipped parameters"
key=$(q "$T/r.db" "SELECT run_key FROM runs")
grep -qF ";sekv_params_sha256=$want" <<<"$key" || fail "the run key lacks the shipped file's sha256 ($want): $key"
q "$T/r.db" "SELECT config_json FROM runs" | grep -qF "\"sekv_params_sha256\":\"$want\"" || fail "config_json lacks the sha256"

# the same tree's binary from another folder: same file, same run, nothing computed again
(cd "$T" && "$other/kvbench" "${R[@]}") >"$T/out" 2>"$T/err" || fail "copied binary: $(cat "$T/err")"
grep -q "no trained parameters" "$T/err" && fail "the copied binary did not find the shipped parameters"
[ "$(q "$T/r.db" "SELECT count(*) FROM runs")" = 1 ] || fail "the copied binary started another run"
[ "$(q "$T/r.db" "SELECT count(*) FROM results")" = 1 ] || fail "the copied binary added results"

# no parameters file for this model: refused before the first case, nothing stored
KVBENCH_SEKV_PARAMS=$T/none.params config_error "$T/r.db" "sekv: no trained parameters for this model" "${R[@]}"
grep -qF "SEKV_PARAMS=$T/none.params\`" "$T/err" && grep -qF "make sekv-params SEKV_MODEL=" "$T/err" &&
    grep -qF -- "--params sekv:params_file=none" "$T/err" || fail "the refusal lacks the file or the commands: $(cat "$T/err")"
grep -q "make sekv-params\`" "$T/err" && fail "the refusal still advises the default model's make sekv-params"
KVBENCH_SEKV_PARAMS=$T/none.params config_error "$T/r.db" "sekv-ref: no trained parameters for this model" \
    "${R[@]/sekv/sekv-ref}"
F=("${R[@]/sekv/fullkv}")
KVBENCH_SEKV_PARAMS=$T/none.params "$KVBENCH" "${F[@]/r.db/f.db}" >/dev/null 2>"$T/err" || fail "fullkv: $(cat "$T/err")"
q "$T/f.db" "SELECT run_key FROM runs" | grep -qF ";sekv_params_sha256=none" ||
    fail "a run without sekv on a model with no parameters: $(q "$T/f.db" "SELECT run_key FROM runs")"

# params_file=none: the untrained router, a run of its own
"$KVBENCH" "${R[@]}" --params sekv:params_file=none >/dev/null 2>"$T/err" || fail "untrained run: $(cat "$T/err")"
[ "$(q "$T/r.db" "SELECT count(*) FROM runs")" = 2 ] || fail "an untrained run resumed the trained one"
q "$T/r.db" "SELECT run_key FROM runs WHERE id = 2" | grep -qF ";sekv_params_sha256=none" ||
    fail "the untrained run's key: $(q "$T/r.db" "SELECT run_key FROM runs WHERE id = 2")"
[ "$(q "$T/r.db" "SELECT count(*) FROM results")" = 2 ] || fail "the untrained run did not store its own result"

# the untrained router is named so in every table; the trained row is plain sekv
for args in "" "--table main" "--table niah" "--table ablation"; do
    "$KVBENCH" report --db "$T/r.db" --run 2 $args >"$T/rep" 2>&1 || fail "report $args: $(cat "$T/rep")"
    grep -q "^| sekv (untrained) |" "$T/rep" || fail "report --run 2 $args does not name the row untrained: $(grep '^|' "$T/rep")"
    grep -q "params_file" "$T/rep" && fail "report --run 2 $args still shows params_file: $(grep '^|' "$T/rep")"
done
"$KVBENCH" report --db "$T/r.db" --table main --run all >"$T/rep" 2>&1 || fail "report --run all: $(cat "$T/rep")"
grep -q "^| sekv (untrained) |" "$T/rep" && grep -q "^| sekv |" "$T/rep" ||
    fail "the pooled table does not tell trained from untrained: $(grep '^|' "$T/rep")"
"$KVBENCH" report --db "$T/r.db" --run 1 >"$T/rep" 2>&1
grep -q "untrained" "$T/rep" && fail "the trained run's row is named untrained: $(grep '^|' "$T/rep")"

[ $fails = 0 ] && echo "test_sekv_params_ident.sh: all checks passed"
exit $((fails > 0))
