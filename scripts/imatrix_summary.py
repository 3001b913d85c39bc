#!/usr/bin/env python3
"""imatrix_summary.py — a compact summary of a GGUF importance-matrix file.

Reads the file with a GGUF parser of its own (no kvik code, no packages)
and prints JSON: the imatrix.* keys and, per entry (NAME.in_sum2 with
NAME.counts, F32), its name, columns, count, the sum over columns of the
means (sum / count) and the means at a few columns.

    scripts/imatrix_summary.py FILE.gguf [--compare OTHER.gguf]

--compare prints, instead, per-entry relative differences of the two
files' means (the largest over the sampled statistics), and which
entries or counts differ.
"""
import json, struct, sys

GGUF_TYPES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_gguf(path):
    d = open(path, "rb").read()
    if d[:4] != b"GGUF":
        raise SystemExit("%s: not a GGUF file" % path)
    ver, n_t, n_kv = struct.unpack_from("<IQQ", d, 4)
    off = 24

    def rstr(o):
        (n,) = struct.unpack_from("<Q", d, o)
        return d[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    def rval(t, o):
        if t == 8:
            return rstr(o)
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, o)
            o += 12
            out = []
            for _ in range(n):
                v, o = rval(et, o)
                out.append(v)
            return out, o
        f = "<" + GGUF_TYPES[t]
        return struct.unpack_from(f, d, o)[0], o + struct.calcsize(f)

    kv = {}
    for _ in range(n_kv):
        k, off = rstr(off)
        (t,) = struct.unpack_from("<I", d, off)
        v, off = rval(t, off + 4)
        kv[k] = v
    align = kv.get("general.alignment", 32)
    infos = []
    for _ in range(n_t):
        name, off = rstr(off)
        (nd,) = struct.unpack_from("<I", d, off)
        ne = struct.unpack_from("<%dQ" % nd, d, off + 4)
        typ, toff = struct.unpack_from("<IQ", d, off + 4 + 8 * nd)
        off += 4 + 8 * nd + 12
        infos.append((name, ne, typ, toff))
    base = (off + align - 1) // align * align
    tensors = {}
    for name, ne, typ, toff in infos:
        if typ != 0:
            raise SystemExit("%s: %s is not F32" % (path, name))
        n = 1
        for x in ne:
            n *= x
        tensors[name] = (list(ne), list(struct.unpack_from("<%df" % n, d, base + toff)))
    return kv, tensors


def entries(path):
    kv, t = read_gguf(path)
    out = {}
    for name in t:
        if not name.endswith(".in_sum2"):
            continue
        w = name[: -len(".in_sum2")]
        ne, sums = t[name]
        _, counts = t[w + ".counts"]
        if len(counts) != 1:
            raise SystemExit("%s: %s has %d matrices; only dense entries are summarized" % (path, w, len(counts)))
        out[w] = (ne[0], counts[0], sums)
    return kv, out


def g7(x):
    """x to 7 significant digits (F32 holds about as many)."""
    return float("%.7g" % x)


def summary(path):
    kv, es = entries(path)
    doc = {"chunk_count": kv.get("imatrix.chunk_count"), "chunk_size": kv.get("imatrix.chunk_size"), "entries": []}
    for w in sorted(es):
        cols, count, sums = es[w]
        means = [s / count for s in sums]
        pick = sorted(set([0, 1, cols // 3, cols // 2, cols - 1, max(range(cols), key=lambda j: means[j])]))
        doc["entries"].append({"name": w, "n_cols": cols, "count": int(count), "sum_of_means": g7(sum(means)),
                               "columns": pick, "means": [g7(means[j]) for j in pick]})
    return doc


def compare(a, b):
    _, ea = entries(a)
    _, eb = entries(b)
    if sorted(ea) != sorted(eb):
        print("entries differ: only in %s: %s; only in %s: %s" % (a, sorted(set(ea) - set(eb)), b, sorted(set(eb) - set(ea))))
    worst_sum, worst_col, n_cnt = (0, ""), (0, ""), 0
    all_rel = []
    for w in sorted(set(ea) & set(eb)):
        ca, na, sa = ea[w]
        cb, nb, sb = eb[w]
        if na != nb:
            n_cnt += 1
        ma = [s / na for s in sa]
        mb = [s / nb for s in sb]
        r = abs(sum(ma) - sum(mb)) / abs(sum(mb))
        worst_sum = max(worst_sum, (r, w))
        scale = max(mb)
        rc = max(abs(x - y) for x, y in zip(ma, mb)) / scale
        worst_col = max(worst_col, (rc, w))
        all_rel.append(r)
    all_rel.sort()
    print("entries %d, counts differing %d" % (len(set(ea) & set(eb)), n_cnt))
    print("sum of means: relative difference median %.3g, max %.3g (%s)" % (all_rel[len(all_rel) // 2], worst_sum[0], worst_sum[1]))
    print("per column: largest |difference| / the entry's largest mean: %.3g (%s)" % worst_col)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--compare":
        compare(sys.argv[1], sys.argv[3])
    elif len(sys.argv) == 2:
        json.dump(summary(sys.argv[1]), sys.stdout, indent=1)
        print()
    else:
        raise SystemExit(__doc__)
