#!/usr/bin/env python3
"""gen_unicode_norm.py — writes src/tokenizer/unicode_norm_tables.c from the
Unicode Character Database: what the WordPiece ("bert") normalizer needs
beyond the category flags of unicode_tables.c.

  - the full canonical decomposition (NFD) of every code point that has one,
    applied recursively, so one lookup gives the final sequence; Hangul
    syllables are decomposed arithmetically in C and are not in the table
  - the canonical combining class (ccc) of every non-starter, for the
    canonical reordering NFD ends with
  - the nonspacing marks (general category Mn), which accent stripping drops
  - the control, format and private-use characters (Cc, Cf, Co), which
    BERT's text clean-up drops (unassigned code points, Cn, are kept, as
    Hugging Face tokenizers keeps them)
  - the full lowercase mapping: UnicodeData.txt's simple mapping, overridden
    by the unconditional entries of SpecialCasing.txt (U+0130 -> 0069 0307),
    as Rust's char::to_lowercase (which Hugging Face tokenizers uses) does
  - for NFC (the normalizer of Qwen2, GPT-NeoX, Command-R vocabularies):
    the canonical composition pairs, i.e. every two-code-point canonical
    decomposition whose composite is not a full composition exclusion
    (CompositionExclusions.txt, singletons and non-starter decompositions;
    checked against DerivedNormalizationProps.txt's Full_Composition_Exclusion);
    Hangul syllables compose arithmetically in C
  - the NFC quick-check set: every code point with a nonzero combining class
    or NFC_QC No/Maybe (DerivedNormalizationProps.txt), as a two-stage
    bitmap (256-code-point blocks); text without any is already NFC

Tables are sorted arrays searched by binary search; the lookup functions are
written out with them (fixed text below), so the generated file is the whole
module behind src/tokenizer/unicode_norm.h.

The C side of NFC (decomposition, reordering, composition, the quick check
over text) is src/tokenizer/unicode_nfc.c; tests/test_unicode_nfc.c checks it
against the UCD's own NormalizationTest.txt.

Usage: scripts/gen_unicode_norm.py [UCD_DIR] > src/tokenizer/unicode_norm_tables.c
UCD_DIR defaults to /usr/share/unicode (Debian package `unicode-data`, UCD
15.0.0, the same version scripts/gen_unicode_tables.py reads).
"""
import os
import re
import sys

MAX_DECOMP = 4  # must match UNORM_MAX_DECOMP in src/tokenizer/unicode_norm.h
MAX_LOWER = 3   # must match UNORM_MAX_LOWER


def ucd_version(ucd):
    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        m = re.search(r"Version (\d+\.\d+\.\d+)", f.read())
        if m:
            return m.group(1)
    with open(os.path.join(ucd, "DerivedAge.txt"), encoding="utf-8") as f:
        m = re.search(r"DerivedAge-(\d+\.\d+\.\d+)\.txt", f.readline())
        return m.group(1) if m else "unknown"


def read_ucd(ucd):
    decomp, ccc, mn, ctrl, lower = {}, {}, set(), set(), {}
    first = None
    with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fld = line.rstrip("\n").split(";")
            cp = int(fld[0], 16)
            if fld[1].endswith(", First>"):
                first = cp
            if fld[1].endswith(", Last>"):
                # ranges (CJK, Hangul, private use, ...): no marks, decompositions or case
                if fld[2] in ("Cc", "Cf", "Co"):
                    ctrl.update(range(first, cp + 1))
                continue
            if fld[2] in ("Cc", "Cf", "Co"):
                ctrl.add(cp)
            if fld[2] == "Mn":
                mn.add(cp)
            if int(fld[3]):
                ccc[cp] = int(fld[3])
            if fld[5] and not fld[5].startswith("<"):
                decomp[cp] = [int(x, 16) for x in fld[5].split()]
            if fld[13]:
                lower[cp] = [int(fld[13], 16)]
    with open(os.path.join(ucd, "SpecialCasing.txt"), encoding="utf-8") as f:
        for line in f:
            fld = [x.strip() for x in line.split("#")[0].split(";")]
            if len(fld) < 4 or (len(fld) > 4 and fld[4]):
                continue  # blank, comment, or a conditional mapping
            cp = int(fld[0], 16)
            lo = [int(x, 16) for x in fld[1].split()]
            if lo != [cp]:
                lower[cp] = lo
            elif cp in lower:
                del lower[cp]
    return decomp, ccc, mn, ctrl, lower


def read_prop_ranges(path, wanted):
    """{property value: set of code points} for lines 'A..B ; prop [; value]'."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fld = [x.strip() for x in line.split("#")[0].split(";")]
            if len(fld) < 2 or fld[1] not in wanted:
                continue
            key = fld[1] if len(fld) == 2 else fld[1] + "=" + fld[2]
            a, _, b = fld[0].partition("..")
            out.setdefault(key, set()).update(range(int(a, 16), int(b or a, 16) + 1))
    return out


def read_composition(ucd, decomp, ccc):
    """Canonical composition pairs {(first, second): composite} and the
    NFC quick-check set (ccc != 0 or NFC_QC No/Maybe)."""
    excl = set()
    with open(os.path.join(ucd, "CompositionExclusions.txt"), encoding="utf-8") as f:
        for line in f:
            t = line.split("#")[0].strip()
            if t:
                excl.add(int(t, 16))
    props = read_prop_ranges(os.path.join(ucd, "DerivedNormalizationProps.txt"),
                             {"Full_Composition_Exclusion", "NFC_QC"})
    full_excl = set(excl)
    for cp, d in decomp.items():
        if len(d) == 1 or ccc.get(cp, 0) or ccc.get(d[0], 0):
            full_excl.add(cp)  # singletons, non-starter decompositions
    assert full_excl == props["Full_Composition_Exclusion"], \
        sorted(full_excl ^ props["Full_Composition_Exclusion"])[:10]
    pairs = {}
    for cp, d in decomp.items():
        if len(d) == 2 and cp not in full_excl:
            assert (d[0], d[1]) not in pairs
            pairs[(d[0], d[1])] = cp
    quick = set(ccc) | props.get("NFC_QC=N", set()) | props.get("NFC_QC=M", set())
    # Hangul is composed in C: its jamo must be in the set, its syllables not
    assert all(c in quick for c in range(0x1161, 0x1176)) and all(c in quick for c in range(0x11A8, 0x11C3))
    assert not any(c in quick for c in range(0xAC00, 0xD7A4))
    return pairs, quick


def full_decomp(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for c in decomp[cp]:
        out += full_decomp(c, decomp)
    return out


def runs(values):
    """[(start, value)] over U+0000..U+10FFFF for a dict cp -> value (default 0)."""
    out, prev = [], None
    keys = sorted(set(values) | {k + 1 for k in values} | {0})
    for c in keys:
        if c > 0x10FFFF:
            continue
        v = values.get(c, 0)
        if v != prev:
            out.append((c, v))
            prev = v
    return out


def write_array(out, ctype, name, items, fmt, per_line):
    out.write("static const %s %s[%d] = {\n" % (ctype, name, len(items)))
    for i in range(0, len(items), per_line):
        out.write("    " + ", ".join(fmt % x for x in items[i:i + per_line]) + ",\n")
    out.write("};\n\n")


LOOKUPS = r"""
/* ---- lookups (fixed text written by the generator) ---------------------- */

/* Index of key in sorted keys[0..n), or -1. */
static int64_t find_key(const uint32_t *keys, uint32_t n, uint32_t key) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo] == key ? (int64_t)lo : -1;
}

/* Value of the run containing cp (runs start at starts[0] == 0). */
static uint16_t run_value(uint32_t cp) {
    uint32_t lo = 0, hi = unorm_n_mark_runs;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (unorm_mark_start[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return unorm_mark_value[lo];
}

uint8_t unorm_ccc(uint32_t cp) {
    if (cp < UNORM_FIRST_MARK || cp > 0x10FFFF) return 0;
    return (uint8_t)(run_value(cp) & 0xFF);
}

bool unorm_is_mn(uint32_t cp) {
    return cp >= UNORM_FIRST_MARK && cp <= 0x10FFFF && (run_value(cp) & UNORM_MN_BIT) != 0;
}

bool unorm_is_control(uint32_t cp) {
    if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
    return cp <= 0x10FFFF && (run_value(cp) & UNORM_CONTROL_BIT) != 0;
}

int unorm_decompose(uint32_t cp, uint32_t out[UNORM_MAX_DECOMP]) {
    /* Hangul syllables: L V or L V T (Unicode chapter 3.12) */
    if (cp >= 0xAC00 && cp < 0xAC00 + 11172) {
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0) return 2;
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    int64_t k = cp < unorm_decomp_cp[0] ? -1 : find_key(unorm_decomp_cp, unorm_n_decomp, cp);
    if (k < 0) {
        out[0] = cp;
        return 1;
    }
    uint32_t at = unorm_decomp_at[k] >> 3, n = unorm_decomp_at[k] & 7;
    for (uint32_t i = 0; i < n; i++) out[i] = unorm_decomp_data[at + i];
    return (int)n;
}

uint32_t unorm_compose(uint32_t a, uint32_t b) {
    /* Hangul: L + V -> LV, LV + T -> LVT (Unicode chapter 3.12) */
    if (a >= 0x1100 && a < 0x1100 + 19 && b >= 0x1161 && b < 0x1161 + 21)
        return 0xAC00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
    if (a >= 0xAC00 && a < 0xAC00 + 11172 && (a - 0xAC00) % 28 == 0 && b > 0x11A7 && b < 0x11A7 + 28)
        return a + (b - 0x11A7);
    if (a >= (1u << 21) || b >= (1u << 21)) return 0;
    uint64_t key = (uint64_t)a << 21 | b;
    uint32_t lo = 0, hi = unorm_n_comp;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (unorm_comp_key[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < unorm_n_comp && unorm_comp_key[lo] == key ? unorm_comp_to[lo] : 0;
}

int unorm_lower(uint32_t cp, uint32_t out[UNORM_MAX_LOWER]) {
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    int64_t k = find_key(unorm_lower_cp, unorm_n_lower, cp);
    if (k < 0) {
        out[0] = cp;
        return 1;
    }
    uint32_t v = unorm_lower_to[k];
    if (!(v & UNORM_LOWER_MULTI)) {
        out[0] = v;
        return 1;
    }
    const uint32_t *m = unorm_lower_multi[v & ~UNORM_LOWER_MULTI];
    int n = 0;
    while (n < UNORM_MAX_LOWER && m[n]) {
        out[n] = m[n];
        n++;
    }
    return n;
}
"""


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    version = ucd_version(ucd)
    decomp, ccc, mn, ctrl, lower = read_ucd(ucd)
    pairs, quick = read_composition(ucd, decomp, ccc)

    full = {cp: full_decomp(cp, decomp) for cp in sorted(decomp)}
    longest = max(len(v) for v in full.values())
    assert longest <= MAX_DECOMP, longest
    dec_cp, dec_at, dec_data = [], [], []
    for cp, seq in full.items():
        dec_cp.append(cp)
        dec_at.append(len(dec_data) << 3 | len(seq))
        dec_data += seq

    marks = {cp: ccc.get(cp, 0) | (0x100 if cp in mn else 0) | (0x200 if cp in ctrl else 0)
             for cp in set(ccc) | mn | ctrl}
    # the ASCII shortcuts written in LOOKUPS must agree with the data
    first_mark = min(set(ccc) | mn)
    assert {c for c in ctrl if c < 0x80} == set(range(0x20)) | {0x7F}
    assert all(lower.get(c, [c]) == [c + 32 if 0x41 <= c <= 0x5A else c] for c in range(0x80))
    mark_runs = runs(marks)

    low_cp, low_to, multi = [], [], []
    for cp in sorted(lower):
        seq = lower[cp]
        assert 1 <= len(seq) <= MAX_LOWER
        low_cp.append(cp)
        if len(seq) == 1:
            low_to.append(seq[0])
        else:
            low_to.append(0x80000000 | len(multi))
            multi.append(seq + [0] * (MAX_LOWER - len(seq)))

    out = sys.stdout
    out.write("/*\n * unicode_norm_tables.c — GENERATED by scripts/gen_unicode_norm.py from the\n")
    out.write(" * Unicode Character Database, version %s (UnicodeData.txt,\n" % version)
    out.write(" * SpecialCasing.txt, CompositionExclusions.txt, DerivedNormalizationProps.txt).\n")
    out.write(" * Do not edit.\n *\n")
    out.write(" * %d full canonical decompositions (Hangul syllables are computed),\n" % len(dec_cp))
    out.write(" * %d runs of (ccc, Mn, control), %d lowercase mappings\n" % (len(mark_runs), len(low_cp)))
    out.write(" * (%d to several code points), %d canonical composition pairs\n" % (len(multi), len(pairs)))
    out.write(" * (CompositionExclusions.txt, DerivedNormalizationProps.txt), %d code points\n" % len(quick))
    out.write(" * in the NFC quick-check set.\n")
    out.write(" * unorm_decomp_at[i] = offset into unorm_decomp_data << 3 | length;\n")
    out.write(" * unorm_comp_key = first << 21 | second, sorted; unorm_comp_to its composite.\n")
    out.write(" * unorm_nfc_rows[unorm_nfc_block[cp >> 8]] bit cp & 0xFF: cp is in the set.\n")
    out.write(" * unorm_mark_value = ccc | UNORM_MN_BIT for a nonspacing mark\n")
    out.write(" * | UNORM_CONTROL_BIT for Cc, Cf, Co;\n")
    out.write(" * unorm_lower_to = the lowercase code point, or UNORM_LOWER_MULTI | row of\n")
    out.write(" * unorm_lower_multi (zero-padded).\n */\n")
    out.write('#include "tokenizer/unicode_norm.h"\n\n')
    out.write("_Static_assert(UNORM_MAX_DECOMP >= %d, \"longest decomposition\");\n\n" % longest)
    out.write("#define UNORM_FIRST_MARK 0x%x /* no non-starter or Mn below */\n" % first_mark)
    out.write("#define UNORM_MN_BIT 0x100\n#define UNORM_CONTROL_BIT 0x200\n#define UNORM_LOWER_MULTI 0x80000000u\n\n")
    out.write('const char unorm_ucd_version[] = "%s";\n\n' % version)
    out.write("static const uint32_t unorm_n_decomp = %d;\n" % len(dec_cp))
    out.write("static const uint32_t unorm_n_mark_runs = %d;\n" % len(mark_runs))
    out.write("static const uint32_t unorm_n_lower = %d;\n\n" % len(low_cp))
    write_array(out, "uint32_t", "unorm_decomp_cp", dec_cp, "0x%x", 8)
    write_array(out, "uint32_t", "unorm_decomp_at", dec_at, "0x%x", 8)
    write_array(out, "uint32_t", "unorm_decomp_data", dec_data, "0x%x", 8)
    write_array(out, "uint32_t", "unorm_mark_start", [s for s, _ in mark_runs], "0x%x", 8)
    write_array(out, "uint16_t", "unorm_mark_value", [v for _, v in mark_runs], "0x%x", 12)
    write_array(out, "uint32_t", "unorm_lower_cp", low_cp, "0x%x", 8)
    write_array(out, "uint32_t", "unorm_lower_to", low_to, "0x%x", 8)
    out.write("static const uint32_t unorm_lower_multi[%d][UNORM_MAX_LOWER] = {\n" % len(multi))
    for row in multi:
        out.write("    {" + ", ".join("0x%x" % x for x in row) + "},\n")
    out.write("};\n\n")

    # NFC: composition pairs, sorted by (first << 21 | second)
    keys = sorted(pairs)
    assert all(a < (1 << 21) and b < (1 << 21) for a, b in keys)
    out.write("static const uint32_t unorm_n_comp = %d;\n\n" % len(keys))
    write_array(out, "uint64_t", "unorm_comp_key", [a << 21 | b for a, b in keys], "0x%xull", 4)
    write_array(out, "uint32_t", "unorm_comp_to", [pairs[k] for k in keys], "0x%x", 8)

    # NFC quick-check bitmap: stage 1 maps a 256-code-point block to its row of 32 bytes
    rows, row_of, stage1 = [], {}, []
    for blk in range(0x110000 >> 8):
        bits = bytearray(32)
        for c in range(blk << 8, (blk + 1) << 8):
            if c in quick:
                bits[(c & 0xFF) >> 3] |= 1 << (c & 7)
        key = bytes(bits)
        if key not in row_of:
            row_of[key] = len(rows)
            rows.append(key)
        stage1.append(row_of[key])
    assert len(rows) <= 256 and rows[0] == bytes(32) and stage1[0] == 0
    assert min(quick) >= 0x300  # the ASCII and Latin-1 shortcut in unicode_nfc.c
    out.write("const uint8_t unorm_nfc_block[%d] = {\n" % len(stage1))
    for i in range(0, len(stage1), 24):
        out.write("    " + ", ".join("%d" % x for x in stage1[i:i + 24]) + ",\n")
    out.write("};\n\n")
    out.write("const uint8_t unorm_nfc_rows[%d][32] = {\n" % len(rows))
    for r in rows:
        out.write("    {" + ", ".join("0x%x" % x for x in r) + "},\n")
    out.write("};\n")
    out.write(LOOKUPS)


if __name__ == "__main__":
    main()
