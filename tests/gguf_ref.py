#!/usr/bin/env python3
"""Compare the C GGUF reader and dequantizer (modes of build/tests/test_gguf) with the
`gguf` Python package (llama.cpp gguf-py), the reference of model-format.md section 6.

  1. A synthetic GGUF written by gguf.GGUFWriter: every kv value type, one tensor of
     every supported tensor type filled with random blocks (finite f16 scales). The C
     dump must equal the reader's, and C dequant must equal gguf.quants.dequantize.
  2. The real model (skipped, printing SKIP, only if the file is absent): the dump of
     all keys and tensor infos, dequantized rows of token_embd (Q8_0), Q4_1 weights and
     the F32 norms, and quant_dot of a Q4_1 matrix against float64 numpy.

usage: gguf_ref.py C_BINARY MODEL_PATH     (exit 1 on any mismatch)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

VNAME = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
         V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array", V.UINT64: "u64",
         V.INT64: "i64", V.FLOAT64: "f64"}
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL " + msg)


def py_dump(path):
    """The reader's view of the file in the C dumper's format."""
    r = gguf.GGUFReader(path)
    f = r.fields
    kvs = [(k, v) for k, v in f.items() if not k.startswith("GGUF.")]
    out = [f"version {f['GGUF.version'].parts[-1][0]}", f"n_kv {len(kvs)}", f"n_tensors {len(r.tensors)}",
           f"alignment {r.alignment}", f"data_start {r.data_offset}"]
    for key, fld in kvs:
        t = fld.types[0]
        if t == V.STRING:
            val = bytes(fld.parts[fld.data[0]]).hex()
        elif t != V.ARRAY:
            val = fld.parts[fld.data[0]].tobytes().hex()
        else:
            et = fld.types[1] if len(fld.types) > 1 else V.UINT8
            val = f"{VNAME[et]} {len(fld.data)}"
            if et == V.STRING:
                elems = [bytes(fld.parts[i]).hex() for i in fld.data]
            else:
                elems = [fld.parts[i].tobytes().hex() for i in fld.data]
            val += "".join(f"\n  [{j}] {e}" for j, e in enumerate(elems))
        out.append(f"kv {key} {VNAME[t]} {val}")
    for t in r.tensors:
        ne = [int(x) for x in t.shape] + [1] * (4 - len(t.shape))
        out.append(f"tensor {t.name} {t.tensor_type.name} {len(t.shape)} {ne[0]} {ne[1]} {ne[2]} {ne[3]} "
                   f"{t.data_offset - r.data_offset} {t.n_bytes}")
    return r, "\n".join(out).split("\n")


def c_run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)} failed: {p.stderr.decode(errors='replace')}")
    return p.stdout


def compare_dump(binary, path, label):
    r, want = py_dump(path)
    got = c_run(binary, "--dump", path).decode().splitlines()
    if got != want:
        for i, (a, b) in enumerate(zip(got, want)):
            if a != b:
                fail(f"{label}: dump line {i}: C '{a[:120]}' vs gguf '{b[:120]}'")
                break
        else:
            fail(f"{label}: dump has {len(got)} lines, gguf {len(want)}")
    else:
        print(f"ok   {label}: dump of {len(want)} lines (header, keys, values, array elements, tensor infos) identical")
    return r


def rows_of(t):
    return int(np.prod([int(x) for x in t.shape[1:]])) if len(t.shape) > 1 else 1


def compare_dequant(binary, path, t, r0, nr, label):
    ne0 = int(t.shape[0])
    got = np.frombuffer(c_run(binary, "--dequant", path, t.name, str(r0), str(nr)), dtype="<f4").reshape(nr, ne0)
    data = t.data.reshape(rows_of(t), -1)[r0:r0 + nr]
    want = gguf.quants.dequantize(data, t.tensor_type).reshape(nr, ne0).astype(np.float32)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    nbits = int(np.sum(got.view(np.uint32) != want.view(np.uint32)))
    ok = np.all(np.isfinite(got)) and diff.max() <= 1e-6
    msg = f"{label}: {t.name} {t.tensor_type.name} rows [{r0}, {r0 + nr}) x {ne0}: max |diff| {diff.max():.3g}, " \
          f"{nbits} values not bit-identical"
    if ok:
        print("ok   " + msg)
    else:
        fail(msg)


def f16_fields(blocks, offsets, rng):
    """Overwrite the f16 fields at the given byte offsets with random finite f16."""
    for o in offsets:
        h = rng.integers(0, 65536, size=blocks.shape[0], dtype=np.uint16)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0xBFFF, h)   # exponent 31 -> finite
        blocks[:, o:o + 2] = h.astype("<u2").view(np.uint8).reshape(-1, 2)


def synthetic(binary, tmp, rng):
    path = os.path.join(tmp, "synthetic.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -30000)
    w.add_int32("t.i32", -123456)
    w.add_float32("t.f32", 3.25)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 2.5e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo\nworld")
    w.add_array("t.strs", ["", "a", "ünï", "x" * 300])
    w.add_array("t.ints", [1, -2, 3, 1 << 20])
    w.add_array("t.floats", [0.5, -1.25])
    layouts = {  # type: (block, bytes, offsets of f16 fields)
        Q.Q4_0: (32, 18, [0]), Q.Q4_1: (32, 20, [0, 2]), Q.Q5_0: (32, 22, [0]), Q.Q5_1: (32, 24, [0, 2]),
        Q.Q8_0: (32, 34, [0]), Q.Q4_K: (256, 144, [0, 2]), Q.Q5_K: (256, 176, [0, 2]),
        Q.Q6_K: (256, 210, [208]),
    }
    tensors = []
    for qt, (block, nbytes, offs) in layouts.items():
        rows, nb = 3, int(rng.integers(1, 5)) * (8 if block == 32 else 1)
        blocks = rng.integers(0, 256, size=(rows * nb, nbytes), dtype=np.uint8)
        f16_fields(blocks, offs, rng)
        w.add_tensor(f"q.{qt.name}", blocks.reshape(rows, nb * nbytes), raw_dtype=qt)
        tensors.append((f"q.{qt.name}", rows))
    w.add_tensor("f.F32", rng.standard_normal((2, 64)).astype(np.float32))
    w.add_tensor("f.F16", (rng.standard_normal((3, 32)) * 100).astype(np.float16))
    bf = rng.integers(0, 65536, size=(2, 48), dtype=np.uint16)
    bf = np.where((bf & 0x7F80) == 0x7F80, bf & 0xBFFF, bf)
    w.add_tensor("f.BF16", bf.astype("<u2").view(np.uint8).reshape(2, 96), raw_dtype=Q.BF16)
    tensors += [("f.F32", 2), ("f.F16", 3), ("f.BF16", 2)]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = compare_dump(binary, path, "synthetic")
    by_name = {t.name: t for t in r.tensors}
    for name, rows in tensors:
        compare_dequant(binary, path, by_name[name], 0, rows, "synthetic")


def real_model(binary, path, rng, tmp):
    r = compare_dump(binary, path, "model")
    t = {x.name: x for x in r.tensors}
    emb = t["token_embd.weight"]
    n_vocab = int(emb.shape[1])
    mid = int(rng.integers(16, n_vocab - 80))
    for r0, nr in [(0, 16), (mid, 64), (n_vocab - 16, 16)]:
        compare_dequant(binary, path, emb, r0, nr, "model")
    for name in ["blk.0.attn_q.weight", "blk.13.attn_k.weight", "blk.29.ffn_down.weight",
                 "blk.0.attn_norm.weight", "blk.17.ffn_norm.weight", "output_norm.weight"]:
        compare_dequant(binary, path, t[name], 0, rows_of(t[name]), "model")

    # quant_dot on every row of a Q4_1 matrix and of a slice of the Q8_0 embedding
    for name in ["blk.3.ffn_gate.weight", "blk.21.attn_output.weight"]:
        w = t[name]
        x = rng.standard_normal(int(w.shape[0])).astype(np.float32)
        xfile = os.path.join(tmp, "x.f32")
        x.tofile(xfile)
        got = np.frombuffer(c_run(binary, "--dot", path, name, xfile), dtype="<f4").astype(np.float64)
        W = gguf.quants.dequantize(w.data, w.tensor_type).astype(np.float64).reshape(rows_of(w), -1)
        ref = W @ x.astype(np.float64)
        mag = np.abs(W) @ np.abs(x.astype(np.float64))
        err = float(np.max(np.abs(got - ref) / mag))
        msg = f"model: quant_dot {name} ({w.tensor_type.name}, {rows_of(w)} rows): max error {err:.3g} of |W||x|"
        if err <= 1e-5:
            print("ok   " + msg)
        else:
            fail(msg)


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    binary, model = sys.argv[1], sys.argv[2]
    seed = int(os.environ.get("KVBENCH_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed} (KVBENCH_TEST_SEED to replay)")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="kvbench_gguf_ref_") as tmp:
        synthetic(binary, tmp, rng)
        if os.path.exists(model):
            real_model(binary, model, rng, tmp)
        else:
            print(f"SKIP real-model comparison: {model} not found (run `make model`)")
    print(f"gguf_ref: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
