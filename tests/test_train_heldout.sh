#!/usr/bin/env bash
# train-sekv's early stopping on a held-out slice of the corpus (random weights of
# SmolLM2's shape, tiny documents): with 4 documents and --held-out 2 it trains on 2,
# measures the held-out loss every step (the CSV's heldout column), and writes the
# parameters of the step with the lowest one, which it names; the written file's
# recorded step count is that step. Without --held-out, 2 documents are too few for the
# default slice of 4: training goes on without it and says so.
source "$(dirname "$0")/lib.sh"

mkdir "$T/corpus"
# head | tail, not tail | head: the reader takes all its input, so no SIGPIPE under pipefail
for i in 1 2 3 4; do head -c $((i * 1500 - 1 + 5000)) tests/test_run.sh | tail -c +$((i * 1500)) >"$T/corpus/d$i.txt"; done
COMMON=(--model random:smollm2-135m --corpus "$T/corpus" --ctx 256 --candidates 4 --keep 2 --cache none --threads 2)
"$KVBENCH" train-sekv "${COMMON[@]}" --max-docs 4 --held-out 2 --eval-every 1 --steps 4 --out "$T/p.params" \
    --log "$T/loss.csv" >"$T/out" 2>"$T/err" || fail "training with a held-out slice failed: $(tail -3 "$T/err")"
grep -q "2 documents train, 2 held out" "$T/err" || fail "no held-out split reported: $(head -5 "$T/err")"
head -1 "$T/loss.csv" | grep -q ",heldout$" || fail "loss CSV has no heldout column"
# every step has a held-out loss; the best one is the step written
best=$(awk -F, 'NR > 1 { if ($NF == "") bad = 1; if (min == "" || $NF + 0 < min) { min = $NF + 0; s = $1 + 1 } }
               END { if (bad || NR != 5) print "bad"; else print s }' "$T/loss.csv")
[ "$best" != bad ] || fail "held-out column not filled on every step: $(cat "$T/loss.csv")"
grep -q "early stopping: the parameters after step $best of 4" "$T/err" \
    || fail "early stopping did not pick step $best: $(grep early "$T/err")"
# the default slice (4) needs 8 documents: with 2 it is skipped, with a note
"$KVBENCH" train-sekv "${COMMON[@]}" --max-docs 2 --steps 1 --out "$T/q.params" >"$T/out2" 2>"$T/err2" \
    || fail "training without enough documents for the default slice failed: $(tail -3 "$T/err2")"
grep -q "too few to hold 4 out: no early stopping" "$T/err2" || fail "no note about the skipped slice"
[ "$fails" = 0 ] && echo "test_train_heldout: all checks passed" || { echo "test_train_heldout: $fails failure(s)"; exit 1; }
