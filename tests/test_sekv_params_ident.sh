#!/usr/bin/env bash
# SeKV's shipped parameters are found by every build of this tree, and the file a run
# loaded is part of its identity (issue 27 item 21: build-san/kvbench ran SeKV untrained
# under the release build's run key, so resuming a release run with it mixed trained and
# untrained results):
#  - a copy of the binary in a folder of its own below the tree's root, as build-san/
#    and build-vg/ hold theirs, loads the shipped file, and its run resumes the release
#    run (the same code, the same file);
#  - the run key and config carry the sha256 of the file loaded, the shipped file's;
#  - a run that loads no file (KVBENCH_SEKV_PARAMS pointing nowhere: untrained) is a run
#    of its own in the same results file, never a resume.
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

# no parameters file: untrained, so a run of its own
KVBENCH_SEKV_PARAMS=$T/none.params "$KVBENCH" "${R[@]}" >/dev/null 2>"$T/err" || fail "untrained run: $(cat "$T/err")"
[ "$(q "$T/r.db" "SELECT count(*) FROM runs")" = 2 ] || fail "an untrained run resumed the trained one"
q "$T/r.db" "SELECT run_key FROM runs WHERE id = 2" | grep -qF ";sekv_params_sha256=none" ||
    fail "the untrained run's key: $(q "$T/r.db" "SELECT run_key FROM runs WHERE id = 2")"
[ "$(q "$T/r.db" "SELECT count(*) FROM results")" = 2 ] || fail "the untrained run did not store its own result"

[ $fails = 0 ] && echo "test_sekv_params_ident.sh: all checks passed"
exit $((fails > 0))
