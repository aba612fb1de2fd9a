#!/usr/bin/env bash
# The device columns of a results file (schema 4) through a real CPU model run and the
# report: a CPU run leaves every device column NULL (cases: gpu_peak_bytes,
# gpu_driver_peak_bytes, gpu_prefill_ms; results: gpu_peak_bytes, gpu_driver_peak_bytes)
# and the report then shows no device section at all, never a 0. A CUDA run's values are
# simulated by writing them into one case with sqlite3 (no GPU here): --table memory then
# shows the case's prefill peak (allocator and driver view) and --table latency its
# device prefill time at that context, "-" at the context without a measurement, and the
# CSV carries the exact values.
set -euo pipefail
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
T=$(mktemp -d /tmp/kvbench_test_report_device_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "test_report_device: FAIL: $*" >&2; exit 1; }
q() { sqlite3 "$1" "$2"; }

"$KVBENCH" run --model random:smollm2-135m --workload niah --ctx 512,1024 --depths 50 --methods fullkv,snapkv \
    --budget 0.5 --max-new 2 --fidelity 0 --quiet --db "$T/r.db" >"$T/run.out" 2>"$T/run.err" \
    || { cat "$T/run.err"; fail "kvbench run exited non-zero"; }

# the columns exist, and a CPU run leaves them NULL
for col in cases.gpu_peak_bytes cases.gpu_driver_peak_bytes cases.gpu_prefill_ms results.gpu_peak_bytes \
    results.gpu_driver_peak_bytes; do
    [ "$(q "$T/r.db" "SELECT count(*) FROM pragma_table_info('${col%.*}') WHERE name = '${col#*.}'")" = 1 ] \
        || fail "no column $col"
    [ "$(q "$T/r.db" "SELECT count(*) FROM ${col%.*} WHERE ${col#*.} IS NOT NULL")" = 0 ] \
        || fail "$col is set on a CPU run"
done
[ "$(q "$T/r.db" "SELECT count(*) FROM cases")" = 2 ] && [ "$(q "$T/r.db" "SELECT count(*) FROM results")" = 4 ] \
    || fail "expected 2 cases and 4 results"

"$KVBENCH" report --db "$T/r.db" --table memory >"$T/mem0" 2>&1 || { cat "$T/mem0"; fail "report --table memory"; }
"$KVBENCH" report --db "$T/r.db" --table latency >"$T/lat0" 2>&1 || { cat "$T/lat0"; fail "report --table latency"; }
grep -qi 'device' "$T/mem0" "$T/lat0" && fail "a CPU run's report shows a device section"

# a device measurement for the 1024-token case only
drv=$((3 * 1024 * 1024 * 1024 + 12345)) alloc=$((2 * 1024 * 1024 * 1024)) ms=123.5
q "$T/r.db" "UPDATE cases SET gpu_peak_bytes = $alloc, gpu_driver_peak_bytes = $drv, gpu_prefill_ms = $ms
             WHERE ctx = 1024"
"$KVBENCH" report --db "$T/r.db" --table memory >"$T/mem1" 2>&1 || { cat "$T/mem1"; fail "report --table memory (device)"; }
"$KVBENCH" report --db "$T/r.db" --table latency >"$T/lat1" 2>&1 || { cat "$T/lat1"; fail "report --table latency (device)"; }
"$KVBENCH" report --db "$T/r.db" --table memory --csv >"$T/mem.csv" 2>&1 || fail "report --table memory --csv"
"$KVBENCH" report --db "$T/r.db" --table latency --csv >"$T/lat.csv" 2>&1 || fail "report --table latency --csv"

# the Markdown grids: a title line ("### TITLE"), then a table; every cell of fullkv's and
# snapkv's rows: "-" at ctx 512 (no measurement), the value at ctx 1024
python3 - "$T/mem1" "$T/lat1" <<'PY' || fail "the device grids (above)"
import sys
def grid(path, title):
    lines = open(path).read().split("\n")
    at = lines.index("### " + title)
    rows = {}
    for ln in lines[at + 1:]:
        if ln.startswith("### "):
            break
        if ln.startswith("| ") and not ln.startswith("| method"):
            c = [x.strip() for x in ln.strip("|").split("|")]
            rows[c[0]] = c
    return rows
want = {("mem", "device prefill peak, driver view (CUDA runs)"): "3.00 GiB",
        ("mem", "device prefill peak, allocator (CUDA runs)"): "2.00 GiB",
        ("lat", "device prefill (ms, CUDA events)"): "124"}   # 123.5 ms, 3 digits
ok = True
for (f, title), v in want.items():
    rows = grid(sys.argv[1] if f == "mem" else sys.argv[2], title)
    for m in ("fullkv", "snapkv"):
        c = rows.get(m)
        if not c or c[2] != "-" or not c[3].startswith(v) or "n=1" not in c[3]:
            print(f"{title}: row {m}: {c} (want '-' at ctx 512, {v}... n=1 at ctx 1024)")
            ok = False
sys.exit(0 if ok else 1)
PY
awk '/^### /{ dev = index($0, "device") > 0 } dev' "$T/mem1" | grep -q '| *0 B' && fail "a device value printed as 0 B"

# the CSV: the exact values at ctx 1024, nothing at ctx 512
python3 - "$T/mem.csv" "$T/lat.csv" "$drv" "$alloc" "$ms" <<'PY' || fail "the device CSV rows (above)"
import csv, sys
rows = [r for p in sys.argv[1:3] for r in csv.DictReader(open(p)) if "device" in r["section"]]
want = {"device prefill peak, driver view (CUDA runs)": float(sys.argv[3]),
        "device prefill peak, allocator (CUDA runs)": float(sys.argv[4]),
        "device prefill (ms, CUDA events)": float(sys.argv[5])}
got = {(r["section"], r["method"], r["column"]): r for r in rows}
ok = True
for sec, v in want.items():
    for m in ("fullkv", "snapkv"):
        r = got.get((sec, m, "ctx 1024"))
        if not r or float(r["value"]) != v or r["n"] != "1":
            print(f"{sec} {m} ctx 1024: {r} (want {v}, n=1)"); ok = False
        r = got.get((sec, m, "ctx 512"))
        if r and r["value"] not in ("", "nan", "NaN"):
            print(f"{sec} {m} ctx 512: {r} (want nothing)"); ok = False
sys.exit(0 if ok else 1)
PY

# a result's driver peak (per method) shows in its own grid, and nothing else moved:
# the memory and latency tables without their device sections are the CPU run's
q "$T/r.db" "UPDATE results SET gpu_driver_peak_bytes = $drv WHERE method = 'snapkv'"
"$KVBENCH" report --db "$T/r.db" --table memory >"$T/mem2" 2>&1 || fail "report --table memory (result driver peak)"
grep -q '^### device peak, driver view (CUDA runs)' "$T/mem2" || fail "no per-method driver peak grid"
strip() { awk '/^### /{ skip = index($0, "device") > 0 } !skip' "$1" | grep -v '^Memory per context\|^Latency per context'; }
diff <(strip "$T/mem0") <(strip "$T/mem2") || fail "the memory table's other sections changed"
diff <(strip "$T/lat0") <(strip "$T/lat1") || fail "the latency table's other sections changed"
echo "test_report_device: all checks passed"
