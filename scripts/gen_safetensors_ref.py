#!/usr/bin/env python3
"""gen_safetensors_ref.py — writes the golden files of tests/data/safetensors/.

How to run (from the repository root; the output is deterministic):

    python3 -m venv /tmp/st-venv && /tmp/st-venv/bin/pip install safetensors numpy
    /tmp/st-venv/bin/python scripts/gen_safetensors_ref.py

The .safetensors files are written by the safetensors package itself (its
numpy front end, and its serialize() for BF16, which numpy lacks), so they
are an independent reference for kvik's reader (src/convert/safetensors.c).
EXPECTED lists, tab-separated, what each file holds:

    tensor  FILE  NAME  DTYPE  SHAPE  NBYTES  SHA256  FIRST
    meta    FILE  KEY   VALUE
    count   FILE  N_TENSORS  N_METADATA

SHAPE is the dimensions joined by 'x' ("-" for a scalar); SHA256 is that of
the tensor's bytes; FIRST is its first element as a decimal number
(float repr) or "-" for an empty tensor. tests/test_safetensors.c compares
everything. The fuzzer's seeds are copies of these files.
"""
import hashlib
import os

import numpy as np
import safetensors
from safetensors import TensorSpec, serialize
from safetensors.numpy import load

OUT = "tests/data/safetensors"
SEEDS = "tests/fuzz/seeds/fuzz_safetensors"


def bf16_bytes(values):
    """float32 values rounded to bfloat16 (nearest even), little-endian bytes."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()


def entry(arr):
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.tobytes()}


FILES = {
    "basic.safetensors": (
        {
            "weight": entry(np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1.25),
            "half": entry(np.array([1.0, -2.5, 65504.0, 6.1e-5], dtype="<f2")),
            "bf": {"dtype": "bfloat16", "shape": [2, 2],
                   "data": bf16_bytes([3.140625, -0.5, 1e10, 7.0])},
            "ids": entry(np.array([-7, 0, 2147483647], dtype="<i4")),
        },
        {"format": "pt", "note": "caf\u00e9 \u2713 \U0001f600 \"quoted\""},
    ),
    "shapes.safetensors": (
        {
            "scalar": entry(np.array(42.5, dtype="<f4")),
            "empty": entry(np.zeros((0, 3), dtype="<i8")),
            "bytes": entry(np.arange(5, dtype="u1")),
            "doubles": entry(np.array([1.0 / 3.0, -1e300], dtype="<f8")),
            "flags": entry(np.array([True, False, True])),
            "small": entry(np.array([-128, 127], dtype="i1")),
            "shorts": entry(np.array([-32768, 5, 32767], dtype="<i2")),
            "cube": entry(np.arange(24, dtype="<f4").reshape(2, 3, 4)),
            "a.b/c d": entry(np.array([9], dtype="<i4")),
        },
        None,
    ),
    "empty.safetensors": ({}, None),
}

DTYPE = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "int32": "I32",
         "int64": "I64", "uint8": "U8", "float64": "F64", "bool": "BOOL",
         "int8": "I8", "int16": "I16"}


def first_value(e):
    if not e["data"]:
        return "-"
    if e["dtype"] == "bfloat16":
        u = int.from_bytes(e["data"][:2], "little") << 16
        return repr(float(np.array([u], dtype="<u4").view("<f4")[0]))
    v = np.frombuffer(e["data"], dtype=np.dtype(e["dtype"]).newbyteorder("<"))[0]
    if e["dtype"] == "bool":
        return "1" if v else "0"
    if e["dtype"].startswith("float"):
        return repr(float(v))
    return str(int(v))


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(SEEDS, exist_ok=True)
    lines = ["# written by scripts/gen_safetensors_ref.py with safetensors %s, numpy %s"
             % (safetensors.__version__, np.__version__)]
    for fname, (tensors, meta) in FILES.items():
        keep = []  # the buffers the specs point into, alive until serialize returns
        specs = {}
        for name, e in tensors.items():
            buf = np.frombuffer(bytearray(e["data"]) or bytearray(1), dtype=np.uint8)
            keep.append(buf)
            specs[name] = TensorSpec(dtype=e["dtype"], shape=e["shape"],
                                     data_ptr=buf.ctypes.data, data_len=len(e["data"]))
        blob = bytes(serialize(specs, metadata=meta))
        # The golden copy as hex text (tests/test_safetensors.c decodes it);
        # the fuzz seed as the bytes themselves, named without the extension.
        hexed = blob.hex()
        with open(os.path.join(OUT, fname + ".hex"), "w") as f:
            f.write("\n".join(hexed[i:i + 64] for i in range(0, len(hexed), 64)) + "\n")
        with open(os.path.join(SEEDS, fname[:-len(".safetensors")]), "wb") as f:
            f.write(blob)
        # Read back with the reference loader (numpy has no bfloat16).
        if all(e["dtype"] != "bfloat16" for e in tensors.values()):
            back = load(blob)
            assert sorted(back) == sorted(tensors)
        lines.append("count\t%s\t%d\t%d" % (fname, len(tensors), len(meta or {})))
        for name in sorted(tensors):
            e = tensors[name]
            shape = "x".join(str(d) for d in e["shape"]) or "-"
            lines.append("tensor\t%s\t%s\t%s\t%s\t%d\t%s\t%s" % (
                fname, name, DTYPE[e["dtype"]], shape, len(e["data"]),
                hashlib.sha256(e["data"]).hexdigest(), first_value(e)))
        for k in sorted(meta or {}):
            lines.append("meta\t%s\t%s\t%s" % (fname, k, meta[k]))
    with open(os.path.join(OUT, "EXPECTED"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
