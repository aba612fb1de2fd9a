"""Independent Python reference for the C text metrics (tests/test_metrics_ref.sh).

The official LongBench metrics re-stated with the Python standard library (difflib
stands in for fuzzywuzzy, as fuzzywuzzy does without python-Levenshtein), on fresh
random cases:
  metrics_ref.py make --seed S --n N --cases FILE --ref FILE
  metrics_ref.py compare --cases FILE --ref FILE --got FILE
"""
import argparse
import difflib
import random
import re
import string
import sys
from collections import Counter


def normalize_answer(s):
    s = s.lower()
    exclude = set(string.punctuation)
    s = "".join(ch for ch in s if ch not in exclude)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_tokens(p, g):
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


def qa_f1(pred, ref):
    return f1_tokens(normalize_answer(pred).split(), normalize_answer(ref).split())


def rouge_l(pred, ref):
    a, b = pred.split(), ref.split()
    if not a or not b:
        return 0.0
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            t[i][j] = t[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(t[i - 1][j], t[i][j - 1])
    lcs = t[len(a)][len(b)]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def ratio(a, b):
    return difflib.SequenceMatcher(None, a, b).ratio()


def fuzz_ratio(a, b):  # fuzzywuzzy.fuzz.ratio without python-Levenshtein
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * ratio(a, b)))


def code_sim(pred, ref):
    line = ""
    for ln in pred.lstrip("\n").split("\n"):
        if "`" not in ln and "#" not in ln and "//" not in ln:
            line = ln
            break
    return fuzz_ratio(line, ref) / 100


def share_equal(pred, want):
    nums = re.findall(r"\d+", pred)
    return 0.0 if not nums else sum(1 for n in nums if n == want) / len(nums)


def count(pred, ref):
    return share_equal(pred, ref)


def retrieval(pred, ref):
    m = re.findall(r"Paragraph (\d+)", ref)
    return share_equal(pred, m[0]) if m else 0.0


def classification(pred, ref, classes):
    matched = [c for c in classes if c in pred]
    for term in matched:  # the official loop removes while iterating
        if term in ref and term != ref:
            matched.remove(term)
    return 1.0 / len(matched) if ref in matched else 0.0


WORDS = ["the", "a", "an", "The", "AN", "cat", "Cat's", "sat", "on", "mat", "dog!", "x-y", "(hello)", "an_x",
         "theory", "A.", "42", "4.5", "Paris,", "\"quoted\""]
SEPS = [" ", "  ", "\t", "\n"]
CLASSES = ["Human", "Human being", "being", "Entity", "Location", "Numeric value", "value", "Abbreviation"]


def words(rng, lo, hi):
    n = rng.randint(lo, hi)
    out = ""
    for i in range(n):
        out += rng.choice(WORDS) + (rng.choice(SEPS) if i + 1 < n else "")
    return out


def chars(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def digits_text(rng):
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice(["Paragraph " + str(rng.randint(1, 30)), str(rng.randint(0, 120)), "and", "x7y"]))
    return " ".join(parts)


def make_cases(rng, n):
    cases = []
    for _ in range(n):
        kind = rng.choice(["qa_f1", "rouge_l", "ratio", "ratio_long", "code_sim", "count", "retrieval", "classification"])
        if kind == "qa_f1":
            cases.append(("qa_f1", words(rng, 0, 8), words(rng, 0, 8), None))
        elif kind == "rouge_l":
            cases.append(("rouge_l", words(rng, 0, 30), words(rng, 0, 30), None))
        elif kind == "ratio":
            alpha = "abcab \u00e9\u6f22"
            cases.append(("ratio", chars(rng, alpha, 0, 40), chars(rng, alpha, 0, 40), None))
        elif kind == "ratio_long":  # b >= 200 elements: difflib's autojunk
            alpha = rng.choice(["abcdefgh", "ab", "abcdefghijklmnopqrstuvwxyz0123456789 "])
            cases.append(("ratio", chars(rng, alpha, 50, 300), chars(rng, alpha, 190, 320), None))
        elif kind == "code_sim":
            lines = [rng.choice(["x = foo(1)", "# note", "// c", "```py", "return a+b", "", "y = bar()"]) for _ in range(rng.randint(0, 4))]
            cases.append(("code_sim", rng.choice(["", "\n"]) + "\n".join(lines), rng.choice(["x = foo(2)", "return a+b", "y=bar()"]), None))
        elif kind == "count":
            cases.append(("count", digits_text(rng), str(rng.randint(0, 12)), None))
        elif kind == "retrieval":
            cases.append(("retrieval", digits_text(rng), "Paragraph " + str(rng.randint(1, 30)), None))
        else:
            cls = rng.sample(CLASSES, rng.randint(1, len(CLASSES)))
            pred = " ".join(rng.sample(CLASSES, rng.randint(0, 3)))
            cases.append(("classification", pred, rng.choice(cls), cls))
    return cases


def reference(c):
    m, p, r, cls = c
    if m == "qa_f1":
        return qa_f1(p, r)
    if m == "rouge_l":
        return rouge_l(p, r)
    if m == "ratio":
        return ratio(p, r)
    if m == "code_sim":
        return code_sim(p, r)
    if m == "count":
        return count(p, r)
    if m == "retrieval":
        return retrieval(p, r)
    return classification(p, r, cls)


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["make", "compare"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--ref")
    ap.add_argument("--got")
    a = ap.parse_args()
    if a.cmd == "make":
        cases = make_cases(random.Random(a.seed), a.n)
        with open(a.cases, "w", encoding="utf-8") as f:
            for m, p, r, cls in cases:
                f.write("\t".join([m, esc(p), esc(r)] + (["|".join(cls)] if cls else [])) + "\n")
        with open(a.ref, "w") as f:
            for c in cases:
                f.write("%.12f\n" % reference(c))
        return 0
    cases = open(a.cases, encoding="utf-8").read().splitlines()
    ref = [float(x) for x in open(a.ref).read().split()]
    got = [float(x) for x in open(a.got).read().split()]
    if len(got) != len(ref):
        print("got %d results for %d cases" % (len(got), len(ref)))
        return 1
    bad = [i for i in range(len(ref)) if not abs(ref[i] - got[i]) <= 1e-9]
    for i in bad[:10]:
        print("MISMATCH %s: C %.12f, Python %.12f" % (cases[i], got[i], ref[i]))
    per = Counter(c.split("\t")[0] for c in cases)
    print("%d cases (%s), %d mismatches" % (len(ref), ", ".join("%s %d" % kv for kv in sorted(per.items())), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
