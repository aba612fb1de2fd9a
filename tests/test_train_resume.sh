#!/usr/bin/env bash
# train-sekv's curriculum, per-document alpha fit and checkpoints (the real model, short
# documents so it runs in seconds):
#  - --ctx 256,512 splits the documents by length into two stages, the longer ones last,
#    each cut to its stage's length and trained on in its half of the steps;
#  - --alpha fit fits alpha per document with the sekv method's rule (P <= p_max*B at the
#    budget drawn for it: P and the cap as logged; that it is the grid's smallest is in
#    tests/test_sekv_teacher.c);
#  - a run stopped by --time-limit after every step (exit 3) and resumed from its
#    checkpoint until done writes the same parameter file, byte for byte, and the same
#    loss curve, as one uninterrupted run;
#  - a checkpoint from another configuration, a corrupt one, one whose next step, best
#    step or best loss is out of range (a step past --steps or past 2^31, a best step at
#    INT_MAX), --checkpoint in a directory that does not exist (at the start, not at the
#    first save) and --time-limit without --checkpoint are refused with one line naming
#    the file or option and the value (exit 2), nothing written.
source "$(dirname "$0")/lib.sh"

mkdir "$T/corpus"
# head | tail, not tail | head: the reader takes all its input, so no SIGPIPE under pipefail
for i in 1 2 3 4 5 6; do head -c $((i * 1500 - 1 + 2500 + i * 900)) tests/test_run.sh | tail -c +$((i * 1500)) >"$T/corpus/d$i.txt"; done
C=(--model "$MODEL" --corpus "$T/corpus" --ctx 256,512 --candidates 12 --keep 3 --window 48 --alpha fit
   --fit-budgets 0.2,0.3 --local 8 --cache "$T/cache" --threads 2 --held-out 2 --eval-every 2 --budget-norm span)
"$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/a.params" --log "$T/a.csv" >"$T/out" 2>"$T/err" \
    || fail "uninterrupted training failed: $(tail -3 "$T/err")"
grep -q "curriculum stage 1: 2 documents of up to 256 tokens (mean 256), steps 1..4" "$T/err" \
    || fail "stage 1 not as expected: $(grep curriculum "$T/err")"
grep -q "curriculum stage 2: 2 documents of up to 512 tokens (mean 512), steps 5..8" "$T/err" \
    || fail "stage 2 not as expected: $(grep curriculum "$T/err")"
# the stages in the loss curve: steps 0-3 on stage-1 documents, 4-7 on stage-2 ones
s1=$(grep 'stage 1, ' "$T/err" | sed 's/.*doc [0-9]*\/[0-9]* \([^:]*\):.*/\1/' | sort | tr '\n' ' ')
while IFS=, read -r step doc _; do
    [ "$step" = step ] && continue
    case " $s1" in *" $doc "*) in1=1 ;; *) in1=0 ;; esac
    [ "$in1" = $((step < 4 ? 1 : 0)) ] || fail "step $step trained on $doc (stage-1 documents: $s1)"
done <"$T/a.csv"
# every fitted alpha is the grid's smallest with P <= p_max*B: one step lower does not fit
n_fit=0
while read -r n budget alpha P cap; do
    n_fit=$((n_fit + 1))
    [ "$P" -le "$cap" ] || fail "fitted alpha $alpha: P $P > $cap"
    exp_cap=$(python3 -c "import math; print(math.floor(0.2 * math.floor($budget * $n)))")
    [ "$cap" = "$exp_cap" ] || fail "p_max*B = $cap for $n tokens at $budget, expected $exp_cap"
done < <(sed -n 's/.* \([0-9]*\) tokens, .*budget \([0-9.]*\): alpha \([0-9.]*\), P \([0-9]*\) <= p_max\*B \([0-9]*\)).*/\1 \2 \3 \4 \5/p' "$T/err")
[ "$n_fit" = 6 ] || fail "$n_fit of 6 documents report a fitted alpha: $(grep 'doc ' "$T/err")"
# resumed after every step = uninterrupted
rc=0
for i in $(seq 1 12); do
    rc=0
    "$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/b.params" --log "$T/b.csv" --checkpoint "$T/ck" \
        --time-limit 0.000001 >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 3 ] || break
    grep -q "rerun the same command to go on" "$T/err" || fail "stop $i: no resume hint"
done
[ "$rc" = 0 ] || fail "resumed training ended with exit $rc: $(tail -3 "$T/err")"
[ "$i" = 8 ] || fail "expected 7 stops and a finishing run, got $i runs"
cmp -s "$T/a.params" "$T/b.params" || fail "resumed training wrote different parameters"
# every column but seconds (16)
diff <(cut -d, -f1-15,17- "$T/a.csv") <(cut -d, -f1-15,17- "$T/b.csv") >/dev/null \
    || fail "resumed loss curve differs: $(diff <(cut -d, -f1-15,17- "$T/a.csv") <(cut -d, -f1-15,17- "$T/b.csv") | head -4)"
# the span-order term: 0 in the reference loss's curve, positive with --lambda-order, which
# is part of the configuration (the finished reference checkpoint is not resumed with it)
awk -F, 'NR == 1 && $17 != "order" { bad = 1 } NR > 1 && $17 != 0 { bad = 1 } END { exit bad }' "$T/a.csv" \
    || fail "the reference loss's order column is not 0: $(cut -d, -f17 "$T/a.csv" | head -3)"
rc=0
"$KVBENCH" train-sekv "${C[@]}" --steps 8 --lambda-order 1 --out "$T/o.params" --checkpoint "$T/ck" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "written by a different configuration" "$T/err" \
    || fail "--lambda-order 1 resumed the reference loss's checkpoint: exit $rc, $(tail -1 "$T/err")"
"$KVBENCH" train-sekv "${C[@]}" --steps 8 --lambda-order 1 --out "$T/o.params" --log "$T/o.csv" >"$T/out" 2>"$T/err" \
    || fail "training with --lambda-order 1 failed: $(tail -3 "$T/err")"
# (0 on a step whose positions see one span or none: the softmax over one span is 1)
awk -F, 'NR > 1 { if (!($17 >= 0)) bad = 1; if ($17 > 0) pos++ } END { exit bad || pos < 2 || NR != 9 }' "$T/o.csv" \
    || fail "--lambda-order 1: order column not positive on the 512-token steps: $(cut -d, -f17 "$T/o.csv" | tr '\n' ' ')"
grep "^held-out after step" "$T/err" | grep -qv " order 0.0000," \
    || fail "--lambda-order 1: no held-out check reports the order term: $(grep '^held-out' "$T/err" | head -2)"
cmp -s "$T/a.params" "$T/o.params" && fail "--lambda-order 1 wrote the reference loss's parameters"
# refusals
rc=0
"$KVBENCH" train-sekv "${C[@]}" --steps 9 --out "$T/c.params" --checkpoint "$T/ck" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "written by a different configuration" "$T/err" \
    || fail "a checkpoint of another configuration: exit $rc, $(tail -1 "$T/err")"
head -c 100 "$T/ck" >"$T/ck2"
rc=0
"$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/c.params" --checkpoint "$T/ck2" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "ck2: truncated or corrupt\|ck2: not a train-sekv checkpoint" "$T/err" \
    || fail "a truncated checkpoint: exit $rc, $(tail -1 "$T/err")"
[ ! -e "$T/c.params" ] || fail "a refused checkpoint still wrote parameters"
# the finished checkpoint with one header field changed (int64 at byte OFF, or the best
# held-out loss, a double at byte 56): refused when the command starts, one line, the
# checkpoint and --out untouched
patched() {   # patched OFF TYPE VALUE EXPECT
    python3 -c "import struct,sys; b=bytearray(open(sys.argv[1],'rb').read()); b[$1:$1+8]=struct.pack('<$2',$3); open(sys.argv[2],'wb').write(b)" "$T/ck" "$T/ck3"
    local was rc=0
    was=$(md5sum <"$T/ck3")
    "$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/c.params" --checkpoint "$T/ck3" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF "ck3: $4" "$T/err" \
        || fail "checkpoint with bytes $1.. = $3: exit $rc, $(tail -1 "$T/err")"
    ! grep -q "resuming from" "$T/err" || fail "checkpoint with bytes $1.. = $3 was resumed: $(grep resuming "$T/err")"
    [ ! -e "$T/c.params" ] || fail "checkpoint with bytes $1.. = $3 still wrote parameters"
    [ "$(md5sum <"$T/ck3")" = "$was" ] || fail "checkpoint with bytes $1.. = $3 was rewritten"
}
patched 16 q 4294967291 "corrupt header: next step 4294967291 is outside 0..8"
patched 16 q $((1 << 40)) "corrupt header: next step 1099511627776 is outside 0..8"
patched 16 q 9 "corrupt header: next step 9 is outside 0..8"
patched 32 q 2147483647 "corrupt header: best step 2147483647 is outside -1..7"
patched 32 q -2 "corrupt header: best step -2 is outside -1..7"
patched 56 d "float('nan')" "corrupt header: best held-out loss nan after step"
# --checkpoint where it cannot be written: refused before the model is loaded
mkfifo "$T/fifo"   # a FIFO is refused, not opened and waited on
for bad in "$T/no-such-dir/ck" "$T/corpus" "$T/fifo"; do
    rc=0
    timeout 120 "$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/c.params" --checkpoint "$bad" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF -- "--checkpoint $bad" "$T/err" \
        || fail "--checkpoint $bad: exit $rc, $(cat "$T/err")"
    [ ! -e "$T/c.params" ] && [ ! -e "$T/no-such-dir" ] && [ ! -e "$T/fifo.tmp" ] || fail "--checkpoint $bad: something was written"
done
rc=0
"$KVBENCH" train-sekv "${C[@]}" --steps 8 --out "$T/c.params" --time-limit 5 >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "time-limit needs --checkpoint" "$T/err" \
    || fail "--time-limit without --checkpoint: exit $rc, $(cat "$T/err")"
[ "$fails" = 0 ] && echo "test_train_resume: all checks passed" || { echo "test_train_resume: $fails failure(s)"; exit 1; }
