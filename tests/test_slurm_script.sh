#!/usr/bin/env bash
# kvbench slurm-script runs nothing taken from its arguments (issue 27 item 12):
#  - SLURM values that are not what sbatch accepts (a partition 'x;touch${IFS}X;', an
#    account '$(touch X)', a newline, a space, a quote) are refused with exit 2 and one
#    stderr line, and no script is written;
#  - command arguments holding a newline, quotes, $(), backquotes, a tab, a backslash and
#    an empty string: the script parses (bash -n), every line before the first command is
#    a comment (so sbatch reads every #SBATCH line, --array included), and both halves of
#    the script hand each argument over byte for byte, to a program that only records
#    them: the array task (SLURM_ARRAY_TASK_ID set, as SLURM runs it) and the submission
#    (`bash FILE`, with a stand-in sbatch on PATH that records its arguments: the real
#    sbatch on a real cluster is tests/slurm/test_slurm.sh), then the merge job's --wrap
#    line through sh, as sbatch runs it;
#  - a plugin whose path holds ':' (the separator of the shards' KVBENCH_PLUGINS, so each
#    shard would split it) is refused with exit 2 and one line naming it, no script
#    written; the same plugin at a path without ':' goes into KVBENCH_PLUGINS whole;
#  - none of the commands in the arguments ran.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/bin" "$T/w/res"
# records its arguments, NUL-terminated, into $ARGS_OUT
cat >"$T/bin/argdump" <<'EOF'
#!/bin/bash
printf '%s\0' "$@" >"$ARGS_OUT"
EOF
# stands for sbatch: records each call's arguments, prints a job id
cat >"$T/bin/sbatch" <<'EOF'
#!/bin/bash
n=$(ls "$SBATCH_LOG".* 2>/dev/null | wc -l)
printf '%s\0' "$@" >"$SBATCH_LOG.$n"
echo $((100 + n))
EOF
chmod +x "$T/bin/argdump" "$T/bin/sbatch"
export ARGS_OUT=$T/args SBATCH_LOG=$T/sbatch

P=$T/pw   # every hostile text below would create a file beginning with this
hostile=($'line one\nline two' "it's" 'say "hi"' "\$(touch ${P}1)" "\`touch ${P}2\`" ";touch ${P}3;" 'back\slash' \
         $'tab\there' '${IFS}$HOME' '' "x'\$(touch ${P}4)'y" $'#SBATCH --array=9\n\$(touch '"${P}5"')')
KV=$(realpath "$KVBENCH")

# refused values: exit 2, one line, no script
refuse() {
    local what=$1 rc=0
    shift
    rm -f "$T/job.sh"
    (cd "$T/w" && "$KV" slurm-script --shards 2 --out "$T/job.sh" "$@") >/dev/null 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "$what: $(wc -l <"$T/err") stderr lines: $(head -c 300 "$T/err")"
    grep -qF -- "$what" "$T/err" || fail "$what: stderr does not name it: $(cat "$T/err")"
    [ ! -e "$T/job.sh" ] || fail "$what: a script was written"
}
for h in "${hostile[@]}" 'x;touch${IFS}X;' '$(touch${IFS}X)' 'a b'; do
    refuse --partition --partition "$h" -- "$T/bin/argdump" run --db res/x.db
    refuse --account --account "$h" -- "$T/bin/argdump" run --db res/x.db
    refuse --time --time "$h" -- "$T/bin/argdump" run --db res/x.db
    refuse --mem --mem "$h" -- "$T/bin/argdump" run --db res/x.db
    refuse --sbatch --sbatch "--qos=$h" -- "$T/bin/argdump" run --db res/x.db
    [ -z "$h" ] && continue   # an empty name part is still a path
    refuse --chdir --chdir "$T/$h" -- "$T/bin/argdump" run --db res/x.db
    refuse --db -- "$T/bin/argdump" run --db "res/$h.db"
done
refuse --time --time 1:2:3:4 -- "$T/bin/argdump" run --db res/x.db
refuse --mem --mem 16GB -- "$T/bin/argdump" run --db res/x.db
refuse "program path" -- $'/bin/arg\ndump' run --db res/x.db
# values SLURM takes are taken
for ok in "--partition a,b-c_1.x" "--account acc.1_x" "--time 30" "--time 1-12:00:00" "--time UNLIMITED" \
          "--mem 1024" "--mem 16G" "--sbatch=--qos=low" "--sbatch=--exclusive"; do
    # shellcheck disable=SC2086
    (cd "$T/w" && "$KV" slurm-script --shards 2 $ok -- "$T/bin/argdump" run --db res/x.db) >/dev/null 2>"$T/err" ||
        fail "slurm-script $ok: $(cat "$T/err")"
done

# hostile command arguments: every one as its own argument and as --question's text
args=(run --workload niah --question "${hostile[*]}")
for h in "${hostile[@]}"; do args+=(--needle "$h"); done
(cd "$T/w" && "$KV" slurm-script --shards 2 --partition p1 --account a1 --mem 1G --time 10 --sbatch=--qos=low \
    --out "$T/job.sh" -- "$T/bin/argdump" "${args[@]}" --db res/x.db) 2>"$T/err" || fail "slurm-script: $(cat "$T/err")"
bash -n "$T/job.sh" || fail "the script is not valid bash"
# sbatch reads #SBATCH lines up to the first line that is not a comment
first=$(grep -nv '^#' "$T/job.sh" | head -1 | cut -d: -f1)
[ "$(sed -n "${first}p" "$T/job.sh")" = "set -euo pipefail" ] ||
    fail "a line before the script's first command is not a comment: $(sed -n "${first}p" "$T/job.sh")"
head -n "$first" "$T/job.sh" | grep -qx '#SBATCH --array=0-1' || fail "--array is not among the header's #SBATCH lines"
[ "$(grep -c '^#SBATCH --array' "$T/job.sh")" = 1 ] || fail "an argument wrote an #SBATCH line"

# same FILE EXPECTED...: the NUL-separated arguments in FILE are EXPECTED, byte for byte
same() {
    local file=$1
    shift
    cmp -s "$file" <(printf '%s\0' "$@") || fail "$file: the arguments do not round-trip: $(tr '\0' '|' <"$file" | head -c 600)"
}
# an array task, as SLURM starts it
(cd "$T/w" && SLURM_ARRAY_TASK_ID=1 SLURM_JOB_ID=7 bash "$T/job.sh") >/dev/null 2>"$T/err" ||
    fail "array task: $(cat "$T/err")"
same "$ARGS_OUT" "${args[@]}" --db res/x.shard-1-of-2.db --shard 1/2
# the submission: the array, then the merge job with the SLURM values and its --wrap line
(cd "$T/w" && PATH=$T/bin:$PATH bash "$T/job.sh") >"$T/out" 2>"$T/err" || fail "submission: $(cat "$T/err")"
grep -q "submitted array job 100 (2 shards) and merge job 101" "$T/out" || fail "submission: $(cat "$T/out")"
same "$SBATCH_LOG.0" --parsable "$T/job.sh"
wrap=$(tr '\0' '\n' <"$SBATCH_LOG.1" | sed -n 's/^--wrap=//p')
same "$SBATCH_LOG.1" --parsable --dependency=afterok:100 --kill-on-invalid-dep=yes --job-name=kvbench-x-merge \
    --output=res/x.merge.log --partition=p1 --account=a1 --mem=1G --chdir="$T/w" --wrap="$wrap"
(cd "$T/w" && sh -c "$wrap")
same "$ARGS_OUT" merge res/x.db 'res/x.shard-*-of-2.db'

# a plugin path with ':' (built from the example plugin against the source tree's headers)
mkdir -p "$T/p:q" "$T/pq"
if cc -std=c11 -D_GNU_SOURCE -fPIC -shared -I. -o "$T/p:q/rk.so" examples/plugin/randomkeep.c 2>"$T/cc"; then
    cp "$T/p:q/rk.so" "$T/pq/rk.so"
    rc=0
    "$KVBENCH" --plugin "$T/p:q/rk.so" slurm-script --shards 2 --out "$T/plug.sh" -- "$KVBENCH" run --db "$T/w/res/p.db" \
        >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF -- "--plugin '$T/p:q/rk.so': the path contains ':'" "$T/err" \
        || fail "a plugin path with ':': exit $rc, $(cat "$T/err")"
    [ ! -e "$T/plug.sh" ] || fail "a plugin path with ':' still wrote the script"
    "$KVBENCH" --plugin "$T/pq/rk.so" slurm-script --shards 2 --out "$T/plug.sh" -- "$KVBENCH" run --db "$T/w/res/p.db" \
        >"$T/out" 2>"$T/err" || fail "a plugin path without ':': $(cat "$T/err")"
    grep -qx "export KVBENCH_PLUGINS='$(realpath "$T/pq/rk.so")'" "$T/plug.sh" \
        || fail "the plugin is not in KVBENCH_PLUGINS: $(grep KVBENCH_PLUGINS "$T/plug.sh")"
else
    fail "the example plugin did not build: $(cat "$T/cc")"
fi

pw=$(ls "$T" | grep '^pw' || true)
[ -z "$pw" ] || fail "an argument ran as a command: $pw"
[ $fails = 0 ] && echo "test_slurm_script.sh: all checks passed"
exit $((fails > 0))
