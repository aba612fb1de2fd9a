#!/usr/bin/env python3
"""Builds the SeKV training corpus from long documents installed on this machine (see
tools/build_corpus.sh, which runs this): Debian documentation (text files, decompressed
changelogs and NEWS), manual pages rendered to plain text, C headers and Python
standard-library modules - prose and code.

Deterministic: candidates are sorted, then visited in the order of the SHA-256 of their
path (a fixed shuffle that spreads the picks over packages); at most one document per
family (package, man-page prefix, header directory) so no source dominates, and none that
repeats a fifth of an earlier document's text (changelogs shipped twice); the first N
per kind whose cleaned text has at least MIN_CHARS characters are kept, cut to MAX_CHARS
at a line end. Writes one .txt per document and MANIFEST.tsv (sha256, chars, kind,
source, file). Documents sharing a 50-character shingle with the NIAH haystack or needle
are dropped (corpus_disjoint.py). Standard library only.
"""
import argparse
import glob
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_disjoint  # noqa: E402

MIN_CHARS = 9000     # ~2K tokens of prose for the SmolLM2 tokenizer
MAX_CHARS = 24000    # ~8K tokens of dense code
KINDS = ('doc', 'man', 'c', 'py')


def candidates(kind):
    if kind == 'doc':
        pats = ['/usr/share/doc/**/*.txt', '/usr/share/doc/**/changelog*.gz',
                '/usr/share/doc/**/NEWS*.gz']
        files = [f for p in pats for f in glob.glob(p, recursive=True)]
    elif kind == 'man':
        files = [f for f in glob.glob('/usr/share/man/man1/*.gz') if os.path.getsize(f) > 2048]
    elif kind == 'c':
        files = [f for p in ('/usr/include/*.h', '/usr/include/*/*.h') for f in glob.glob(p)
                 if os.path.getsize(f) > 8192]
    else:
        files = [f for f in glob.glob('/usr/lib/python3*/*.py') if os.path.getsize(f) > 8192]
    # one path per file: documentation directories are often symlinks to a shared one
    files = sorted(set(os.path.realpath(f) for f in files if os.path.isfile(f)))
    return sorted(files, key=lambda f: hashlib.sha256(f.encode()).hexdigest())


def family(kind, path):
    if kind == 'doc':
        parts = path.split('/')                          # /usr/share/doc/PKG/...
        return parts[4] if len(parts) > 5 and parts[:4] == ['', 'usr', 'share', 'doc'] else path
    if kind == 'man':
        return re.split(r'[-_.]', os.path.basename(path))[0]
    if kind == 'c':
        return os.path.dirname(path)
    return path


def extract(kind, path):
    if kind == 'man':
        env = dict(os.environ, MANWIDTH='80', LC_ALL='C.UTF-8')
        r = subprocess.run(['man', '--nh', '--nj', '-l', '-P', 'cat', path], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
        r2 = subprocess.run(['col', '-bx'], input=r.stdout, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, timeout=60)
        raw = r2.stdout
    elif path.endswith('.gz'):
        with gzip.open(path, 'rb') as f:
            raw = f.read()
    else:
        with open(path, 'rb') as f:
            raw = f.read()
    return raw.decode('utf-8', 'replace')


def clean_cut(text, min_chars=MIN_CHARS, max_chars=MAX_CHARS):
    """Plain text without control characters, cut at a line end; None when too short."""
    text = text.replace('\r\n', '\n')
    text = re.sub(r'[\x00-\x08\x0b-\x1f\x7f\ufffd]', '', text)
    if len(text) > max_chars:
        cut = text.rfind('\n', 0, max_chars)
        text = text[:cut + 1] if cut > 0 else text[:max_chars]
    return text if len(text) >= min_chars else None


def sample_shingles(text):
    """50-character shingles (whitespace collapsed) starting every 10 characters."""
    t = corpus_disjoint.normalise(text)
    return {t[i:i + 50] for i in range(0, max(len(t) - 49, 0), 10)}


def safe(s):
    return re.sub(r'[^A-Za-z0-9._-]', '_', s)


def main(argv):
    ap = argparse.ArgumentParser(description='Build the SeKV training corpus.')
    ap.add_argument('--out', required=True)
    ap.add_argument('--per-kind', type=int, default=16)
    ap.add_argument('--min-chars', type=int, default=MIN_CHARS)
    ap.add_argument('--max-chars', type=int, default=MAX_CHARS)
    a = ap.parse_args(argv)
    if a.per_kind < 1:
        print('build_corpus: --per-kind must be >= 1', file=sys.stderr)
        return 2
    if not 0 < a.min_chars <= a.max_chars:
        print('build_corpus: need 0 < --min-chars <= --max-chars', file=sys.stderr)
        return 2

    tmp = tempfile.mkdtemp(prefix='kvbench-corpus-')
    try:
        rows, seen_text = [], set()
        for kind in KINDS:
            kept, seen = 0, set()
            for src in candidates(kind):
                if kept == a.per_kind:
                    break
                fam = family(kind, src)
                if fam in seen:
                    continue
                try:
                    text = clean_cut(extract(kind, src), a.min_chars, a.max_chars)
                except (OSError, EOFError, subprocess.SubprocessError):
                    text = None
                if text is None:
                    continue
                # near-duplicates (one changelog shipped by several packages) count once
                sh = sample_shingles(text)
                if len(sh & seen_text) > 0.2 * len(sh):
                    continue
                seen_text |= sh
                seen.add(fam)
                base = safe(re.sub(r'\.gz$', '', os.path.basename(src)))
                name = f'{kind}-{kept:03d}-{safe(fam.strip("/").split("/")[-1])}-{base}.txt'
                if kind in ('man', 'py'):
                    name = f'{kind}-{kept:03d}-{base}.txt'
                with open(os.path.join(tmp, name), 'w', encoding='utf-8') as f:
                    f.write(text)
                rows.append((name, kind, src))
                kept += 1
            if kept < a.per_kind:
                print(f'build_corpus: note: only {kept} "{kind}" documents found', file=sys.stderr)

        # the haystack `make haystack` caches, too (the same essays; .venv may lack them)
        cache = os.environ.get('KVBENCH_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'kvbench')
        hay = [h for h in glob.glob(os.path.join(cache, 'haystack', '*')) if os.path.isdir(h)]
        if corpus_disjoint.main(['--drop', tmp] + [x for h in hay for x in ('--haystack', h)]) not in (0,):
            return 1

        if os.path.isdir(a.out):
            shutil.rmtree(a.out)
        os.makedirs(a.out)
        lines = ['# sha256\tchars\tkind\tsource\tfile']
        for name, kind, src in rows:
            p = os.path.join(tmp, name)
            if not os.path.exists(p):
                continue
            data = open(p, 'rb').read()
            chars = len(data.decode('utf-8'))
            lines.append(f'{hashlib.sha256(data).hexdigest()}\t{chars}\t{kind}\t{src}\t{name}')
            shutil.copyfile(p, os.path.join(a.out, name))
        with open(os.path.join(a.out, 'MANIFEST.tsv'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
        digest = hashlib.sha256('\n'.join(lines).encode()).hexdigest()[:16]
        print(f'build_corpus: {len(lines) - 1} documents in {a.out} (manifest {digest})',
              file=sys.stderr)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
