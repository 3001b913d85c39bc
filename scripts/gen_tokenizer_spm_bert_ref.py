#!/usr/bin/env python3
"""gen_tokenizer_spm_bert_ref.py — reference data for kvik's SentencePiece BPE
("llama") and WordPiece ("bert") tokenizers, from Hugging Face `tokenizers`
and `transformers` (pinned in scripts/tokenizer-requirements.txt).

Writes tests/data/tok_spm_bert/ (read by tests/test_tokenizer_spm.c; the
formats are in the README.md it writes there):

  strings.txt        3000 random, diverse test strings (seeded: a second run
                     writes identical files)
  llama-spm.ref      for each string: Hugging Face's id count, a hash of the
  bert-bge.ref       ids and a hash of decode(ids, skip_special_tokens=True)
  bert-unicode.ref   for every code point c, hashed per 1024: what BERT's
                     normalizer makes of chr(c) and how its pre-tokenizer
                     splits "a" + chr(c) + "a"

The vocabularies are the shared fixtures (../shared/fixtures/vocab/, i.e.
ggml-vocab-llama-spm.gguf and ggml-vocab-bert-bge.gguf), read with the `gguf`
package. Hugging Face tokenizers are built from them:

  llama  models.BPE(byte_fallback, fuse_unk) with the merges transformers
         derives from the scores (tokenization_utils_base.generate_merges),
         the Llama tokenizer.json normalizer Prepend("▁") + Replace(" ", "▁"),
         the decoder Replace/ByteFallback/Fuse/Strip, control tokens added
         as special tokens. (transformers' own GGUF loader needs torch and
         builds the newer Metaspace form, which does not prepend "▁" to text
         that starts with a space, unlike the fixture's ids.)
  bert   transformers.BertTokenizer (do_lower_case, clean-up of spaces on
         decode) over the vocabulary with llama.cpp's spelling undone:
         "▁word" -> "word", "piece" -> "##piece", "[X]" unchanged.

Both are first checked against the fixture's .inp/.out (exact ids); the
script stops if either differs.

BERT's normalizer in Hugging Face uses Unicode data of several versions
(categories and NFD from crates at about Unicode 8.0, lowercase from Rust's
std at 16.0); kvik uses UCD 15.0. Code points where they must differ are
left out of the comparison and listed in bert-unicode.ref: those assigned
after 8.0, unassigned ones that Hugging Face lowercases, and six whose
category changed (CATEGORY_CHANGED). A random string with one of them has
no bert reference (its line is "-"); the llama one still checks it.

Setup (once), the venv OUTSIDE the repository:

    python3 -m venv ~/.cache/kvik/tok-venv
    ~/.cache/kvik/tok-venv/bin/pip install -r scripts/tokenizer-requirements.txt

Run from the repository root (re-executes itself with the venv's python if
the current one lacks one of those packages):

    python3 scripts/gen_tokenizer_spm_bert_ref.py [--fixtures DIR] [--out DIR]
    python3 scripts/gen_tokenizer_spm_bert_ref.py --show N   # string N's ids
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.environ.get("KVIK_TOK_VENV") or os.path.join(os.path.expanduser("~"), ".cache", "kvik", "tok-venv")
UCD = "/usr/share/unicode"
N_STRINGS = 3000
SEED = 20240601
BLOCK = 1024
# Code points whose general category changed between Hugging Face's tables
# (about Unicode 8.0) and UCD 15.0.
CATEGORY_CHANGED = {0x1734, 0x1885, 0x1886, 0xA9BD, 0x111C9, 0x166D}
LLAMA_SPECIAL_TEXTS = ("<s>", "</s>", "<unk>")
BERT_SPECIAL_TEXTS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

try:
    import gguf  # noqa: F401
    import tokenizers  # noqa: F401
    import transformers  # noqa: F401
except ImportError:
    py = os.path.join(VENV, "bin", "python")
    if os.path.exists(py) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(py, [py] + sys.argv)
    sys.exit("tokenizers/transformers/gguf not found: set up %s (see this script's docstring)" % VENV)

from gguf import GGUFReader  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402
from transformers import BertTokenizer  # noqa: E402
from transformers.tokenization_utils_base import generate_merges  # noqa: E402


def fnv32(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def ids_hash(ids):
    return fnv32(b"".join(int(i).to_bytes(4, "little", signed=True) for i in ids))


def read_vocab(path):
    r = GGUFReader(path)
    f = r.fields

    def get(key, default=None):
        return f[key].contents() if key in f else default

    return {
        "tokens": get("tokenizer.ggml.tokens"),
        "types": get("tokenizer.ggml.token_type"),
        "scores": get("tokenizer.ggml.scores"),
        "unk": get("tokenizer.ggml.unknown_token_id"),
    }


def llama_tokenizer(v):
    tokens, scores, types = v["tokens"], v["scores"], v["types"]
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token texts"
    merges = generate_merges(vocab, dict(zip(tokens, scores)))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=tokens[v["unk"]], fuse_unk=True,
                               byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, ty in zip(tokens, types) if ty in (2, 3)])
    return tok


def unphantom(t):
    if t.startswith("\u2581"):
        return t[1:]
    if t.startswith("[") and t.endswith("]"):
        return t
    return "##" + t


def bert_tokenizer(v):
    hf = [unphantom(t) for t in v["tokens"]]
    vocab = {t: i for i, t in enumerate(hf)}
    assert len(vocab) == len(hf), "undoing llama.cpp's spelling made duplicates"
    return BertTokenizer(vocab=vocab, do_lower_case=True, unk_token="[UNK]", clean_up_tokenization_spaces=True)


def encode(tok, s):
    if isinstance(tok, Tokenizer):
        return tok.encode(s, add_special_tokens=False).ids
    return tok.encode(s, add_special_tokens=False)


def decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=True)


def check_fixture(tok, fixtures, name):
    base = os.path.join(fixtures, "vocab", name)
    with open(base + ".gguf.inp", encoding="utf-8", newline="") as f:
        strings = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(base + ".gguf.out", encoding="utf-8") as f:
        lines = f.read().split("\n")
    bad = 0
    for s, line in zip(strings, lines):
        want = [int(x) for x in line.split()]
        got = encode(tok, s)
        if got != want:
            bad += 1
            print("%s: %r: got %s, want %s" % (name, s[:40], got[:20], want[:20]), file=sys.stderr)
    if bad:
        sys.exit("%s: the Hugging Face reference differs from the fixture on %d strings" % (name, bad))
    print("%s: reference matches the fixture on %d strings" % (name, len(strings)), file=sys.stderr)


# ---- Unicode data (UCD 15.0) ---------------------------------------------------

def read_ucd():
    cat, age = {}, {}
    first = None
    with open(os.path.join(UCD, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fld = line.split(";")
            cp = int(fld[0], 16)
            if fld[1].endswith(", First>"):
                first = cp
                continue
            if fld[1].endswith(", Last>"):
                for c in range(first, cp + 1):
                    cat[c] = fld[2]
                continue
            cat[cp] = fld[2]
    with open(os.path.join(UCD, "DerivedAge.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, a = (x.strip() for x in line.split(";"))
            lo, _, hi = rng.partition("..")
            for c in range(int(lo, 16), int(hi or lo, 16) + 1):
                age[c] = tuple(int(x) for x in a.split("."))
    return cat, age


def bert_exceptions(cat, age, norm):
    exc = set(CATEGORY_CHANGED)
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        if c in age and age[c] > (8, 0):
            exc.add(c)
        elif c not in cat and norm.normalize_str(chr(c)) != chr(c):
            exc.add(c)  # unassigned in 15.0, lowercased by Rust's newer tables
    return exc


def ranges(cps):
    out, run = [], None
    for c in sorted(cps):
        if run and c == run[1] + 1:
            run[1] = c
        else:
            run = [c, c]
            out.append(run)
    return out


def unicode_ref(exc):
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    lines = []
    for b in range(0, 0x110000, BLOCK):
        data = bytearray()
        for c in range(b, b + BLOCK):
            if 0xD800 <= c <= 0xDFFF or c in exc:
                continue
            parts = len(pre.pre_tokenize_str("a" + chr(c) + "a"))
            data += norm.normalize_str(chr(c)).encode("utf-8") + bytes([0xFF, parts])
        lines.append("b %x %08x" % (b, fnv32(data)))
    return lines


# ---- random strings --------------------------------------------------------------

WORDS = ("the quick brown fox jumps over lazy dog Hello World hello world THE Tokenizer tokenizer "
         "naïve café résumé Führer Straße jalapeño São Paulo Zürich don't it's I'm we're they've can't "
         "won't y'all o'clock rock'n'roll e-mail co-operate state-of-the-art 3.14 1,000,000 2024-06-01 "
         "12:30 $5 100% #tag @user C++ x86_64 UTF-8 README.md http://example.com/a?b=c&d=e "
         "user@example.org unbelievable antidisestablishmentarianism supercalifragilistic").split()
SCRIPTS = [
    "Ελληνικά γλώσσα ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ", "Привет мир, как дела? ЁЖИК", "Բարեւ աշխարհ", "გამარჯობა",
    "مرحبا بالعالم، كيف حالك؟", "שָׁלוֹם עוֹלָם", "नमस्ते दुनिया", "বাংলা ভাষা", "தமிழ் மொழி",
    "สวัสดีชาวโลก", "ສະບາຍດີ", "កាន់តែពិសេស", "မြန်မာ", "ሰላም ልዑል", "Tiếng Việt có dấu: Cửa Việt",
    "我想在apple工作1314151天～", "日本語のテキスト、カタカナとひらがな。", "한국어 텍스트입니다 안녕하세요",
    "中文標點：「你好」，『世界』！", "𠜎𠜱𠝹𠱓 𪚥 𫝀", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３！", "ﾊﾝｶｸｶﾀｶﾅ",
    "İstanbul ıi İI", "ǅǆǄ ǈ ǋ", "ﬁﬂﬀ ﬃ ﬆ", "Å K Ω ℃", "𝐀𝐁𝐂 𝔸𝔹 𝒜", "①②③ ⅫⅣ ½¾ x² H₂O",
    "a\u0301e\u0301 o\u0308 n\u0303 a\u0323\u0302 a\u0302\u0323", "x\U0001D16D\U0001D165y \U0001D15F",
    "Ǖ ǖ ṩ ẛ̣ ᾂ ᾷ", "— – ‐ … • · ‹› «» „“ ‘’ ¿¡ ‽ ※ § ¶ † ‡", "™ © ® ℠ № ℗ ℮",
    "€ £ ¥ ₹ ₽ ₩ ¢", "→ ⇒ ∀ ∃ ∈ ∑ ∫ ≈ ≠ ≤ √ ∞", "┌─┐ │ └─┘ ░▒▓ ■□▪", "♠♣♥♦ ♪♫ ☀☁☂ ✓✗ ★☆",
]
EMOJI = ["😀", "😁", "🦙", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇩🇪", "🇯🇵", "✨", "❤️", "😶\u200d🌫️",
         "🚀", "✅", "🤖", "🧪", "🏳️\u200d🌈", "👋🏿", "1️⃣", "©️", "🀄", "🎉"]
CODE = ["def f(x):\n    return x ** 2\n", "int main(void) { return 0; }", "a->b = *p++;",
        "for (i = 0; i < n; i++) {\n\tsum += a[i];\n}", "<div class=\"x\">&nbsp;</div>",
        "if (a && b || !c) x |= 0xFF;", "// comment\n/* block */", "#include <stdio.h>",
        "SELECT * FROM t WHERE id = 42;", "let s = `${a}-${b}`;", "fn main() -> Result<(), E> {}",
        "$ ls -la ~/.cache | grep 'x'", "{\"key\": [1, 2.5, null, true]}", "x := y // 2",
        "    indented\n        more\n", "\\begin{equation} e^{i\\pi} + 1 = 0 \\end{equation}",
        "@decorator\nclass A(B):\n    pass", "a_b__c___d", "CamelCaseWordsHere", "snake_case_words"]
SPACES = [" ", "  ", "   ", "    ", "\t", "\n", "\n\n", "\r\n", " \t ", "\u00a0", "\u3000", "\u2003",
          "\u2028", "\u200b", "\x0b", "\x0c", "\x85", "          "]
CONTROLS = ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\u00ad", "\u200d", "\u200e", "\ufeff", "\ue000",
            "\uf8ff", "\ufffd", "\u0378", "\U000F0000", "\u2060", "\u061c"]
RANDOM_RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x250, 0x2FF), (0x300, 0x36F), (0x370, 0x52F),
                 (0x531, 0x58A), (0x591, 0x6FF), (0x900, 0xDFF), (0xE00, 0xEFF), (0x10A0, 0x10FF),
                 (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x2BFF), (0x2E80, 0x2FDF), (0x3000, 0x30FF),
                 (0x3130, 0x318F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF), (0xAC00, 0xD7A3),
                 (0xF900, 0xFAFF), (0xFB00, 0xFDFF), (0xFE00, 0xFFFD), (0x10000, 0x1013F),
                 (0x1D400, 0x1D7FF), (0x1F000, 0x1F6FF), (0x20000, 0x2A6DF), (0x2F800, 0x2FA1F)]


def make_strings(rng, usable):
    def rand_cp():
        lo, hi = rng.choice(RANDOM_RANGES)
        for _ in range(100):
            c = rng.randint(lo, hi)
            if usable(c):
                return chr(c)
        return "x"

    def fragment():
        k = rng.random()
        if k < 0.30:
            w = rng.choice(WORDS)
            r = rng.random()
            return w.upper() if r < 0.1 else w.capitalize() if r < 0.25 else w
        if k < 0.45:
            s = rng.choice(SCRIPTS)
            i = rng.randrange(len(s))
            return s[i:i + rng.randint(1, 24)]
        if k < 0.53:
            return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
        if k < 0.61:
            return rng.choice(CODE)
        if k < 0.68:
            return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12)))
        if k < 0.74:
            return rng.choice(CONTROLS)
        if k < 0.80:
            return "".join(rand_cp() for _ in range(rng.randint(1, 6)))
        if k < 0.86:
            return rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") * rng.randint(1, 4)
        if k < 0.87:
            return rng.choice("abcxyzé") * rng.randint(97, 104)  # around BERT's 100-character limit
        return rng.choice(SPACES) * rng.randint(1, 3)

    out = []
    while len(out) < N_STRINGS:
        n = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 8, 12])
        parts = []
        for _ in range(n):
            parts.append(fragment())
            r = rng.random()
            parts.append(" " if r < 0.6 else "" if r < 0.8 else rng.choice(SPACES))
        s = "".join(parts)
        if rng.random() < 0.1:
            s = rng.choice(SPACES) + s
        if any(t in s for t in LLAMA_SPECIAL_TEXTS + BERT_SPECIAL_TEXTS):
            continue
        out.append(s)
    return out


def write_ref(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for h in header:
            f.write("# " + h + "\n")
        for r in rows:
            f.write(r + "\n")


README = """# tests/data/tok_spm_bert

Reference data for the SentencePiece BPE ("llama") and WordPiece ("bert")
tokenizers, read by `tests/test_tokenizer_spm.c`. Made by
`scripts/gen_tokenizer_spm_bert_ref.py` (the only way it is produced; it
says how to run it) with Hugging Face `tokenizers` and `transformers`
(versions pinned in `scripts/tokenizer-requirements.txt`) from the shared
vocabulary fixtures `ggml-vocab-llama-spm.gguf` and `ggml-vocab-bert-bge.gguf`.

Hashes are 32-bit FNV-1a (offset basis 0x811C9DC5, prime 0x01000193),
written as 8 hex digits. Lines starting with `#` are comments.

- `strings.txt`: the test strings, one record each: the string's length in
  bytes (decimal), a space, its UTF-8 bytes, a newline.
- `llama-spm.ref`, `bert-bge.ref`: one line per string, in order:
  `N IDS DEC`, or `-` (bert only) for a string with a code point left out
  of the Unicode comparison (below). N is the number of ids Hugging Face's tokenizer gives the
  string (no special tokens added, none parsed), IDS the hash of those ids
  as little-endian int32s, DEC the hash of the UTF-8 of
  `decode(ids, skip_special_tokens=True)`.
- `bert-unicode.ref`: `x LO HI` lines list the code points (hex ranges) left
  out (see the script: Unicode versions differ); `b START HASH` lines hash,
  for the code points START .. START+1023 in order, leaving out surrogates
  and those listed, each one's bytes: the UTF-8 of BERT's normalization of
  that single character, 0xFF, and the number of pieces (1..3) the BERT
  pre-tokenizer cuts "a" + character + "a" into.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(ROOT), "shared", "fixtures"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "tok_spm_bert"))
    ap.add_argument("--show", type=int, default=-1)
    a = ap.parse_args()

    llama_v = read_vocab(os.path.join(a.fixtures, "vocab", "ggml-vocab-llama-spm.gguf"))
    bert_v = read_vocab(os.path.join(a.fixtures, "vocab", "ggml-vocab-bert-bge.gguf"))
    llama, bert = llama_tokenizer(llama_v), bert_tokenizer(bert_v)
    check_fixture(llama, a.fixtures, "ggml-vocab-llama-spm")
    check_fixture(bert, a.fixtures, "ggml-vocab-bert-bge")

    norm = normalizers.BertNormalizer(lowercase=True)
    cat, age = read_ucd()
    exc = bert_exceptions(cat, age, norm)

    def usable(c):
        return not (0xD800 <= c <= 0xDFFF) and c not in exc

    strings = make_strings(random.Random(SEED), usable)
    if a.show >= 0:
        s = strings[a.show]
        print(repr(s))
        for name, tok in (("llama", llama), ("bert", bert)):
            ids = encode(tok, s)
            print(name, ids, repr(decode(tok, ids)))
        return

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "strings.txt"), "wb") as f:
        for s in strings:
            b = s.encode("utf-8")
            f.write(b"%d " % len(b) + b + b"\n")
    for name, tok in (("llama-spm", llama), ("bert-bge", bert)):
        rows = []
        for s in strings:
            if tok is bert and not all(usable(ord(c)) for c in s):
                rows.append("-")  # a character whose Unicode data differs (see above)
                continue
            ids = encode(tok, s)
            rows.append("%d %08x %08x" % (len(ids), ids_hash(ids), fnv32(decode(tok, ids).encode("utf-8"))))
        write_ref(os.path.join(a.out, name + ".ref"),
                  ["Hugging Face reference for ggml-vocab-%s.gguf: N IDS DEC per string of strings.txt" % name,
                   "made by scripts/gen_tokenizer_spm_bert_ref.py"], rows)
    rows = ["x %x %x" % (lo, hi) for lo, hi in ranges(exc)] + unicode_ref(exc)
    write_ref(os.path.join(a.out, "bert-unicode.ref"),
              ["Hugging Face BertNormalizer(lowercase) + BertPreTokenizer per code point, hashed per %d" % BLOCK,
               "made by scripts/gen_tokenizer_spm_bert_ref.py"], rows)
    with open(os.path.join(a.out, "README.md"), "w", encoding="utf-8") as f:
        f.write(README)


if __name__ == "__main__":
    main()
