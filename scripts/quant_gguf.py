#!/usr/bin/env python3
"""quant_gguf.py — reads a GGUF file's tensor table and hashes each tensor's
data; writes legacy imatrix (.dat) files. Python's standard library only.

    python3 scripts/quant_gguf.py FILE            # name type sha256 per tensor
    python3 scripts/quant_gguf.py A B             # tensors whose type or bytes differ

Used by scripts/gen_quant_golden.py.
"""
import hashlib
import struct
import sys

# ggml type ids -> (name, block size, bytes per block)
TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 30: ("BF16", 1, 2),
}

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        n = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.f.read(n))

    def string(self):
        (n,) = self.take("Q")
        return self.f.read(n).decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            (et, n) = self.take("IQ")
            if et in _SCALAR:
                size = struct.calcsize("<" + _SCALAR[et])
                self.f.seek(size * n, 1)
                return None
            for _ in range(n):
                self.value(et)
            return None
        return self.take(_SCALAR[t])[0]


def tensors(path):
    """[(name, type name, sha256 hex)] in file order; and the metadata dict
    (scalars and strings only)."""
    out, meta = [], {}
    with open(path, "rb") as f:
        r = Reader(f)
        magic = f.read(4)
        if magic != b"GGUF":
            raise ValueError(path + ": not a GGUF file")
        (version, n_tensors, n_kv) = r.take("IQQ")
        for _ in range(n_kv):
            key = r.string()
            (t,) = r.take("I")
            meta[key] = r.value(t)
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            (nd,) = r.take("I")
            ne = r.take("Q" * nd)
            (t, off) = r.take("IQ")
            infos.append((name, t, ne, off))
        align = meta.get("general.alignment", 32)
        pos = f.tell()
        data0 = (pos + align - 1) // align * align
        for name, t, ne, off in infos:
            tname, bs, ts = TYPES[t]
            n = 1
            for d in ne:
                n *= d
            nbytes = n // bs * ts
            f.seek(data0 + off)
            h = hashlib.sha256(f.read(nbytes)).hexdigest()
            out.append((name, tname, h))
    return out, meta


def write_legacy_imatrix(path, entries, n_chunks, dataset):
    """entries: [(name, ncall, [floats])] -> llama.cpp's legacy .dat file."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, ncall, vals in entries:
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b)
            f.write(struct.pack("<ii", ncall, len(vals)))
            f.write(struct.pack("<%df" % len(vals), *vals))
        d = dataset.encode()
        f.write(struct.pack("<i", n_chunks) + struct.pack("<i", len(d)) + d)


def main():
    if len(sys.argv) == 2:
        for name, t, h in tensors(sys.argv[1])[0]:
            print(name, t, h)
    elif len(sys.argv) == 3:
        a = {n: (t, h) for n, t, h in tensors(sys.argv[1])[0]}
        b = {n: (t, h) for n, t, h in tensors(sys.argv[2])[0]}
        bad = 0
        for n in sorted(set(a) | set(b)):
            if a.get(n) != b.get(n):
                bad += 1
                print(n, a.get(n, ("-",))[0], b.get(n, ("-",))[0],
                      "types differ" if a.get(n, ("-",))[0] != b.get(n, ("-",))[0] else "bytes differ")
        print("%d of %d tensors differ" % (bad, len(a)))
        sys.exit(1 if bad else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
