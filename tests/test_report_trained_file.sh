#!/usr/bin/env bash
# A SeKV row run only with a parameter file named explicitly (params_file=PATH: trained
# parameters that are not the model's default, as the judge model's are; issue 32) is
# judged in the claims table (--table paper) with that file, named "sekv (params FILE)"
# there, in the score table and in the zoom table, not left out as an ablation; its
# ablations are matched on top of the file, so C7 (removing the trained zoom-in) is
# judged, not "undecidable: untrained". Before this, such a row had no claim numbers
# ("no baseline", n 0). Real runs on a random model with parameters trained for it.
source "$(dirname "$0")/lib.sh"
mkdir "$T/corpus"
for i in 1 2 3 4; do head -c $((i * 1500 - 1 + 2500 + i * 900)) tests/test_run.sh | tail -c +$((i * 1500)) >"$T/corpus/d$i.txt"; done
"$KVBENCH" train-sekv --model random:tiny-llama --corpus "$T/corpus" --ctx 256 --candidates 12 --keep 3 --window 48 \
    --steps 3 --max-docs 4 --held-out 1 --cache none --threads 1 --out "$T/tiny.params" >/dev/null 2>"$T/err" ||
    fail "train-sekv: $(tail -3 "$T/err")"
P=$T/tiny.params
R=(run --model random:tiny-llama --workload niah --ctx 300,400 --depths 20,50 --max-new 3 --budget 0.1 --db "$T/f.db" --quiet)
"$KVBENCH" "${R[@]}" --methods fullkv,snapkv,chunkkv,sentencekv,sekv --params "sekv:params_file=$P" >/dev/null 2>"$T/err" ||
    fail "run: $(cat "$T/err")"
"$KVBENCH" "${R[@]}" --methods fullkv,sekv --params "sekv:params_file=$P,trained_zoom=0" >/dev/null 2>"$T/err" ||
    fail "ablation run: $(cat "$T/err")"
row='sekv \(params tiny\.params\)'
"$KVBENCH" report --db "$T/f.db" --table paper --run all >"$T/paper" 2>&1 || fail "paper: $(cat "$T/paper")"
grep -Eq "^\| C3 \| .* \| $row \| [0-9.]+ .*vs best baseline .* \| 4 \|" "$T/paper" ||
    fail "C3 not judged on the file's row over 4 cells: $(grep '^| C3' "$T/paper")"
# (a random model: FullKV answers nothing, so the verdict is "undecidable: ceiling"; what
# matters is that the ablation was paired with the row, cell by cell)
grep -Eq "^\| C7 \| .* \| $row \| [-+0-9.]+.* \| 4 \| [0-9.e-]+ \| [0-9]+ \| [a-z]" "$T/paper" &&
    ! grep -q '^| C7 .*untrained' "$T/paper" ||
    fail "C7 (trained_zoom=0 on top of the file) not judged over 4 cells: $(grep '^| C7' "$T/paper")"
grep -Eq '^\| C[0-9]+ .*\| sekv( \(untrained\))? \|' "$T/paper" &&
    fail "a row named plain sekv or untrained, though only the file ran: $(grep -E '\| sekv( \(untrained\))? \|' "$T/paper")"
grep -Eq "^\| $row \| 0.1 \| [0-9]+ \| [0-9]+ \|$" "$T/paper" || fail "feasibility lacks the file's row: $(tail -5 "$T/paper")"
"$KVBENCH" report --db "$T/f.db" --run 1 >"$T/score" 2>&1 || fail "report: $(cat "$T/score")"
grep -Eq "^\| $row \| 0.1 \|" "$T/score" || fail "score table does not name the file: $(grep sekv "$T/score")"
"$KVBENCH" report --db "$T/f.db" --table zoom --run 1 >"$T/zoom" 2>&1 || fail "zoom: $(cat "$T/zoom")"
grep -Eq "^\| $row \| 0.1 \| [1-4] \|" "$T/zoom" || fail "zoom table lacks the file's row: $(cat "$T/zoom")"
# the ablation (two settings) stays out of the zoom table
"$KVBENCH" report --db "$T/f.db" --table zoom --run 2 >"$T/zoom2" 2>&1 || true
grep -q "trained_zoom" "$T/zoom2" && fail "the ablation entered the zoom table: $(cat "$T/zoom2")"
# A row none of whose results ran (sekv-ref at 5% here: its spans alone exceed the budget)
# prints no number and no p beside "untested (infeasible)": its zeros were never measured.
"$KVBENCH" run --model random:tiny-llama --workload niah --ctx 300,400 --depths 20,50 --max-new 3 --budget 0.05 \
    --db "$T/inf.db" --quiet --methods fullkv,snapkv,chunkkv,sentencekv,sekv-ref >/dev/null 2>"$T/err" ||
    fail "infeasible run: $(cat "$T/err")"
"$KVBENCH" report --db "$T/inf.db" --table paper --run all >"$T/inf" 2>&1 || fail "paper (infeasible): $(cat "$T/inf")"
n_un=$(grep -c '^| C4 .*| sekv-ref | .*untested (infeasible) |$' "$T/inf" || true)
[ "$n_un" = 3 ] || fail "want 3 C4 rows of sekv-ref untested, got $n_un: $(grep '^| C4' "$T/inf")"
grep '^| C4 .*untested (infeasible)' "$T/inf" | grep -Evq '\| - \(every result infeasible\) \| 4 \| - \| 4 \|' &&
    fail "an untested row prints a number or a p: $(grep 'untested' "$T/inf")"
[ $fails = 0 ] && echo "test_report_trained_file: ok"
exit $((fails > 0))
