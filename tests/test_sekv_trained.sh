#!/usr/bin/env bash
# SeKV's shipped parameters (methods/sekv/params/): the file matches its sha256, `sekv`
# loads it by default for the default model (no training in CI), says so on stderr when
# no file fits, and on NIAH dev cases (768 and 1,280 tokens, depth 35: outside the
# reported grid) the trained router, capped at 50%, gives the answer a lower
# teacher-forced NLL than the untrained router at the same budget and does expand the
# needle's span. Its zoom precision is NOT better than the untrained router's (measured,
# not asserted: see methods/sekv/params/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
DIR=methods/sekv/params
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

(cd "$DIR" && sha256sum -c --quiet sekv-smollm2-135m.params.sha256) || fail "shipped params do not match their sha256"
[ "$(wc -l <"$DIR/sekv-smollm2-135m.loss.csv")" -ge 301 ] || fail "loss curve shorter than 300 steps"
if [ ! -f "$MODEL" ] || [ ! -d "$HOME/.cache/kvbench/haystack" ]; then
    echo "SKIP: model or haystack absent (make model haystack)"; exit $((fails > 0))
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset KVBENCH_SEKV_PARAMS
# capped at 50% on two dev cases, at the operating point the file was trained at (the
# authors' code defaults, sekv-ref's: alpha 1, no local window, P <= B): the trained
# router's answer NLL is lower than the untrained one's at the same budget, and it does
# expand the needle's span
REF="alpha=1,local=0,p_max=1"
"$KVBENCH" sekv-probe --model "$MODEL" --ctx 768,1280 --depths 35 --budget 0.5 --params "$REF" \
    --params "$REF,params_file=none" >"$T/out" 2>"$T/err" || fail "sekv-probe failed: $(cat "$T/err")"
cat "$T/out"
sed -n 2p "$T/out" | grep -q "params: trained (default file)" || fail "the shipped file was not loaded by default"
sed -n 6p "$T/out" | grep -q "params: none (untrained routing)" || fail "params_file=none still trained"
val() { sed -n "$1p" "$T/out" | sed -E "s/.* $2 ([0-9.na]+).*/\1/"; }
nt=$(val 1 nll) nu=$(val 5 nll) rec=$(val 1 recall)
awk -v a="$nt" -v b="$nu" 'BEGIN { exit !(a > 0 && a < b) }' || fail "trained router's answer NLL $nt not below the untrained $nu"
awk -v r="$rec" 'BEGIN { exit !(r > 0) }' || fail "trained router never expands the needle's span (recall $rec)"
# no file for this model: untrained, and said once on stderr
KVBENCH_SEKV_PARAMS=/nonexistent/p.params "$KVBENCH" sekv-probe --model "$MODEL" --ctx 768 --depths 35 --budget 0.5 \
    --params "" >"$T/out2" 2>"$T/err2" || fail "probe without params failed"
grep -q "no trained parameters for this model" "$T/err2" || fail "untrained SeKV did not say so: $(cat "$T/err2")"
grep -q "params: none (untrained routing)" "$T/out2" || fail "without a file: $(cat "$T/out2")"
[ "$fails" = 0 ] && echo "test_sekv_trained: all checks passed" || { echo "test_sekv_trained: $fails failure(s)"; exit 1; }
