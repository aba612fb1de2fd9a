#!/usr/bin/env bash
# The source tree's layers, bottom to top:
#   kernels < methods, model, workloads < results < plots < harness
# A file may include its own layer or a lower one, never a higher one (an arrow back up).
# And SQL text (sqlite3_prepare / sqlite3_exec) lives in results/ only: the files
# outside it that still hold some are listed in KNOWN_SQL, a list that may only shrink
# (a file that no longer needs its entry fails the test until the entry is removed).
set -u
cd "$(dirname "$0")/.."
layer() {
    case "$1" in
        kernels/*) echo 0 ;;
        methods/* | model/* | workloads/*) echo 1 ;;
        results/*) echo 2 ;;
        plots/*) echo 3 ;;
        harness/*) echo 4 ;;
        *) echo -1 ;;
    esac
}
fail=0
files=$(find kernels methods model workloads results plots harness -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
for f in $files; do
    lf=$(layer "$f")
    # every quoted include, resolved against the including file's folder
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        t=$(realpath -m --relative-to=. "$(dirname "$f")/$inc")
        lt=$(layer "$t")
        if [ "$lt" -gt "$lf" ]; then
            echo "test_layers: $f includes $t (layer $lt above $lf: an arrow back up)"
            fail=1
        fi
    done
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
[ $fail -eq 0 ] && echo "test_layers: ok ($(echo "$files" | wc -l) files; $(echo $KNOWN_SQL | wc -w) known files with SQL outside results/)"
exit $fail
