#!/usr/bin/env bash
# Bad input, as a careless or hostile user gives it (issue 14): each case asserts the
# exit code, exactly one stderr line matching what is wrong, and that the results file
# every case points at is unchanged (sqlite3 .dump before and after). Then the
# behaviours the same issue fixed: a plot --out with a newline runs nothing, read-only
# results files are readable, two identical runs both succeed, a foreign SQLite file is
# left alone, train-sekv refuses a bad --out at once.
set -u
cd "$(dirname "$0")/.."
KVBENCH=${KVBENCH:-./kvbench}
KV=$(realpath "$KVBENCH")
dir=$(mktemp -d /tmp/kvbench_bad_XXXXXX)
chmod 755 "$dir"
trap 'chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
MODEL_FILE=${KVBENCH_MODEL:-${KVBENCH_CACHE:-$HOME/.cache/kvbench}/SmolLM2-135M-Instruct.Q4_1.gguf}

SHAPE=(--layers 2 --heads 2 --kv-heads 1 --head-dim 16 --steps 2 --depths 0.5 --quiet)
ref=$dir/ref.db
"$KV" run --workload synthetic-niah --methods fullkv,snapkv --ctx 64 "${SHAPE[@]}" --db "$ref" >/dev/null 2>&1 ||
    { echo "FAIL: cannot make the reference results file"; exit 1; }
dump() { sqlite3 "$1" .dump | sha256sum; }
ref_dump=$(dump "$ref")

# case NAME EXPECTED_RC 'STDERR REGEX' COMMAND...
case_() {
    local name=$1 want_rc=$2 want=$3
    shift 3
    local err=$dir/stderr rc
    (cd "$dir" && timeout 60 "$@") >/dev/null 2>"$err"
    rc=$?
    local lines; lines=$(wc -l <"$err")
    if [ "$rc" != "$want_rc" ]; then fail "$name: exit $rc, want $want_rc ($(head -c 300 "$err"))"
    elif [ "$lines" != 1 ]; then fail "$name: $lines stderr lines, want 1: $(head -c 600 "$err")"
    elif ! grep -Eq -- "$want" "$err"; then fail "$name: stderr '$(cat "$err")' does not match '$want'"
    else echo "ok   $name: $(cat "$err")"
    fi
    [ "$(dump "$ref")" = "$ref_dump" ] || { fail "$name: the results file changed"; ref_dump=$(dump "$ref"); }
}

printf 'abc \xff\xfe def. ' >"$dir/latin1.txt"
sqlite3 "$dir/foreign.db" "CREATE TABLE t(x); INSERT INTO t VALUES (1);"
foreign_dump=$(dump "$dir/foreign.db")
long=$dir/$(for i in $(seq 40); do printf 'abcdefghijk/'; done)x.db
NL=$'\n'

# item 4: control characters in plot paths
case_ "plot --out with a newline" 2 "--out contains a control character \(byte 0x0a" \
    "$KV" plot --db ref.db --out "p${NL}system('touch pwned')${NL}#"
case_ "plot --variant with a CR" 2 "--variant contains a control character \(byte 0x0d" \
    "$KV" plot --db "$ref" --variant $'single\r'
# item 6: train-sekv --out checked before anything is loaded
case_ "train-sekv --out in a missing directory" 2 "--out $dir/nope/p.params: cannot write there: No such file" \
    "$KV" train-sekv --corpus "$dir" --out "$dir/nope/p.params"
case_ "train-sekv --out a directory" 2 "--out $dir: is a directory" "$KV" train-sekv --corpus "$dir" --out "$dir"
# item 7: a context the machine cannot hold
case_ "synthetic --ctx 4000000" 2 "--ctx 4000000: a synthetic case needs about [0-9.]+ GiB .*more than this machine's" \
    "$KV" run --ctx 4000000 --db "$ref"
# issue 27 item 13: a context that fits the machine but not the limit the process runs under
if grep -aq "SAN=1" "$KV"; then echo "skip synthetic --ctx 4000000 under ulimit -v: a sanitizer build cannot start under ulimit -v"; else
case_ "synthetic --ctx 4000000 under ulimit -v" 2 "--ctx 4000000: a synthetic case needs about [0-9.]+ GiB .*more than the [0-9.]+ GiB of address space left under ulimit -v" \
    bash -c 'ulimit -v 1200000; exec "$0" "$@"' "$KV" run --ctx 4000000 --layers 2 --heads 2 --kv-heads 1 --head-dim 16 --db "$ref"
fi
# item 8: someone else's SQLite file
case_ "run --db on a foreign SQLite file" 1 "not a kvbench results file \(an SQLite file with other tables\)" \
    "$KV" run --ctx 64 "${SHAPE[@]}" --db "$dir/foreign.db"
[ "$(dump "$dir/foreign.db")" = "$foreign_dump" ] || fail "the foreign file changed"
# item 10: messages that say what is wrong
case_ "unknown flag in last position" 2 "unknown option '--bogus'" "$KV" run --db "$ref" --bogus
case_ "unknown flag last, model run" 2 "unknown option '--bogus'" "$KV" run --workload niah --db "$ref" --bogus
case_ "known flag without its value" 2 "^kvbench run: --ctx needs a value$" "$KV" run --db "$ref" --ctx
case_ "unknown synthetic workload before a text-only flag" 2 "--workload 'synthetic-foo': unknown workload" \
    "$KV" run --workload synthetic-foo --limit 3 --db "$ref"
case_ "text-only flag in a synthetic run" 2 "--limit applies to text workloads" \
    "$KV" run --workload synthetic-niah --limit 3 --db "$ref"
case_ "text workload mixed into a synthetic run" 2 "'niah' is a text workload; synthetic and text workloads go in separate runs" \
    "$KV" run --workload synthetic-niah,niah --db "$ref"
# issue 27 item 5: a task of the benchmark that kvbench does not run is refused by name, with why
case_ "unsupported LongBench task" 2 "longbench: task 'dureader' is not supported: Chinese; scored by rouge_zh_score, which segments words with jieba" \
    "$KV" run --workload longbench:"$dir" --tasks narrativeqa,dureader --db "$ref"
case_ "unsupported InfiniteBench task" 2 "infinitebench: task 'Math.Calc' is not supported: it generates up to 30000 tokens" \
    "$KV" run --workload infinitebench:"$dir" --tasks Math.Calc --db "$ref"
case_ "long --db path keeps its reason" 1 "\.\.\..*/x\.db': its directory does not exist$" \
    "$KV" run --ctx 64 "${SHAPE[@]}" --db "$long"
case_ "long --db path, report" 1 "\.\.\..*/x\.db': no such file$" "$KV" report --db "$long"
if [ -f "$MODEL_FILE" ]; then
    # issue 27 item 19: a setting sekv refuses is a usage error
    case_ "sekv-probe --params zoom=abc" 2 "--params \"zoom=abc\": sekv: parameter zoom='abc' is not an integer" \
        "$KV" sekv-probe --params zoom=abc
    case_ "sekv-probe --params route=3" 2 "--params \"route=3\": sekv: route must be 0, 1 or 2 \(the diagnostic oracle\)" \
        "$KV" sekv-probe --params route=3
    case_ "non-UTF-8 haystack" 1 "latin1.txt: not UTF-8 text \(byte 0xff at offset 4\)" \
        "$KV" run --workload niah --haystack "$dir/latin1.txt" --ctx 1024 --depths 50 --methods fullkv --db "$ref"
else
    echo "SKIP non-UTF-8 haystack: no model"
fi
# our own
case_ "report on a text file" 1 "not a kvbench results file: file is not a database" "$KV" report --db "$dir/latin1.txt"
case_ "report on a missing file" 1 "'$dir/missing.db': no such file" "$KV" report --db "$dir/missing.db"
case_ "report on a missing run" 1 "has no run 999" "$KV" report --db "$ref" --run 999
case_ "report --table unknown" 2 "unknown --table 'bogus'" "$KV" report --db "$ref" --table bogus
case_ "report --base with a bad budget" 2 "the budget after @ is not a positive number" "$KV" report --db "$ref" --table compare --base snapkv@0x
case_ "report --base with bad settings" 2 "the settings after : are not KEY=VALUE" "$KV" report --db "$ref" --table compare --base snapkv:window
case_ "report --base with settings no run has" 1 "no results of snapkv at each row's budget with window=999 in this run" \
    "$KV" report --db "$ref" --table compare --base snapkv:window=999
case_ "plot --figure unknown" 2 "--figure 'bogus' is unknown" "$KV" plot --db "$ref" --figure bogus
case_ "run --budget 0" 2 "--budget '0': expected a fraction" "$KV" run --budget 0 --db "$ref"
case_ "run --ctx 8" 2 "--ctx '8': expected an integer in 16..4194304" "$KV" run --ctx 8 --db "$ref"
# issue 27 item 20: the range a synthetic --ctx takes; an unknown workload before the options it lacks
case_ "run --ctx abc" 2 "^kvbench run: --ctx 'abc': expected an integer in 16..4194304$" "$KV" run --ctx abc --db "$ref"
case_ "run --ctx too large" 2 "--ctx '5000000': expected an integer in 16..4194304" "$KV" run --ctx 5000000 --db "$ref"
case_ "unknown workload with --layers" 2 "--workload 'nosuch': unknown workload" \
    "$KV" run --workload nosuch --layers 2 --db "$ref"
case_ "--layers in a model run" 2 "--layers applies to the synthetic workloads" "$KV" run --workload niah --layers 2 --db "$ref"
case_ "run --params unknown method" 2 "--params: unknown method 'nosuch'" "$KV" run --params nosuch:x=1 --db "$ref"
case_ "run --params unknown key" 2 "snapkv: unknown parameter 'bogus'" "$KV" run --params snapkv:bogus=1 --db "$ref"
case_ "run --heads not a multiple" 2 "--heads 3 is not a multiple of --kv-heads 2" "$KV" run --heads 3 --kv-heads 2 --db "$ref"
case_ "run --seed negative" 2 "--seed '-1': expected an integer in 0..9223372036854775807" "$KV" run --seed -1 --db "$ref"
case_ "run --db a directory" 1 "is a directory, not a results file" "$KV" run --ctx 64 "${SHAPE[@]}" --db "$dir"
case_ "train-sekv --steps abc" 2 "--steps 'abc': expected an integer" "$KV" train-sekv --steps abc --out "$dir/p.params"
case_ "train-sekv --l-max below l_min" 2 "--l-max '3': expected none or an integer in 4..4096" "$KV" train-sekv --l-max 3 --out "$dir/p.params"
case_ "train-sekv --lambda-order negative" 2 "--lambda-order '-0.5': expected a number in 0..100" "$KV" train-sekv --lambda-order -0.5 --out "$dir/p.params"
case_ "train-sekv --held-out too many" 2 "--held-out 30: needs at least twice as many documents \(--max-docs 40\)" \
    "$KV" train-sekv --held-out 30 --out "$dir/p.params"
# issue 27 item 14: a corpus document that is not text is refused by name before training
mkdir -p "$dir/corp_bin" "$dir/corp_l1"
head -c 6000 tests/test_run.sh >"$dir/corp_bin/a.txt"; cp "$dir/corp_bin/a.txt" "$dir/corp_l1/a.txt"
head -c 6000 /dev/urandom >"$dir/corp_bin/b.txt"
printf '\x00' | dd of="$dir/corp_bin/b.txt" bs=1 seek=1 conv=notrunc 2>/dev/null
cp "$dir/latin1.txt" "$dir/corp_l1/b.txt"
TS=(--model random:smollm2-135m --steps 1 --max-docs 2 --ctx 256 --candidates 4 --keep 2 --cache none --threads 2)
case_ "train-sekv on a binary corpus file" 1 "corp_bin/b.txt: contains a NUL byte: not a text document" \
    "$KV" train-sekv --corpus "$dir/corp_bin" --out "$dir/bin.params" "${TS[@]}"
case_ "train-sekv on a latin1 corpus file" 1 "corp_l1/b.txt: not UTF-8 text \(byte 0xff at offset 4\)" \
    "$KV" train-sekv --corpus "$dir/corp_l1" --out "$dir/l1.params" "${TS[@]}"
[ ! -e "$dir/bin.params" ] && [ ! -e "$dir/l1.params" ] || fail "train-sekv wrote params from a corpus that is not text"
case_ "methods --bogus" 2 "unknown option '--bogus'" "$KV" methods --bogus
case_ "info on a missing model" 2 "no model at $dir/none.gguf" "$KV" info --model "$dir/none.gguf"
case_ "info on a text file" 2 "latin1.txt" "$KV" info --model "$dir/latin1.txt"
case_ "unknown command" 2 "unknown command 'frobnicate'" "$KV" frobnicate
# issue 27 item 12: SLURM values that would run in the script (tests/test_slurm_script.sh: all)
case_ "slurm-script --partition with ;" 2 "--partition 'x;touch\\$\{IFS\}X;': not a SLURM partition name" \
    "$KV" slurm-script --shards 2 --partition 'x;touch${IFS}X;' -- kvbench run --db r.db
case_ "slurm-script --account with \$()" 2 "--account '\\$\(touch\\$\{IFS\}X\)': not a SLURM account name" \
    "$KV" slurm-script --shards 2 --account '$(touch${IFS}X)' -- kvbench run --db r.db
case_ "slurm-script --partition with a newline" 2 "--partition 'a\\\\nb': not a SLURM partition name" \
    "$KV" slurm-script --shards 2 --partition $'a\nb' -- kvbench run --db r.db
case_ "slurm-script --time not a time" 2 "--time '1h': expected a SLURM time limit" \
    "$KV" slurm-script --shards 2 --time 1h -- kvbench run --db r.db
# issue 36: gnuplot runs an output name starting with | (or <) as a command
case_ "plot --out with a pipe" 2 "--out '\\|touch pwned3': expected a plain file path" \
    "$KV" plot --db "$ref" --out '|touch pwned3'
case_ "plot --out with an input pipe" 2 "--out '<touch pwned3': expected a plain file path" \
    "$KV" plot --db "$ref" --out '<touch pwned3'
case_ "plot --out with a space and a pipe" 2 "--out '  \\|touch pwned3': expected a plain file path" \
    "$KV" plot --db "$ref" --out '  |touch pwned3'
case_ "plot --out empty" 2 "--out '': expected a plain file path" "$KV" plot --db "$ref" --out ''
[ -e "$dir/pwned3" ] && fail "plot --out '|cmd' ran the command"
# issue 36: sekv-probe values whose conversion to int overflowed (UBSan), a params file
# that is a device (read until memory ran out, then a table of NaNs and exit 0)
case_ "sekv-probe --ctx 1e30" 2 "--ctx '1e30': expected up to 16 comma-separated whole numbers in 1..1048576" \
    "$KV" sekv-probe --ctx 1e30 --params ''
case_ "sekv-probe --ctx 768.5" 2 "--ctx '768.5': expected up to 16 comma-separated whole numbers" \
    "$KV" sekv-probe --ctx 768.5 --params ''
case_ "sekv-probe --budget 1e30" 2 "--budget '1e30': expected a fraction in \(0,1\] or a whole token count up to 1048576" \
    "$KV" sekv-probe --budget 1e30 --params ''
case_ "sekv-probe --budget inf" 2 "--budget 'inf': expected a fraction in \(0,1\] or a whole token count" \
    "$KV" sekv-probe --budget inf --params ''
case_ "sekv-probe --depths 101" 2 "--depths '101': expected up to 16 comma-separated numbers in 0..100" \
    "$KV" sekv-probe --depths 101 --params ''
if [ -f "$MODEL_FILE" ]; then
    case_ "sekv-probe params_file=/dev/zero" 2 "--params \"params_file=/dev/zero\": sekv: /dev/zero: cannot open SeKV params: not a regular file" \
        "$KV" sekv-probe --model "$MODEL_FILE" --ctx 300 --params params_file=/dev/zero
    mkfifo "$dir/fifo"
    case_ "sekv-probe params_file=FIFO" 2 "sekv: $dir/fifo: cannot open SeKV params: not a regular file" \
        "$KV" sekv-probe --model "$MODEL_FILE" --ctx 300 --params "params_file=$dir/fifo"
fi

# item 4: nothing ran, no script was written
[ -e "$dir/pwned" ] && fail "plot --out with a newline ran gnuplot commands"
ls "$dir"/p* 2>/dev/null | grep -q '\.gp' && fail "plot --out with a newline wrote a script"
# ... and a hostile method name inside a results file never leaves a comment line
cp "$ref" "$dir/hostile.db"
sqlite3 "$dir/hostile.db" "UPDATE results SET method = 'snapkv' || char(10) || 'system(\"touch $dir/pwned2\")' WHERE method = 'snapkv';"
if command -v gnuplot >/dev/null; then
    (cd "$dir" && "$KV" plot --db hostile.db --figure budget --out hostile >/dev/null 2>&1)
    [ -e "$dir/pwned2" ] && fail "a method name from the results file ran as gnuplot"
    grep -q '^system' "$dir/hostile.gp" "$dir/hostile.dat" 2>/dev/null && fail "a method name broke a line of the script"
fi

# issue 27 item 11: backquotes run a command inside a gnuplot double-quoted string. Every
# text column of a results file (someone else's file is enough) in turn holds one, with a
# ' " \ and @ beside it, and every figure is drawn from it with the real gnuplot: no
# command runs, and the figures a hostile model name reaches are still drawn.
if command -v gnuplot >/dev/null; then
    mkdir -p "$dir/gq"
    "$KV" run --workload synthetic-niah --methods fullkv,snapkv,sekv --ctx 64,96 --budget 0.25,0.5 "${SHAPE[@]}" \
        --db "$dir/gq/base.db" >/dev/null 2>&1 || fail "item 11: cannot make the results file"
    cols=$(for t in runs cases results; do
        sqlite3 "$dir/gq/base.db" "SELECT '$t.' || name FROM pragma_table_info('$t') WHERE type = 'TEXT'"; done)
    [ "$(wc -w <<<"$cols")" -ge 15 ] || fail "item 11: only $(wc -w <<<"$cols") text columns found"
    drawn=0
    for tc in $cols; do
        t=${tc%.*} c=${tc#*.} db=$dir/gq/$tc.db
        cp "$dir/gq/base.db" "$db"
        sqlite3 "$db" "UPDATE $t SET $c = coalesce($c, '') || 'x\`touch $dir/gq/pw-$tc\`'' \" \\ @c y'" 2>/dev/null || continue
        for fig in niah memory latency budget zoom; do
            (cd "$dir/gq" && "$KV" plot --db "$db" --figure $fig --out "$tc-$fig" >/dev/null 2>&1) &&
                [ "$tc" = runs.model ] && drawn=$((drawn + 1))
        done
    done
    (cd "$dir/gq" && "$KV" plot --db base.db --figure budget --variant "x\`touch $dir/gq/pw-variant\`" --out v >/dev/null 2>&1)
    pw=$(cd "$dir/gq" && ls -d pw-* 2>/dev/null | tr '\n' ' ')
    [ -z "$pw" ] && echo "ok   no text column of a results file runs a gnuplot command ($(wc -w <<<"$cols") columns)" ||
        fail "item 11: text from a results file ran as a command: $pw"
    [ "$drawn" -ge 4 ] || fail "item 11: only $drawn figures drawn with a hostile runs.model"
    # a model file whose name holds one, through sim --out, then plot --figure memory
    if [ -f "$MODEL_FILE" ]; then
        ln -s "$MODEL_FILE" "$dir/gq/m\`touch pw-model\`.gguf"
        (cd "$dir/gq" && "$KV" sim --model "m\`touch pw-model\`.gguf" --ctx 1K --methods fullkv,snapkv --out sim.db --quiet \
            >/dev/null 2>&1 && "$KV" plot --db sim.db --figure memory --out simmem >/dev/null 2>&1) ||
            fail "item 11: sim and plot of a model with a backquote in its name failed"
        [ -e "$dir/gq/pw-model" ] && fail "item 11: a model file's name ran as a gnuplot command"
        [ -s "$dir/gq/simmem.png" ] && grep -qF 'model m`touch pw-model`.gguf' "$dir/gq/simmem.gp" ||
            fail "item 11: the model's name is not in the figure's title"
    fi
fi

# issue 27 item 18: merging a file with a result that no plan lists is not "complete"
"$KV" run --workload synthetic-niah --methods fullkv --ctx 64 "${SHAPE[@]}" --db "$dir/shard.db" >/dev/null 2>&1
"$KV" run --workload synthetic-niah --methods fullkv,snapkv --ctx 64 "${SHAPE[@]}" --db "$dir/extra.db" >/dev/null 2>&1
sqlite3 "$dir/extra.db" "DELETE FROM plan WHERE method = 'snapkv'"
rc=0
"$KV" merge "$dir/merged.db" "$dir/shard.db" "$dir/extra.db" >"$dir/merge.out" 2>&1 || rc=$?
if [ $rc = 3 ] && grep -q "1 results no plan lists (e.g. .* snapkv @ 0.1), so not complete" "$dir/merge.out" &&
   ! grep -q ", complete$" "$dir/merge.out"; then echo "ok   merge flags a result no plan lists (exit 3)"
else fail "merge of an unplanned result: exit $rc: $(cat "$dir/merge.out")"; fi

# item 5: a WAL-mode results file in a directory the reader cannot write
mkdir -p "$dir/ro"
"$KV" run --workload synthetic-niah --methods fullkv --ctx 64 "${SHAPE[@]}" --db "$dir/ro/r.db" >/dev/null 2>&1
sqlite3 "$dir/ro/r.db" "PRAGMA journal_mode=WAL;" >/dev/null      # as main left files: WAL mode, no -wal
[ "$(od -An -tu1 -j18 -N1 "$dir/ro/r.db" | tr -d ' ')" = 2 ] || fail "setup: the file is not in WAL mode"
chmod 555 "$dir/ro"
as_reader() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
if out=$(as_reader "$KV" report --db "$dir/ro/r.db" 2>&1) && grep -q '| fullkv |' <<<"$out"; then
    echo "ok   report on a WAL file in a read-only directory"
else
    fail "report on a WAL file in a read-only directory: $out"
fi
if as_reader "$KV" report --db "$dir/ro/r.db" --table memory >/dev/null 2>&1; then echo "ok   report --table memory, read-only"
else fail "report --table memory on a read-only directory"; fi
# a file kvbench closed is left readable without a writable directory
chmod 755 "$dir/ro"
"$KV" run --workload synthetic-niah --methods snapkv --ctx 64 "${SHAPE[@]}" --db "$dir/ro/r.db" >/dev/null 2>&1
[ "$(od -An -tu1 -j18 -N1 "$dir/ro/r.db" | tr -d ' ')" = 1 ] || fail "kvbench left the closed file in WAL mode"
chmod 555 "$dir/ro"

# item 8: two identical runs on one file at once both succeed, each result once
both=$dir/both.db
args=(run --workload synthetic-niah,synthetic-multikey --methods all --ctx 64,96 --budget 0.25,0.5 "${SHAPE[@]}" --db "$both")
"$KV" "${args[@]}" >"$dir/o1" 2>&1 & p1=$!
"$KV" "${args[@]}" >"$dir/o2" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
[ $r1 = 0 ] && [ $r2 = 0 ] || fail "two identical runs: exits $r1 and $r2: $(cat "$dir/o1" "$dir/o2" | grep -v '^$' | tail -3)"
n=$(sqlite3 "$both" "SELECT count(*) FROM results")
u=$(sqlite3 "$both" "SELECT count(*) FROM (SELECT DISTINCT case_id, method, budget FROM results)")
[ "$n" = "$u" ] && [ "$n" -gt 0 ] || fail "two identical runs: $n results, $u distinct"
echo "ok   two identical runs at once: both exit 0, $n results"

# issue 24: Hugging Face directories (written here by hand; test_hf_model.sh has more)
hf=$dir/hf
mkdir -p "$hf"
cfg='"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_hidden_layers": 2,
     "max_position_embeddings": 512, "vocab_size": 300, "rms_norm_eps": 1e-5'
printf '{"architectures": ["GPT2LMHeadModel"], %s}' "$cfg" >"$hf/config.json"
case_ "HF directory of another architecture" 2 "$hf/config.json: field 'architectures' = 'GPT2LMHeadModel' is not supported" \
    "$KV" info --model "$hf"
printf '{"architectures": ["LlamaForCausalLM"], %s, "rope_scaling": {"rope_type": "dynamic", "factor": 2}}' "$cfg" \
    >"$hf/config.json"
case_ "HF rope_type dynamic" 2 "$hf/config.json: field 'rope_scaling.rope_type' = 'dynamic' is not supported" \
    "$KV" run --workload niah --model "$hf" --db "$ref"
printf '{"architectures": ["LlamaForCausalLM"], %s}' "$cfg" >"$hf/config.json"
printf '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}' >"$hf/tokenizer.json"
case_ "HF WordPiece tokenizer.json" 2 "$hf/tokenizer.json: field 'model.type' = 'WordPiece' is not supported \(BPE\)" \
    "$KV" info --model "$hf"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}' \
    >"$hf/tokenizer.json"
printf '{"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}}' >"$hf/model.safetensors.index.json"
case_ "HF missing shard" 2 "$hf/model-00002-of-00002.safetensors: cannot open: No such file or directory \(a shard" \
    "$KV" info --model "$hf"
rm "$hf/model.safetensors.index.json"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": 1}        ' >"$hf/model.safetensors"
case_ "HF safetensors header" 2 "$hf/model.safetensors: tensor a: header entry needs dtype, shape and data_offsets" \
    "$KV" info --model "$hf"

[ $fails -eq 0 ] && echo "all bad-input cases passed"
exit $((fails > 0))
