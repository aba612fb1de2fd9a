#!/usr/bin/env bash
# Replays every fuzz target's committed seeds (tests/fuzz/corpus/NAME) and the inputs of
# crashes fixed since (tests/fuzz/regress/NAME) through the target built with a plain
# main() ($BUILD/fuzz/replay_NAME, make check builds them): under `make SAN=1 check`
# that is ASan/UBSan (float-cast-overflow included) on each input. Each must run clean.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
n=0
for src in tests/fuzz/fuzz_*.c; do
    name=${src##*/fuzz_}; name=${name%.c}
    bin=$BUILD/fuzz/replay_$name
    [ -x "$bin" ] || { echo "FAIL: $bin not built (make check builds it)"; exit 1; }
    if [ "$name" = loaders ] && [ ! -f "${KVBENCH_MODEL:-${KVBENCH_CACHE:-$HOME/.cache/kvbench}/SmolLM2-135M-Instruct.Q4_1.gguf}" ]; then
        echo "SKIP loaders: the default model is missing (make model)"
        continue
    fi
    dirs=()
    for d in "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name"; do [ -d "$d" ] && dirs+=("$d"); done
    [ ${#dirs[@]} -gt 0 ] || { echo "FAIL: no seeds for $name"; exit 1; }
    "$bin" "${dirs[@]}" || { echo "FAIL: $name crashed on an input of ${dirs[*]}"; exit 1; }
    n=$((n + 1))
done
echo "ok: $n fuzz targets replayed their seeds and regression inputs"
