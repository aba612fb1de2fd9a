#!/usr/bin/env python3
"""Independent reference for the byte-level BPE tokenizer (model/tok_*.c), built from
the GGUF vocabulary and merges with the gguf package and the `regex` module.

  prepare --model M --seed S --dir D   D/corpus.txt: >= 200 test strings, one per line;
      for each pre-tokenizer P (smollm, gpt2, llama-bpe, qwen2): D/P.gguf, a tokenizer-only
      GGUF with M's vocabulary and merges (smollm: M itself is used), and D/ref_P.txt,
      the ids of each line as llama.cpp tokenizes them
  compare --corpus FILE --ref F --got F   exit 1 and show the first mismatches, if any

Lines are escaped: \\n \\r \\t \\\\ and \\xHH for other bytes < 0x20, 0x7F and bytes that
are not valid UTF-8, so a line can hold any byte string."""
import argparse
import os
import random
import sys

import regex

# ---- pre-tokenizer regexes (HF tokenizer.json / llama.cpp llama-vocab.cpp) ----
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
PRE = {"smollm": [r"\p{N}", GPT2], "gpt2": [GPT2], "llama-bpe": [LLAMA3], "qwen2": [QWEN2]}


def split_keep(pattern, pieces):
    """Apply one regex to every piece: matches and the text between them are pieces."""
    out = []
    for piece in pieces:
        pos = 0
        for m in regex.finditer(pattern, piece):
            if m.start() > pos:
                out.append(piece[pos:m.start()])
            out.append(m.group())
            pos = m.end()
        if pos < len(piece):
            out.append(piece[pos:])
    return out


def lenient_decode(b):
    """UTF-8 -> str as llama.cpp's unicode_cpts_from_utf8: bit patterns are checked,
    overlong forms and surrogates accepted; each bad byte becomes U+FFFD."""
    out, i, n = [], 0, len(b)
    while i < n:
        c = b[i]
        if c < 0x80:
            out.append(chr(c)); i += 1; continue
        k = 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 0
        ok = k and i + k <= n and all(b[i + j] >> 6 == 2 for j in range(1, k))
        if ok:
            v = c & (0x7F >> k)
            for j in range(1, k):
                v = (v << 6) | (b[i + j] & 0x3F)
            ok = v <= 0x10FFFF
        if ok:
            out.append(chr(v)); i += k
        else:
            out.append("\ufffd"); i += 1
    return "".join(out)


def byte_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, nxt = {}, 0x100
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(nxt); nxt += 1
    return table


class RefBPE:
    def __init__(self, tokens, merges, pre):
        self.pre = pre
        self.vocab = {}
        for i, t in enumerate(tokens):
            self.vocab.setdefault(t, i)
        self.ranks = {}
        for i, m in enumerate(merges):
            a, b = m.split(" ", 1)
            self.ranks.setdefault((a, b), i)
        self.bmap = byte_to_unicode()
        self.cache = {}

    def bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def encode(self, data):
        text = lenient_decode(data)
        pieces = [text] if text else []
        for pat in PRE[self.pre]:
            pieces = split_keep(pat, pieces)
        assert "".join(pieces) == text
        ids = []
        for p in pieces:
            word = "".join(self.bmap[b] for b in p.encode("utf-8", "surrogatepass"))
            if self.pre == "llama-bpe" and word in self.vocab:   # llama.cpp ignore_merges
                ids.append(self.vocab[word])
            else:
                ids.extend(self.bpe(word))
        return ids


# ---- line escaping ----
def escape(b):
    out, i = [], 0
    while i < len(b):
        c = b[i]
        if c == 0x5C:
            out.append("\\\\"); i += 1; continue
        if c in (0x0A, 0x0D, 0x09):
            out.append({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}[c]); i += 1; continue
        if c < 0x20 or c == 0x7F:
            out.append("\\x%02X" % c); i += 1; continue
        if c < 0x80:
            out.append(chr(c)); i += 1; continue
        k = 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 0
        try:
            s = b[i:i + k].decode("utf-8") if k else None
        except UnicodeDecodeError:
            s = None
        if s is None or len(s) != 1:
            out.append("\\x%02X" % c); i += 1
        else:
            out.append(s); i += k
    return "".join(out)


def unescape(line):
    out, i = bytearray(), 0
    while i < len(line):
        ch = line[i]
        if ch != "\\":
            out += ch.encode("utf-8"); i += 1; continue
        nx = line[i + 1]
        if nx == "x":
            out.append(int(line[i + 2:i + 4], 16)); i += 4
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}[nx]
            i += 2
    return bytes(out)


# ---- corpus ----
FRAGMENTS = [
    "Hello world! 123", "\n", "  multiple   spaces", "don't", "I'LL", "we've", "they're", "it'd",
    "she'S", "'s", "''", "can't've", "12345", "3.14159", "1,000,000", "2024-01-31", "x²+y³", "½ cup",
    "Ⅻ", "٣٤٥", "१२३", "0x1F", "café", "naïve", "résumé", "Ünïcödé", "straße", "你好世界", "日本語のテキスト",
    "こんにちは", "안녕하세요", "Привет, мир", "Γειά σου", "مرحبا", "שלום", "हिन्दी", "ภาษาไทย",
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "✓ ✗ → ←", "…", "—", "«quotes»", "“smart”", "¿qué?",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
    "#include <stdio.h>", "<|im_start|>", "<|im_end|>", "<repo_name>", "a\u00a0b", "x\u3000y",
    "line\u2028sep", "tab\there", "\r\n", "\n\n\n", "   ", "\t\t", " \n ", "$$$", "!!!???", "...",
    "=====", "--flag=value", "path/to/file.txt", "user@example.com", "https://example.org/a?b=c",
    "A", "a", "I", " ", "'", "  1", "a1b2c3", "ABC123def", "snake_case_name", "camelCaseName",
]
POOL = ("abcxyzABCXYZ 0123456789 ''\"!?.,;:-_()[]{}<>/\\|@#$%^&*+=~`\n\t\r"
        "éüñßøçÅΩπжЯ中文字日本한国😀🎉👍²½Ⅻ٣\u00a0\u3000\u2028\u0301\u0300\u200d\ufe0f")
INVALID = [b"\xff", b"\x80", b"\xc3", b"\xe4\xbd", b"\xf0\x9f\x98", b"\xc0\x80", b"\xed\xa0\x80",
           b"\xf8\x88\x80\x80\x80", b"\xfe\xff", b"\xf4\x90\x80\x80"]


def license_texts():
    base = "/usr/share/common-licenses"
    out = []
    if os.path.isdir(base):
        for name in sorted(os.listdir(base)):
            p = os.path.join(base, name)
            if os.path.isfile(p):
                with open(p, "rb") as fh:
                    out.append(fh.read())
    return out


def corpus(seed):
    rng = random.Random(seed)
    out = [f.encode() for f in FRAGMENTS] + [b"", b" 123", b"hello  \n  world", b"x  \t y", b"  ",
                                              b"a\n\nb", b"end with spaces   ", b"\n\t \n"]
    for _ in range(90):      # fragment mixes
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 10))]
        seps = ["", " ", "  ", "\n", "\t", " \n", "   "]
        out.append("".join(p + rng.choice(seps) for p in parts).encode())
    for _ in range(60):      # random characters from the pool
        out.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 80))).encode())
    for _ in range(20):      # invalid UTF-8 spliced into text
        parts = [rng.choice(FRAGMENTS).encode() for _ in range(rng.randint(1, 5))]
        for _ in range(rng.randint(1, 3)):
            parts.insert(rng.randint(0, len(parts)), rng.choice(INVALID))
        out.append(b"".join(parts))
    lic = license_texts()
    for _ in range(40 if lic else 0):   # license text chunks, and one whole file
        t = rng.choice(lic)
        a = rng.randint(0, max(0, len(t) - 1))
        out.append(t[a:a + rng.randint(1, 3000)])
    if lic:
        out.append(rng.choice(lic))
    return out


def write_variant(path, fields, pre):
    from gguf import GGUFWriter
    w = GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(fields["tokenizer.ggml.tokens"].contents())
    w.add_token_types(fields["tokenizer.ggml.token_type"].contents())
    w.add_token_merges(fields["tokenizer.ggml.merges"].contents())
    w.add_eos_token_id(fields["tokenizer.ggml.eos_token_id"].contents())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def prepare(a):
    from gguf import GGUFReader
    lines = corpus(a.seed)
    with open(os.path.join(a.dir, "corpus.txt"), "w", encoding="utf-8", newline="\n") as fh:
        for b in lines:
            assert unescape(escape(b)) == b, b
            fh.write(escape(b) + "\n")
    print(f"corpus: {len(lines)} strings, {sum(map(len, lines))} bytes")
    fields = GGUFReader(a.model).fields
    assert fields["tokenizer.ggml.model"].contents() == "gpt2"
    own = fields["tokenizer.ggml.pre"].contents()
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = fields["tokenizer.ggml.merges"].contents()
    for pre in PRE:
        if pre != own:
            write_variant(os.path.join(a.dir, pre + ".gguf"), fields, pre)
        ref = RefBPE(tokens, merges, pre)
        with open(os.path.join(a.dir, f"ref_{pre}.txt"), "w") as out:
            for b in lines:
                out.write(" ".join(map(str, ref.encode(b))) + "\n")


def compare(a):
    def read(p):
        with open(p, encoding="utf-8", newline="\n") as fh:
            return fh.read().split("\n")[:-1]
    lines, ref, got = read(a.corpus), read(a.ref), read(a.got)
    if len(ref) != len(lines) or len(got) != len(lines):
        print(f"{a.label}: line counts differ: corpus {len(lines)}, ref {len(ref)}, C {len(got)}")
        return 1
    bad = [i for i in range(len(lines)) if ref[i] != got[i]]
    for i in bad[:5]:
        r, g = ref[i].split(), got[i].split()
        j = next((j for j in range(min(len(r), len(g))) if r[j] != g[j]), min(len(r), len(g)))
        print(f"{a.label}: line {i + 1} differs at id {j}: [{lines[i][:120]}]\n"
              f"  ref {r[max(0, j - 3):j + 5]}\n  C   {g[max(0, j - 3):j + 5]}")
    print(f"{a.label}: {len(lines) - len(bad)}/{len(lines)} strings identical, "
          f"{sum(len(x.split()) for x in ref)} reference ids")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--model", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--dir", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--corpus", required=True)
    c.add_argument("--ref", required=True)
    c.add_argument("--got", required=True)
    c.add_argument("--label", default="")
    a = ap.parse_args()
    return prepare(a) if a.cmd == "prepare" else compare(a)


if __name__ == "__main__":
    sys.exit(main())
