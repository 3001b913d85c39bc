#!/usr/bin/env python3
"""gen_tiktoken_parity.py -- writes tests/data/tokenizer_parity/tiktoken-cl100k.hash:
for every string of tests/data/tokenizer_parity/strings.lps, a 32-bit hash
of the ids OpenAI's tiktoken gives it with the cl100k_base encoding (the
ranks file scripts/fetch-vocab.sh fetches, and tiktoken's own cl100k_base
pattern). tests/test_tokenizer_parity.c builds the same vocabulary with
`vocab_import_tiktoken` (what `kvik vocab-import` runs), encodes the strings
with kvik and compares. The format is the one of the other hash files
(tests/data/tokenizer_parity/README.md); strings that are not valid UTF-8
are skipped (flag bit 0), since tiktoken encodes Python strings.

    scripts/fetch-vocab.sh
    ~/.cache/kvik/tok-venv/bin/python scripts/gen_tiktoken_parity.py

The venv is the one of scripts/tokenizer-requirements.txt (tiktoken pinned
there). Rerun whenever strings.lps changes (the hash file records its
FNV-1a, and the test refuses a stale one).
"""
import os
import struct
import sys

import tiktoken
from tiktoken.load import load_tiktoken_bpe

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizer_parity")
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# tiktoken 0.14's cl100k_base pattern (tiktoken_ext/openai_public.py)
CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                  r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
FNV32_BASIS, FNV32_PRIME = 0x811C9DC5, 0x01000193
FLAG_INVALID_UTF8 = 1
HFLAG_SKIPS_INVALID = 1


def fnv1a(data, h=FNV32_BASIS):
    for b in data:
        h = ((h ^ b) * FNV32_PRIME) & 0xFFFFFFFF
    return h


def read_strings(path):
    raw = open(path, "rb").read()
    if raw[:8] != b"KVTPSTR1":
        sys.exit("%s: not a strings.lps file" % path)
    n, _seed = struct.unpack_from("<II", raw, 8)
    off, out = 16, []
    for _ in range(n):
        ln, flags, _cat = struct.unpack_from("<IBB", raw, off)
        off += 6
        out.append((flags, raw[off:off + ln]))
        off += ln
    return raw, out


def main():
    vocab_dir = os.environ.get("KVIK_VOCAB_DIR", os.path.expanduser("~/.cache/kvik/vocab"))
    ranks = load_tiktoken_bpe(os.path.join(vocab_dir, "cl100k_base.tiktoken"), expected_hash=RANKS_SHA256)
    enc = tiktoken.Encoding("cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    raw, strings = read_strings(os.path.join(DATA, "strings.lps"))
    hashes = []
    for flags, s in strings:
        if flags & FLAG_INVALID_UTF8:
            hashes.append(0)
            continue
        ids = enc.encode_ordinary(s.decode("utf-8"))
        hashes.append(fnv1a(struct.pack("<%di" % len(ids), *ids)))
    out = os.path.join(DATA, "tiktoken-cl100k.hash")
    with open(out, "wb") as f:
        f.write(b"KVTPHSH2" + struct.pack("<IIII", len(strings), fnv1a(raw), HFLAG_SKIPS_INVALID, 0))
        for h in hashes:  # low 24 bits, as the README says
            f.write(struct.pack("<I", h & 0xFFFFFF)[:3])
    print("%s: %d strings (tiktoken %s)" % (out, len(strings), tiktoken.__version__))


if __name__ == "__main__":
    main()
