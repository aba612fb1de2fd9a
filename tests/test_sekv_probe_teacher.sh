#!/usr/bin/env bash
# sekv-probe's teacher line (issue 32, item 4: why the trained router loses): per answer
# step and (layer, head), the exact attention of the query sekv's model sent, summed per
# span. Its shares must be consistent with each other and with the router's decisions.
# Also: the probe pairs every two settings (it used to pair each only with the first).
source "$(dirname "$0")/lib.sh"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL is absent (make model)"; exit 0; }
[ -d "${KVBENCH_CACHE:-$HOME/.cache/kvbench}/haystack" ] || { echo "SKIP: no haystack (make haystack)"; exit 0; }
"$KVBENCH" sekv-probe --model "$MODEL" --ctx 768 --depths 35 --budget 0.5 --params "params_file=none" \
    --params "params_file=none,zoom=0" --params "" >"$T/out" 2>"$T/err" || fail "sekv-probe: $(cat "$T/err")"
cat "$T/out"
mapfile -t lines < <(grep '^  teacher (exact attention' "$T/out")
[ ${#lines[@]} = 3 ] || fail "expected a teacher line per setting, got ${#lines[@]}"
for k in 0 1 2; do
    read -r dec top cov tgt mass agree topagree < <(echo "${lines[$k]}" | sed -E \
        's/.*attention, ([0-9]+) decisions\): needle span on top ([0-9.]+), a coverage target ([0-9.]+); targets ([0-9.]+) of the spans; needle mass share ([0-9.]+); router expanded the top span ([0-9.]+), the needle.s when on top ([0-9.na]+)/\1 \2 \3 \4 \5 \6 \7/')
    # SmolLM2: 30 layers x 9 heads per answer step, the needle a prompt span of every layer
    awk -v d="$dec" 'BEGIN { exit !(d > 0 && d % 270 == 0) }' || fail "setting $k: $dec decisions, not answer steps x 270"
    # the span of most mass is always a coverage target, so on top <= a target <= 1
    awk -v a="$top" -v b="$cov" -v t="$tgt" -v m="$mass" \
        'BEGIN { exit !(a <= b && b <= 1 && t > 0 && t <= 1 && m > 0 && m < 1) }' ||
        fail "setting $k: inconsistent shares: top $top, target $cov, targets $tgt, mass $mass"
    [ $k = 1 ] && { [ "$agree" = 0.000 ] && [ "$topagree" = 0.000 ] || fail "zoom=0 expanded the teacher's top span ($agree, $topagree)"; }
    # expanding the top span where it is the needle's is a part of expanding the top span
    awk -v a="$agree" -v b="$topagree" -v t="$top" 'BEGIN { exit !(b <= 1 && b * t <= a + 0.0005) }' ||
        fail "setting $k: the needle's top span expanded $topagree of $top, more than the top span overall ($agree)"
    [ $k = 0 ] && { awk -v g="$agree" 'BEGIN { exit !(g > 0) }' || fail "the router never expanded the top span"; }
done
# route=2, the oracle that ranks spans by the teacher's own mass (sekv-probe's upper bound
# for a router that imitates its teacher), on capped spans where the room holds a few: it
# follows the teacher's top span far more often than the untrained router, and this case's
# answer (SmolLM2 at 1,536 tokens, 10%) comes out far better (NLL 0.42 against 3.87)
"$KVBENCH" sekv-probe --model "$MODEL" --ctx 1536 --depths 35 --budget 0.1 --params "params_file=none,p_max=0.7,l_max=auto" \
    --params "params_file=none,route=2,p_max=0.7,l_max=auto" >"$T/or" 2>"$T/err" || fail "oracle probe: $(cat "$T/err")"
grep -q 'route=oracle' "$T/or" || fail "route=2 is not described as the oracle"
mapfile -t ag < <(sed -nE 's/.*router expanded the top span ([0-9.]+),.*/\1/p' "$T/or")
mapfile -t nl < <(sed -nE 's/^params .* nll ([0-9.]+),.*/\1/p' "$T/or")
awk -v u="${ag[0]}" -v o="${ag[1]}" 'BEGIN { exit !(o > 0.5 && o > 2 * u) }' ||
    fail "the oracle expanded the teacher's top span in ${ag[1]} of decisions (untrained ${ag[0]})"
awk -v u="${nl[0]}" -v o="${nl[1]}" 'BEGIN { exit !(o < u / 2) }' || fail "oracle NLL ${nl[1]}, untrained ${nl[0]}"
# every pair of settings is compared, each later one against each earlier
[ "$(grep -c '^paired: ' "$T/out")" = 3 ] || fail "expected 3 paired comparisons: $(grep '^paired' "$T/out")"
grep -q '^paired: "" against "params_file=none,zoom=0"' "$T/out" || fail "the last two settings were not paired"
[ $fails = 0 ] && echo "test_sekv_probe_teacher: ok"
exit $((fails > 0))
