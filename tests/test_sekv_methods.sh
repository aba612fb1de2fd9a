#!/usr/bin/env bash
# `kvbench methods sekv` counts SeKV's trainable parameters for the model's shape: the
# count is recomputed here from the shape `kvbench info` prints and the parameter layout
# of reference section 8 (W: L*H*32*d, tau: L*H, rank gate 64-wide MLP at rank cap 32:
# 64*(32+d) + 64 + 64*64 + 64 + 32*64 + 32), and its share of the model's parameters.
# Without a model file the line says so instead of failing.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

out=$("$KVBENCH" methods --model /nonexistent/m.gguf sekv) || fail "methods with a missing model exited non-zero"
echo "$out" | grep -q "trainable parameters: .*no model to count for (/nonexistent/m.gguf" \
    || fail "missing model not named: $(echo "$out" | tail -1)"
"$KVBENCH" methods --model 2>/dev/null && fail "--model without a file accepted"

# Every default of sekv and sekv-ref says where it comes from: [paper], [code] (the
# authors' default.yaml) or [kvbench] (switches that only ablate are exempt); alpha is
# never attributed to the paper, which states none.
for m in sekv sekv-ref; do
    params=$("$KVBENCH" methods --model /nonexistent/m.gguf "$m" | awk '/^  parameters:/ {on = 1; next} on && /^    / {print}')
    [ -n "$params" ] || fail "$m: no parameters listed"
    untagged=$(echo "$params" | awk '$1 !~ /^(zoom|trained_zoom|fixed_chunk|uncapped)$/ && $0 !~ /default [^ ]+ +\[(paper|code|kvbench)/ {print $1}')
    [ -z "$untagged" ] || fail "$m: defaults without a source: $untagged"
    echo "$params" | grep -E "^ +alpha " | grep -q "paper: 1\|\[paper\]" && fail "$m: alpha attributed to the paper"
done
"$KVBENCH" methods --model /nonexistent/m.gguf sekv | grep -E "^ +alpha +default auto +\[kvbench; the paper states none\]" >/dev/null \
    || fail "sekv: alpha is not the per-prompt fit"
"$KVBENCH" methods --model /nonexistent/m.gguf sekv-ref | grep -E "^ +alpha +default 1 +\[code\]" >/dev/null \
    || fail "sekv-ref: alpha is not the authors' code's 1"

if [ ! -f "$MODEL" ]; then echo "SKIP: $MODEL is absent (make model)"; exit $((fails > 0)); fi
info=$("$KVBENCH" info --model "$MODEL")
L=$(echo "$info" | awk '$1 == "layers" {print $2}')
H=$(echo "$info" | awk '$1 == "heads" {print $2}')
D=$(echo "$info" | awk '$1 == "head" && $2 == "dim" {print $3}')
P=$(echo "$info" | awk '$1 == "parameters" {gsub(/[()]/, "", $4); print $4}')
[ -n "$L" ] && [ -n "$H" ] && [ -n "$D" ] && [ -n "$P" ] || fail "could not read the shape from kvbench info"
want=$((L * H * 32 * D + L * H + 64 * (32 + D) + 64 + 64 * 64 + 64 + 32 * 64 + 32))
line=$("$KVBENCH" methods --model "$MODEL" sekv | grep "trainable parameters")
got=$(echo "$line" | sed -E 's/.*trainable parameters: ([0-9]+) .*/\1/')
[ "$got" = "$want" ] || fail "count $got, expected $want for L=$L H=$H d=$D: $line"
pct=$(awk -v n="$want" -v p="$P" 'BEGIN { printf "%.2f%%", 100 * n / p }')
echo "$line" | grep -qF "($pct of the" || fail "share: expected $pct of $P: $line"
"$KVBENCH" methods --model "$MODEL" snapkv | grep -q "trainable" && fail "a method other than sekv got a count"
[ "$fails" = 0 ] && echo "test_sekv_methods: all checks passed ($line)" || { echo "test_sekv_methods: $fails failure(s)"; exit 1; }
