#!/usr/bin/env bash
# sekv-probe tunes on dev cases (issue 32: it read the test split's haystack where the docs
# say dev): by default it reads the same text as --split dev, which is not the test split's.
source "$(dirname "$0")/lib.sh"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL is absent (make model)"; exit 0; }
[ -d "${KVBENCH_CACHE:-$HOME/.cache/kvbench}/haystack" ] || { echo "SKIP: no haystack (make haystack)"; exit 0; }
P=(sekv-probe --model "$MODEL" --ctx 400 --depths 40 --budget 0.5 --params "")
"$KVBENCH" "${P[@]}" >"$T/default" 2>"$T/err" || fail "default: $(cat "$T/err")"
"$KVBENCH" "${P[@]}" --split dev >"$T/dev" 2>"$T/err" || fail "--split dev: $(cat "$T/err")"
"$KVBENCH" "${P[@]}" --split test >"$T/test" 2>"$T/err" || fail "--split test: $(cat "$T/err")"
grep -q "cases 1," "$T/default" || fail "the probe ran no case: $(cat "$T/default")"
cmp -s "$T/default" "$T/dev" || fail "the default is not the dev split: $(diff "$T/default" "$T/dev")"
cmp -s "$T/dev" "$T/test" && fail "dev and test gave the same numbers (the same text?)"
rc=0; "$KVBENCH" "${P[@]}" --split train >/dev/null 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "split 'train': expected dev or test" "$T/err" || fail "--split train: exit $rc, $(cat "$T/err")"
[ $fails = 0 ] && echo "test_sekv_probe_split: ok"
exit $((fails > 0))
