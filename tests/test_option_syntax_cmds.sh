#!/usr/bin/env bash
# One rule for options in every command (issue 35), for the commands without --model:
# `conformance` and `merge` read "--flag=value" as "--flag value" (kernels/cli_opt.h), say
# "--flag needs a value" when argv ends there, refuse "=value" on a bare flag, and name
# an unknown option, each in one line with exit 2. Before, conformance took only the spaced
# form and merge took any "--x=..." for an unknown option.
source "$(dirname "$0")/lib.sh"
# conformance: the same checks, the same output, whichever form
"$KVBENCH" conformance --method=fullkv --seed=7 --trials=1 >"$T/eq" 2>&1 || fail "conformance --flag=value: $(tail -3 "$T/eq")"
"$KVBENCH" conformance --method fullkv --seed 7 --trials 1 >"$T/sp" 2>&1 || fail "conformance --flag value: $(tail -3 "$T/sp")"
grep -q "^seed 7 " "$T/eq" || fail "conformance did not read --seed=7: $(head -1 "$T/eq")"
grep -q "^conformance: 1 method, " "$T/eq" || fail "conformance did not read --method=fullkv: $(tail -1 "$T/eq")"
cmp -s "$T/eq" "$T/sp" || fail "conformance: the two forms printed different output: $(diff "$T/eq" "$T/sp" | head -4)"
one_line() {   # want, then the command: exit 2, one line on stderr holding want
    local want=$1 rc=0; shift
    "$KVBENCH" "$@" >/dev/null 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF -- "$want" "$T/err" || fail "$*: exit $rc, '$(cat "$T/err")', want '$want'"
}
one_line "kvbench conformance: --trials needs a value" conformance --method fullkv --trials
one_line "kvbench conformance: --trials '0': expected 1 to 1000" conformance --trials=0
one_line "kvbench conformance: unknown method 'nope'" conformance --method=nope
one_line "kvbench conformance: --help takes no value" conformance --help=1
one_line "kvbench conformance: unknown option '--bogus'" conformance --bogus=1
# merge: --quiet is its one option, bare; files are words
"$KVBENCH" run --workload synthetic-niah --ctx 64 --depths 0.5 --methods fullkv,snapkv --budget 0.5 --layers 1 \
    --steps 2 --quiet --shard 0/1 --db "$T/s0.db" >/dev/null 2>"$T/err" || fail "run for merge: $(cat "$T/err")"
"$KVBENCH" merge --quiet "$T/m.db" "$T/s0.db" >"$T/out" 2>&1 || fail "merge --quiet OUT IN: $(cat "$T/out")"
[ "$(q "$T/m.db" "SELECT count(*) FROM results")" = 2 ] || fail "merge: $(q "$T/m.db" "SELECT count(*) FROM results") results, want 2"
one_line "kvbench merge: --quiet takes no value" merge --quiet=1 "$T/m2.db" "$T/s0.db"
one_line "kvbench merge: unknown option '--out'" merge --out="$T/m2.db" "$T/s0.db"
[ -e "$T/m2.db" ] && fail "a refused merge created its output"
[ "$fails" = 0 ] && echo "test_option_syntax_cmds: conformance and merge read --flag=value as --flag value"
exit $((fails > 0))
