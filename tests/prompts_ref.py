#!/usr/bin/env python3
"""The official prompt text, rebuilt the way the official code builds it, against what
`kvbench run --print-prompts` printed (test_prompts_official.sh).

    prompts_ref.py KIND PRINTED FIXTURES [DATA]

KIND: narrativeqa, code_debug (DATA: the task's JSONL file), vt, cwe. FIXTURES holds the
official template strings (tests/fixtures/prompts, copied byte for byte from LongBench's
config/dataset2prompt.json, InfiniteBench's src/prompt.py gpt4_templates and RULER's
scripts/data/synthetic/constants.py). vt and cwe take the generated parts (variables,
values, word lists, positions) from the printed prompt and rebuild the text around them as
variable_tracking.py and common_words_extraction.py do; the answer prefix follows the chat
template without RULER's leading and trailing space (kvbench's documented convention).
Prints nothing and exits 0 when the texts agree, else the first difference and exits 1."""
import json
import re
import sys

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."


def prompts(path):
    """The printed prompts, exact (the header gives the byte count)."""
    data = open(path, "rb").read()
    out, at = [], 0
    while True:
        m = re.compile(rb"=== prompt \d+/\d+: .*?, (\d+) bytes, .*?===\n").search(data, at)
        if not m:
            return out
        n = int(m.group(1))
        out.append(data[m.end():m.end() + n].decode())
        at = m.end() + n


def fixture(d, name):
    return open(f"{d}/{name}", encoding="utf-8").read()


def fill(tpl, **kw):
    """str.format for the named fields only (data may hold braces)."""
    for k, v in kw.items():
        tpl = tpl.replace("{" + k + "}", v)
    return tpl


def differ(want, got, what):
    if want in got if what.endswith("(in)") else want == got:
        return 0
    if what.endswith("(in)"):
        print(f"{what}: the official text is not in the prompt\n  want {want[:120]!r}\n  got  {got[:200]!r}")
        return 1
    i = 0
    while i < min(len(want), len(got)) and want[i] == got[i]:
        i += 1
    print(f"{what}: differs at byte {i}\n  want {want[max(0, i - 60):i + 60]!r}\n  got  {got[max(0, i - 60):i + 60]!r}")
    return 1


def longbench(p, fx, data):
    rec = json.loads(open(data).readline())
    want = fill(fixture(fx, "longbench_narrativeqa.txt"), context=rec["context"], input=rec["input"])
    return differ(want, p, "narrativeqa body (in)")


def code_debug(p, fx, data):
    rec = json.loads(open(data).readline())
    o = rec["options"]
    want = fill(fixture(fx, "infinitebench_code_debug.txt"), context=rec["context"], OPTION_A=o[0], OPTION_B=o[1],
                OPTION_C=o[2], OPTION_D=o[3])
    return differ(want, p, "Code.Debug body (in)")


def vt_context(ctx):
    """RULER's noise context rebuilt from the chain found in ctx: the variables, the value,
    and the noise line before which each chain line goes."""
    lines = ctx.split("\n")
    noise = [l == NOISE for l in lines]
    chain = [(i, l) for i, l in enumerate(lines) if not noise[i]]
    first = re.fullmatch(r"VAR ([A-Z]+) = (\d+) ?", chain[0][1])
    names, value = [first.group(1)], first.group(2)
    for _, l in chain[1:]:
        names.append(re.fullmatch(r"VAR ([A-Z]+) = VAR [A-Z]+ ?", l).group(1))
    pos = [sum(noise[:i]) for i, _ in chain]          # noise lines before each chain line
    # generate_chains + generate_input_output (noise haystack), verbatim in effect
    this_chain = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(len(names) - 1)]
    sentences = [NOISE] * sum(noise)
    for j, pi in enumerate(pos):
        sentences.insert(pi + j, this_chain[j])
    return "\n".join(sentences).replace(". \n", ".\n"), names, value


def vt(p, fx, _):
    tpl, pre = fixture(fx, "ruler_vt_template.txt"), fixture(fx, "ruler_vt_answer_prefix.txt")
    intro = tpl[:tpl.index("{context}")]
    s = p.index(intro)
    s2 = p.index(intro, s + 1)
    q = p.rindex("\nQuestion: ")
    icl_ctx = p[s + len(intro):p.index("\nQuestion: ", s)]
    ctx = p[s2 + len(intro):q]
    c1, n1, v1 = vt_context(icl_ctx)
    c2, n2, v2 = vt_context(ctx)
    # the example: template + answer_prefix, + " " + its variables + "\n"; then "\n" + the task
    icl = fill(tpl + pre, context=c1, query=v1, num_v=str(len(n1))) + " " + " ".join(n1) + "\n"
    want = icl + "\n" + fill(tpl, context=c2, query=v2, num_v=str(len(n2)))
    end = q + len(fill(tpl[tpl.index("\nQuestion: "):], query=v2))
    bad = differ(want, p[s:end], "vt user text")
    tail_pre = fill(pre, query=v2, num_v=str(len(n2))).strip()
    if not p.endswith(tail_pre):
        print(f"vt: the prompt does not end with the answer prefix {tail_pre!r}")
        bad = 1
    return bad


def cwe(p, fx, _):
    tpl, pre = fixture(fx, "ruler_cwe_template.txt"), fixture(fx, "ruler_cwe_answer_prefix.txt")
    intro = tpl[:tpl.index("{context}")]
    question = fill(tpl[tpl.index("{context}") + len("{context}"):], num_cw="10", query="")
    ap = fill(pre, num_cw="10").strip()
    s1 = p.index(intro)
    head = p[:s1]
    e1 = p.index(question, s1) + len(question)
    ex = p[s1 + len(intro):e1 - len(question)]
    a1 = p.index(ap, e1)
    tail = p[e1:a1]
    after = p[a1 + len(ap):]
    shots = re.match(r"((?: \d+\. \S+){10})\n", after).group(1)
    s2 = p.index(intro, e1)
    e2 = p.index(question, s2) + len(question)
    ctx = p[s2 + len(intro):e2 - len(question)]
    # the worked example's answers are its 10 most common words
    words = re.findall(r"\d+\. (\S+)", ex)
    counts = {w: words.count(w) for w in words}
    top = re.findall(r"\d+\. (\S+)", shots)
    if sorted(top) != sorted(sorted(counts, key=lambda w: -counts[w])[:10]) or len({counts[w] for w in top}) != 1:
        print(f"cwe: the example's answers {top} are not its 10 most common words")
        return 1
    if not head:
        print("cwe: no chat template around the example")
        return 1
    # common_words_extraction.py: each example is the whole template (chat turn and answer
    # prefix) + " " + its answers, joined by "\n", then "\n" + the task's whole template
    turn = lambda c: head + fill(tpl, context=c, num_cw="10", query="") + tail + ap
    want = turn(ex) + shots + "\n" + turn(ctx)
    return differ(want, p, "cwe prompt")


if __name__ == "__main__":
    kind, printed, fx = sys.argv[1:4]
    data = sys.argv[4] if len(sys.argv) > 4 else None
    ps = prompts(printed)
    if not ps:
        sys.exit(f"{printed}: no prompt printed")
    f = {"narrativeqa": longbench, "code_debug": code_debug, "vt": vt, "cwe": cwe}[kind]
    sys.exit(f(ps[0], fx, data))
