#!/usr/bin/env bash
# The benchmarks' tasks kvbench does not run (LongBench's 5 Chinese tasks, 5 of
# InfiniteBench's 12) are never skipped without a word:
#  - loading every task of a data folder, each such file present gets one stderr line that
#    names the file and why, and the supported tasks still load;
#  - naming one (file name or the paper's name) is refused with the reason, exit 2,
#    before any model or data is read; an unknown name is still "unknown task".
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

LB_ZH="multifieldqa_zh dureader vcsum lsht passage_retrieval_zh"
IB_OTHER="longbook_qa_chn:Zh.QA longdialogue_qa_eng:En.Dia math_find:Math.Find math_calc:Math.Calc code_run:Code.Run"

refused() {   # refused BENCH TASKS REASON [NAMED]: --tasks TASKS exits 2 with one line naming NAMED (TASKS) and why
    local bench=$1 task=$2 why=$3 named=${4:-$2}
    if "$KVBENCH" run --model "$T/no-model.gguf" --workload "$bench:$T" --tasks "$task" --db "$T/x.db" >/dev/null 2>"$T/e"; then
        fail "--tasks $task succeeded"; return
    else
        local rc=$?
        [ "$rc" = 2 ] || fail "--tasks $task: exit $rc, want 2"
    fi
    [ "$(wc -l <"$T/e")" = 1 ] || fail "--tasks $task: not one stderr line: $(cat "$T/e")"
    grep -q "$bench: task '$named' is not supported: .*$why" "$T/e" || fail "--tasks $task: $(cat "$T/e")"
    [ ! -e "$T/x.db" ] || fail "--tasks $task wrote a results file"
}
for t in $LB_ZH; do refused longbench "$t" "Chinese"; done
for t in $IB_OTHER; do refused infinitebench "${t%%:*}" "not\|jieba"; refused infinitebench "${t#*:}" "not\|jieba"; done
refused longbench "narrativeqa,vcsum" "jieba" vcsum
"$KVBENCH" run --workload longbench:"$T" --tasks nosuch --db "$T/x.db" >/dev/null 2>"$T/e" && fail "unknown task accepted"
grep -q "unknown task 'nosuch'" "$T/e" || fail "unknown task: $(cat "$T/e")"

if [ ! -f "$MODEL" ]; then echo "SKIP (the rest): $MODEL is absent (make model)"; [ "$fails" = 0 ]; exit; fi
# A folder holding every task's file: one line per unsupported file, the supported ones load.
mkdir "$T/lb" "$T/ib"
cp tests/fixtures/prompts/longbench/narrativeqa.jsonl "$T/lb/"
cp tests/fixtures/prompts/infinitebench/code_debug.jsonl "$T/ib/"
for t in $LB_ZH; do echo '{"input": "q", "context": "c", "answers": ["a"]}' >"$T/lb/$t.jsonl"; done
for t in $IB_OTHER; do echo '{"input": "q", "context": "c", "answer": ["a"]}' >"$T/ib/${t%%:*}.jsonl"; done
for b in lb:longbench ib:infinitebench; do
    d=${b%%:*} bench=${b#*:}
    "$KVBENCH" run --model "$MODEL" --workload "$bench:$T/$d" --print-prompts 9 >"$T/out" 2>"$T/err" ||
        fail "$bench folder: $(cat "$T/err")"
    [ "$(grep -c '^=== prompt ' "$T/out")" = 1 ] || fail "$bench: the supported task did not load: $(head -1 "$T/out")"
    [ "$(grep -c ": skipped: " "$T/err")" = 5 ] || fail "$bench: want 5 skip lines: $(cat "$T/err")"
    [ "$(wc -l <"$T/err")" = 5 ] || fail "$bench: other stderr lines: $(cat "$T/err")"
    for f in "$T/$d"/*.jsonl; do
        t=$(basename "$f" .jsonl)
        case $t in narrativeqa|code_debug) continue ;; esac
        grep -q "^$bench: $f: skipped: $t is not supported: ." "$T/err" || fail "$bench: no line for $f: $(cat "$T/err")"
    done
done
# named tasks: the run reads only those, and says nothing of the other files
"$KVBENCH" run --model "$MODEL" --workload "longbench:$T/lb" --tasks narrativeqa --print-prompts 9 >"$T/out" 2>"$T/err" ||
    fail "--tasks narrativeqa: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "--tasks narrativeqa: stderr $(cat "$T/err")"

[ "$fails" = 0 ] || exit 1
echo "test_unsupported_tasks: ok"
