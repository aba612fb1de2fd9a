#!/usr/bin/env bash
# train-sekv --l-max: training's segmentation takes sekv's span cap (the capped operating
# point that retrieves on the judge model; issue 32), so its documents get more, shorter
# spans than with maximal runs; a bad value is refused before anything is loaded.
source "$(dirname "$0")/lib.sh"

mkdir "$T/corpus"
for i in 1 2; do head -c $((i * 1500 - 1 + 5000)) tests/test_run.sh | tail -c +$((i * 1500)) >"$T/corpus/d$i.txt"; done
COMMON=(--model random:smollm2-135m --corpus "$T/corpus" --ctx 256 --candidates 4 --keep 2 --cache none --threads 2
    --max-docs 2 --steps 1)
spans() { sed -nE 's/^train-sekv: doc [0-9]+\/[0-9]+ ([^:]+): stage 1, [0-9]+ tokens, ([0-9]+) spans.*/\1 \2/p' "$1" | sort; }
"$KVBENCH" train-sekv "${COMMON[@]}" --out "$T/a.params" >/dev/null 2>"$T/free" || fail "uncapped: $(tail -3 "$T/free")"
"$KVBENCH" train-sekv "${COMMON[@]}" --l-max 8 --out "$T/b.params" >/dev/null 2>"$T/cap" || fail "--l-max 8: $(tail -3 "$T/cap")"
join <(spans "$T/free") <(spans "$T/cap") >"$T/both"
[ "$(wc -l <"$T/both")" = 2 ] || fail "expected 2 documents in both logs: $(cat "$T/both")"
while read -r doc a b; do
    [ "$b" -gt "$a" ] || fail "$doc: $b spans with --l-max 8, $a without"
    [ "$b" -ge 16 ] || fail "$doc: $b spans of at most 8 tokens cannot cover a 256-token document's runs"
done <"$T/both"
cat "$T/both"
[ "$fails" = 0 ] && echo "test_train_lmax: all checks passed" || { echo "test_train_lmax: $fails failure(s)"; exit 1; }
