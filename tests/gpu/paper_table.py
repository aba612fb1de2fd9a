#!/usr/bin/env python3
"""The GPU check's table for the paper's figure (tests/gpu/check.sh prints it in its
summary): per context length and method, from the check's `kvbench run --backend cuda`
results file, the `kvbench sim` table for the same shapes (its log) and the transformers
anchor (tests/gpu/anchor_hf.py's JSON). Any of the three may be missing.

  python3 tests/gpu/paper_table.py --db gpu_model.db [--log gpu_model.log] [--sim gpu_sim.log]
                                   [--anchor gpu_anchor.json]

Columns: the device's allocator peak over the method (weights + its K/V + decode), the
driver's peak over it (cudaMemGetInfo sampled at every allocation: the CUDA context and
libraries included; from the run's log, its "[device]" lines), the fast tier (GPU K/V) and slow tier (host) the method accounts at peak, each beside the
sim's prediction for the same shape (total = weights + fast tier + activations), the
case's prefill on the device (CUDA events) and its allocator peak and driver view
(cudaMemGetInfo: the whole device, context included), decode ms/token and tok/s, and
decode tok/s as a ratio to transformers' FullKV at the same length.
"""
import argparse
import json
import os
import re
import sqlite3
import sys


def gib(b):
    if b is None:
        return "-"
    if b >= 2**30:
        return "%.2f G" % (b / 2**30)
    return "%.1f M" % (b / 2**20) if b >= 2**20 else "%.0f K" % (b / 2**10)


def sim_table(path):
    """{(ctx, method): (fast peak, slow, total peak) in bytes} from kvbench sim's markdown."""
    out = {}
    if not path or not os.path.exists(path):
        return out
    head = None
    for line in open(path, errors="replace"):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "ctx":
            head = cells
            continue
        if not head or len(cells) < len(head) or not cells[0].isdigit():
            continue
        row = dict(zip(head, cells))
        try:
            g = lambda k: float(row[k]) * 2**30
            out[(int(cells[0]), row["method"])] = (g("fast peak GiB"), g("slow GiB"), g("total peak GiB"))
        except (KeyError, ValueError):   # an infeasible row
            out[(int(cells[0]), row.get("method", "?"))] = None
    return out


def driver_peaks(paths):
    """{(ctx, method or 'prefill'): driver peak bytes} from kvbench run's "[device]" lines."""
    out = {}
    for path in paths:
        if os.path.exists(path):
            driver_peaks_of(path, out)
    return out


def driver_peaks_of(path, out):
    pat = re.compile(r"\[device\] ctx (\d+) (\S+)(?: @ \S+)?: allocator peak (\d+) B, driver peak (\d+) B")
    for line in open(path, errors="replace"):
        m = pat.search(line)
        if m:
            out[(int(m.group(1)), m.group(2))] = int(m.group(4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--log", action="append", default=[], help="kvbench run's log (repeatable)")
    ap.add_argument("--sim")
    ap.add_argument("--anchor")
    a = ap.parse_args()
    sim = sim_table(a.sim)
    drv = driver_peaks(a.log)
    hf = {}
    if a.anchor and os.path.exists(a.anchor):
        try:
            j = json.load(open(a.anchor))
            hf = {r["ctx"]: r for r in j.get("results", [])}
        except (ValueError, KeyError, TypeError) as e:
            print("  anchor: %s unreadable: %s" % (a.anchor, e))
    rows, cases = [], []
    if os.path.exists(a.db):
        db = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True)
        rows = db.execute("""SELECT c.ctx, r.method, r.status, r.gpu_peak_bytes, r.fast_peak, r.slow_peak,
                                    r.decode_s, r.decode_tokens, r.compress_s
                             FROM results r JOIN cases c ON c.id = r.case_id ORDER BY c.ctx, r.id""").fetchall()
        cases = db.execute("""SELECT ctx, prompt_tokens, gpu_prefill_ms, gpu_peak_bytes, gpu_used_bytes FROM cases
                              ORDER BY ctx""").fetchall()
    print("  %-6s %-12s %-6s %9s %9s | %8s %8s | %8s %8s | %9s %8s | %8s %7s %6s" %
          ("ctx", "method", "status", "dev peak", "driver", "fast KV", "sim", "slow", "sim", "sim total", "compr s",
           "ms/tok", "tok/s", "x HF"))
    for ctx, m, st, pk, fp, sp, ds, dt, cs in rows:
        s = sim.get((ctx, m))
        tps = dt / ds if dt and ds else None
        h = hf.get(ctx, {}).get("decode_tok_s")
        print("  %-6d %-12s %-6s %9s %9s | %8s %8s | %8s %8s | %9s %8s | %8s %7s %6s" % (
            ctx, m, st[:6], gib(pk), gib(drv.get((ctx, m))), gib(fp), gib(s[0]) if s else "-", gib(sp), gib(s[1]) if s else "-",
            gib(s[2]) if s else "-", "-" if cs is None else "%.2f" % cs,
            "-" if not tps else "%.1f" % (1000 / tps), "-" if not tps else "%.1f" % tps,
            "%.2f" % (tps / h) if tps and h else "-"))
    if not rows:
        print("  (no results recorded)")
    for ctx, n, ms, pk, used in cases:
        tps = n / (ms / 1000) if n and ms else None
        line = ("  case %d: prefill %s ms on the device (%s tok/s), allocator peak %s, driver peak %s, "
                "in use after it %s" % (ctx, "-" if ms is None else "%.0f" % ms, "-" if not tps else "%.0f" % tps,
                                        gib(pk), gib(drv.get((ctx, "prefill"))), gib(used)))
        h = hf.get(ctx)
        if h and tps:
            line += "; x HF prefill %.2f" % (tps / h["prefill_tok_s"])
        print(line)
    if hf:
        print("  transformers (anchor_hf.py, bf16, SDPA, FullKV): kvbench FullKV / transformers")
        fk = {ctx: (pk, ds, dt) for ctx, m, st, pk, fp, sp, ds, dt, cs in rows if m == "fullkv" and st == "ok"}
        pf = {ctx: (n / (ms / 1000) if n and ms else None) for ctx, n, ms, pk, used in cases}
        for ctx in sorted(hf):
            h = hf[ctx]
            k = fk.get(ctx)
            ktps = k[2] / k[1] if k and k[1] and k[2] else None
            ratio = lambda x, y: "%.2f" % (x / y) if x and y else "-"
            print("  ctx %-6d HF prefill %.0f tok/s, decode %.1f tok/s, max_memory_allocated %s | ratios: prefill %s, "
                  "decode %s, peak memory %s" % (ctx, h["prefill_tok_s"], h.get("decode_tok_s") or 0,
                                                 gib(h.get("max_memory_allocated")), ratio(pf.get(ctx), h["prefill_tok_s"]),
                                                 ratio(ktps, h.get("decode_tok_s")),
                                                 ratio(k[0] if k else None, h.get("max_memory_allocated"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
