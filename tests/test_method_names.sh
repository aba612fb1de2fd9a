#!/usr/bin/env bash
# No file outside methods/ names a method: the harness, the report, the plots, the model
# and the workloads reach every method through its table (methods/method.h), never by its
# name. Checked in the code (comments are prose and may mention a method) of every C/CUDA
# file under kernels, model, workloads, results, plots and harness:
#   - a string or character literal holding a registered name as a word ("sekv",
#     'fullkv', "sekv:zoom=0"), the names taken from the `.name = "..."` of the tables
#     in methods/ (a new method is covered with no edit here);
#   - an identifier of a method's own code: its table (kv_sekv), its functions and types
#     (sekv_describe, kv_is_sekv), or an include of a method's own header;
#   - a file name holding a registered name as a word (cuda_sekv.cu).
# ALLOWED lists the files that may still do so, a list that may only shrink (an entry no
# longer needed fails the test until it is removed); it is empty, and stays so.
set -u
cd "$(dirname "$0")/.."
ALLOWED=""
names=$(grep -rhoE '^[[:space:]]*\.name[[:space:]]*=[[:space:]]*"[a-z0-9_.-]+"' methods | sed 's/.*"\(.*\)"/\1/' | sort -u)
[ -n "$names" ] || { echo "test_method_names: no method names found in methods/"; exit 1; }
files=$(find kernels model workloads results plots harness -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
python3 - "$ALLOWED" $names -- $files <<'PY'
import re, sys
args = sys.argv[1:]
allowed = set(args[0].split())
k = args.index('--')
names, files = args[1:k], args[k + 1:]
word = lambda n: r'(?<![A-Za-z0-9_])' + re.escape(n) + r'(?![A-Za-z0-9_])'
in_literal = re.compile('|'.join(word(n) for n in sorted(names, key=len, reverse=True)))
ids = sorted({n.replace('-', '_').replace('.', '_') for n in names}, key=len, reverse=True)
ident = re.compile(r'(?<![A-Za-z0-9_])(?:kv_(?:is_)?(?:%s)(?![A-Za-z0-9])|(?:%s)_[A-Za-z0-9_]+)' % ('|'.join(ids), '|'.join(ids)))
include = re.compile(r'#\s*include\s*"[^"]*methods/(?:[a-z0-9_]+/|(?:%s)[a-z0-9_]*\.h)' % '|'.join(ids))
token = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
bad, used = [], set()
for f in files:
    src = open(f, encoding='utf-8', errors='replace').read()
    hits = []
    stem = f.rsplit('/', 1)[-1].rsplit('.', 1)[0].replace('_', ' ')
    if in_literal.search(stem):   # the file's own name (cuda_sekv.cu would be one)
        hits.append((0, 'its file name names a method'))
    for m in include.finditer(src):
        hits.append((m.start(), 'includes a method\'s own header: ' + m.group(0)))
    code = list(src)   # the source with comments and literals blanked (lines kept)
    for m in token.finditer(src):
        t = m.group(0)
        if t[0] in '"\'' and in_literal.search(t[1:-1]):
            hits.append((m.start(), 'a literal names a method: ' + t[:80]))
        for i in range(m.start(), m.end()):
            if code[i] != '\n':
                code[i] = ' '
    for m in ident.finditer(''.join(code)):
        hits.append((m.start(), 'uses a method\'s own code: ' + m.group(0)))
    if not hits:
        continue
    if f in allowed:
        used.add(f)
        continue
    for pos, what in hits:
        line = src.count('\n', 0, pos) + 1
        bad.append(f'{f}:{line}: {what}')
for f in sorted(allowed - used):
    bad.append(f'{f}: no longer names a method: remove it from ALLOWED')
for b in bad:
    print('test_method_names:', b)
if not bad:
    print(f'test_method_names: ok ({len(files)} files, {len(names)} method names; {len(allowed)} allowed files)')
sys.exit(1 if bad else 0)
PY
