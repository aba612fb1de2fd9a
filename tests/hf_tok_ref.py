#!/usr/bin/env python3
"""tokenizer.json files for tests/test_hf_tokenizer.sh, and what the `tokenizers` package
(Hugging Face's own Rust tokenizer, no torch) makes of a corpus with them.

  prepare --model M.gguf --dir D --seed S [--prompts FILE ...] [--seed-only]
    D/corpus.txt: one escaped string per line (tokenizer_ref.py's escaping): every essay
      of the NIAH haystack whole and by paragraph, the texts of the prompts files
      (`kvbench run --print-prompts` output: NIAH and RULER prompts, cut at the chat
      template's special tokens), and tokenizer_ref.py's random corpus (valid UTF-8 only:
      tokenizers takes str);
    D/<variant>/tokenizer.json + tokenizer_config.json for each variant:
      smollm, gpt2, llama-bpe, qwen2: byte-level BPE with M's vocabulary and merges and the
        pre-tokenizer those families' tokenizer.json files have (Digits + ByteLevel,
        ByteLevel, the Llama-3 and Qwen2 Split patterns + ByteLevel without regex;
        llama-bpe with ignore_merges, as Llama-3's file);
      spm, spm-legacy: Mistral-style SentencePiece BPE (byte_fallback, <0xXX> tokens,
        U+2581 spaces) trained here by tokenizers' BpeTrainer on half the essays; spm as
        Mistral's current file (Metaspace, prepend_scheme first, no split), spm-legacy as
        Llama-2's (Prepend + Replace normalizers);
      gpt2 and spm-legacy keep their merges as "a b" strings (older files), the others as
      ["a", "b"] pairs;
    D/ref_<variant>.txt: the ids tokenizers gives each line (add_special_tokens=False).
Compare with `tokenizer_ref.py compare`."""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import tokenizer_ref  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

SP = "\u2581"


def essays():
    base = os.path.join(os.environ.get("KVBENCH_CACHE", os.path.expanduser("~/.cache/kvbench")), "haystack")
    out = []
    for root, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(".txt"):
                with open(os.path.join(root, f), encoding="utf-8") as fh:
                    out.append(fh.read())
    return out


def prompt_texts(path):
    """The prompts of `kvbench run --print-prompts` output (headers give the byte counts)."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while True:
        i = data.find(b"=== prompt ", pos)
        if i < 0:
            return out
        head_end = data.index(b"\n", i)
        n = int(data[i:head_end].split(b" bytes,")[0].rsplit(b" ", 1)[1])
        out.append(data[head_end + 1:head_end + 1 + n].decode("utf-8"))
        pos = head_end + 1 + n


def split_specials(text, specials):
    """Pieces of text between special-token texts (kvbench encodes plain text without them)."""
    pieces = [text]
    for s in specials:
        pieces = [q for p in pieces for q in p.split(s)]
    return [p for p in pieces if p]


def byte_level(vocab, merges, specials, pre):
    tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=pre == "llama-bpe"))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre in ("gpt2", "smollm"))
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    elif pre == "gpt2":
        tok.pre_tokenizer = bl
    else:
        pattern = tokenizer_ref.LLAMA3 if pre == "llama-bpe" else tokenizer_ref.QWEN2
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False), bl])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    return tok


def spm(train_texts, legacy):
    """A SentencePiece-style BPE: trained with words split at U+2581, then rebuilt with
    <unk> <s> </s> and the 256 <0xXX> tokens first, as Mistral's and Llama-2's files."""
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="first", split=True)
    t.train_from_iterator(train_texts, trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"],
                                                           show_progress=False))
    trained = json.loads(t.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    return tok


def prepare(a):
    from gguf import GGUFReader
    f = GGUFReader(a.model).fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in f["tokenizer.ggml.merges"].contents()]
    vocab = {t: i for i, t in enumerate(tokens) if types[i] != 3}
    specials = [t for i, t in enumerate(tokens) if types[i] == 3]
    es = essays()
    rng = random.Random(a.seed)
    lines = list(es)
    for e in es:
        lines += [p for p in e.split("\n\n") if p.strip()]
    for p in a.prompts or []:
        for text in prompt_texts(p):
            lines += split_specials(text, specials + ["<s>", "</s>"])
    n_fixed = len(lines)
    for b in tokenizer_ref.corpus(a.seed):
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not any(x in s for x in specials + ["<unk>", "<s>", "</s>"]):
            lines.append(s)
    # --seed-only: the byte-level variants (fixed vocabulary, merges and pre-tokenizer) get
    # only the random strings, the essays being the same for every seed; the spm variants,
    # trained on a seeded order of the essays, keep every line (corpus_spm.txt)
    corpora = {"corpus.txt": lines[n_fixed:] if a.seed_only else lines}
    if a.seed_only:
        corpora["corpus_spm.txt"] = lines
    for name, ls in corpora.items():
        with open(os.path.join(a.dir, name), "w", encoding="utf-8", newline="\n") as fh:
            for s in ls:
                fh.write(tokenizer_ref.escape(s.encode("utf-8")) + "\n")
        print(f"{name}: {len(ls)} strings, {sum(len(s.encode()) for s in ls)} bytes "
              f"({len(es) if ls is lines else 0} essays, prompts from {len(a.prompts or [])} file(s))")
    half = es[::2]
    rng.shuffle(half)
    variants = {pre: byte_level(vocab, merges, specials, pre) for pre in ("smollm", "gpt2", "llama-bpe", "qwen2")}
    variants["spm"] = spm(half, False)
    variants["spm-legacy"] = spm(half, True)
    for name, tok in variants.items():
        d = os.path.join(a.dir, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        if name in ("gpt2", "spm-legacy"):   # merges as "a b" strings, as files before tokenizers 0.20
            with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as fh:
                tj = json.load(fh)
            tj["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
            with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as fh:
                json.dump(tj, fh, ensure_ascii=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            json.dump({"add_bos_token": name.startswith("spm"), "eos_token": "</s>" if name.startswith("spm")
                       else "<|endoftext|>"}, fh)
        mine = corpora.get("corpus_spm.txt", lines) if name.startswith("spm") else corpora["corpus.txt"]
        with open(os.path.join(a.dir, f"ref_{name}.txt"), "w") as out:
            for enc in tok.encode_batch(mine, add_special_tokens=False):
                out.write(" ".join(map(str, enc.ids)) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["prepare"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--prompts", nargs="*")
    ap.add_argument("--seed-only", action="store_true", help="byte-level variants: the random strings alone")
    prepare(ap.parse_args())


if __name__ == "__main__":
    main()
