#!/usr/bin/env bash
# `make bench-llamacpp`: kvbench's engine against llama.cpp on the same GGUF, same threads,
# same machine, same session. llama.cpp comes from the llama-cpp-python source distribution
# on PyPI (its vendored copy), built once with cmake (CPU only, Release, GGML_NATIVE) into
# the cache, never into git. Then llama-bench runs prefill (-p) and decode (-n) at each depth
# (-d), with flash attention off (-fa 0) and at llama.cpp's default (-fa auto, which turns
# it on for the CPU), and kvbench's bench_model runs at the same depths, for the default
# model and for KVBENCH_MODEL; the table gives tok/s and the ratio kvbench / llama.cpp,
# one block of rows per model.
#
# Usage: tools/bench_llamacpp.sh [--build-only]
#   env: KVBENCH_CACHE (default ~/.cache/kvbench), BUILD (kvbench build dir, default build),
#        THREADS (default 2), DEPTHS (default "512 2048 8192"), REPS (runs averaged on both sides:
#        llama-bench -r and bench_model --reps, default 3), LLAMACPP_PY_VERSION (default 0.3.36),
#        KVBENCH_MODEL (a second GGUF, e.g. the judge model; the cached SmolLM2 file runs too
#        unless ONLY_MODEL=1), FA (llama.cpp's flash-attention settings run, default "0 auto";
#        "0" alone halves the llama.cpp time and leaves the "def" columns empty).
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
if [ $# -gt 0 ] && [ "$1" != "--build-only" ]; then
    echo "bench_llamacpp: unknown argument '$1' (only --build-only or --help)" >&2
    exit 2
fi
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
VER=${LLAMACPP_PY_VERSION:-0.3.36}
DIR=$CACHE/llamacpp
THREADS=${THREADS:-2}
DEPTHS=${DEPTHS:-512 2048 8192}
REPS=${REPS:-3}
BUILD=${BUILD:-build}
DEFAULT_MODEL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$DIR/build-$VER/bin/llama-bench

# the models first: a wrong KVBENCH_MODEL is refused before the long build
FA=${FA:-0 auto}
case "$FA" in "0" | "0 auto" | "auto 0") ;; *) echo "bench_llamacpp: FA='$FA': give \"0\" or \"0 auto\"" >&2; exit 2 ;; esac
MODELS=()
[ -r "$DEFAULT_MODEL" ] && [ "${ONLY_MODEL:-0}" != 1 -o -z "${KVBENCH_MODEL:-}" ] && MODELS+=("$DEFAULT_MODEL")
if [ -n "${KVBENCH_MODEL:-}" ] && [ "$KVBENCH_MODEL" != "$DEFAULT_MODEL" ]; then
    [ -r "$KVBENCH_MODEL" ] || { echo "bench_llamacpp: KVBENCH_MODEL=$KVBENCH_MODEL: no such readable file" >&2; exit 2; }
    MODELS+=("$KVBENCH_MODEL")
fi
if [ ${#MODELS[@]} -eq 0 ] && [ "${1:-}" != "--build-only" ]; then
    echo "bench_llamacpp: no model at $DEFAULT_MODEL: run \`make model\` (or set KVBENCH_MODEL)" >&2
    exit 2
fi
if [ ! -x "$BIN" ]; then
    mkdir -p "$DIR"
    sdist=$DIR/llama_cpp_python-$VER.tar.gz
    if [ ! -f "$sdist" ]; then
        echo "bench_llamacpp: downloading llama-cpp-python==$VER (source) from PyPI ..." >&2
        python3 -m pip download --quiet --no-binary :all: --no-deps --disable-pip-version-check \
            "llama-cpp-python==$VER" -d "$DIR" >&2
    fi
    src=$DIR/llama_cpp_python-$VER
    [ -d "$src" ] || tar -xzf "$sdist" -C "$DIR"
    echo "bench_llamacpp: building llama-bench (vendor/llama.cpp, CPU, Release, native) ..." >&2
    cmake -S "$src/vendor/llama.cpp" -B "$DIR/build-$VER" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$DIR/build-$VER" --config Release --target llama-bench -j "${JOBS:-2}" >&2
fi
[ "${1:-}" = "--build-only" ] && { echo "$BIN"; exit 0; }
[ -x "$ROOT/$BUILD/tests/bench_model" ] || { echo "bench_llamacpp: build $BUILD/tests/bench_model first (make bench-llamacpp does)" >&2; exit 2; }

tmp=$DIR/last-run   # the raw CSVs of the latest run stay here (llama-bench at 8K takes minutes)
rm -rf "$tmp" && mkdir -p "$tmp"
d_list=$(echo "$DEPTHS" | tr ' ' ',')
# llama-bench: -p 512 prefill of 512 tokens after d tokens of context, -n 128 decoded tokens
# after d; we use -p equal to the depth with -d 0 for prefill (as bench_model's prefill of
# the whole prompt), and -n 32 at -d depth for decode. Output: one CSV row per test.
# kvbench runs between the two llama.cpp runs, so a drift in the machine's speed during the
# session shows as a gap between the fa0 and default columns rather than as a ratio.
# Each model's CSVs go to $tmp/<index>/, its path to $tmp/<index>/model.
i=0
for model in "${MODELS[@]}"; do
    out=$tmp/$i && mkdir -p "$out" && echo "$model" > "$out/model"
    for fa in 0 auto; do
        [[ " $FA " == *" $fa "* ]] || continue
        echo "bench_llamacpp: ${model##*/}: llama-bench -fa $fa (prefill, then decode at each depth; $REPS reps) ..." >&2
        "$BIN" -m "$model" -t "$THREADS" -fa "$fa" -r "$REPS" -p "$d_list" -n 0 -o csv > "$out/pp$fa.csv"
        "$BIN" -m "$model" -t "$THREADS" -fa "$fa" -r "$REPS" -p 0 -n 32 -d "$d_list" -o csv > "$out/tg$fa.csv"
        if [ "$fa" = 0 ]; then
            echo "bench_llamacpp: ${model##*/}: kvbench bench_model at the same depths ..." >&2
            KVBENCH_MODEL="$model" KVBENCH_THREADS="$THREADS" KVBENCH_BENCH_DEPTHS="$DEPTHS" \
                "$ROOT/$BUILD/tests/bench_model" --csv --reps "$REPS" > "$out/kv.csv"
        fi
    done
    echo "kvbench bench_model on ${model##*/} (CSV):"
    cat "$out/kv.csv"
    i=$((i + 1))
done

python3 - "$tmp" "$DEPTHS" "$THREADS" "$REPS" "${#MODELS[@]}" <<'PY'
import csv, os, sys
tmp, depths, threads, reps, n_models = sys.argv[1], [int(d) for d in sys.argv[2].split()], sys.argv[3], sys.argv[4], int(sys.argv[5])

def llama(path, key):
    """{depth: tok/s} from llama-bench CSV: prefill rows keyed by n_prompt, decode by n_depth
    (empty when that flash-attention setting did not run: FA=0)."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for r in csv.DictReader(f):
            out[int(r[key])] = float(r["avg_ts"])
    return out

FA = ("0", "auto")
print(f"{threads} threads; tok/s, the mean of {reps} runs each (llama-bench -r; "
      "kvbench bench_model --reps), 32 new tokens; at the model's context kvbench's prompt is shortened to fit; "
      "pp = prefill of the whole depth, "
      "tg = decode after it with 8-bit activations (--activations q8, as llama.cpp), tg f32 = with f32 activations "
      "(kvbench's default), q8+f16 = 8-bit activations over f16 K/V (--kv-type f16, llama.cpp's own "
      "defaults); ratio = kvbench / llama.cpp")
names = [os.path.basename(open(f"{tmp}/{i}/model").read().strip()) for i in range(n_models)]
W = max([5] + [len(n) for n in names])
hdr = f"{'model':<{W}} {'depth':>6} | {'kvbench pp':>10} {'llama fa0':>9} {'llama def':>9} {'ratio fa0':>9} {'ratio def':>9} | " \
      f"{'kvbench tg':>10} {'llama fa0':>9} {'llama def':>9} {'ratio fa0':>9} {'ratio def':>9} | " \
      f"{'tg f32':>7} {'ratio fa0':>9} | {'q8+f16':>7} {'ratio fa0':>9} {'ratio def':>9}"
print(hdr)
print("-" * len(hdr))
def ratio(a, b):
    return f"{a / b:9.2f}" if b else f"{'-':>9}"
for i in range(n_models):
    d_dir = f"{tmp}/{i}"
    name = names[i]
    pp = {fa: llama(f"{d_dir}/pp{fa}.csv", "n_prompt") for fa in FA}
    tg = {fa: llama(f"{d_dir}/tg{fa}.csv", "n_depth") for fa in FA}
    kv = {}
    with open(f"{d_dir}/kv.csv") as f:
        for r in csv.DictReader(f):
            kv[int(r["depth"])] = (float(r["prefill_tok_s"]), float(r["decode_tok_s"]), float(r["decode_f32_tok_s"]),
                                  float(r["decode_f16kv_tok_s"]))
    for d in depths:
        kp, kt, kf, kh = kv.get(d, (float("nan"),) * 4)
        # bench_model's deepest prompt is shortened to fit the model's context: match by nearest
        if d not in kv and kv:
            near = min(kv, key=lambda k: abs(k - d))
            kp, kt, kf, kh = kv[near]
        lp = [pp[fa].get(d, 0.0) for fa in FA]
        lt = [tg[fa].get(d, 0.0) for fa in FA]
        print(f"{name:<{W}} {d:6d} | {kp:10.1f} {lp[0]:9.1f} {lp[1]:9.1f} {ratio(kp, lp[0])} {ratio(kp, lp[1])} | "
              f"{kt:10.1f} {lt[0]:9.1f} {lt[1]:9.1f} {ratio(kt, lt[0])} {ratio(kt, lt[1])} | {kf:7.1f} {ratio(kf, lt[0])} | "
              f"{kh:7.1f} {ratio(kh, lt[0])} {ratio(kh, lt[1])}")
PY
