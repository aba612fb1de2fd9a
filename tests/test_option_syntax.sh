#!/usr/bin/env bash
# One rule for options in every command (issue 35): "--flag value" and "--flag=value" mean
# the same (kernels/cli_opt.h). Each of the seven commands that read --model gives the same
# output for --model=PATH as for --model PATH (before, only run took the first form); each
# says "--model needs a value" when argv ends there; a bare flag given "=value" is refused.
source "$(dirname "$0")/lib.sh"
[ -f "$MODEL" ] || { echo "skipped: no model at $MODEL (make model)"; exit 0; }
NO=/nonexistent/kvbench-model.gguf
# same CMD ARGS...: stdout and stderr of `kvbench CMD --model=X ARGS` and `kvbench CMD
# --model X ARGS` are equal (X: $path; timing lines, "tok/s", left out).
same() {
    local cmd=$1; shift
    local r1=0 r2=0
    "$KVBENCH" "$cmd" --model="$path" "$@" >"$T/eq.out" 2>"$T/eq.err" || r1=$?
    "$KVBENCH" "$cmd" --model "$path" "$@" >"$T/sp.out" 2>"$T/sp.err" || r2=$?
    [ "$r1" = "$r2" ] || fail "$cmd: exit $r1 with --model=PATH, $r2 with --model PATH"
    cmp -s "$T/eq.out" "$T/sp.out" || fail "$cmd: --model=PATH and --model PATH print different output"
    cmp -s <(grep -v "tok/s" "$T/eq.err") <(grep -v "tok/s" "$T/sp.err") || fail "$cmd: different messages: $(head -c 300 "$T/eq.err") / $(head -c 300 "$T/sp.err")"
    [ -s "$T/eq.out" ] || [ -s "$T/eq.err" ] || fail "$cmd printed nothing"
}
path=$MODEL
same info
grep -qF "$MODEL" "$T/eq.out" || fail "info does not describe $MODEL"
same methods sekv
same generate --prompt=Hello --max-tokens 3
same run --workload=niah --ctx=512 --print-prompts 1
grep -q "^=== prompt 1/1: niah" "$T/eq.out" || fail "run --print-prompts printed no prompt"
path=random:smollm2-135m
same sim --ctx 512 --decode 2 --layers 1 --methods=streamingllm --quiet
grep -q "random:smollm2-135m" "$T/eq.out" || fail "sim does not name the random preset"
path=$NO   # the trainer and the probe load the model first: the same error names the path
mkdir -p "$T/corpus"
same train-sekv --corpus "$T/corpus" --out "$T/p.params" --steps 1
grep -qF "$NO" "$T/eq.err" || fail "train-sekv did not read --model=PATH: $(cat "$T/eq.err")"
same sekv-probe --params ""
grep -qF "$NO" "$T/eq.err" || fail "sekv-probe did not read --model=PATH: $(cat "$T/eq.err")"

for cmd in info methods generate sim run train-sekv sekv-probe; do
    rc=0
    "$KVBENCH" "$cmd" --model >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] || fail "$cmd --model (no value): exit $rc, expected 2"
    grep -q -- "--model needs a value" "$T/err" || fail "$cmd --model (no value): $(head -1 "$T/err")"
done
for args in "run --quiet=1" "generate --chat=yes" "sim --quiet=1" "sekv-probe --question-after=1"; do
    rc=0
    "$KVBENCH" $args >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] && grep -q "takes no value" "$T/err" || fail "$args: exit $rc, $(head -1 "$T/err")"
done
[ "$fails" = 0 ] && echo "test_option_syntax: --model=PATH and --model PATH alike in 7 commands"
exit $((fails > 0))
