"""Reference values for the C text metrics (tests/test_metrics_ref.sh).

ROUGE-L and code_sim come from the official packages, pinned in tools/setup_venv.sh:
LongBench's rouge_score() (pltrdy `rouge` 1.0.1), InfiniteBench's rougeLsum (`rouge-score`
0.1.2, what HF evaluate's "rouge" runs) and fuzzywuzzy 0.18.0 (LongBench code_sim). The
other LongBench metrics and InfiniteBench's Code.Debug, which ship as scripts rather than
packages, are restated here with the standard library. Fixed cases (case, punctuation,
several sentences, empty inputs) plus fresh random ones:
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

try:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # fuzzywuzzy: "using slow pure-python SequenceMatcher"
        from fuzzywuzzy import fuzz
    from rouge import Rouge
    from rouge_score import rouge_scorer
except ImportError as e:
    sys.exit("metrics_ref.py: %s: install the pinned reference packages with tools/setup_venv.sh" % e)


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


def rouge_l(pred, ref):  # LongBench metrics.py rouge_score
    try:
        scores = Rouge().get_scores([pred], [ref], avg=True)
    except Exception:
        return 0.0
    return scores["rouge-l"]["f"]


LSUM = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)


def rouge_lsum(pred, ref):  # InfiniteBench: evaluate "rouge" rougeLsum, no stemmer
    return LSUM.score(ref, pred)["rougeLsum"].fmeasure


def code_debug(pred, label):  # InfiniteBench compute_scores.py get_score_one_code_debug
    pred = pred.strip()
    fn_name, label_c = label
    if pred[:2] in [f"{label_c}.", f"{label_c}:"]:
        return True
    ans_prefixes = ["answer is:", "is:", "answer:", "correct option is:"]
    pred = pred.strip()
    for c in ["\n", "`", "'", '"', "-", "*", "Option", "option"]:
        pred = pred.replace(c, " ")
    while "  " in pred:
        pred = pred.replace("  ", " ")
    for prefix in ans_prefixes:
        idx = pred.find(prefix)
        if idx == -1:
            continue
        if len(pred) < idx + len(prefix) + 1:
            return False
        pred = pred[idx + len(prefix) + 1:]
        for s in [label_c, fn_name]:
            if pred.startswith(s):
                return True
        return False
    return False


def ratio(a, b):
    return difflib.SequenceMatcher(None, a, b).ratio()


def code_sim(pred, ref):
    line = ""
    for ln in pred.lstrip("\n").split("\n"):
        if "`" not in ln and "#" not in ln and "//" not in ln:
            line = ln
            break
    return fuzz.ratio(line, ref) / 100


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


def kv_word(pred, label):  # InfiniteBench get_score_one_kv_retrieval
    for c in ["\n", ":", '"', "'", ".", ",", "?", "!", "{", "}"]:
        pred = pred.replace(c, " ")
    return label in pred.split()


def first_int(pred, label):  # InfiniteBench first_int_match (passkey, number_string)
    value = ""
    for item in re.split("[^0-9]", pred):
        if item != "":
            value = item
            break
    return label == value


def choice(pred, label):  # InfiniteBench get_score_one_longbook_choice_eng (current: strips first)
    pred = pred.strip()
    if pred == "":
        return False
    if pred[0] in "ABCD":
        return pred[0] in label
    if pred in label:
        return True
    for c in ["\n", '"', "'", ".", ",", "?", "!", "{", "}"]:
        pred = pred.replace(c, " ")
    while "  " in pred:
        pred = pred.replace("  ", " ")
    for prefix in ["answer is:", "answer:", "answer is", "option is"]:
        idx = pred.find(prefix)
        if idx == -1:
            continue
        if len(pred) < idx + len(prefix) + 1:
            return False
        after = pred[idx + len(prefix) + 1:]
        return any(after.startswith(s) for s in label)
    for word in pred.split():
        if word in "ABCD":
            return word in label
    return False


def string_match_all(pred, refs):  # RULER evaluate: string_match_all, one prediction, in [0,1]
    return sum(1.0 if r.lower() in pred.lower() else 0.0 for r in refs) / len(refs)


def string_match_part(pred, refs):  # RULER evaluate: string_match_part, one prediction
    return max(1.0 if r.lower() in pred.lower() else 0.0 for r in refs)


WORDS = ["the", "a", "an", "The", "AN", "cat", "Cat's", "sat", "on", "mat", "dog!", "x-y", "(hello)", "an_x",
         "theory", "A.", "42", "4.5", "Paris,", "\"quoted\""]
SEPS = [" ", "  ", "\t", "\n"]
# ROUGE material: case, punctuation, sentence ends, newlines, non-ASCII letters and spaces
RWORDS = ["the", "The", "cat", "Cat,", "sat", "mat.", "on", "dog!", "(a)", "x-y", "42", "caf\u00e9", "\u0130stanbul",
          "\u212aelvin", "K", "i", "it's", "U.S.", "..."]
RSEPS = [" ", " ", "  ", "\t", "\n", ". ", ".\n", "\u00a0", "\u3000", " \n\n "]
ESSAY = ("I spent a lot of time painting. Painting taught me to look. Then I went to grad school, "
         "where I learned Lisp. Lisp was a revelation.\nLater we started a company. It made online stores. "
         "Yahoo bought it in 1998.")
ROUGE_FIXED = [
    (ESSAY, ESSAY),
    ("I spent a lot of time painting. Painting taught me to look.", ESSAY),
    ("Then I went to grad school, where I learned Lisp. Later we started a company.", ESSAY),
    ("Yahoo bought it in 1998. Lisp was a revelation. Painting taught me to look.",
     "Painting taught me to look. Lisp was a revelation. Yahoo bought it in 1998."),
    ("Yahoo bought it in 1998.\nLisp was a revelation.", "Lisp was a revelation.\nYahoo bought it in 1998."),
    ("THE CAT SAT.", "the cat sat."), ("The cat, sat!", "the cat sat"), ("cat. cat. cat", "cat cat cat"),
    ("", "the cat"), ("the cat", ""), ("", ""), ("...", "a b"), (" . ", "a"), ("\n\n", "a\nb"), ("!!!", "a"),
    ("a b c d", "d c b a"), ("x x x y", "x y y"), ("U.S. policy", "US policy"), ("\u0130stanbul", "i stanbul"),
    ("\u212aelvin scale", "kelvin scale"), ("caf\u00e9 au lait", "cafe au lait"), ("a\u00a0b", "a b"),
]

CLASSES = ["Human", "Human being", "being", "Entity", "Location", "Numeric value", "value", "Abbreviation"]


def words(rng, lo, hi):
    n = rng.randint(lo, hi)
    out = ""
    for i in range(n):
        out += rng.choice(WORDS) + (rng.choice(SEPS) if i + 1 < n else "")
    return out


def rwords(rng, lo, hi):
    n = rng.randint(lo, hi)
    return "".join(rng.choice(RWORDS) + (rng.choice(RSEPS) if i + 1 < n else "") for i in range(n))


def fixed_cases():
    out = []
    for p, r in ROUGE_FIXED:
        out += [("rouge_l", p, r, None), ("rouge_lsum", p, r, None)]
    for p, lab in [(" B. foo", "foo|B"), ("\nB: foo", "foo|B"), ("B.", "foo|B"), ("C. foo", "foo|B"), ("", "foo|B"),
                   ("The answer is: foo", "foo|C"), ("answer is:", "foo|C"), ("Option B", "foo|B"),
                   ("The correct option is: B", "foo|B"), ("I think foo", "foo|A")]:
        out.append(("code_debug", p, lab, None))
    return out


def chars(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def digits_text(rng):
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice(["Paragraph " + str(rng.randint(1, 30)), str(rng.randint(0, 120)), "and", "x7y"]))
    return " ".join(parts)


# Non-ASCII material: capitals whose lowercase is Unicode (Greek with its final sigma,
# Cyrillic, Latin-1, Turkish dotted I to "i" + U+0307, German sharp s, titlecase, KELVIN),
# combining marks, articles glued to non-ASCII letters, digits that re's \\d reads and ASCII
# [0-9] does not (fullwidth, Arabic-Indic, mathematical), digit-likes that \\d does not read
# (superscript, fraction), and whitespace of str.split() beyond ASCII (NBSP, U+2028, U+3000,
# U+0085, U+001C) next to what is not whitespace (U+200B, U+180E).
UWORDS = ["\u03a9MEGA", "s\u00e3o", "S\u00c3O", "\u039f\u0394\u039f\u03a3", "\u03a3", "\u03a3\u0391", "\u03c3\u03c2",
          "\u039f\u03a3'", "\u039f\u03a3\u0301", "\u041f\u0420\u0418\u0412\u0415\u0422", "\u043f\u0440\u0438\u0432\u0435\u0442",
          "\u0401\u041b\u041a\u0410", "\u00c0\u00c9\u00ce\u00d5\u00dc", "\u00e0\u00e9\u00ee\u00f5\u00fc", "\u0130stanbul",
          "istanbul", "i\u0307stanbul", "\u0130", "\u0131", "stra\u00dfe", "STRASSE", "\u1e9e", "\u01c5", "\u023a", "\u2c65",
          "\u212aelvin", "kelvin", "caf\u00e9", "cafe\u0301", "\u0301", "\u0307the", "the", "The", "THE", "a", "A", "an", "AN",
          "\u00e9the", "the\u00e9", "a\u00e9", "\u00e0n", "\u0130the", "\u03a3the", "the\u0301", "an\u0307", "x_the", "the_",
          "\u00abthe\u00bb", "\u2014a", "the\u2014", "\u00a1an!", "\u00bfthe?", "\uff21", "\uff41", "12", "\uff11", "\uff1112",
          "\u0661\u0662", "\u0663", "\U0001d7d9", "\u00b2", "\u00bd", "7", "42", "Paragraph \uff112", "Paragraph 12",
          "Paragraph \u0661", "\u4e00", "\u6f22\u5b57", "B", "C", "\u00c1", "answer is:", "answer:", "option is", "Option",
          "foo", "bar_baz", "\u00dfar"]
USEPS = [" ", " ", "\u00a0", "\u2028", "\u3000", "\u0085", "\x1c", "\x1f", "\u2029", "\u202f", "\u205f", "\u2009",
         "\u200b", "\u180e", "\t", "\n", "", ".", ", ", " \u00a0"]
UDIGITS = ["12", "3", "112", "\uff11\uff12", "\u0661\u0662", "\uff1112", "\U0001d7d9", "\u0967"]
UKINDS = ["qa_f1", "count", "retrieval", "kv_word", "choice", "code_debug", "first_int", "match_all", "match_part",
          "rouge_l", "rouge_lsum"]


def utext(rng, lo, hi):
    n = rng.randint(lo, hi)
    return "".join(rng.choice(UWORDS) + (rng.choice(USEPS) if i + 1 < n else "") for i in range(n))


def dtext(rng):  # mostly numbers, ASCII and not, glued or apart
    return "".join(rng.choice(UDIGITS + UDIGITS + UWORDS) + rng.choice(USEPS) for _ in range(rng.randint(0, 6)))


def uword(rng):  # one reference word without whitespace or '|' (the case file's separator)
    return rng.choice([w for w in UWORDS if not any(c.isspace() for c in w)])


def make_unicode_cases(rng, per):
    """per cases of each metric in UKINDS, all of them with non-ASCII text."""
    cases = []
    for kind in UKINDS:
        for _ in range(per):
            pre = rng.choice(["", " ", "\u00a0", "\u3000", "\u2028"])
            if kind in ("qa_f1", "rouge_l", "rouge_lsum"):
                cases.append((kind, pre + utext(rng, 0, 8), utext(rng, 0, 8), None))
            elif kind == "count":
                cases.append((kind, dtext(rng), rng.choice(UDIGITS), None))
            elif kind == "retrieval":
                cases.append((kind, dtext(rng), "Paragraph " + rng.choice(UDIGITS), None))
            elif kind == "first_int":
                cases.append((kind, utext(rng, 0, 5), rng.choice(["12", "3", "112", "7", "42"]), None))
            elif kind == "kv_word":
                cases.append((kind, pre + utext(rng, 0, 6), uword(rng), None))
            elif kind in ("choice", "code_debug"):
                a = rng.choice(["foo", "bar_baz", "\u00dfar", "\u03a9MEGA"]) if kind == "code_debug" else uword(rng)
                letter = rng.choice("ABCD")
                pred = pre + rng.choice(["", "The answer is:", "answer:", "option is", "The correct option is:",
                                         "Option", letter]) + rng.choice(USEPS) + rng.choice(["", letter, a]) + \
                    rng.choice(["", ".", ":", " "]) + utext(rng, 0, 3)
                cases.append((kind, pred, a + "|" + letter, None))
            else:
                refs = [uword(rng) for _ in range(rng.randint(1, 3))]
                cases.append((kind, pre + utext(rng, 0, 8), "|".join(refs), None))
    return cases


def exhaustive_cases():
    """Every code point but NUL and the surrogates, 512 to a case: "lower" holds Python's
    str.lower() of the run (so the final-sigma context is a neighbour's), "classes" one digit
    per code point, isspace + 2 * (re \\w) + 4 * (re \\d). C answers 1 where it agrees."""
    cps = [cp for cp in range(1, 0x110000) if not 0xD800 <= cp < 0xE000]
    cases = []
    for i in range(0, len(cps), 512):
        run = "".join(chr(cp) for cp in cps[i:i + 512])
        cls = "".join(str(int(c.isspace()) + 2 * int(c.isalnum() or c == "_") + 4 * int(c.isdecimal())) for c in run)
        cases += [("lower", run, run.lower(), None), ("classes", run, cls, None)]
    # capital sigma between each kind of neighbour, both sides
    probe = ["", "A", "a", "1", " ", "\u0301", "'", "\u00ad", "\u02b0", "\u0345", "\u03a3", "\u2160", "\u24b6", ".", "\u00b7"]
    for x in probe:
        for y in probe:
            for z in probe:
                t = x + y + "\u03a3" + z
                cases.append(("lower", t, t.lower(), None))
    return cases


def make_cases(rng, n):
    cases = []
    for _ in range(n):
        kind = rng.choice(["qa_f1", "rouge_l", "rouge_lsum", "ratio", "ratio_long", "code_sim", "code_debug", "count",
                           "retrieval", "classification"])
        if kind == "qa_f1":
            cases.append(("qa_f1", words(rng, 0, 8), words(rng, 0, 8), None))
        elif kind in ("rouge_l", "rouge_lsum"):
            cases.append((kind, rwords(rng, 0, 30), rwords(rng, 0, 30), None))
        elif kind == "code_debug":
            fn, letter = rng.choice(["foo", "bar_baz"]), rng.choice("ABCD")
            pred = rng.choice(["", " ", "\n", "  \n"]) + rng.choice(["B", "C", "foo", "The answer is:", "Option B", "answer: ",
                                                                  "The correct option is: ", "- "]) + \
                rng.choice(["", ".", ":", " "]) + rng.choice(["", " foo", " bar_baz", " C", "B. foo", "`bar_baz`"])
            cases.append(("code_debug", pred, fn + "|" + letter, None))
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
    if m == "rouge_lsum":
        return rouge_lsum(p, r)
    if m == "code_debug":
        return float(code_debug(p, r.split("|")))
    if m == "ratio":
        return ratio(p, r)
    if m == "code_sim":
        return code_sim(p, r)
    if m == "count":
        return count(p, r)
    if m in ("lower", "classes"):
        return 1.0
    if m == "kv_word":
        return float(kv_word(p, r))
    if m == "first_int":
        return float(first_int(p, r))
    if m == "choice":
        return float(choice(p, r.split("|")))
    if m == "match_all":
        return string_match_all(p, r.split("|"))
    if m == "match_part":
        return string_match_part(p, r.split("|"))
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
    ap.add_argument("--unicode", type=int, default=0, help="non-ASCII cases per metric (UKINDS)")
    ap.add_argument("--exhaustive", action="store_true", help="also every code point through lower and classes")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--ref")
    ap.add_argument("--got")
    a = ap.parse_args()
    if a.cmd == "make":
        rng = random.Random(a.seed)
        cases = fixed_cases() + make_cases(rng, a.n) + make_unicode_cases(rng, a.unicode)
        if a.exhaustive:
            cases += exhaustive_cases()
        with open(a.cases, "w", encoding="utf-8", newline="") as f:
            for m, p, r, cls in cases:
                f.write("\t".join([m, esc(p), esc(r)] + (["|".join(cls)] if cls else [])) + "\n")
        with open(a.ref, "w") as f:
            for c in cases:
                f.write("%.12f\n" % reference(c))
        return 0
    cases = open(a.cases, encoding="utf-8", newline="").read().split("\n")  # only \n ends a case: \r, U+2028 are data
    ref = [float(x) for x in open(a.ref).read().split()]
    got = [float(x) for x in open(a.got).read().split()]
    if len(got) != len(ref):
        print("got %d results for %d cases" % (len(got), len(ref)))
        return 1
    bad = [i for i in range(len(ref)) if not abs(ref[i] - got[i]) <= 1e-9]  # stricter than the 1e-6 asked
    for i in bad[:10]:
        print("MISMATCH %s: C %.12f, Python %.12f" % (cases[i], got[i], ref[i]))
    cases = cases[:len(ref)]
    per = Counter(c.split("\t")[0] for c in cases)
    miss = Counter(cases[i].split("\t")[0] for i in bad)
    print("%d cases (%s), %d mismatches" % (len(ref), ", ".join("%s %d" % kv for kv in sorted(per.items())), len(bad)))
    uni = [i for i in range(len(ref)) if any(ord(ch) > 127 for ch in cases[i])]
    if uni:
        uset = set(uni)
        ubad = Counter(cases[i].split("\t")[0] for i in bad if i in uset)
        uper = Counter(cases[i].split("\t")[0] for i in uni)
        print("non-ASCII cases, mismatches per metric: %s" % ", ".join("%s %d/%d" % (k, ubad[k], uper[k]) for k in sorted(uper)))
    if miss:
        print("mismatches per metric: %s" % ", ".join("%s %d" % kv for kv in sorted(miss.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
