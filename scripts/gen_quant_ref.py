#!/usr/bin/env python3
"""gen_quant_ref.py — writes the golden vectors of tests/data/quant_ref/.

How to run (from the repository root; the output is deterministic):

    pip install gguf numpy          # made with gguf 0.19.0, numpy 2.4
    python3 scripts/gen_quant_ref.py

This script is the only way the golden data is produced. It rewrites
tests/data/quant_ref/<TYPE>.qref for every type kvik converts, plus
tests/data/quant_ref/VERSIONS (the gguf / numpy versions used and each file's
SHA-256). The file format is described in tests/data/README.md.

What the files hold, per type:
  - a "dequantization" section: raw blocks (random bytes with edge cases:
    zero, negative, subnormal and largest half-float scales, all-zero and
    all-ones quant bytes) and the float32 values gguf-py's numpy
    dequantizer gives for them. gguf-py has no Q8_1 / Q8_K dequantizer, so
    for those two this script's own small numpy one is used (x = q * d).
  - a "quantization" section, for the types gguf-py can quantize (F32, F16,
    BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): float32 input rows of varied scale
    (1e-5 .. 1e4, zeros, constants, an outlier, exact ties) and the bytes
    gguf-py's quantizer writes for them.

tests/test_types.c checks kvik's to_float / from_float against these bit
for bit. Inputs avoid two spots where gguf-py and the C reference quantizers
(which kvik follows) differ: a block whose largest-magnitude weight is a
zero with its sign bit set (-0.0: gguf-py takes its sign, the C reference
does not), and signalling NaNs for F16 (numpy keeps them signalling).
"""

import hashlib
import os
import struct
import sys

import numpy as np

try:
    import gguf
    from gguf import quants as gq
    from gguf.constants import GGMLQuantizationType as T
except ImportError:  # pragma: no cover
    sys.exit("gen_quant_ref.py needs the gguf package: pip install gguf numpy")

SEED = 20240607
MAGIC = b"KVQR"
VERSION = 1
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant_ref")

# name -> (ggml id, block size, bytes per block). Taken from ggml's block
# structs; gguf-py's GGML_QUANT_SIZES says 40 bytes for Q8_1, which is wrong
# (d and s are halves: 2 + 2 + 32 = 36), so the table is spelled out here.
TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "BF16": (30, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "Q8_K": (15, 256, 292),
}

# Byte offsets of the half-float scale fields of each block type.
HALF_FIELDS = {
    "Q4_0": [0],
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "Q8_1": [0],  # s (offset 2) is derived from d and the quants
    "Q2_K": [80, 82],
    "Q3_K": [108],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
}

# Blocks in the dequantization section: a few hundred for the small legacy
# blocks, fewer for the 256-weight K-quants (1 KiB of floats each) to keep
# the whole directory small.
N_BLOCKS_LEGACY = 160
N_BLOCKS_K = 32
N_VALUES_FLOAT = 4096

# Edge-case half scales: +-0, smallest and largest subnormal, smallest
# normal, +-1, largest finite (+-65504). Outputs stay finite.
EDGE_HALVES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF]


def random_halves(rng, n):
    """Half floats of random sign, magnitude log-uniform in [1e-4, 1e4]."""
    mag = np.exp(rng.uniform(np.log(1e-4), np.log(1e4), n))
    sign = rng.choice([-1.0, 1.0], n)
    return (mag * sign).astype(np.float16).view(np.uint16)


def put_half(block, off, h):
    block[off:off + 2] = np.frombuffer(struct.pack("<H", int(h)), dtype=np.uint8)


def make_blocks(rng, name, n_blocks):
    """Random blocks of a quantized type, the first ones being edge cases."""
    _, bs, ts = TYPES[name]
    blocks = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    if name == "Q8_K":
        return make_q8_K_blocks(rng, blocks)
    fields = HALF_FIELDS[name]
    is_scale = np.zeros(ts, dtype=bool)
    for off in fields:
        is_scale[off:off + 2] = True
    if name == "Q8_1":
        is_scale[2:4] = True
    for b in range(n_blocks):
        for off, h in zip(fields, random_halves(rng, len(fields))):
            put_half(blocks[b], off, h)
    i = 0
    # every scale field at one edge value
    for h in EDGE_HALVES:
        for off in fields:
            put_half(blocks[i], off, h)
        i += 1
    # one field at zero, the others random (d = 0 with a min, and the reverse)
    for off in fields:
        put_half(blocks[i], off, 0)
        i += 1
    # all-zero, all-ones, 0x80 and 0x7F quant bytes (for K-quants: scales
    # too), with random scales, then with the largest scales
    for fill, h in ((0x00, None), (0xFF, None), (0x80, None), (0x7F, None),
                    (0x00, 0x7BFF), (0xFF, 0x7BFF), (0xFF, 0xFBFF)):
        blocks[i, ~is_scale] = fill
        if h is not None:
            for off in fields:
                put_half(blocks[i], off, h)
        i += 1
    assert i <= n_blocks
    if name == "Q8_1":
        # s = d * sum(q), as the quantizer writes it (dequantization ignores s)
        for b in range(n_blocks):
            d = blocks[b, 0:2].view(np.float16).astype(np.float32)[0]
            total = np.float32(blocks[b, 4:36].view(np.int8).astype(np.int32).sum())
            with np.errstate(over="ignore"):  # s may overflow to inf: fine
                put_half(blocks[b], 2, np.float16(total * d).view(np.uint16))
    return blocks


def make_q8_K_blocks(rng, blocks):
    """Q8_K: float32 d, int8 quants, int16 sums of each 16 quants."""
    n_blocks = blocks.shape[0]
    mag = np.exp(rng.uniform(np.log(1e-6), np.log(1e4), n_blocks))
    d = (mag * rng.choice([-1.0, 1.0], n_blocks)).astype(np.float32)
    edge = np.array([0.0, -0.0, 1e-30, -1e-30, 1.4e-45, 1.0, -1.0, 1e30, -2.6e36], dtype=np.float32)
    d[: len(edge)] = edge
    qs = blocks[:, 4:260].view(np.int8)
    qs[len(edge)] = 0
    qs[len(edge) + 1] = 127
    qs[len(edge) + 2] = -128
    for b in range(n_blocks):
        blocks[b, 0:4] = np.frombuffer(d[b].tobytes(), dtype=np.uint8)
        sums = qs[b].astype(np.int16).reshape(16, 16).sum(axis=1, dtype=np.int16)
        blocks[b, 260:292] = sums.view(np.uint8)
    return blocks


def dequant_q8_1(blocks):
    """Q8_1 (not in gguf-py): x = q * d; the s field plays no part."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    qs = blocks[:, 4:36].view(np.int8).astype(np.float32)
    return qs * d


def dequant_q8_K(blocks):
    """Q8_K (not in gguf-py): x = q * d with a float32 d."""
    d = blocks[:, 0:4].copy().view(np.float32)
    qs = blocks[:, 4:260].view(np.int8).astype(np.float32)
    return qs * d


def dequantize(name, blocks):
    if name == "Q8_1":
        out = dequant_q8_1(blocks)
    elif name == "Q8_K":
        out = dequant_q8_K(blocks)
    else:
        out = gq.dequantize(blocks, T[name])
    out = np.asarray(out, dtype=np.float32)
    return out.reshape(-1)


def float_patterns(rng, name):
    """Bit patterns of the plain float types, NaN-free, with specials first."""
    if name == "F32":
        bits = rng.integers(0, 2**32, N_VALUES_FLOAT // 16, dtype=np.uint64).astype(np.uint32)
        bits[(bits & 0x7F800000) == 0x7F800000] ^= 0x40000000  # no inf/NaN
        bits[:6] = [0, 0x80000000, 1, 0x7F7FFFFF, 0x3F800000, 0xFF7FFFFF]
        return bits.view(np.uint8)
    h = (np.arange(N_VALUES_FLOAT, dtype=np.uint32) * 16 + rng.integers(0, 16, N_VALUES_FLOAT)).astype(np.uint16)
    if name == "F16":
        nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0)
        specials = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x3C00, 0x8001]
    else:
        nan = ((h & 0x7F80) == 0x7F80) & ((h & 0x007F) != 0)
        specials = [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0xFF80, 0x3F80, 0x8001]
    h[nan] ^= 0x4000  # clear the top exponent bit: finite
    h[: len(specials)] = specials
    return h.view(np.uint8)


def quant_rows(rng, row_len):
    """Float32 rows for the quantizers, one kind of data per row."""
    def gauss(s):
        return rng.standard_normal(row_len) * s

    rows = [
        np.zeros(row_len),                                   # all zero
        gauss(1.0),
        gauss(1e-3),
        gauss(1e3),
        gauss(1e-5),                                         # tiny: subnormal half scales
        gauss(1e4),                                          # large, scales still finite
        rng.uniform(-1, 1, row_len),
        rng.uniform(0.5, 2.0, row_len),                      # all positive (min > 0)
        -rng.uniform(0.5, 2.0, row_len),                     # all negative
        np.full(row_len, 0.37),                              # constant: zero range
    ]
    r = gauss(1.0)                                           # one outlier
    r[rng.integers(0, row_len)] = 60.0
    rows.append(r)
    # exact ties: half-integers with one +-127 per 32 weights, so Q8_0's
    # d = 1 and x/d = k + 0.5 exactly (rounded away from zero)
    r = rng.integers(-127, 127, row_len) + 0.5
    r[::32] = 127.0 * rng.choice([-1, 1], row_len // 32)
    rows.append(r)
    r = rng.integers(-8, 8, row_len) * 0.25                  # exact 4-bit grid
    rows.append(r)
    r = gauss(1.0)                                           # +a and -a both largest
    r[0::32] = 3.0
    r[5::32] = -3.0
    rows.append(r)
    for _ in range(2):
        rows.append(gauss(np.exp(rng.uniform(np.log(1e-3), np.log(1e3)))))
    return np.array(rows, dtype=np.float32)


def float_rows(rng, name, row_len=64):
    """Rows for the plain float conversions: random values plus rounding
    ties, overflow, subnormals, infinities and quiet NaNs."""
    rows = [rng.standard_normal(row_len) * s for s in (1e-6, 1e-3, 1.0, 1e3, 1e5)]
    rows = np.array(rows, dtype=np.float32)
    special = np.array([
        0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, -1e9, 2.0**-24, 2.0**-25, 1.5 * 2.0**-24,
        1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1e-8, -1e-8, np.inf, -np.inf, 1e38, 3.4e38,
    ], dtype=np.float32)
    bits = np.zeros(row_len, dtype=np.uint32)
    bits[: len(special)] = special.view(np.uint32)
    extra = [0x3F808000, 0x3F818000, 0x7FC00000, 0xFFC00001, 0x7F7FFFFF, 0x00000001, 0x807FFFFF]
    if name == "BF16":
        extra += [0x7F800001, 0x7FA00000]  # signalling NaNs: bit operations only
    bits[len(special): len(special) + len(extra)] = extra
    rest = rng.integers(0, 2**32, row_len - len(special) - len(extra), dtype=np.uint64).astype(np.uint32)
    rest[(rest & 0x7F800000) == 0x7F800000] ^= 0x40000000
    bits[len(special) + len(extra):] = rest
    return np.concatenate([rows, bits.view(np.float32)[None, :]])


def quantize(name, rows):
    if name == "F32":
        return rows.astype(np.float32).view(np.uint8).reshape(rows.shape[0], -1)
    if name == "F16":
        with np.errstate(over="ignore"):  # the overflow rows round to inf on purpose
            return rows.astype(np.float16).view(np.uint8).reshape(rows.shape[0], -1)
    return gq.quantize(rows, T[name]).reshape(rows.shape[0], -1)


def write_file(name, raw, deq, qin, qout):
    tid, bs, ts = TYPES[name]
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    deq = np.ascontiguousarray(deq, dtype="<f4").reshape(-1)
    n_blocks = raw.size // ts
    assert raw.size == n_blocks * ts and deq.size == n_blocks * bs
    if qin is None:
        n_rows, row_len, qin_b, qout_b = 0, 0, b"", b""
    else:
        n_rows, row_len = qin.shape
        assert row_len % bs == 0 and qout.shape == (n_rows, row_len // bs * ts)
        qin_b = np.ascontiguousarray(qin, dtype="<f4").tobytes()
        qout_b = np.ascontiguousarray(qout, dtype=np.uint8).tobytes()
    header = MAGIC + struct.pack("<7I", VERSION, tid, bs, ts, n_blocks, n_rows, row_len)
    data = header + raw.tobytes() + deq.tobytes() + qin_b + qout_b
    path = os.path.join(OUT_DIR, name + ".qref")
    with open(path, "wb") as f:
        f.write(data)
    return path, data


def main():
    rng = np.random.default_rng(SEED)
    os.makedirs(OUT_DIR, exist_ok=True)
    manifest = [f"gguf {version_of('gguf')}",
                f"numpy {np.__version__}", f"seed {SEED}", ""]
    total = 0
    for name in TYPES:
        _, bs, ts = TYPES[name]
        if name in ("F32", "F16", "BF16"):
            raw = float_patterns(rng, name)
            deq = (raw.view(np.float32) if name == "F32" else
                   raw.view(np.float16).astype(np.float32) if name == "F16" else
                   gq.dequantize(raw, T.BF16))
            deq = np.asarray(deq, dtype=np.float32)
            assert not np.isnan(deq).any()
            rows = float_rows(rng, name)
        else:
            n_blocks = N_BLOCKS_K if bs == 256 else N_BLOCKS_LEGACY
            raw = make_blocks(rng, name, n_blocks)
            deq = dequantize(name, raw)
            assert np.isfinite(deq).all(), name
            rows = quant_rows(rng, 128) if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0") else None
        qout = quantize(name, rows) if rows is not None else None
        path, data = write_file(name, raw, deq, rows, qout)
        total += len(data)
        manifest.append(f"{hashlib.sha256(data).hexdigest()}  {name}.qref")
        print(f"{os.path.relpath(path)}: {len(data)} bytes")
    with open(os.path.join(OUT_DIR, "VERSIONS"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print(f"total {total} bytes")


def version_of(pkg):
    from importlib.metadata import version
    return version(pkg)


if __name__ == "__main__":
    main()
