#!/usr/bin/env python3
"""gen_tokenizer_parity.py -- writes tests/data/tokenizer_parity/: a fixed set of
>= 10,000 diverse test strings and, for every vocabulary family kvik's
tokenizer supports, a 32-bit hash of the token ids Hugging Face `tokenizers`
gives each string. tests/test_tokenizer_parity.c encodes the same strings
with kvik and compares the hashes. This script is the only way the data is
produced; the file formats are in tests/data/tokenizer_parity/README.md,
which this script also writes.

Setup (once). The venv lives OUTSIDE the repository, by default
~/.cache/kvik/tok-venv (override with $KVIK_TOK_VENV or --venv DIR); the pins
are in scripts/tokenizer-requirements.txt:

    python3 scripts/gen_tokenizer_parity.py --setup

Run (from anywhere; if the interpreter lacks `tokenizers` the script re-runs
itself with the venv's python):

    python3 scripts/gen_tokenizer_parity.py            # regenerate everything
    python3 scripts/gen_tokenizer_parity.py --check    # self-checks only
    python3 scripts/gen_tokenizer_parity.py --show FAMILY INDEX [INDEX...]

--show prints a string and Hugging Face's ids for it (what the C test
cannot print, as it only has the hash). FAMILY is a hash-file stem
(`smollm2-qwen2`, `gpt2vocab-falcon`, `fixture-mpt`, ...).

Inputs: the default model's vocabulary (SmolLM2-135M-Instruct Q4_1 from
$KVIK_MODELS or ~/.cache/kvik/models, `make model`) and the shared fixture
vocabularies ($KVIK_FIXTURES/vocab, else ../shared/fixtures/vocab beside the
repository). Only the tokenizer.* metadata is read, by the small GGUF
reader below.

What is compared, and how the reference is built:

  * Byte-level BPE families: a vocabulary's tokens and merges, combined with
    the pre-tokenizer pipeline that family's real tokenizer.json uses
    (PIPELINES below: Split regexes with their behaviour, Digits,
    Punctuation, ByteLevel), encoded by `tokenizers` with add_special_tokens
    off and special tokens NOT parsed (encode_special_tokens = True);
    non-special added tokens (GGUF type USER_DEFINED) are still matched, as
    Hugging Face always does. Each pipeline runs on two vocabularies: the
    default model's (49,152 tokens; it has no merges between digits, so it
    cannot tell digit groupings apart) and GPT-2's (50,257 tokens, with
    multi-digit tokens); the NFC twins of a split (gpt2-nfc, digits-gpt2-nfc,
    qwen2 without NFC) run on the default model's only. The NFC normalizer
    is applied where the real tokenizer.json has it (Qwen/Qwen2, MPT and OLMo
    with GPT-NeoX's tokenizer, Command-R); --check counts the strings it
    changes.
  * The real fixture vocabularies (gpt-2, starcoder, refact, mpt,
    deepseek-coder with their own pipelines; llama-spm as SentencePiece BPE
    with byte fallback; bert-bge as WordPiece), rebuilt from their GGUF the
    way the tokenizer.json they came from is laid out. --check first
    verifies each rebuilt tokenizer against the fixture's own .inp/.out ids.
  * Strings that are not valid UTF-8 cannot enter Hugging Face. kvik reads
    each byte that does not start a valid sequence (lone continuation bytes,
    truncated sequences, overlong forms, encoded surrogates, 0xF5..0xFF) as a
    character of its own of category "other" (\\p{C}) and encodes it as its
    byte. The reference does exactly that: every such byte is replaced by a
    private-use character (U+E000, also \\p{C}) for the pre-tokenizer stages
    up to ByteLevel, the pieces are mapped back to the original bytes, and
    each piece's bytes go through the stages after ByteLevel (falcon's) and
    the BPE model (`model.tokenize`). Added tokens are matched first,
    leftmost-longest, as Hugging Face does. So an invalid byte joins a
    neighbouring piece exactly where the regex would put a \\p{C} character
    (" \\xff!" is one piece under GPT-2's ` ?[^\\s\\p{L}\\p{N}]+`), which
    cutting the string at invalid bytes would not do; --check also verifies
    this piecewise path against the full encode on every valid string. With
    NFC, each run of valid UTF-8 between invalid bytes is normalized by the
    reference's normalizer first (an invalid byte composes with nothing,
    like the private-use placeholder). The
    SentencePiece and WordPiece families skip invalid strings (no sensible
    Hugging Face reference: their normalizers work on characters).
  * Unicode versions: Hugging Face's regexes use Oniguruma's tables, but its
    Digits pre-tokenizer uses Rust's char::is_numeric, which in the pinned
    build knows Unicode 16's new digits (U+11DE0..U+11DE9, U+16FF4..U+16FF6).
    kvik pins its tables to UCD 15.0 for every rule, so the strings hold no
    character that is unassigned in 15.0 and numeric in 16 (the reference
    itself mixes two versions there; see tests/data/tokenizer_parity/README.md).
  * ignore_merges (a word that is a token whole is not merged) is set for
    Llama 3 and Tekken, as their tokenizer.json files do; with these
    vocabularies (every token is reachable by merges) it changes nothing
    (--check reports it), so tests/test_tokenizer.c checks it on a vocabulary
    where it does.
  * Special-token text: "<unk>", "<s>", "</s>", "<|endoftext|>" and other
    control-token texts appear in the strings (special-text category and
    edge cases) and must encode as plain text, special tokens not parsed.
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REQS = os.path.join(HERE, "tokenizer-requirements.txt")
DEFAULT_VENV = os.environ.get("KVIK_TOK_VENV") or os.path.join(
    os.path.expanduser("~"), ".cache", "kvik", "tok-venv")
OUT_DIR = os.path.join(ROOT, "tests", "data", "tokenizer_parity")
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

SEED = 20240611
N_STRINGS = 10600          # random strings, plus the hand-written edge cases
MAX_DATA_BYTES = 2000000   # everything under OUT_DIR stays below this (2 MB)
# Hash files another script makes from the same strings.lps (kept, counted):
# scripts/gen_tiktoken_parity.py, OpenAI's tiktoken on cl100k_base.
OTHER_HASHES = {"tiktoken-cl100k": ("cl100k_base (tiktoken ranks, `kvik vocab-import`)",
                                    "tiktoken itself: cl100k_base's pattern and ranks "
                                    "(scripts/gen_tiktoken_parity.py; rerun it after this script)")}

FNV32_BASIS = 0x811C9DC5
FNV32_PRIME = 0x01000193

# String flags (strings.lps)
FLAG_INVALID_UTF8 = 1

# Hash-file flags
HFLAG_SKIPS_INVALID = 1


def default_model():
    d = os.environ.get("KVIK_MODELS")
    if d:
        return os.path.join(d, MODEL_NAME)
    return os.path.join(os.path.expanduser("~"), ".cache", "kvik", "models", MODEL_NAME)


def fixtures_dir():
    d = os.environ.get("KVIK_FIXTURES")
    if d:
        return os.path.join(d, "vocab")
    return os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "vocab")


def setup(venv_dir):
    if not os.path.exists(os.path.join(venv_dir, "bin", "python")):
        subprocess.check_call([sys.executable, "-m", "venv", venv_dir])
    pip = os.path.join(venv_dir, "bin", "pip")
    subprocess.check_call([pip, "install", "-r", REQS])
    print("venv ready: %s" % venv_dir)


def reexec_in_venv(venv_dir):
    try:
        import tokenizers  # noqa: F401
        return
    except ImportError:
        pass
    py = os.path.join(venv_dir, "bin", "python")
    if not os.path.exists(py) or os.path.realpath(py) == os.path.realpath(sys.executable):
        sys.exit("tokenizers is not installed; run: python3 %s --setup" % sys.argv[0])
    os.execv(py, [py] + sys.argv)


# --------------------------------------------------------------------------
# GGUF metadata reader (only what the tokenizer keys need).
#
# header: "GGUF", u32 version, u64 n_tensors, u64 n_kv; then n_kv times
# (u64 key length, key bytes, u32 type, value). Strings are u64 length +
# bytes; arrays are u32 element type + u64 count + elements.

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
           10: "Q", 11: "q", 12: "d"}


def read_gguf_meta(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    pos = [4]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, data, pos[0])[0]
        pos[0] += struct.calcsize("<" + fmt)
        return v

    def string():
        n = take("Q")
        s = data[pos[0]:pos[0] + n]
        pos[0] += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et = take("I")
            n = take("Q")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[t])

    take("I")  # version
    take("Q")  # tensors
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string().decode()
        kv[key] = value(take("I"))
    return kv


class Vocab:
    """The tokenizer.* metadata of one GGUF file."""

    def __init__(self, path):
        kv = read_gguf_meta(path)
        self.path = path
        self.model = kv["tokenizer.ggml.model"].decode()
        self.pre = kv.get("tokenizer.ggml.pre", b"default").decode()
        self.tokens = [t.decode("utf-8") for t in kv["tokenizer.ggml.tokens"]]
        self.types = kv.get("tokenizer.ggml.token_type") or [1] * len(self.tokens)
        self.merges = [m.decode("utf-8") for m in kv.get("tokenizer.ggml.merges", [])]
        self.scores = kv.get("tokenizer.ggml.scores")
        self.unk = kv.get("tokenizer.ggml.unknown_token_id")


TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


# --------------------------------------------------------------------------
# GPT-2's byte-level alphabet: byte b is written as a printable code point.

def byte_to_char_table():
    printable = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100)))
    table = {}
    extra = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


B2C = byte_to_char_table()
C2B = {c: b for b, c in B2C.items()}


def bytes_to_bl(bs):
    return "".join(B2C[b] for b in bs)


def bl_to_bytes(s):
    return bytes(C2B[c] for c in s)


# --------------------------------------------------------------------------
# Pre-tokenizer pipelines, as in each model family's tokenizer.json.

RE_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
RE_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
             r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
             r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_DSV3 = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
           r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_BLOOM = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"

# DeepSeek LLM's letter class (deepseek-llm and DeepSeek-V2 tokenizer.json),
# as code point ranges. Some ends are compatibility characters whose NFC form
# differs (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A): they are written
# by number so no editor or copy can normalize them.
DS_LETTER_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]


def char_class(ranges):
    out = []
    for lo, hi in ranges:
        out.append(chr(lo) if lo == hi else chr(lo) + "-" + chr(hi))
    return "".join(out)


RE_DS_LETTERS = "\\s?[" + char_class(DS_LETTER_RANGES) + "]+"
RE_DS_PUNCT = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
RE_DS_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
RE_DSV3_CJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"

# Each pipeline: (stages up to and including ByteLevel, stages after it,
# BPE ignore_merges, NFC normalizer). A stage is (kind, argument).
PIPELINES = {
    # GPT-2, Phi-2, Jais (and kvik's "default")
    "gpt2": ([("bytelevel_regex", None)], [], False, False),
    # MPT, OLMo: GPT-NeoX-20B's tokenizer.json, which normalizes with NFC
    "gpt2-nfc": ([("bytelevel_regex", None)], [], False, True),
    # SmolLM, StarCoder, Refact, EXAONE, CodeShell
    "digits-gpt2": ([("digits", True), ("bytelevel_regex", None)], [], False, False),
    # Command-R: the same with NFC
    "digits-gpt2-nfc": ([("digits", True), ("bytelevel_regex", None)], [], False, True),
    # Llama 3 (ignore_merges is set in its tokenizer.json), GLM-4; DBRX, Smaug
    # and ChatGLM share the split (kvik sets no ignore_merges for them; on
    # these vocabularies and strings it changes nothing, --check counts it)
    "llama3": ([("split", RE_LLAMA3), ("bytelevel", None)], [], True, False),
    # Qwen, Qwen2 (NFC normalizer)
    "qwen2-nfc": ([("split", RE_QWEN2), ("bytelevel", None)], [], False, True),
    # StableLM 2: Qwen2's split without the normalizer
    "qwen2": ([("split", RE_QWEN2), ("bytelevel", None)], [], False, False),
    # Falcon: digits are grouped AFTER the byte-level mapping, on its alphabet
    "falcon": ([("punctuation", None), ("bytelevel_regex", None)],
               [("digits", False), ("split", "[0-9][0-9][0-9]")], False, False),
    "deepseek-llm": ([("split", "[\r\n]"), ("split", RE_DS_LETTERS), ("split", RE_DS_PUNCT),
                      ("split", r"\s+$"), ("split", RE_DS_CJK), ("digits", True),
                      ("bytelevel", None)], [], False, False),
    "deepseek-coder": ([("split", "[\r\n]"), ("split", r"\s?\p{L}+"), ("split", r"\s?\p{P}+"),
                        ("split", RE_DS_CJK), ("digits", True), ("bytelevel", None)], [], False,
                       False),
    "deepseek-v3": ([("split", r"\p{N}{1,3}"), ("split", RE_DSV3_CJK), ("split", RE_DSV3),
                     ("bytelevel", None)], [], False, False),
    # Mistral Nemo's tekken (ignore_merges, as llama.cpp's loader has it)
    "tekken": ([("split", RE_TEKKEN), ("bytelevel", None)], [], True, False),
    # BLOOM, Poro
    "bloom": ([("split", RE_BLOOM), ("bytelevel", None)], [], False, False),
}

# The tokenizer.ggml.pre names tests/test_tokenizer_parity.c checks against
# each pipeline (llama.cpp's name table groups them the same way).
PRE_NAMES = {
    "gpt2": "default, gpt-2, phi-2, jais",
    "gpt2-nfc": "mpt, olmo",
    "digits-gpt2": "smollm, starcoder, refact, exaone, codeshell",
    "digits-gpt2-nfc": "command-r",
    "llama3": "llama3, llama-bpe, llama-v3, glm4, falcon3, pixtral; dbrx, smaug-bpe, chatglm-bpe",
    "qwen2-nfc": "qwen2, qwen, deepseek-r1-qwen",
    "qwen2": "stablelm2",
    "falcon": "falcon",
    "deepseek-llm": "deepseek-llm",
    "deepseek-coder": "deepseek-coder",
    "deepseek-v3": "deepseek-v3",
    "tekken": "tekken",
    "bloom": "bloom, poro-chat",
}

# Pipelines run on the default model's vocabulary only (the GPT-2 vocabulary
# adds nothing an NFC twin of the same split does not already show there).
SMOLLM2_ONLY = ("gpt2-nfc", "digits-gpt2-nfc", "qwen2")


def make_pretokenizer(stages):
    from tokenizers import Regex, pre_tokenizers as pt
    out = []
    for kind, arg in stages:
        if kind == "bytelevel_regex":
            out.append(pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True))
        elif kind == "bytelevel":
            out.append(pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False))
        elif kind == "split":
            out.append(pt.Split(Regex(arg), behavior="isolated", invert=False))
        elif kind == "digits":
            out.append(pt.Digits(individual_digits=arg))
        elif kind == "punctuation":
            out.append(pt.Punctuation(behavior="contiguous"))
        else:
            raise ValueError(kind)
    if not out:
        return None
    return out[0] if len(out) == 1 else pt.Sequence(out)


# --------------------------------------------------------------------------
# Reference tokenizers.

class ByteLevelRef:
    """A byte-level BPE vocabulary with one pipeline, in Hugging Face."""

    def __init__(self, vocab, pipeline):
        from tokenizers import AddedToken, Tokenizer, models, normalizers
        pre, post, ignore_merges, nfc = PIPELINES[pipeline]
        # The model's vocabulary holds every token, so ids stay the GGUF's;
        # the user-defined ones are also added tokens, matched in the raw
        # text before pre-tokenization. (Only a byte that valid UTF-8 never
        # has can reach such a token through BPE: deepseek-coder's 0xF5..0xFF,
        # 0xC0, 0xC1 are user-defined tokens; such a byte gets that token.)
        table = {}
        user = []
        for i, (t, ty) in enumerate(zip(vocab.tokens, vocab.types)):
            table.setdefault(t, i)
            if ty == TT_USER_DEFINED:
                user.append(i)
        merges = []
        for m in vocab.merges:
            a, b = m.split(" ")
            merges.append((a, b))
        unk = vocab.tokens[vocab.unk] if vocab.unk is not None else None
        model = models.BPE(vocab=table, merges=merges, unk_token=unk, fuse_unk=False,
                           byte_fallback=False, ignore_merges=ignore_merges)
        tok = Tokenizer(model)
        if nfc:
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = make_pretokenizer(pre + post)
        specials = [AddedToken(vocab.tokens[i], special=True, normalized=False)
                    for i, ty in enumerate(vocab.types) if ty == TT_CONTROL]
        users = [AddedToken(vocab.tokens[i], special=False, normalized=False) for i in user]
        tok.add_special_tokens(specials)
        tok.add_tokens(users)
        tok.encode_special_tokens = True
        for i in user:
            assert tok.token_to_id(vocab.tokens[i]) == i, vocab.tokens[i]
        self.tok = tok
        self.pre_a = make_pretokenizer(pre)
        self.pre_b = make_pretokenizer(post)
        self.user = {vocab.tokens[i].encode(): i for i in user}
        self.user_lens = sorted({len(k) for k in self.user}, reverse=True)
        self.nfc = normalizers.NFC() if nfc else None
        self.skips_invalid = False

    def encode(self, s):
        return self.tok.encode(s, add_special_tokens=False).ids

    def encode_batch(self, strs):
        return [e.ids for e in self.tok.encode_batch(strs, add_special_tokens=False)]

    # ---- the piecewise path (works on bytes, valid or not) ----

    def encode_bytes(self, raw):
        out = []
        start = 0
        i = 0
        while i < len(raw):
            hit = None
            for n in self.user_lens:
                tid = self.user.get(raw[i:i + n])
                if tid is not None:
                    hit = (n, tid)
                    break
            if hit:
                out += self.encode_segment(raw[start:i])
                out.append(hit[1])
                i += hit[0]
                start = i
            else:
                i += 1
        out += self.encode_segment(raw[start:])
        return out

    def encode_segment(self, raw):
        if not raw:
            return []
        if self.nfc is not None:
            raw = nfc_runs(raw, self.nfc)
        text, sub_to_raw = substitute_invalid(raw)
        pieces = self.pre_a.pre_tokenize_str(text)
        sub = text.encode("utf-8")
        ids = []
        pos = 0
        for piece, _ in pieces:
            pb = bl_to_bytes(piece)
            end = pos + len(pb)
            assert sub[pos:end] == pb
            a, b = sub_to_raw[pos], sub_to_raw[end]
            assert a >= 0 and b >= 0, "piece boundary inside a placeholder"
            mapped = bytes_to_bl(raw[a:b])
            if self.pre_b is not None:
                subs = [p for p, _ in self.pre_b.pre_tokenize_str(mapped)]
            else:
                subs = [mapped]
            for p in subs:
                ids += [t.id for t in self.tok.model.tokenize(p)]
            pos = end
        assert pos == len(sub)
        return ids


PLACEHOLDER = "\ue000"  # private use: category Co, like kvik's invalid bytes


def utf8_atoms(raw):
    """kvik's reading of bytes: (start, length, valid) per atom. A byte that
    does not start a valid UTF-8 sequence is an atom of its own."""
    i = 0
    out = []
    while i < len(raw):
        b = raw[i]
        n = 1 if b < 0x80 else 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF \
            else 4 if 0xF0 <= b <= 0xF4 else 0
        ok = False
        if n == 1:
            ok = True
        elif n and i + n <= len(raw):
            try:
                raw[i:i + n].decode("utf-8")
                ok = True
            except UnicodeDecodeError:
                ok = False
        if ok:
            out.append((i, n, True))
            i += n
        else:
            out.append((i, 1, False))
            i += 1
    return out


def nfc_runs(raw, normalizer):
    """raw with each maximal run of valid UTF-8 put in NFC by the reference's
    normalizer; invalid bytes stay (kvik: each is a character that composes
    with nothing, as the placeholder below would)."""
    out = []
    run = []
    for start, n, ok in utf8_atoms(raw):
        if ok:
            run.append(raw[start:start + n])
            continue
        if run:
            out.append(normalizer.normalize_str(b"".join(run).decode("utf-8")).encode("utf-8"))
            run = []
        out.append(raw[start:start + 1])
    if run:
        out.append(normalizer.normalize_str(b"".join(run).decode("utf-8")).encode("utf-8"))
    return b"".join(out)


def substitute_invalid(raw):
    """The text with each invalid byte replaced by PLACEHOLDER, and a map
    from byte offsets in its UTF-8 to offsets in raw (-1 inside a
    placeholder)."""
    parts = []
    sub_to_raw = []
    for start, n, ok in utf8_atoms(raw):
        if ok:
            parts.append(raw[start:start + n].decode("utf-8"))
            sub_to_raw += [start + k for k in range(n)]
        else:
            parts.append(PLACEHOLDER)
            sub_to_raw += [start, -1, -1]
    sub_to_raw.append(len(raw))
    return "".join(parts), sub_to_raw


def spm_merges(vocab):
    """Merges for a SentencePiece BPE vocabulary, the way Hugging Face's
    converter derives them: every split of a piece into two pieces of the
    vocabulary, ranked by the merged piece's score (higher first), ties by
    the merged piece's id, then the two halves' ids."""
    ids = {}
    for i, t in enumerate(vocab.tokens):
        ids.setdefault(t, i)
    cands = []
    for i, t in enumerate(vocab.tokens):
        for k in range(1, len(t)):
            left, right = t[:k], t[k:]
            if left in ids and right in ids:
                cands.append((-vocab.scores[i], i, ids[left], ids[right], left, right))
    cands.sort()
    return [(c[4], c[5]) for c in cands]


class SpmRef:
    """llama-spm: SentencePiece BPE with byte fallback, as Llama 2's
    tokenizer.json: normalizer Prepend("\u2581") + Replace(" ", "\u2581"), no
    pre-tokenizer, BPE(unk <unk>, fuse_unk, byte_fallback)."""

    def __init__(self, vocab):
        from tokenizers import AddedToken, Tokenizer, models, normalizers
        table = {}
        for i, t in enumerate(vocab.tokens):
            table.setdefault(t, i)
        model = models.BPE(vocab=table, merges=spm_merges(vocab), unk_token=vocab.tokens[vocab.unk],
                           fuse_unk=True, byte_fallback=True)
        tok = Tokenizer(model)
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                               normalizers.Replace(" ", "\u2581")])
        tok.add_special_tokens([AddedToken(vocab.tokens[i], special=True, normalized=False)
                                for i, ty in enumerate(vocab.types)
                                if ty in (TT_CONTROL, TT_UNKNOWN)])
        tok.encode_special_tokens = True
        self.tok = tok
        self.skips_invalid = True

    def encode(self, s):
        return self.tok.encode(s, add_special_tokens=False).ids

    def encode_batch(self, strs):
        return [e.ids for e in self.tok.encode_batch(strs, add_special_tokens=False)]


class WordPieceRef:
    """bert-bge: WordPiece as BAAI/bge's tokenizer.json: BertNormalizer
    (clean text, CJK spacing, lowercase and accent stripping), the BERT
    pre-tokenizer, WordPiece(unk [UNK], "##", 100 chars a word). The GGUF
    stores a word-initial piece as "\u2581piece" and a continuation as
    "piece"; bracketed names ([PAD], [unused0]) are kept as they are."""

    def __init__(self, vocab):
        from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
        table = {}
        for i, t in enumerate(vocab.tokens):
            if t.startswith("[") and t.endswith("]") and len(t) > 2:
                hf = t
            elif t.startswith("\u2581"):
                hf = t[1:]
            else:
                hf = "##" + t
            assert hf not in table, hf
            table[hf] = i
        self.table = table
        model = models.WordPiece(vocab=table, unk_token="[UNK]", continuing_subword_prefix="##",
                                 max_input_chars_per_word=100)
        tok = Tokenizer(model)
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                    strip_accents=None, lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.add_special_tokens([AddedToken(vocab.tokens[i], special=True, normalized=False)
                                for i, ty in enumerate(vocab.types) if ty == TT_CONTROL])
        tok.encode_special_tokens = True
        self.tok = tok
        self.skips_invalid = True

    def encode(self, s):
        return self.tok.encode(s, add_special_tokens=False).ids

    def encode_batch(self, strs):
        return [e.ids for e in self.tok.encode_batch(strs, add_special_tokens=False)]


# --------------------------------------------------------------------------
# Families: one hash file each. The C test's table names the same stems.
#   stem -> (vocabulary source, pipeline or kind)

FAMILIES = {}
for _p in PIPELINES:
    FAMILIES["smollm2-" + _p] = ("smollm2", _p)
    if _p not in SMOLLM2_ONLY:
        FAMILIES["gpt2vocab-" + _p] = ("gpt-2", _p)   # gpt2vocab-gpt2 is GPT-2 itself
for _f, _p in (("starcoder", "digits-gpt2"), ("refact", "digits-gpt2"), ("mpt", "gpt2-nfc"),
               ("deepseek-coder", "deepseek-coder")):
    FAMILIES["fixture-" + _f] = (_f, _p)
FAMILIES["fixture-llama-spm"] = ("llama-spm", "spm")
FAMILIES["fixture-bert-bge"] = ("bert-bge", "wordpiece")


def vocab_path(source):
    if source == "smollm2":
        return default_model()
    return os.path.join(fixtures_dir(), "ggml-vocab-%s.gguf" % source)


_vocab_cache = {}


def load_vocab(source):
    if source not in _vocab_cache:
        _vocab_cache[source] = Vocab(vocab_path(source))
    return _vocab_cache[source]


def build_ref(stem):
    source, kind = FAMILIES[stem]
    vocab = load_vocab(source)
    if kind == "spm":
        return SpmRef(vocab)
    if kind == "wordpiece":
        return WordPieceRef(vocab)
    return ByteLevelRef(vocab, kind)


def reference_ids(ref, raw, valid):
    if valid:
        return ref.encode(raw.decode("utf-8"))
    return ref.encode_bytes(raw)


def fnv1a32_ids(ids):
    h = FNV32_BASIS
    for b in struct.pack("<%di" % len(ids), *ids):
        h = ((h ^ b) * FNV32_PRIME) & 0xFFFFFFFF
    return h


def fnv1a32_bytes(data):
    h = FNV32_BASIS
    for b in data:
        h = ((h ^ b) * FNV32_PRIME) & 0xFFFFFFFF
    return h


# --------------------------------------------------------------------------
# The strings. Everything is drawn from one random.Random(SEED); the pools
# are lists (never sets), so the output does not depend on PYTHONHASHSEED.
# Category ids are stored per string (strings.lps) and named in the README.

CATEGORIES = [
    "edge", "latin", "cyrillic", "greek", "arabic", "hebrew", "devanagari", "thai",
    "hangul", "cjk", "other-scripts", "emoji", "whitespace", "digits", "numbers", "code",
    "english", "punctuation", "long-words", "invalid-utf8", "special-text", "mixed",
]
CAT = {name: i for i, name in enumerate(CATEGORIES)}


def crange(lo, hi):
    return [chr(c) for c in range(lo, hi + 1)]


LATIN_WORDS = [
    "café", "naïve", "résumé", "façade", "Ångström", "über", "Straße", "STRASSE", "Łódź",
    "São", "Paulo", "señor", "jalapeño", "crème", "brûlée", "Dvořák", "Škoda", "İstanbul",
    "ığdır", "ÆØÅ", "œuvre", "Œil", "ẞ", "ǅemal", "ǈ", "ﬁnance", "ﬂow", "Ĳssel", "Þór",
    "Ðoà", "Việt", "Nguyễn", "ﬀ", "Ørsted", "smørrebrød", "Kraków", "Zürich", "Ålesund",
    "Çağrı", "Ñandú", "à", "è", "ù", "ÿ", "õ", "÷", "×", "ā", "ē", "ī", "ō", "ū",
]
LATIN_LETTERS = (crange(0x41, 0x5A) + crange(0x61, 0x7A) + crange(0xC0, 0xD6) + crange(0xD8, 0xF6)
                 + crange(0xF8, 0x17F) + crange(0x180, 0x24F) + crange(0x1E00, 0x1EFF))
COMBINING = crange(0x300, 0x36F) + ["\u20d7", "\u1ab0", "\u1dc0", "\ufe20"]

CYRILLIC_WORDS = ["Привет", "мир", "съешь", "же", "ещё", "этих", "мягких", "французских",
                  "булок", "Україна", "ґанок", "їжак", "Єва", "Ђорђе", "Љубљана", "ЁЛКА",
                  "Москва", "щётка", "ЩИ", "Ѣ", "ѳита", "Ӂ"]
CYRILLIC = crange(0x400, 0x4FF)
GREEK_WORDS = ["Καλημέρα", "κόσμε", "ΑΒΓΔΕ", "ψυχή", "λόγος", "Ἀθῆναι", "ᾠδή", "ΐ", "ς",
               "Σίσυφος", "φιλοσοφία", "ΩΜΕΓΑ", "μ", "ϐϑϒ", "Ϗ"]
GREEK = crange(0x391, 0x3A1) + crange(0x3A3, 0x3CE) + crange(0x1F00, 0x1F15) + crange(0x1F80, 0x1FBC)
ARABIC_WORDS = ["مرحبا", "بالعالم", "العربية", "كتاب", "مَدْرَسَةٌ", "اللّٰه", "ـــــ", "ﷺ",
                "سلام", "فارسی", "اردو", "پاکستان", "ڤ", "٣٤٥", "۱۲۳", "؟", "،", "؛"]
ARABIC = crange(0x621, 0x64A) + crange(0x64B, 0x652) + crange(0x660, 0x669) + crange(0x6F0, 0x6F9)
HEBREW_WORDS = ["שלום", "עולם", "עִבְרִית", "בְּרֵאשִׁית", "ירושלים", "תל־אביב", "צה״ל", "א׳",
                "ﬡ", "ךםןףץ"]
HEBREW = crange(0x5D0, 0x5EA) + crange(0x5B0, 0x5BC) + ["\u05be", "\u05f3", "\u05f4"]
DEVANAGARI_WORDS = ["नमस्ते", "दुनिया", "हिन्दी", "भारत", "क़", "ज़्यादा", "श्री", "०१२३",
                    "।", "॥", "ॐ", "संस्कृतम्", "क्षत्रिय", "मराठी", "নমস্কার", "தமிழ்", "ગુજરાતી"]
DEVANAGARI = crange(0x905, 0x939) + crange(0x93E, 0x94D) + crange(0x966, 0x96F) + ["\u093c", "\u0964"]
THAI_WORDS = ["สวัสดี", "ชาวโลก", "ภาษาไทย", "กรุงเทพมหานคร", "๑๒๓", "ฯ", "ๆ", "ผู้ใหญ่", "น้ำ",
              "ສະບາຍດີ", "ភាសាខ្មែរ", "မြန်မာ"]
THAI = crange(0xE01, 0xE3A) + crange(0xE40, 0xE4E) + crange(0xE50, 0xE59)
HANGUL_WORDS = ["안녕하세요", "세계", "한국어", "텍스트입니다", "ㄱㄴㄷ", "ㅏㅑㅓ", "각", "힣",
                "\u1100\u1161\u11a8", "ᄀᄁ", "서울", "대한민국"]
HANGUL = crange(0xAC00, 0xACFF) + crange(0xD700, 0xD7A3) + crange(0x3131, 0x318E) + crange(0x1100, 0x1112)
CJK_WORDS = ["你好", "世界", "中文", "日本語", "東京", "ひらがな", "カタカナ", "テキスト", "漢字",
             "こんにちは", "ありがとう", "コンピューター", "ｶﾀｶﾅ", "ﾃｽﾄ", "ＡＢＣ", "ａｂｃ",
             "１２３", "！？", "。、", "「引用」", "『書名』", "【注意】", "《书》", "〜", "ー",
             "𠮷野家", "𪚥", "龥龦鿿", "丂", "㐀", "豈", "々", "〆", "ヶ", "ゝゞ", "㊀", "㍿"]
CJK = (crange(0x4E00, 0x4FFF) + crange(0x9F00, 0x9FFF) + crange(0x3041, 0x3096)
       + crange(0x30A1, 0x30FA) + ["\u30fc"] + crange(0xFF66, 0xFF9D) + crange(0xFF01, 0xFF5E)
       + crange(0x3400, 0x340F) + crange(0x20000, 0x2000F) + crange(0xF900, 0xF90F) + ["\u3000"])
OTHER_SCRIPTS = ["Բարև", "გამარჯობა", "ሰላም", "ᏣᎳᎩ", "ᠮᠣᠩᠭᠣᠯ", "བོད་ཡིག", "ꦗꦮ", "ߒߞߏ",
                 "𐐷𐐰", "𝐀𝐁𝐂", "𝔘𝔫𝔦", "𝟘𝟙𝟚", "ⰀⰁ", "ᚠᚢᚦ", "ᛗᛁᚾ", "𓀀𓁐", "𒀀", "ʕ•ᴥ•ʔ",
                 "ℌℑℜ", "Ⅻ", "ⅻ", "①②③", "⑴", "⒈", "½¼¾", "²³¹", "ⁿ", "ₐₑ", "ªº",
                 "\u180e", "\u2060", "\u00ad", "\u200e", "\u200f", "\u202e", "\ufeff", "\ufffd",
                 "\U000e0061", "\uffff", "\U0010ffff", "\ue000", "\U000f0000", "\u0378",
                 "\U0001fbf0"]

EMOJI = ["😀", "🎉", "👍", "❤️", "❤", "☺", "✨", "🚀", "🤖", "🧠", "🔥", "💯", "🙏", "😂",
         "🥲", "🫠", "🪿", "☕", "⚡", "✅", "❌", "⭐", "🌍", "🍕", "🐍", "🦀", "©️", "™️"]
SKIN = ["\U0001f3fb", "\U0001f3fc", "\U0001f3fd", "\U0001f3fe", "\U0001f3ff"]
ZWJ_SEQ = ["👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "🧑🏽‍🚀", "👩🏿‍🔬", "🏴‍☠️", "👁️‍🗨️", "❤️‍🔥", "🧔‍♂️",
           "👨🏻‍🤝‍👨🏿", "🐻‍❄️", "😶‍🌫️"]
FLAGS = ["🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷", "🇧🇷", "🇮🇳", "🇪🇺", "🇺🇦", "🇨🇭", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🏴󠁧󠁢󠁥󠁮󠁧󠁿"]
KEYCAPS = ["1️⃣", "#️⃣", "*️⃣", "0️⃣", "9⃣"]

WS_CHARS = [" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2000", "\u2002", "\u2003",
            "\u2009", "\u200a", "\u202f", "\u205f", "\u1680", "\u0085", "\u2028", "\u2029",
            "\x0b", "\x0c"]
NOT_WS = ["\u200b", "\u200c", "\u200d", "\ufeff", "\u180e", "\x1c", "\x1d", "\x1e", "\x1f",
          "\x00", "\x01", "\x7f", "\x1b"]

DIGITS_OTHER = ["٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "০১২৩", "๐๑๒๓", "０１２３４５６７８９",
                "𝟎𝟏𝟐𝟑", "²³¹⁴", "½⅓¼", "ⅠⅡⅢⅣ", "①②③", "〇一二三", "፩፪፫", "𑁦𑁧"]

PUNCT = (list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
         + ["…", "—", "–", "«", "»", "“", "”", "‘", "’", "¿", "¡", "·", "•", "§", "¶", "†", "‡",
            "※", "、", "。", "，", "！", "？", "：", "；", "「", "」", "【", "】", "《", "》", "‹", "›",
            "„", "‚", "′", "″", "‰", "⁂", "¦", "¨", "´", "¸", "ˆ", "˜", "°", "€", "£", "¥", "₹",
            "₿", "¢", "+", "−", "×", "÷", "=", "≠", "≤", "≥", "∞", "∑", "∫", "√", "©", "®",
            "™", "←", "→", "⇒", "★", "♥", "♪", "■", "□", "▲", "○", "●", "◆", "☐", "✓", "‿",
            "⁀", "॥", "۔", "،", "؟", "־", "׳", "〜", "〃", "゠", "・", "᠁", "꙳"])

ENGLISH_WORDS = ("the of and to in is was he for it with as his on be at by had are but from "
                 "or have an they which one you were all we her she there would their will when "
                 "who him been has more if no out so up said what its about than into them can "
                 "only other time new some could these two may first then do any like my now "
                 "over such our man me even most made after also did many off before must well "
                 "back through years where much your way down should because each just those "
                 "people how too little state good very make world still see own men work long "
                 "here get both between life being under never day same another know while "
                 "last might us great old year since against go came right used take three "
                 "tokenizer kvik model inference quantization benchmark throughput latency").split()
CONTRACTION_FORMS = ["I'm", "you're", "they've", "he'll", "she'd", "it's", "don't", "can't",
                     "won't", "isn't", "we'd", "I'll", "let's", "o'clock", "y'all", "ma'am"]
SUFFIXES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL",
            "'D", "'Re", "'Ve", "'Ll", "'lL", "'rE", "'sS", "'x", "'", "''", "'''", "\u2019s",
            "\u2019t", "\u2019ll", "'\u017f", "'\u212a", "'\u0130", "'ı", "'ß"]

CODE_SNIPPETS = [
    'def merge(a, b):\n    """Merge two sorted lists."""\n    i = j = 0\n    out = []\n'
    '    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n'
    '        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n',
    '#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; i++)\n'
    '\t\tprintf("%d: %s\\n", i, argv[i]);\n\treturn 0;\n}\n',
    '{"name": "kvik", "version": "0.1.0", "tags": ["llm", "c11"], "size": 1.5e9, "ok": true,\n'
    ' "nested": {"a": [1, 2, {"b": null}], "unicode": "\\u00e9\\ud83d\\ude00"}}',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test &amp; more</title></head>\n'
    '<body>\n  <p class="x">Hello, <b>world</b>!</p>\n  <!-- comment -->\n</body>\n</html>\n',
    'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n'
    '    println!("{:?}", v);\n}\n',
    'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC LIMIT 10;',
    'for f in *.txt; do\n  echo "$f" | sed -e \'s/\\.txt$/.md/\' >> out.log 2>&1\ndone\n',
    'const add = (a, b) => a + b;\nexport default { add, sub: (a, b) => a - b };\n',
    '    if (x != NULL && x->next) {\r\n        x = x->next;\r\n    }\r\n',
    'key: value\nlist:\n  - one\n  - two\nnested:\n    deep: [1, 2, 3]\n',
    '\\begin{equation}\n  E = mc^2 \\quad \\sum_{i=0}^{n} x_i^2\n\\end{equation}\n',
    '# Title\n\n* item one\n* item **two**\n\n```python\nprint("hi")\n```\n',
    'x+=1;y-=2;z*=3;w/=4;a%=5;b<<=1;c>>=2;d&=e|f^g;h=!i&&j||k;',
    '    \n\t\n        return None  # trailing spaces   \n',
    'class Foo(Bar):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n',
    'matrix = [[1, 2, 3],\n          [4, 5, 6]]\nprint(matrix[1][2])  # 6\n',
]
IDENT_PARTS = ["get", "set", "user", "Name", "ID", "_tmp", "buf", "len", "HTTPServer", "parse",
               "JSON", "x", "i", "snake_case", "camelCase", "PascalCase", "__init__", "kv_cache",
               "MAX_LEN", "utf8", "v2", "tok", "i18n"]

SPECIAL_TEXT = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "[CLS]",
                "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<fim_prefix>", "<fim_middle>",
                "<fim_suffix>", "<|padding|>", "<repo_name>", "<file_sep>",
                "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cfim\u2581hole\uff5c>",
                "[PAD32022]", "[PAD50277]", "[PAD49152]", "<0x41>", "<|User|>", "<pad>",
                "<|eot_id|>", "<|begin_of_text|>", "[unused0]", "<|", "|>", "<|im_start|"]

INVALID_FRAGMENTS = [
    b"\x80", b"\xbf", b"\x8f\x8f", b"\x80\x80\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
    b"\xf0\x9f", b"\xe4\xb8", b"\xc0\x80", b"\xc1\xbf", b"\xc0\xaf", b"\xe0\x80\xaf",
    b"\xe0\x9f\xbf", b"\xf0\x80\x80\xaf", b"\xf0\x8f\xbf\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xed\xb0\x80", b"\xed\xa0\xbd\xed\xb8\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xfe", b"\xff", b"\xff\xfe",
    b"\xfe\xff", b"\xc2", b"\xdf", b"\xef\xbf", b"\xb2", b"\xbd", b"\xb9\xbc", b"\xa0",
    b"\xc3\x28", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xf0\x90\x28\xbc",
]


def make_generator(rng):
    R = rng

    def pick(seq):
        return seq[R.randrange(len(seq))]

    def rword(pool, lo=1, hi=8):
        return "".join(pick(pool) for _ in range(R.randint(lo, hi)))

    def ws(short=True):
        if short:
            return pick([" ", " ", " ", "  ", "\n", "\t", " \n", "\n\n", "\u00a0", "\u3000", "\r\n"])
        return "".join(pick(WS_CHARS) for _ in range(R.randint(1, 12)))

    def sentence(words, n_lo=2, n_hi=10, sep=" "):
        out = []
        for _ in range(R.randint(n_lo, n_hi)):
            out.append(pick(words))
        s = sep.join(out)
        if R.random() < 0.5:
            s += pick([".", "!", "?", "…", ",", ":", "", "", " "])
        return s

    def digit_run(lo=1, hi=20):
        return "".join(R.choice("0123456789") for _ in range(R.randint(lo, hi)))

    def script_text(words, pool, marks=()):
        parts = []
        for _ in range(R.randint(1, 8)):
            r = R.random()
            if r < 0.5:
                w = pick(words)
            elif r < 0.85:
                w = rword(pool, 1, 10)
            else:
                w = pick(words) + pick(ENGLISH_WORDS)
            if marks and R.random() < 0.2:
                w += pick(marks)
            parts.append(w)
            parts.append(ws() if R.random() < 0.8 else pick(PUNCT))
        s = "".join(parts)
        if R.random() < 0.2:
            s = pick([" ", "\n", "  ", "\t"]) + s
        if R.random() < 0.2:
            s += digit_run(1, 6)
        return s.rstrip() if R.random() < 0.5 else s

    def latin():
        r = R.random()
        if r < 0.4:
            return script_text(LATIN_WORDS + ENGLISH_WORDS, LATIN_LETTERS)
        if r < 0.7:
            # combining marks: decomposed forms, stacks, marks after spaces/digits
            s = []
            for _ in range(R.randint(1, 10)):
                base = pick(LATIN_LETTERS[:52] + [" ", "1", "'", "-", "i", "ı"])
                s.append(base + "".join(pick(COMBINING) for _ in range(R.randint(0, 3))))
                if R.random() < 0.3:
                    s.append(" ")
            return "".join(s)
        if r < 0.85:
            w = pick(LATIN_WORDS)
            return pick([unicodedata.normalize("NFD", w), w.upper(), w.lower(), w.title(),
                         unicodedata.normalize("NFKD", w)]) + pick(["", " ", ".", " " + pick(LATIN_WORDS)])
        return rword(LATIN_LETTERS, 1, 30)

    def emoji():
        parts = []
        for _ in range(R.randint(1, 8)):
            r = R.random()
            if r < 0.3:
                e = pick(EMOJI)
            elif r < 0.5:
                e = pick(["👍", "👋", "🧑", "👩", "✋", "🤝", "💪"]) + pick(SKIN)
            elif r < 0.7:
                e = pick(ZWJ_SEQ)
            elif r < 0.85:
                e = pick(FLAGS) if R.random() < 0.7 else "".join(
                    chr(0x1F1E6 + R.randrange(26)) for _ in range(R.randint(1, 5)))
            else:
                e = pick(KEYCAPS) if R.random() < 0.5 else pick(EMOJI) + pick(["\ufe0e", "\ufe0f", "\u200d"])
            parts.append(e)
            if R.random() < 0.5:
                parts.append(pick([" ", "", "", "\n", " " + pick(ENGLISH_WORDS) + " ", "!", "..."]))
        return "".join(parts)

    def whitespace():
        r = R.random()
        if r < 0.25:
            n = R.randint(1, 300 if R.random() < 0.2 else 40)
            return "".join(pick(WS_CHARS[:6] + [" ", " ", "\t", "\n"]) for _ in range(n))
        if r < 0.45:
            c = pick(WS_CHARS)
            run = c * R.randint(1, 64)
            ctx = pick(["x", "1", ".", "word", "漢", " ", "", "\n", "'s", "😀", "\u0301"])
            form = R.randrange(5)
            if form == 0:
                return run + ctx
            if form == 1:
                return ctx + run
            if form == 2:
                return ctx + run + ctx
            if form == 3:
                return pick(ENGLISH_WORDS) + run + pick(ENGLISH_WORDS) + run
            return run
        if r < 0.7:
            parts = []
            for _ in range(R.randint(2, 10)):
                parts.append(pick(ENGLISH_WORDS + ["1", "23", "!", "?!", "中", "é"]))
                parts.append(ws(False))
            return "".join(parts)
        if r < 0.85:
            return "".join(pick(WS_CHARS + NOT_WS) for _ in range(R.randint(1, 20)))
        lines = []
        for _ in range(R.randint(2, 8)):
            indent = pick(["", "    ", "\t", "  ", "        ", "\t\t", " \t"])
            lines.append(indent + sentence(ENGLISH_WORDS, 1, 5) + pick(["", " ", "  ", "\t"]))
        return pick(["\n", "\r\n", "\n\n", "\r"]).join(lines) + pick(["", "\n", "\n\n", " "])

    def digits():
        r = R.random()
        if r < 0.3:
            return digit_run()
        if r < 0.5:
            return pick(["", " ", "x", "abc", "$", "-", "+", "#", "v", "'", "(", "\n"]) + digit_run() + \
                pick(["", " ", "px", "th", "%", ")", ".", "abc", "\n", "0", " 1"])
        if r < 0.65:
            return " ".join(digit_run(1, 6) for _ in range(R.randint(2, 6)))
        if r < 0.8:
            return pick(DIGITS_OTHER) + pick(["", " ", "1", "a", "٫", "."]) + pick(DIGITS_OTHER)
        if r < 0.9:
            return "".join(pick(["1", "22", "333", "4444", "a", "b", " ", "-", "_", "٣", "²", "½"])
                           for _ in range(R.randint(2, 16)))
        return digit_run(21, 80)

    def numbers():
        r = R.randrange(12)
        n = R.randint(0, 10 ** R.randint(1, 12))
        if r == 0:
            return "{:,}".format(n)
        if r == 1:
            return "{:,}".format(n).replace(",", ".") + "," + digit_run(1, 3)
        if r == 2:
            return "{:,}".format(n).replace(",", pick([" ", "\u00a0", "\u202f", "'", "_"]))
        if r == 3:
            return "%s%d.%s" % (pick(["", "-", "+", "$", "€", "£"]), n, digit_run(1, 6))
        if r == 4:
            return "%.*e" % (R.randint(0, 6), R.uniform(-1e6, 1e6) * 10 ** R.randint(-20, 20))
        if r == 5:
            return "0x%X" % n if R.random() < 0.5 else "0b" + bin(n)[2:]
        if r == 6:
            return "%d-%02d-%02dT%02d:%02d:%02d" % (R.randint(1900, 2100), R.randint(1, 12),
                                                    R.randint(1, 28), R.randint(0, 23),
                                                    R.randint(0, 59), R.randint(0, 59))
        if r == 7:
            return "%d.%d.%d.%d" % tuple(R.randint(0, 255) for _ in range(4))
        if r == 8:
            return "+%d (%03d) %03d-%04d" % (R.randint(1, 99), R.randint(0, 999),
                                             R.randint(0, 999), R.randint(0, 9999))
        if r == 9:
            return "v%d.%d.%d" % (R.randint(0, 20), R.randint(0, 99), R.randint(0, 999))
        if r == 10:
            return "%d%s" % (n, pick(["%", "km", "°C", "×10³", " kg", "th", "st", "ms", "k", "½"]))
        return "%d/%d = %s" % (R.randint(1, 999), R.randint(1, 999), R.random())

    def code():
        r = R.random()
        if r < 0.4:
            s = pick(CODE_SNIPPETS)
            if R.random() < 0.5:
                lines = s.split("\n")
                a = R.randrange(len(lines))
                s = "\n".join(lines[a:a + R.randint(1, 4)])
            if R.random() < 0.2:
                s = s.replace("    ", "\t")
            if R.random() < 0.1:
                s = s.replace("\n", "\r\n")
            return s
        if r < 0.7:
            name = "".join(pick(IDENT_PARTS) for _ in range(R.randint(1, 3)))
            return pick([
                "%s = %s(%s, %d)" % (name, pick(IDENT_PARTS), pick(IDENT_PARTS), R.randint(0, 999)),
                "if (%s->%s != NULL) { return %d; }" % (name, pick(IDENT_PARTS), R.randint(-9, 9)),
                "    %s: %s = %s\n" % (name, pick(["int", "str", "float", "list[int]"]), digit_run(1, 5)),
                "<%s %s=\"%s\">%s</%s>" % (name, pick(IDENT_PARTS), pick(ENGLISH_WORDS),
                                           sentence(ENGLISH_WORDS, 1, 4), name),
                "\"%s\": [%s]," % (name, ", ".join(digit_run(1, 4) for _ in range(R.randint(1, 5)))),
                "#define %s(x) ((x) << %d)" % (name.upper(), R.randint(0, 31)),
                "https://example.com/%s?%s=%s&id=%s#frag" % (name, pick(IDENT_PARTS),
                                                            pick(ENGLISH_WORDS), digit_run(1, 8)),
                "%s@%s.org" % (name.lower(), pick(ENGLISH_WORDS)),
            ])
        if r < 0.85:
            return "".join(pick(["{", "}", "(", ")", "[", "]", ";", "=>", "->", "::", "&&", "||", "!=",
                                 "==", "<=", ">>=", "/*", "*/", "//", "#", "\n", "\t", "    ", " ",
                                 "'", '"', "\\n", "\\", "`", "$", "@", "%"])
                           for _ in range(R.randint(2, 30)))
        return "\n".join(pick(["", "    ", "\t", "        "]) + pick(IDENT_PARTS) + pick(["()", "[0]", ":", ";", ""])
                         for _ in range(R.randint(2, 8)))

    def english():
        parts = []
        for _ in range(R.randint(2, 14)):
            r = R.random()
            if r < 0.25:
                w = pick(CONTRACTION_FORMS)
            elif r < 0.45:
                w = pick(ENGLISH_WORDS) + pick(SUFFIXES)
            elif r < 0.55:
                w = pick(SUFFIXES)
            else:
                w = pick(ENGLISH_WORDS)
            case = R.random()
            if case < 0.15:
                w = w.upper()
            elif case < 0.25:
                w = w.title()
            elif case < 0.3:
                w = "".join(c.upper() if R.random() < 0.5 else c for c in w)
            parts.append(w)
            parts.append(pick([" ", " ", " ", "  ", "\n", ", ", ". ", "", " '", "' "]))
        s = "".join(parts)
        return s.strip() if R.random() < 0.6 else s

    def punctuation():
        r = R.random()
        if r < 0.4:
            return "".join(pick(PUNCT) for _ in range(R.randint(1, 30)))
        if r < 0.7:
            parts = []
            for _ in range(R.randint(2, 10)):
                parts.append("".join(pick(PUNCT) for _ in range(R.randint(1, 5))))
                parts.append(pick([" ", "", "\n", "  ", pick(ENGLISH_WORDS), "1", "é", "中", "\r\n"]))
            return "".join(parts)
        if r < 0.85:
            return pick(ENGLISH_WORDS) + pick(["!!!", "???", "?!", "...", "…", "---", "--", " - ",
                                               "!\n", ".\n\n", ",\r\n", " ,", " .", "!?!?"]) * R.randint(1, 3)
        c = pick(PUNCT)
        return c * R.randint(2, 40) + pick(["", "\n", " ", "a"])

    def long_word():
        r = R.randrange(9)
        n = R.randint(60, 1200)
        if r == 0:
            return pick("aAzé中й") * n
        if r == 1:
            return rword(crange(0x61, 0x7A), n, n)
        if r == 2:
            return (pick(["ab", "the", "xyz", "ing", "an"]) * n)[:n]
        if r == 3:
            return rword(CJK[:200], n // 3, n // 3)
        if r == 4:
            return rword(CYRILLIC[:64] + GREEK[:40], n // 2, n // 2)
        if r == 5:
            return rword(list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"), n, n)
        if r == 6:
            return "".join(R.choice("0123456789abcdef") for _ in range(n))
        if r == 7:
            return pick(["=", "-", "*", "_", "#", "~", "."]) * n
        return "".join(pick(LATIN_LETTERS) + (pick(COMBINING) if R.random() < 0.3 else "")
                       for _ in range(n // 2))

    def special_text():
        parts = []
        for _ in range(R.randint(1, 5)):
            parts.append(pick(SPECIAL_TEXT))
            parts.append(pick(["", " ", "\n", "user\n", " hello ", "x"]))
        return "".join(parts)

    def any_valid():
        return pick(VALID_MAKERS)()

    def mixed():
        sep = pick(["", " ", "\n", "  ", "\t", ""])
        return sep.join(any_valid() for _ in range(R.randint(2, 4)))

    def invalid():
        base = any_valid().encode("utf-8")
        if len(base) > 300:
            base = base[:300]
        for _ in range(R.randint(1, 5)):
            r = R.random()
            if r < 0.7 or not base:
                frag = pick(INVALID_FRAGMENTS) if R.random() < 0.85 else bytes(
                    [R.randrange(0x80, 0x100) for _ in range(R.randint(1, 4))])
                atoms = utf8_atoms(base)
                cuts = [a[0] for a in atoms] + [len(base)]
                at = pick(cuts)
                base = base[:at] + frag + base[at:]
            else:
                # cut a multi-byte character short
                atoms = [a for a in utf8_atoms(base) if a[1] > 1 and a[2]]
                if atoms:
                    start, n, _ = pick(atoms)
                    keep = R.randint(1, n - 1)
                    base = base[:start + keep] + base[start + n:]
                else:
                    base += pick(INVALID_FRAGMENTS)
        return base

    script_makers = {
        "cyrillic": lambda: script_text(CYRILLIC_WORDS, CYRILLIC),
        "greek": lambda: script_text(GREEK_WORDS, GREEK),
        "arabic": lambda: script_text(ARABIC_WORDS, ARABIC, ["\u064b", "\u0651", "\u0670"]),
        "hebrew": lambda: script_text(HEBREW_WORDS, HEBREW, ["\u05b7", "\u05bc"]),
        "devanagari": lambda: script_text(DEVANAGARI_WORDS, DEVANAGARI, ["\u094d", "\u0902", "\u093c"]),
        "thai": lambda: script_text(THAI_WORDS, THAI, ["\u0e48", "\u0e31"]),
        "hangul": lambda: script_text(HANGUL_WORDS, HANGUL),
        "cjk": lambda: script_text(CJK_WORDS, CJK) if R.random() < 0.7 else "".join(
            pick(CJK_WORDS) + pick(["", "", "，", "。", " ", "!", "1", "\u3000"]) for _ in range(R.randint(1, 10))),
        "other-scripts": lambda: script_text(OTHER_SCRIPTS, OTHER_SCRIPTS),
    }
    makers = {"latin": latin, "emoji": emoji, "whitespace": whitespace, "digits": digits,
              "numbers": numbers, "code": code, "english": english, "punctuation": punctuation,
              "long-words": long_word, "special-text": special_text, "mixed": mixed,
              "invalid-utf8": invalid}
    makers.update(script_makers)
    VALID_MAKERS = [makers[k] for k in CATEGORIES
                    if k in makers and k not in ("invalid-utf8", "mixed", "long-words")]
    return makers


# Share of each category among the random strings (weights, not counts).
WEIGHTS = {
    "latin": 6, "cyrillic": 3, "greek": 2.5, "arabic": 3.5, "hebrew": 2.5, "devanagari": 3.5,
    "thai": 2.5, "hangul": 3, "cjk": 6, "other-scripts": 2.5, "emoji": 5, "whitespace": 8,
    "digits": 6, "numbers": 4.5, "code": 6.5, "english": 8, "punctuation": 4.5,
    "long-words": 1.0, "invalid-utf8": 7, "special-text": 1.5, "mixed": 9,
}


def edge_cases():
    """Hand-written strings: boundaries of every pre-tokenizer rule."""
    s = ["", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\n ", " \n ", "\t\n",
         "a", "A", "é", "中", "1", "12", "123", "1234", "12345", "'", "'s", "'S", "''s", " 's",
         "'t", "'re", "'RE", "'ll", "'LL", "'ve", "'d", "'m", "I'm", "I'M", "i'M", "'ſ", "'K",
         "x 1", "x  1", "x   1", " 1", "  1", "a1", "1a", "a 1 b", "1 2", "1  2", "1\n2",
         "hello world", " hello world", "hello  world", "hello   world", "hello\nworld",
         "hello \nworld", "hello\n\nworld", "hello \n\n world", "hello\r\nworld",
         "hello\t\tworld", "hello \u00a0world", "hello\u3000world", "hello\u00a0\u00a0world",
         "!!", " !!", "  !!", "!!\n", "!!\n\n", " !!\r\n", "a.b", "a. b", "a .b", "...",
         " ...", "a...", "...a", "$1", "$ 1", "1$", "<=>", "a<=>b", "^_^", "`x`", "|a|",
         "~/x", "+1", "-1", "1.5", "1,5", "1_000", "½", "x²", "²x", "Ⅻ", "١٢٣", "１２３",
         "A1B2C3", "ABCdef", "abcDEF", "aBcDeF", "Hello", "HELLO", "hELLO", "ǅx", "Xǅ",
         "中文", " 中文", "中 文", "中1文", "中a文", "日本語のテキスト", "カタカナ", "ｶﾀｶﾅ", "한국어",
         "\u0301", " \u0301", "a\u0301", "1\u0301", "!\u0301", "\u0301a", "e\u0301\u0301",
         "\u200b", "a\u200bb", "\u200d", "\ufeff", "\ufeffhello", "\u00ad", "a\u00adb",
         "\x00", "a\x00b", "\x1f", "\x7f", "\x1b[31m", "\u0085", "a\u0085b", "\u2028", "\x0b",
         "\x0c", "\x1c", "a\x1cb", "\ue000", "\U0010ffff", "\uffff", "\ufffd", "😀", " 😀",
         "😀😀", "👍🏽", "🇺🇸", "👨‍👩‍👧‍👦", "1️⃣", "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>",
         "<s>", "</s>", "[CLS]", "<unk>", "a" * 100, "a" * 101, "é" * 100, "1" * 100,
         " " * 100, "\n" * 50, "\t" * 30, " \t" * 20, "x" + " " * 200 + "y",
         "Hello, World! 123 héllo wörld. 你好 😀", "don't you think? I'd've", "O'Neil's",
         "rock'n'roll", "'twas", "y'all're", "it\u2019s", "'s's's", "a's", "A'S", "1's",
         "1'S", "!'s", " 's", "\n's", "\u00a0's", "ſ", "K", "İ", "ı", "ß", "ẞ",
         "\u0130stanbul", "Ωhm", "\u2126", "\u212a", "\u1f7d", "\u03ce", "\u00b5", "\u03bc",
         "-" * 60, "=" * 60, "#" * 30, "/*" + "*" * 40, "....\n....", "\n\n\n\n\n",
         "   \n   \n", "\r\n\r\n", "\r\r", "\n\r", " \r\n ", "a\rb", "a\r\n\r\nb",
         "\u3000\u3000", "\u3000a", "a\u3000", "\u00a0", "\u00a0a", "a\u00a0", "\u2009", "a\u2009b",
         "x\u2000\u2001\u2002y", "\u1680x", "x\u202fy", "12\u202f345", "1\u00a0000"]
    out = [x.encode("utf-8") for x in s]
    out += [b"\x80", b"\xff", b"\xfe\xff", b"a\xffb", b" \xff", b" \xff!", b"\xff ", b"\xc3",
            b"a\xc3", b"\xc3a", b"\xe2\x82", b"\xe2\x82\xac\xe2\x82", b"\xf0\x9f\x98",
            b"\xf0\x9f\x98\x80\xf0", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xb0\x80",
            b"\xf4\x90\x80\x80", b"\xf5", b"'\xff", b"'s\xff", b"1\xff2", b"\xb2\xb2\xb2",
            b"12\xbd3456", b"\xb2", b"hello \x80world", b"\x80" * 40, b"\xff" * 40,
            b"\xe4\xb8\xad\xe6\x96", b"\xd0\xbc\xd0", b"   \xff", b"\n\xff\n", b"\xff\n\n"]
    # special-token texts as plain text
    out += [x.encode("utf-8") for x in [
        "<unk>a", "a<unk>", " <unk> ", "<unk><unk>", "<s>hello</s>", " <s> ", "</s>\n", "<s></s>",
        "<|endoftext|><|endoftext|>", "x<|endoftext|>y", " <|endoftext|>", "<|endoftext|>\n\n",
        "<unk> <s> </s> <|endoftext|>", "<<unk>>", "<|endoftext|", "|endoftext|>"]]
    # NFC: decomposed and composed forms, exclusions, Hangul jamo, reordering
    out += [x.encode("utf-8") for x in [
        "e\u0301", "cafe\u0301", "Cafe\u0301 na\u0131\u0308ve", "a\u0301\u0323", "a\u0323\u0301",
        "\u00e1\u0323", "\u00ea\u0323", "\u0958", "\u0915\u093c", "\u2126", "\u212b", "\u1100\u1161",
        "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1100\u1161 \u11a8", "a\u0305\u0301", "a\u0316\u0301",
        "\u0344", "\u0f73", "\u1e9b\u0323", "\u00c5\u030a", "A\u030a\u0301", "\u0301\u0301a",
        " \u0301", "1\u0301", "e" + "\u0301\u0323" * 40]]
    out += [b"e\xff\xcc\x81", b"\xc3e\xcc\x81", b"\xcc\x81\xff", b"\xe0\xa4e\xcc\x81"]
    return out


def generate_strings():
    rng = random.Random(SEED)
    makers = make_generator(rng)
    seen = {}
    for raw in edge_cases():
        seen.setdefault(raw, CAT["edge"])
    names = [k for k in CATEGORIES if k in WEIGHTS]
    weights = [WEIGHTS[k] for k in names]
    target = len(seen) + N_STRINGS
    while len(seen) < target:
        cat = rng.choices(names, weights)[0]
        v = makers[cat]()
        raw = v if isinstance(v, bytes) else v.encode("utf-8")
        if cat == "invalid-utf8":
            try:
                raw.decode("utf-8")
                continue  # the inserts happened to form valid text
            except UnicodeDecodeError:
                pass
        seen.setdefault(raw, CAT[cat])
    return list(seen.items())


# --------------------------------------------------------------------------
# Files.

STRINGS_MAGIC = b"KVTPSTR1"
HASH_MAGIC = b"KVTPHSH2"


def pack_strings(items):
    out = bytearray(STRINGS_MAGIC)
    out += struct.pack("<II", len(items), SEED)
    for raw, cat in items:
        flags = 0
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            flags |= FLAG_INVALID_UTF8
        out += struct.pack("<IBB", len(raw), flags, cat)
        out += raw
    return bytes(out)


def unpack_strings(data):
    assert data[:8] == STRINGS_MAGIC
    n, _ = struct.unpack_from("<II", data, 8)
    pos = 16
    items = []
    for _ in range(n):
        length, flags, cat = struct.unpack_from("<IBB", data, pos)
        pos += 6
        items.append((data[pos:pos + length], flags, cat))
        pos += length
    assert pos == len(data)
    return items


def pack_hashes(hashes, strings_hash, flags):
    out = bytearray(HASH_MAGIC)
    out += struct.pack("<IIII", len(hashes), strings_hash, flags, 0)
    for h in hashes:  # the low 24 bits, 3 bytes each (keeps the data under 2 MB)
        out += struct.pack("<I", h & 0xFFFFFF)[:3]
    return bytes(out)


def family_ids(stem, ref, items):
    """Reference ids of every string (None where the family skips it)."""
    valid_idx = [i for i, (raw, flags, _) in enumerate(items) if not flags & FLAG_INVALID_UTF8]
    ids = [None] * len(items)
    batch = ref.encode_batch([items[i][0].decode("utf-8") for i in valid_idx])
    for i, v in zip(valid_idx, batch):
        ids[i] = v
    if not ref.skips_invalid:
        for i, (raw, flags, _) in enumerate(items):
            if flags & FLAG_INVALID_UTF8:
                ids[i] = ref.encode_bytes(raw)
    return ids


def escape(raw, limit=160):
    s = []
    for atom_start, n, ok in utf8_atoms(raw):
        chunk = raw[atom_start:atom_start + n]
        if not ok:
            s.append("\\x%02x" % chunk[0])
            continue
        c = chunk.decode("utf-8")
        if c == "\\":
            s.append("\\\\")
        elif c == "\n":
            s.append("\\n")
        elif c == "\t":
            s.append("\\t")
        elif c == "\r":
            s.append("\\r")
        elif ord(c) < 0x20 or ord(c) == 0x7F or unicodedata.category(c) in ("Zl", "Zp", "Cf", "Cc", "Co", "Cn", "Cs"):
            s.append("\\u{%x}" % ord(c))
        elif unicodedata.category(c) == "Zs" and c != " ":
            s.append("\\u{%x}" % ord(c))
        else:
            s.append(c)
    out = "".join(s)
    return out if len(out) <= limit else out[:limit] + "..."


# --------------------------------------------------------------------------
# Self-checks.

def read_fixture(name):
    base = os.path.join(fixtures_dir(), "ggml-vocab-%s.gguf" % name)
    with open(base + ".inp", "rb") as f:
        inp = f.read().decode("utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    with open(base + ".out", "r", encoding="utf-8") as f:
        out = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(inp)]]
    return inp, out


def check_fixtures():
    """Each rebuilt fixture tokenizer must reproduce the fixture's own ids
    (which the real tokenizer.json produced)."""
    ok = True
    for stem, (source, kind) in FAMILIES.items():
        if not stem.startswith("fixture-") and stem != "gpt2vocab-gpt2":
            continue
        ref = build_ref(stem)
        inp, out = read_fixture(source)
        bad = [i for i in range(len(inp)) if ref.encode(inp[i]) != out[i]]
        print("  fixture %-16s %3d/%d strings match the fixture's ids" % (source, len(inp) - len(bad), len(inp)))
        for i in bad[:3]:
            print("    %r\n      want %s\n      got  %s" % (inp[i], out[i], ref.encode(inp[i])))
        ok = ok and not bad
    return ok


def check_piecewise(items, every=1):
    """The piecewise path (used for invalid UTF-8) against the full encode."""
    ok = True
    for stem, (source, kind) in FAMILIES.items():
        ref = build_ref(stem)
        if ref.skips_invalid:
            continue
        bad = 0
        n = 0
        for i in range(0, len(items), every):
            raw, flags, _ = items[i]
            if flags & FLAG_INVALID_UTF8:
                continue
            n += 1
            if ref.encode_bytes(raw) != ref.encode(raw.decode("utf-8")):
                if bad < 2:
                    print("    %s: piecewise differs on %s" % (stem, escape(raw)))
                bad += 1
        print("  piecewise %-26s %5d/%d valid strings agree with encode()" % (stem, n - bad, n))
        ok = ok and bad == 0
    return ok


def info_variants(items):
    """How much the NFC normalizer and ignore_merges change: each family
    that has one is also encoded without it."""
    valid = [raw.decode("utf-8") for raw, flags, _ in items if not flags & FLAG_INVALID_UTF8]
    for stem, (source, kind) in FAMILIES.items():
        if kind not in PIPELINES or stem.startswith("fixture-"):
            continue
        for k, what in ((3, "the NFC normalizer"), (2, "ignore_merges")):
            saved = PIPELINES[kind]
            if not saved[k]:
                continue
            a = ByteLevelRef(load_vocab(source), kind).encode_batch(valid)
            PIPELINES[kind] = tuple(not v if i == k else v for i, v in enumerate(saved))
            try:
                b = ByteLevelRef(load_vocab(source), kind).encode_batch(valid)
            finally:
                PIPELINES[kind] = saved
            diff = sum(1 for x, y in zip(a, b) if x != y)
            print("  info: %s without %s would differ on %d of %d valid strings"
                  % (stem, what, diff, len(valid)))


# --------------------------------------------------------------------------
# README of the data folder.

README = """\
# tests/data/tokenizer_parity — randomized tokenizer parity with Hugging Face

Made by `scripts/gen_tokenizer_parity.py` (the only way it is produced; its
docstring says how to set it up and run it, and exactly how the reference
is built) with Hugging Face `tokenizers` pinned in
`scripts/tokenizer-requirements.txt`. Read by `tests/test_tokenizer_parity.c`.

- `strings.lps` — {n_strings} test strings (seed {seed}), shared by all families
  (".lps": length-prefixed strings, the format below; test data, not a model).
- `<family>.hash` — for each family, a 32-bit hash of the ids Hugging Face
  gives each string.

All integers are little-endian, no padding.

## strings.lps

| offset | size | field |
| --- | --- | --- |
| 0 | 8 | magic `KVTPSTR1` |
| 8 | 4 | u32 `n`: number of strings |
| 12 | 4 | u32 seed of the generator |
| 16 | ... | `n` records, back to back |

A record: u32 `len`, u8 `flags` (bit 0: the bytes are not valid UTF-8),
u8 `category` (below), then `len` bytes (any bytes, NUL included).

Categories: {categories}.

## FAMILY.hash

| offset | size | field |
| --- | --- | --- |
| 0 | 8 | magic `KVTPHSH2` |
| 8 | 4 | u32 `n`: must equal strings.lps's |
| 12 | 4 | u32 FNV-1a 32 of the whole strings.lps (ties the two files together) |
| 16 | 4 | u32 flags (bit 0: strings flagged invalid UTF-8 are skipped; their hash is 0) |
| 20 | 4 | reserved, 0 |
| 24 | 3·n | u24: the low 24 bits of the hash of string i's ids |

The hash of an id sequence is 32-bit FNV-1a (offset basis 0x811C9DC5, prime
0x01000193) over the ids written as int32 little-endian, 4 bytes each; the
empty sequence hashes to 0x811C9DC5. Only its low 24 bits are stored, which
keeps all the data under 2 MB; a wrong id sequence still passes for a given
string with probability 2^-24. Encoding is with add_special off and
parse_special off.

## Families

| file | vocabulary | pipeline (tokenizer.json pre-tokenizer) |
| --- | --- | --- |
{families}

`smollm2` is the default model's vocabulary (SmolLM2-135M-Instruct, 49,152
tokens, no merges between digits); `gpt-2` is the GPT-2 fixture vocabulary
(50,257 tokens, multi-digit tokens), so digit grouping shows. Pipelines:

{pipelines}

Normalizers: the `-nfc` pipelines (and `fixture-mpt`) apply NFC before
pre-tokenizing, as the real Qwen/Qwen2, MPT, OLMo (GPT-NeoX tokenizer) and
Command-R tokenizer.json files do; kvik does the same for those
tokenizer.ggml.pre names. Special-token texts ("<unk>", "<s>", "</s>",
"<|endoftext|>", ...) in the strings are plain text (special tokens are not
parsed). Invalid UTF-8: each byte that does not
start a valid sequence is a character of category \\p{{C}} of its own
(standing in for it, U+E000 during pre-tokenization) and its byte goes to
BPE with the bytes around it in the same piece (with NFC, each run of
valid text between such bytes is normalized on its own); the SentencePiece
and WordPiece families skip such strings.

The folder holds {total_bytes} bytes in all (the generator keeps it under 2 MB).

## Unicode versions

kvik's category tables are generated from one pinned version of the Unicode
Character Database (15.0.0, Debian's `unicode-data`), for every rule. The
reference mixes versions: Hugging Face `tokenizers` matches its regexes with
Oniguruma's tables, while its `Digits` pre-tokenizer asks Rust's
`char::is_numeric`, which in the pinned build already knows Unicode 16's new
digits (U+11DE0..U+11DE9, U+16FF4..U+16FF6). The strings therefore contain no
code point that is unassigned in 15.0 and numeric in 16; on such characters
kvik and the reference would disagree by construction. kvik's NFC uses the
same UCD 15.0 (and passes its NormalizationTest.txt, tests/test_unicode_nfc.c);
the reference's NFC comes from the Rust crate `tokenizers` bundles, with
tables of its own version. Composition is stable across versions for the
characters both know, so they can differ only on characters one of them
does not have, which these strings do not contain where it would matter
(every string agrees).
"""


def describe_pipeline(name):
    pre, post, ignore_merges, nfc = PIPELINES[name]
    parts = ["NFC"] if nfc else []
    for kind, arg in pre + post:
        if kind == "bytelevel_regex":
            parts.append("ByteLevel(use_regex) [GPT-2 regex]")
        elif kind == "bytelevel":
            parts.append("ByteLevel")
        elif kind == "split":
            a = arg if len(arg) < 60 else arg[:57] + "..."
            parts.append("Split(`` %s ``, Isolated)" % a.replace("\r", "\\r").replace("\n", "\\n"))
        elif kind == "digits":
            parts.append("Digits(individual=%s)" % arg)
        elif kind == "punctuation":
            parts.append("Punctuation(Contiguous)")
    s = " → ".join(parts)
    if ignore_merges:
        s += "; BPE ignore_merges"
    return s


def write_readme(out_dir, n, total_bytes):
    fam = []
    for stem, (source, kind) in list(FAMILIES.items()) + list(OTHER_HASHES.items()):
        fam.append("| `%s.hash` | %s | %s |" % (stem, source, kind))
    pipes = "\n".join("- `%s` (tokenizer.ggml.pre %s): %s" % (k, PRE_NAMES[k], describe_pipeline(k))
                      for k in PIPELINES)
    pipes += ("\n- `spm`: normalizer Prepend(▁) + Replace(' ', ▁), BPE with byte fallback, merges "
              "from the scores\n- `wordpiece`: BertNormalizer(lowercase, strip accents, CJK), "
              "BertPreTokenizer, WordPiece(##, 100)")
    text = README.format(n_strings=n, seed=SEED, families="\n".join(fam), pipelines=pipes,
                         categories=", ".join("%d `%s`" % (i, c) for i, c in enumerate(CATEGORIES)),
                         total_bytes=total_bytes)
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return len(text.encode("utf-8"))


# --------------------------------------------------------------------------

def generate(out_dir):
    items_raw = generate_strings()
    data = pack_strings(items_raw)
    items = unpack_strings(data)
    n_invalid = sum(1 for _, flags, _ in items if flags & FLAG_INVALID_UTF8)
    print("%d strings (%d not valid UTF-8), strings.lps %d bytes" % (len(items), n_invalid, len(data)))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "strings.lps"), "wb") as f:
        f.write(data)
    strings_hash = fnv1a32_bytes(data)
    total = len(data)
    for stem in FAMILIES:
        ref = build_ref(stem)
        ids = family_ids(stem, ref, items)
        hashes = [0 if v is None else fnv1a32_ids(v) for v in ids]
        blob = pack_hashes(hashes, strings_hash, HFLAG_SKIPS_INVALID if ref.skips_invalid else 0)
        with open(os.path.join(out_dir, stem + ".hash"), "wb") as f:
            f.write(blob)
        total += len(blob)
        print("  %-28s %d tokens in all" % (stem, sum(len(v) for v in ids if v)))
    # Stale files of families that no longer exist.
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".hash") and name[:-5] not in FAMILIES and name[:-5] not in OTHER_HASHES:
            os.remove(os.path.join(out_dir, name))
    total += len(OTHER_HASHES) * (24 + 3 * len(items))  # their size, once remade
    # The README states the folder's size, its own included: rewrite it
    # until the number it states is the number it makes.
    size = total
    while True:
        readme = write_readme(out_dir, len(items), size)
        if total + readme == size:
            break
        size = total + readme
    print("data folder: %d bytes (limit %d)" % (size, MAX_DATA_BYTES))
    if size >= MAX_DATA_BYTES:
        sys.exit("data too large")
    return items


def show(out_dir, stem, indices):
    with open(os.path.join(out_dir, "strings.lps"), "rb") as f:
        items = unpack_strings(f.read())
    ref = build_ref(stem)
    for i in indices:
        raw, flags, cat = items[i]
        valid = not flags & FLAG_INVALID_UTF8
        print("#%d [%s]%s \"%s\"" % (i, CATEGORIES[cat], "" if valid else " (invalid UTF-8)", escape(raw, 10 ** 9)))
        if not valid and ref.skips_invalid:
            print("  skipped by this family")
            continue
        ids = reference_ids(ref, raw, valid)
        print("  hash 0x%08x, %d ids: %s" % (fnv1a32_ids(ids), len(ids), " ".join(map(str, ids))))
        print("  tokens: %s" % " | ".join(repr(ref.tok.id_to_token(t)) for t in ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", action="store_true", help="create the venv and install the pins")
    ap.add_argument("--venv", default=DEFAULT_VENV)
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--check", action="store_true", help="self-checks only (writes nothing)")
    ap.add_argument("--show", nargs="+", metavar="ARG", help="FAMILY INDEX [INDEX...]")
    args = ap.parse_args()
    if args.setup:
        setup(args.venv)
        return
    reexec_in_venv(args.venv)
    if args.show:
        show(args.out, args.show[0], [int(x) for x in args.show[1:]])
        return
    if args.check:
        items = unpack_strings(pack_strings(generate_strings()))
        ok = check_fixtures()
        ok = check_piecewise(items) and ok
        info_variants(items)
        sys.exit(0 if ok else 1)
    print("self-check against the fixtures' own ids:")
    if not check_fixtures():
        sys.exit("a rebuilt fixture tokenizer disagrees with its fixture: not writing")
    items = generate(args.out)
    print("piecewise path (invalid UTF-8) against encode(), every 10th string:")
    if not check_piecewise(items, every=10):
        sys.exit("piecewise path disagrees with encode()")


if __name__ == "__main__":
    main()
