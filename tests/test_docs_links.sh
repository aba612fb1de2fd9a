#!/usr/bin/env bash
# The README is a map (issue 25, item 6): at most 250 lines, its test command is the one CI
# runs, its methods table names every method `kvbench methods` lists, every docs/ file is
# in the docs/README.md index, and every relative link in README.md and docs/*.md reaches
# a file, and a heading where it names one (#anchor), so a moved section is never lost.
source "$(dirname "$0")/lib.sh"

# Markdown outside fenced code blocks (a `# comment` in a shell block is not a heading).
prose() { awk '/^ *```/ { f = !f; next } !f' "$1"; }
# GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens.
anchors() {
    prose "$1" | sed -n 's/^#\{1,6\} \{1,\}//p' | tr 'A-Z' 'a-z' |
        sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

n=$(wc -l <README.md)
[ "$n" -le 250 ] || fail "README.md has $n lines (at most 250: move the rest into docs/)"
grep -q '`make test`' README.md || fail "README.md does not name its test command \`make test\`"
grep -Eq '^make( -j[0-9]+)? test$' .ci/run || fail ".ci/run does not run make test"

# The methods list comes from the binary (make check builds it first); run alone before a
# build, say so in one line instead of "printed no names", and still check the links.
mlist=
if ! command -v "$KVBENCH" >/dev/null; then
    fail "$KVBENCH is not built (run make first): README.md's methods table left unchecked"
else
    mlist=$("$KVBENCH" methods | grep -E '^[a-z0-9][a-z0-9_-]*$') || fail "kvbench methods printed no names"
fi
for m in $mlist; do
    grep -q "^| $m |" README.md || fail "method $m is not in README.md's methods table"
done

for f in docs/*.md; do
    b=${f#docs/}
    [ "$b" = README.md ] && continue
    grep -qF "]($b)" docs/README.md || fail "docs/README.md does not list $b"
done

links=0
for f in README.md docs/*.md; do
    dir=$(dirname "$f")
    while IFS= read -r target; do
        case $target in http://* | https://* | mailto:*) continue ;; esac
        links=$((links + 1))
        path=${target%%#*}
        anchor=${target#"$path"}; anchor=${anchor#\#}
        if [ -z "$path" ]; then file=$f; else file=$dir/$path; fi
        if [ ! -e "$file" ]; then
            fail "$f: link ($target): $file does not exist"
        elif [ -n "$anchor" ] && ! anchors "$file" | grep -qxF -- "$anchor"; then
            fail "$f: link ($target): no heading #$anchor in $file"
        fi
    done < <(prose "$f" | grep -o '](\([^)]*\))' | sed 's/^](\(.*\))$/\1/')
done
[ "$links" -gt 20 ] || fail "only $links relative links found: the extraction is broken"

[ $fails -eq 0 ] && echo "ok: README.md $n lines, $(echo $mlist | wc -w) methods in its table, $links relative links resolve"
exit $((fails > 0))
