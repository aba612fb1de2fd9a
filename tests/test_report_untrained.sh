#!/usr/bin/env bash
# A SeKV row run only with the untrained router (params_file=none: no trained parameters
# for the model, issue 32) is judged in the claims table (--table paper) at that setting
# and named "sekv (untrained)" there and in the zoom table, not left out; its ablations
# are matched on top of params_file=none; and C7 (removing the trained zoom-in) is
# "undecidable: untrained" for it, since nothing trained is there to remove. Real runs on
# a random model.
source "$(dirname "$0")/lib.sh"
R=(run --model random:tiny-llama --workload niah --ctx 300,400 --depths 20,50 --max-new 3 --budget 0.1 --db "$T/u.db" --quiet)
"$KVBENCH" "${R[@]}" --methods fullkv,snapkv,chunkkv,sentencekv,sekv --params sekv:params_file=none >/dev/null 2>"$T/err" ||
    fail "run: $(cat "$T/err")"
"$KVBENCH" "${R[@]}" --methods fullkv,sekv --params sekv:params_file=none,zoom=0 >/dev/null 2>"$T/err" ||
    fail "ablation run: $(cat "$T/err")"
"$KVBENCH" report --db "$T/u.db" --table paper --run all >"$T/paper" 2>&1 || fail "paper: $(cat "$T/paper")"
grep -Eq '^\| C3 \| .* \| sekv \(untrained\) \| [0-9.]+ .*vs best baseline .* \| 4 \|' "$T/paper" ||
    fail "C3 not judged on the untrained row over 4 cells: $(grep '^| C3' "$T/paper")"
grep -Eq '^\| C6 \| .* \| sekv \(untrained\) \| [-+0-9.]+.* \| 4 \|' "$T/paper" ||
    fail "C6 (zoom=0 on top of params_file=none) not matched: $(grep '^| C6' "$T/paper")"
grep -Eq '^\| C7 \| .* \| sekv \(untrained\) \| .* \| undecidable: untrained \|$' "$T/paper" ||
    fail "C7 on the untrained row is not undecidable: $(grep '^| C7' "$T/paper")"
grep -Eq '^\| C[0-9]+ .*\| sekv \|' "$T/paper" && fail "a row named plain sekv, though none ran trained: $(grep '| sekv |' "$T/paper")"
"$KVBENCH" report --db "$T/u.db" --table zoom --run all >"$T/zoom" 2>&1 || fail "zoom: $(cat "$T/zoom")"
grep -Eq '^\| sekv \(untrained\) \| 0.1 \| [1-4] \|' "$T/zoom" || fail "zoom table lacks the untrained row: $(cat "$T/zoom")"
# a result whose zoom events lack the spans they could expand (a file from before that column)
# leaves the zoom table, and only that result (at 50% the untrained router expands here)
"$KVBENCH" run --model random:tiny-llama --workload niah --ctx 300,400 --depths 20,50 --max-new 3 --budget 0.5 \
    --methods sekv --params sekv:params_file=none --db "$T/z.db" --quiet >/dev/null 2>"$T/err" || fail "run at 0.5: $(cat "$T/err")"
"$KVBENCH" report --db "$T/z.db" --table zoom >"$T/zoom-all" 2>&1 || fail "zoom at 0.5: $(cat "$T/zoom-all")"
rid=$(q "$T/z.db" "SELECT min(result_id) FROM zoom_events")
[ -n "$rid" ] || fail "no zoom events at 0.5"
q "$T/z.db" "UPDATE zoom_events SET spans = NULL WHERE result_id = $rid AND step = (SELECT min(step) FROM zoom_events WHERE result_id = $rid)"
"$KVBENCH" report --db "$T/z.db" --table zoom >"$T/zoom-nul" 2>&1 || fail "zoom with NULL spans: $(cat "$T/zoom-nul")"
n_all=$(awk -F' [|] ' '/^[|] sekv [(]untrained[)] [|] 0.5 [|]/ {print $3}' "$T/zoom-all")
n_nul=$(awk -F' [|] ' '/^[|] sekv [(]untrained[)] [|] 0.5 [|]/ {print $3}' "$T/zoom-nul")
[ "$n_all" = 4 ] && [ "$n_nul" = 3 ] || fail "a result with NULL spans: n $n_all -> $n_nul, not 4 -> 3"
# tiny-llama has 2 layers: the zoom table's empty third prints "-", not "nan", and the
# claim about the thirds (C15) is not decided on it
grep -qi 'nan' "$T/zoom" && fail "zoom table prints nan: $(cat "$T/zoom")"
grep -Eq '^\| C15 \| .* \| - \((fewer than 3 layers|no zoom)\) \|$' "$T/paper" ||
    fail "C15 decided on a 2-layer model: $(grep '^| C15' "$T/paper")"
# the CSV keeps the method name and its params apart
"$KVBENCH" report --db "$T/u.db" --table paper --run all --csv "$T/p.csv" >/dev/null 2>&1 || fail "paper --csv"
grep -q '"paper","claims","","sekv","params_file=none","0.1","C3",' "$T/p.csv" || fail "CSV row of C3: $(grep C3 "$T/p.csv" | head -2)"
[ $fails = 0 ] && echo "test_report_untrained: ok"
exit $((fails > 0))
