#!/usr/bin/env python3
"""Exits 0 when two kvbench results files hold the same results, else prints the first
differences and exits 1. Rows are matched by their natural keys (run_key; case_key;
method and budget; layer and head), never by row ids; timing and device columns (names
ending in _s, _ms or _spread, gpu_*, load_*, *rss*, *peak_bytes*, created) and the per-machine run columns
(host, cpu, config_json, created) are left aside, and so are result notes whose key ends in _s
(timings: a batched run's attend_s). Used by tests/test_shard.sh and
tests/slurm/test_slurm.sh: an independent check of `kvbench merge`, in Python.

usage: same_results.py A.db B.db [--plan] [--any-code] [--methods=M1,M2]
  --plan: the plan tables must match too
  --methods=M1,M2: only these methods' results (and their rows in other tables) are compared
  --any-code: the two files come from different code (another commit): runs are matched
    whatever their run_key, and the run rows themselves are not compared"""
import sqlite3
import sys


def measurement(c):
    return (c.endswith("_s") or c.endswith("_ms") or "_s_" in c or "rss" in c or "peak_bytes" in c
            or c.startswith("gpu_") or c == "created" or c.endswith("_spread") or c.startswith("load_"))


def columns(db, table):
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def rows(path, plan, any_code=False, only=None):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.text_factory = lambda b: b.decode("utf-8", "surrogateescape")   # random models write any bytes
    if any_code:   # every run keyed the same: a file holds one run per command
        db.create_function("kv_key", 1, lambda k: "")
    else:
        db.create_function("kv_key", 1, lambda k: k)
    out = {}
    rc = [c for c in columns(db, "runs") if c not in ("id", "created", "host", "cpu", "config_json")]
    for r in db.execute(f"SELECT {', '.join(rc)} FROM runs"):
        d = dict(zip(rc, r))
        if not any_code:
            out[("run", d["run_key"])] = d
    cc = [c for c in columns(db, "cases") if c not in ("id", "run_id") and not measurement(c)]
    for r in db.execute(f"SELECT kv_key(u.run_key), {', '.join('c.' + c for c in cc)} FROM cases c JOIN runs u ON u.id = c.run_id"):
        d = dict(zip(cc, r[1:]))
        out[("case", r[0], d["case_key"])] = d
    rs = [c for c in columns(db, "results") if c not in ("id", "case_id") and not measurement(c)]
    q = (f"SELECT kv_key(u.run_key), c.case_key, {', '.join('r.' + c for c in rs)} FROM results r "
         "JOIN cases c ON c.id = r.case_id JOIN runs u ON u.id = c.run_id")
    for r in db.execute(q):
        d = dict(zip(rs, r[2:]))
        if only and d["method"] not in only:
            continue
        out[("result", r[0], r[1], d["method"], d["budget"])] = d
    kids = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if t != "results" and "result_id" in columns(db, t)]
    for t in kids:
        kc = [c for c in columns(db, t) if c not in ("id", "result_id")]
        q = (f"SELECT kv_key(u.run_key), c.case_key, r.method, r.budget, {', '.join('x.' + c for c in kc)} FROM {t} x "
             "JOIN results r ON r.id = x.result_id JOIN cases c ON c.id = r.case_id JOIN runs u ON u.id = c.run_id")
        for r in db.execute(q):
            vals = r[4:]
            if only and r[2] not in only:
                continue
            if t == "result_notes" and str(vals[0]).endswith("_s"):
                continue   # a timing note (attend_s of a batched run)
            out[(t,) + tuple(r[:4]) + tuple(vals[:2])] = dict(zip(kc, vals))
    if plan:
        for r in db.execute("SELECT kv_key(u.run_key), p.case_key, p.method, p.budget FROM plan p JOIN runs u ON u.id = p.run_id"):
            out[("plan",) + tuple(r)] = {}
    db.close()
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    plan, any_code = "--plan" in sys.argv, "--any-code" in sys.argv
    only = next((set(a.split("=", 1)[1].split(",")) for a in sys.argv[1:] if a.startswith("--methods=")), None)
    if len(args) != 2:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    a, b = rows(args[0], plan, any_code, only), rows(args[1], plan, any_code, only)
    diffs = []
    for k in sorted(set(a) | set(b), key=repr):
        if k not in a or k not in b:
            diffs.append(f"{k[0]} {k[1:]} only in {args[0] if k in a else args[1]}")
        elif a[k] != b[k]:
            bad = [c for c in a[k] if a[k].get(c) != b[k].get(c)]
            diffs.append(f"{k[0]} {k[1:]}: {bad[0]} {a[k][bad[0]]!r} vs {b[k][bad[0]]!r}")
    n = sum(1 for k in a if k[0] == "result")
    if diffs:
        print(f"{len(diffs)} differences between {args[0]} and {args[1]}:", *diffs[:10], sep="\n  ")
        return 1
    if n == 0:
        print(f"{args[0]}: no results to compare")
        return 1
    print(f"same: {n} results, {len(a)} rows compared by key and value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
