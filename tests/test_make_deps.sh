#!/usr/bin/env bash
# The build's header dependencies (issue 35): every object records the headers it read
# (-MMD -MP), so a newer header rebuilds exactly the objects that include it, directly or
# through other headers, at any depth of folders (methods/sekv/train/sekv_train.h was
# missed when the Makefile listed */*.h and */*/*.h). For every header of the source tree,
# `make -n` over the binary's objects after a touch of it is compared with the set an independent
# scan of the #include "..." lines finds (outside #ifdef KB_CUDA and C++-only blocks, for
# the CPU build). Needs the build up to date; each header's time is put back after.
source "$(dirname "$0")/lib.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL SAN FUZZ CUDA VG
BUILD=${BUILD:-build}
case "$BUILD" in build) flags=() ;; build-san) flags=(SAN=1) ;; build-vg) flags=(VG=1) ;;
    *) echo "skipped: BUILD=$BUILD"; exit 0 ;; esac
read -r -a objs <<<"$(make -s --no-print-directory "${flags[@]}" print-objects)"
[ ${#objs[@]} -gt 50 ] || { fail "make print-objects listed ${#objs[@]} objects"; exit 1; }
stale=$(make -n "${flags[@]}" "${objs[@]}" 2>&1 | grep -c -- ' -c -o ' || true)
[ "$stale" = 0 ] || { fail "$stale objects are out of date: build first (make ${flags[*]})"; exit 1; }
for o in "${objs[@]}"; do [ -f "$o.d" ] || fail "$o has no dependency file $o.d"; done

# The independent answer: header -> the objects whose source includes it (transitively).
python3 - "$BUILD" "${objs[@]}" >"$T/want" <<'PY'
import os, re, sys
build, objs = sys.argv[1], sys.argv[2:]
inc = re.compile(r'\s*#\s*include\s+"([^"]+)"')
cond = re.compile(r'\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)')
def includes(path, memo={}):
    if path in memo: return memo[path]
    memo[path] = set()
    out, stack = set(), []   # stack: is the enclosing block compiled in a CPU C build
    for line in open(path, errors='replace'):
        m = cond.match(line)
        if m:
            kw, rest = m.group(1), m.group(2)
            if kw in ('if', 'ifdef', 'ifndef'):
                off = 'KB_CUDA' in rest or '__cplusplus' in rest or '__CUDACC__' in rest
                stack.append(not off if kw != 'ifndef' else True)
            elif kw in ('else', 'elif') and stack:
                stack[-1] = not stack[-1] if kw == 'else' else stack[-1]
            elif kw == 'endif' and stack:
                stack.pop()
            continue
        m = inc.match(line)
        if m and all(stack):
            h = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            if os.path.exists(h):
                out.add(h)
                out |= includes(h)
    memo[path] = out
    return out
want = {}
for o in objs:
    src = o[len(build) + 1:-2] + '.c'
    for h in includes(src):
        want.setdefault(h, set()).add(o)
for h in sorted(want):
    print(h, ' '.join(sorted(want[h])))
PY
mapfile -t headers < <(find kernels methods workloads harness results plots model -name '*.h' | sort)
checked=0
restore=
trap 'rm -rf "$T"; [ -n "$restore" ] && touch -d "@${restore#* }" "${restore%% *}"' EXIT
for h in "${headers[@]}"; do
    # a real touch (the objects name headers by any relative spelling, so make -W cannot
    # stand for it), then the header's own time back
    restore="$h $(stat -c %.9Y "$h")"
    touch "$h"
    got=$(make -n "${flags[@]}" "${objs[@]}" 2>/dev/null | sed -n 's/.* -c -o \([^ ]*\.o\) .*/\1/p' | sort | tr '\n' ' ')
    touch -d "@${restore#* }" "$h"
    restore=
    want=$(awk -v h="$h" '$1 == h { for (i = 2; i <= NF; i++) print $i }' "$T/want" | sort | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "touching $h rebuilds [${got% }], but [${want% }] include it"
    checked=$((checked + 1))
done
[ "$fails" = 0 ] && echo "test_make_deps: $checked headers, each rebuilds exactly the objects that include it"
exit $((fails > 0))
