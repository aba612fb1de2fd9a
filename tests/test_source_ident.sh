#!/usr/bin/env bash
# The run identity sees every compiled source, tracked by git or not: in a copy of the
# tree (and of its build, so only what changes is rebuilt: one object, the generated
# source hash, the archive and the link, seconds), an untracked file is added to
# methods/ and built in; a run is made; rebuilt without an edit, the same command
# resumes it; after an edit of that untracked file and a rebuild, the same command
# starts a new run instead of finding its results "already present". The same build's
# provenance names the commit (git_commit), the code= part the source hash.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
case "$BUILD" in build) flags=() ;; build-san) flags=(SAN=1) ;; build-vg) flags=(VG=1) ;;
    *) echo "skipped: BUILD=$BUILD"; exit 0 ;; esac
[ -d "$BUILD" ] || { fail "no $BUILD/ to copy (build first)"; exit 1; }
W=$T/tree
mkdir "$W"
cp -a Makefile kernels methods workloads harness results plots model "$W/"
mkdir -p "$W/$BUILD"
for d in "$BUILD"/*; do [ "$(basename "$d")" = tests ] || cp -a "$d" "$W/$BUILD/"; done
bin=$W/kvbench; [ "$BUILD" = build ] || bin=$W/$BUILD/kvbench
build() { make -s --no-print-directory -C "$W" "${flags[@]}" >"$T/make" 2>&1 || { cat "$T/make"; fail "build: $1"; exit 1; }; }

printf '/* a file git does not track */\nint kv_untracked_probe(void) { return 1; }\n' >"$W/methods/zz_untracked_probe.c"
t0=$SECONDS
build "with the untracked file"
echo "rebuild after adding a file: $((SECONDS - t0))s"
R=(run --workload synthetic-niah --methods knormpress --budget 0.2 --ctx 256 --layers 1 --depths 0.5 --seed 3
   --db "$T/s.db")
"$bin" "${R[@]}" >"$T/out" 2>"$T/err" || fail "first run failed: $(cat "$T/err")"
grep -q "^1 results written, 0 already present" "$T/out" || fail "first run: $(tail -1 "$T/out")"
h1=$(sed -n 's/.*"\([0-9a-f]\{64\}\)".*/\1/p' "$W/$BUILD/gen/source_hash.c")
[ ${#h1} = 64 ] || fail "no source hash generated"
case "$(q "$T/s.db" 'SELECT run_key FROM runs WHERE id = 1')" in *";code="*"+src.$h1;"*) ;;
    *) fail "the run key lacks the source hash $h1" ;; esac

touch "$W/methods/zz_untracked_probe.c"   # rebuilt, same bytes: the same code
build "after a touch"
"$bin" "${R[@]}" >"$T/out" 2>"$T/err" || fail "rerun failed"
grep -q "^0 results written, 1 already present" "$T/out" || fail "the same sources did not resume: $(tail -1 "$T/out")"

sed -i 's/return 1;/return 2;/' "$W/methods/zz_untracked_probe.c"
t0=$SECONDS
build "after the edit"
echo "rebuild after an edit: $((SECONDS - t0))s"
h2=$(sed -n 's/.*"\([0-9a-f]\{64\}\)".*/\1/p' "$W/$BUILD/gen/source_hash.c")
[ "$h1" != "$h2" ] || fail "an edit of an untracked source left the source hash as it was"
"$bin" "${R[@]}" >"$T/out" 2>"$T/err" || fail "run after the edit failed"
grep -q "^1 results written, 0 already present" "$T/out" || fail "an edited untracked file reused old results: $(tail -1 "$T/out")"
[ "$(q "$T/s.db" 'SELECT count(*) FROM runs')" = 2 ] || fail "the edit did not start a new run"

rm "$W/methods/zz_untracked_probe.c"   # removing a file is other code too
build "after removing it"
h3=$(sed -n 's/.*"\([0-9a-f]\{64\}\)".*/\1/p' "$W/$BUILD/gen/source_hash.c")
[ "$h3" != "$h2" ] && [ "$h3" != "$h1" ] || fail "removing a source left the hash of a build that had it"

[ "$fails" = 0 ] && echo "test_source_ident: all checks passed"
exit $((fails > 0))
