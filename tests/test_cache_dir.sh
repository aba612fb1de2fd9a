#!/usr/bin/env bash
# Every default under the cache directory (kernels/host.c kb_cache_path) follows
# KVBENCH_CACHE, as tools/fetch_model.sh, fetch_haystack.sh and build_corpus.sh write there,
# and else $HOME/.cache/kvbench: the model, the sim's bandwidth file (make bench's
# membw.tsv) and the sim's corpus (before the shared helper these two read only $HOME).
set -u
cd "$(dirname "$0")/.."
KV=${KVBENCH:-./kvbench}
T=$(mktemp -d /tmp/kvbench_test_cache_dir_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "test_cache_dir: $*"; fail=1; }
M=${KVBENCH_MODEL:-${KVBENCH_CACHE:-$HOME/.cache/kvbench}/SmolLM2-135M-Instruct.Q4_1.gguf}
mkdir -p "$T/c" "$T/home/.cache/kvbench"
printf 'read 1 12.5\nread 2 20.25\ncopy 2 9\n' >"$T/c/membw.tsv"
printf 'read 1 7.5\n' >"$T/home/.cache/kvbench/membw.tsv"

# the model: the default path names the cache
out=$(env -u KVBENCH_MODEL KVBENCH_CACHE="$T/c" "$KV" sim 2>&1)
grep -q -- "$T/c/SmolLM2-135M-Instruct.Q4_1.gguf" <<<"$out" || bad "the default model is not under KVBENCH_CACHE: $out"
out=$(env -u KVBENCH_MODEL -u KVBENCH_CACHE HOME="$T/home" "$KV" sim 2>&1)
grep -q -- "$T/home/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf" <<<"$out" || bad "the default model is not under HOME: $out"

if [ -f "$M" ]; then
    # the bandwidth file: the best read figure of the cache's file, named
    out=$(KVBENCH_CACHE="$T/c" "$KV" sim --model "$M" --ctx 4096 2>&1 | grep -m1 '^Bandwidth')
    grep -q -- "host 20.2 GB/s read, measured by make bench ($T/c/membw.tsv)" <<<"$out" || bad "sim bandwidth under KVBENCH_CACHE: $out"
    out=$(env -u KVBENCH_CACHE HOME="$T/home" "$KV" sim --model "$M" --ctx 4096 2>&1 | grep -m1 '^Bandwidth')
    grep -q -- "host 7.5 GB/s read, measured by make bench ($T/home/.cache/kvbench/membw.tsv)" <<<"$out" ||
        bad "sim bandwidth under HOME: $out"
    # the corpus of --measure-inputs (none there: the message names where it looked)
    out=$(KVBENCH_CACHE="$T/c" "$KV" sim --model "$M" --measure-inputs 2>&1)
    grep -q -- "$T/c/corpus: no MANIFEST.tsv" <<<"$out" || bad "sim corpus under KVBENCH_CACHE: $out"
else
    echo "test_cache_dir: $M not found; the sim's bandwidth and corpus checks need the model"
fi
[ $fail = 0 ] && echo "test_cache_dir: ok"
exit $fail
