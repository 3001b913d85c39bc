#!/usr/bin/env python3
"""gen_unicode_tables.py — writes src/tokenizer/unicode_tables.c from the
Unicode Character Database.

The tokenizer's pre-tokenizers need, for every code point, its general
category class (letter, number, punctuation, symbol, mark, separator,
other), for letters the subcategory (Lu, Ll, Lt, Lm, Lo: the o200k / tekken
patterns tell upper from lower case), and whether it has the White_Space
property (what Oniguruma's \\s matches), and whether Hugging Face's
Punctuation pre-tokenizer (Falcon's) counts it: that one uses the Rust
crate unicode_categories, whose tables are Unicode 8.0's, so it is \\p{P}
as of 8.0 — today's P characters assigned by then (DerivedAge.txt) and the
two that were Po in 8.0 and have changed category since (LEGACY_PUNCT).
This script reads UnicodeData.txt (general categories; "<..., First>" /
"<..., Last>" pairs stand for whole ranges), PropList.txt (White_Space) and
DerivedAge.txt, and writes a two-stage table:

  ucd_stage1[cp >> 7]                      which 128-code-point block
  ucd_stage2[block * 128 + (cp & 127)]     index into ucd_combo
  ucd_combo[index]                         the UCAT_* flags (uint16_t)

Blocks with the same contents are stored once (about 250 distinct blocks
of the 8704), and only a dozen flag combinations occur, so a lookup is
three loads and no branch (src/tokenizer/unicode.c). ucat_ascii repeats
the flags of U+0000..U+007F for the fast path.

Usage: scripts/gen_unicode_tables.py [UCD_DIR] > src/tokenizer/unicode_tables.c
UCD_DIR defaults to /usr/share/unicode (Debian package `unicode-data`,
version 15.0.0 for the committed tables).
"""
import os
import re
import sys

# Must match the UCAT_* flags in src/tokenizer/unicode.h.
LETTER, NUMBER, PUNCT, SYMBOL, MARK, SEPARATOR, OTHER, WHITESPACE = (1 << i for i in range(8))
LU, LL, LT, LM, LO, PUNCT_U8 = (1 << i for i in range(8, 14))
MAJOR = {"L": LETTER, "N": NUMBER, "P": PUNCT, "S": SYMBOL, "M": MARK, "Z": SEPARATOR, "C": OTHER}
SUB = {"Lu": LU, "Ll": LL, "Lt": LT, "Lm": LM, "Lo": LO}
N_CP = 0x110000
# Po in Unicode 8.0, now U+166D CANADIAN SYLLABICS CHI SIGN (So since 12.0)
# and U+111C9 SHARADA SANDHI MARK (Mn since 11.0).
LEGACY_PUNCT = (0x166D, 0x111C9)
BLOCK = 128


def ucd_version(ucd):
    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        m = re.search(r"Version (\d+\.\d+\.\d+)", f.read())
        if m:
            return m.group(1)
    # Debian's ReadMe has no version line: take it from DerivedAge's header.
    with open(os.path.join(ucd, "DerivedAge.txt"), encoding="utf-8") as f:
        m = re.search(r"DerivedAge-(\d+\.\d+\.\d+)\.txt", f.readline())
        return m.group(1) if m else "unknown"


def read_flags(ucd):
    flags = [OTHER] * N_CP  # unassigned code points are Cn
    first = None
    with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fields = line.split(";")
            cp, name, cat = int(fields[0], 16), fields[1], fields[2]
            v = MAJOR[cat[0]] | SUB.get(cat, 0)
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                for c in range(first, cp + 1):
                    flags[c] = v
                first = None
                continue
            flags[cp] = v
    with open(os.path.join(ucd, "PropList.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, prop = (s.strip() for s in line.split(";"))
            if prop != "White_Space":
                continue
            lo, _, hi = rng.partition("..")
            lo = int(lo, 16)
            hi = int(hi, 16) if hi else lo
            for c in range(lo, hi + 1):
                flags[c] |= WHITESPACE
    with open(os.path.join(ucd, "DerivedAge.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, age = (s.strip() for s in line.split(";"))
            if tuple(int(x) for x in age.split(".")) > (8, 0):
                continue
            lo, _, hi = rng.partition("..")
            lo = int(lo, 16)
            hi = int(hi, 16) if hi else lo
            for c in range(lo, hi + 1):
                if flags[c] & PUNCT:
                    flags[c] |= PUNCT_U8
    for c in LEGACY_PUNCT:
        flags[c] |= PUNCT_U8
    return flags


def write_array(out, decl, values, per_line, fmt):
    out.write("%s = {\n" % decl)
    for i in range(0, len(values), per_line):
        out.write("    " + ",".join(fmt % v for v in values[i:i + per_line]) + ",\n")
    out.write("};\n")


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    version = ucd_version(ucd)
    flags = read_flags(ucd)

    combos = sorted(set(flags))
    combo_index = {v: i for i, v in enumerate(combos)}
    assert len(combos) <= 256, "combination index no longer fits a byte"
    stage1, stage2, block_ids = [], [], {}
    for b in range(0, N_CP, BLOCK):
        blk = tuple(combo_index[v] for v in flags[b:b + BLOCK])
        if blk not in block_ids:
            block_ids[blk] = len(block_ids)
            stage2.extend(blk)
        stage1.append(block_ids[blk])
    assert len(block_ids) <= 256, "block index no longer fits a byte: widen ucd_stage1"

    out = sys.stdout
    out.write("/*\n * unicode_tables.c — GENERATED by scripts/gen_unicode_tables.py from the\n")
    out.write(" * Unicode Character Database, version %s (UnicodeData.txt, PropList.txt,\n"
              % version)
    out.write(" * DerivedAge.txt).\n")
    out.write(" * Do not edit. The UCAT_* flags of code point cp are\n")
    out.write(" *   ucd_combo[ucd_stage2[ucd_stage1[cp >> 7] * 128 + (cp & 127)]]\n")
    out.write(" * (%d distinct blocks of 128 code points, %d flag combinations);\n"
              % (len(block_ids), len(combos)))
    out.write(" * ucat_ascii repeats the flags of U+0000..U+007F for the fast path.\n */\n")
    out.write('#include "tokenizer/unicode.h"\n\n')
    out.write('const char ucd_version[] = "%s";\n\n' % version)
    write_array(out, "const uint16_t ucd_combo[%d]" % len(combos), combos, 8, "0x%04x")
    out.write("\n")
    write_array(out, "const uint8_t ucd_stage1[%d]" % len(stage1), stage1, 24, "%d")
    out.write("\n")
    write_array(out, "const uint8_t ucd_stage2[%d]" % len(stage2), stage2, 40, "%d")
    out.write("\n")
    write_array(out, "const uint16_t ucat_ascii[128]", flags[:128], 8, "0x%04x")


if __name__ == "__main__":
    main()
