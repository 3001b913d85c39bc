#!/usr/bin/env python3
"""Small valid `kvik perplexity` base files, the fuzz target's seeds.

Writes ctx{C}-vocab{V}-chunks{N}-top{K}.bin into the folder given
(default tests/fuzz/seeds/fuzz_ppl_base), in the format of the table at the
top of src/tools/ppl.c, written here from that table alone. The files are
generated, never committed: `make fuzz-run` and the test that parses them
make them.
"""
import math
import os
import struct
import sys

SHAPES = [(4, 8, 1, 2), (8, 50, 2, 4), (9, 16, 1, 16)]  # n_ctx, n_vocab, n_chunk, top_k


def base_file(n_ctx, n_vocab, n_chunk, top_k):
    n_scored = n_ctx - 1 - n_ctx // 2
    out = bytearray(b"KVIKLOGP")
    out += struct.pack("<6I", 1, n_ctx, n_vocab, n_chunk, top_k, n_scored)
    out += struct.pack("<%di" % (n_chunk * n_ctx), *[(7 * i + 3) % n_vocab for i in range(n_chunk * n_ctx)])
    for r in range(n_chunk * n_scored):
        ids = [(r + 5 * j) % n_vocab for j in range(top_k)]
        if len(set(ids)) < top_k:  # 5 shares a factor with the vocabulary: take the first top_k
            ids = [(r + j) % n_vocab for j in range(top_k)]
        lps = [-0.25 - 0.5 * j for j in range(top_k)]
        rest = sum(math.exp(v) for v in lps)
        lr = math.log(1.0 - rest) if rest < 1.0 else float("-inf")
        out += struct.pack("<2f", lps[-1], lr)
        for i, v in zip(ids, lps):
            out += struct.pack("<if", i, v)
    return bytes(out)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fuzz",
                                                                  "seeds", "fuzz_ppl_base")
    os.makedirs(folder, exist_ok=True)
    for c, v, n, k in SHAPES:
        with open(os.path.join(folder, "ctx%d-vocab%d-chunks%d-top%d.bin" % (c, v, n, k)), "wb") as f:
            f.write(base_file(c, v, n, k))


if __name__ == "__main__":
    main()
