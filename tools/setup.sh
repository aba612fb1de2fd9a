#!/usr/bin/env bash
# Everything kvbench needs on a fresh Debian machine, idempotent: the Debian packages
# (installed only when missing, with sudo when not root), the Python reference
# environment (.venv), the default model and the NIAH haystack.
#   tools/setup.sh [--no-data]   (--no-data: packages and .venv only)
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="build-essential libsqlite3-dev libcsv-dev gnuplot-nox libopenblas-dev liblapacke-dev python3-venv python3-pip sqlite3 clang libclang-rt-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=" $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing Debian packages:$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then
        echo "setup: not root and no sudo: install these packages first:$missing" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq $missing >/dev/null
fi
bash tools/setup_venv.sh
[ "${1:-}" = --no-data ] && exit 0
bash tools/fetch_model.sh
bash tools/fetch_haystack.sh
