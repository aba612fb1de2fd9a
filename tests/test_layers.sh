#!/usr/bin/env bash
# The source tree's layers, bottom to top, one top-level folder each:
#   kernels < model < workloads < methods < results < plots < harness
# kernels/ is the ground floor: the compute kernels, the host plumbing, the JSON reader,
# utf8, strbuf and the method door's types (method_types.h), which every layer above reads.
# The model engine drives a method through those types alone; workloads/ tokenizes with
# the model's tokenizer; methods/ may use both (SeKV's commands train-sekv and sekv-probe
# run the engine on workloads' text).
# A file may include its own folder or a lower one, never a higher one (an arrow back up).
# Every top-level folder the Makefile compiles (SRC_DIRS) has its own place in ORDER: no
# two share one, and there is no exception list. The test checks itself first: a planted
# arrow back up must be caught.
# And SQL text (sqlite3_prepare / sqlite3_exec) lives in results/ only: the files
# outside it that still hold some are listed in KNOWN_SQL, a list that may only shrink
# (a file that no longer needs its entry fails the test until the entry is removed).
set -u
cd "$(dirname "$0")/.."
ORDER="kernels model workloads methods results plots harness"
fail=0

layer() {   # layer PATH: the index of its top-level folder in ORDER, -1 when not a layer
    local top=${1%%/*} i=0
    for l in $ORDER; do
        [ "$top" = "$l" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}

# every folder compiled into the library has its own layer
for d in $(sed -n 's/^SRC_DIRS *:= *//p' Makefile); do
    [ "$(layer "$d")" -ge 0 ] || { echo "test_layers: $d is compiled (Makefile SRC_DIRS) but ${d%%/*}/ has no place in ORDER"; fail=1; }
done
for l in $ORDER; do
    [ -d "$l" ] || { echo "test_layers: $l/ is in ORDER but not in the tree"; fail=1; }
done

arrows() {   # arrows NAME TEXTFILE: the arrows back up of NAME's quoted includes, read from TEXTFILE
    local lf lt t
    lf=$(layer "$1")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$2"); do
        t=$(realpath -m --relative-to=. "$(dirname "$1")/$inc")   # resolved against NAME's folder
        lt=$(layer "$t")
        [ "$lt" -gt "$lf" ] && echo "test_layers: $1 includes $t (${t%%/*}/ is above ${1%%/*}/: an arrow back up)"
    done
    return 0
}

# the check itself: an include of the harness from the model is caught
planted=$(mktemp)
trap 'rm -f "$planted"' EXIT
printf '#include "../kernels/core.h"\n#include "../harness/cli/commands.h"\n' >"$planted"
case "$(arrows model/planted.c "$planted")" in
    *"model/planted.c includes harness/cli/commands.h"*) ;;
    *) echo "test_layers: a planted arrow back up (model/ including harness/) was not caught"; fail=1 ;;
esac

files=$(find $ORDER -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
for f in $files; do
    out=$(arrows "$f" "$f")
    [ -n "$out" ] && { echo "$out"; fail=1; }
done

KNOWN_SQL=""
sql=$(grep -l -E 'sqlite3_(prepare|exec)' $files | grep -v '^results/' || true)
for f in $sql; do
    case "$KNOWN_SQL" in
        *" $f "* | *"
$f
"*) ;;
        *) echo "test_layers: $f holds SQL outside results/ (move it behind a function in results/)"; fail=1 ;;
    esac
done
for f in $KNOWN_SQL; do
    if ! printf '%s\n' $sql | grep -qx "$f"; then
        echo "test_layers: $f no longer holds SQL: remove it from KNOWN_SQL"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "test_layers: ok ($(echo "$files" | wc -l) files in $(echo $ORDER | wc -w) layers; $(echo $KNOWN_SQL | wc -w) known files with SQL outside results/)"
exit $fail
