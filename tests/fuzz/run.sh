#!/usr/bin/env bash
# Runs each libFuzzer target (build-fuzz/fuzz/fuzz_NAME, built by `make fuzz`) for
# FUZZ_SECONDS, starting from its committed seeds (tests/fuzz/corpus/NAME) and the
# inputs of fixed crashes (tests/fuzz/regress/NAME); new inputs go to
# build-fuzz/corpus/NAME, crashes to build-fuzz/crashes/NAME/. Prints one line per
# target (executions, crashes) and fails if any target crashed.
#   tests/fuzz/run.sh [NAME...]      (default: every target)
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-60}
names=("$@")
[ ${#names[@]} -gt 0 ] || for f in tests/fuzz/fuzz_*.c; do n=${f##*/fuzz_}; names+=("${n%.c}"); done
bad=0
for n in "${names[@]}"; do
    bin=build-fuzz/fuzz/fuzz_$n
    [ -x "$bin" ] || { echo "fuzz: $bin missing (make fuzz builds it)"; bad=1; continue; }
    mkdir -p "build-fuzz/corpus/$n" "build-fuzz/crashes/$n"
    seeds=(); for d in "tests/fuzz/corpus/$n" "tests/fuzz/regress/$n"; do [ -d "$d" ] && seeds+=("$d"); done
    log=build-fuzz/fuzz-$n.log
    # -rss_limit_mb: the loaders' target holds the model; -timeout: one input, seconds
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="build-fuzz/crashes/$n/" "build-fuzz/corpus/$n" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    crashes=$(find "build-fuzz/crashes/$n" -type f | wc -l)
    echo "fuzz $n: ${execs:-?} executions in ${secs}s, $crashes crash file(s), exit $rc (log $log)"
    [ "$rc" -eq 0 ] && [ "$crashes" -eq 0 ] || bad=1
done
exit $bad
