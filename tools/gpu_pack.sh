#!/usr/bin/env bash
# make gpu-pack: what a lent GPU machine needs carried with the tree, and the exact call
# (docs/gpu-device.md). The device image has nvcc, a driver and Python with torch, but
# perhaps not the C libraries kvbench links, and no network:
#   .deps      the Debian 12 packages of SQLite, libcsv, OpenBLAS (pthread), LAPACKE and
#              their run-time dependencies (libgfortran5, libquadmath0), unpacked with
#              dpkg -x; /usr/share and static libraries removed (check.sh uses .deps
#              whenever it exists);
#   .haystack  the NIAH essays from ~/.cache/kvbench (make haystack), else any text (the
#              check's model has random weights: the text does not matter).
# Both are ignored by git. Checks that the tree plus both stay under the 64 MiB a call
# may carry, then prints the call. PACK_DEBS: a folder of the .debs already downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((64 * 1024 * 1024))
pkgs="libsqlite3-0 libsqlite3-dev libcsv3 libcsv-dev liblapacke liblapacke-dev libtmglib3 libopenblas0-pthread
      libopenblas-pthread-dev libgfortran5 libquadmath0"
if [ ! -d .deps/usr/include ]; then
    debs=${PACK_DEBS:-}
    if [ -z "$debs" ]; then
        debs=$(mktemp -d)
        trap 'rm -rf "$debs"' EXIT
        # shellcheck disable=SC2086
        (cd "$debs" && timeout 300 apt-get download $pkgs) >&2 ||
            { echo "gpu-pack: apt-get download failed (no network or no Debian archive?)" >&2; exit 1; }
    fi
    rm -rf .deps.tmp
    mkdir .deps.tmp
    for p in $pkgs; do
        f=$(ls "$debs"/"${p}"_*.deb 2>/dev/null | head -n 1)
        [ -n "$f" ] || { echo "gpu-pack: no .deb for $p in $debs" >&2; rm -rf .deps.tmp; exit 1; }
        dpkg -x "$f" .deps.tmp
    done
    rm -rf .deps.tmp/usr/share
    find .deps.tmp -name '*.a' -delete
    mv .deps.tmp .deps
fi
if [ ! -d .haystack ]; then
    src=${KVBENCH_HAYSTACK:-$HOME/.cache/kvbench/haystack/PaulGrahamEssays}
    mkdir -p .haystack.tmp
    if [ -d "$src" ]; then cp "$src"/*.txt .haystack.tmp/
    else cp README.md .haystack.tmp/text.txt   # any text serves: random weights
    fi
    mv .haystack.tmp .haystack
fi
size() { du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
untracked=$(git ls-files -z --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
deps=$(size .deps)
hay=$(size .haystack)
total=$((tree + ${untracked:-0} + deps + hay))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "gpu-pack: .deps $(mib "$deps"), .haystack $(mib "$hay"), tracked tree $(mib "$tree"), untracked $(mib "${untracked:-0}"): $(mib $total) of the 64 MiB a call carries"
if [ "$total" -gt "$limit" ]; then
    echo "gpu-pack: over the carry limit by $(mib $((total - limit))); remove untracked files or trim .deps" >&2
    exit 1
fi
cat <<'CALL'
gpu-pack: the device call (one call, 9 minutes; a fresh machine also takes its start-up):
  carry:     [".deps", ".haystack"]
  timeout_s: 540
  command:   KB_CHECK_BUDGET_S=510 bash tests/gpu/check.sh
It ends within its 510 s budget (30 s to spare for the transfer back); $OUT then holds
gpu_summary.txt, gpu_model.db and gpu_logs.tar.gz. The model run's 8K and 32K results
come first, before the tests and benchmarks.
CALL
