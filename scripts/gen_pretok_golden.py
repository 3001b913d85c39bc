#!/usr/bin/env python3
"""gen_pretok_golden.py — golden word splits for kvik's pre-tokenizers, made
by Hugging Face `tokenizers` (an independent implementation: Rust, with the
Oniguruma regex engine), read by tests/test_pretok.c.

For every tokenizer.ggml.pre name kvik accepts, CHAINS below writes down
the pre_tokenizer chain that name's models declare in their tokenizer.json
(as the JSON appears there). Names with identical chains share one output
file. Each chain runs through `tokenizers` on a fixed corpus of strings;
the pieces it returns are byte-level text (every chain ends in ByteLevel),
mapped back to bytes, so a split is the list of its pieces' byte lengths.
Normalizers (NFC for Qwen 2, ...) are not part of the split and are left
out: the corpus is split as it is.

Writes tests/data/pretok/:
  corpus.txt     one string per line, escaped: \\\\ \\n \\r \\t, \\xHH for
                 other ASCII controls, \\uHHHH / \\UHHHHHHHH for non-ASCII
                 whitespace, controls, format and unassigned characters;
                 everything else is UTF-8 as is
  <chain>.txt    "# names: ..." and "# chain: ..." header lines, then one
                 line per corpus string: its pieces' byte lengths
  VERSIONS       the tokenizers version and each file's SHA-256

Usage (a venv outside the repository, pinned by
scripts/tokenizer-requirements.txt):
  python3 -m venv ~/.cache/kvik/tok-venv
  ~/.cache/kvik/tok-venv/bin/pip install -r scripts/tokenizer-requirements.txt
  ~/.cache/kvik/tok-venv/bin/python scripts/gen_pretok_golden.py
"""
import hashlib
import json
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import Tokenizer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pretok")

# ---- chains, as tokenizer.json spells them -------------------------------------------

def split(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
            "use_regex": use_regex}


def digits(individual):
    return {"type": "Digits", "individual_digits": individual}


def ranges(pairs):
    """A character class body from (first, last) code points: written with
    the code points themselves, so no copy of the text can normalize them."""
    return "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in pairs)


CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")
# Qwen 3.5: marks join letters (tokenizer.json of the Qwen3.5 models)
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
          r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
         r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
         r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# [一-龥ࠀ-一가-퟿]+ and [一-龥぀-ゟ゠-ヿ]+
DS_CJK = "[" + ranges([(0x4E00, 0x9FA5), (0x0800, 0x4E00), (0xAC00, 0xD7FF)]) + "]+"
V3_CJK = "[" + ranges([(0x4E00, 0x9FA5), (0x3040, 0x309F), (0x30A0, 0x30FF)]) + "]+"
# DeepSeek LLM's cased letters, in the order of its tokenizer.json
DS_LETTERS = r"\s?[" + ranges([
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x376),
    (0x377, 0x377), (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A),
    (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F),
    (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15),
    (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59),
    (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC),
    (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB),
    (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107),
    (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
    (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F),
    (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2183), (0x2184, 0x2184), (0x2C00, 0x2C7B),
    (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF2), (0x2CF3, 0x2CF3), (0xA640, 0xA66D),
    (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2),
    (0x118A0, 0x118DF), (0x1E900, 0x1E943)]) + "]+"
# \s?[!-/:-~！-／：-～‘-‟　-。]+
DS_PUNCT = r"\s?[" + ranges([(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E),
                             (0x2018, 0x201F), (0x3000, 0x3002)]) + "]+"
V3_MAIN = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
           "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
           "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
BLOOM = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"

GPT2_CHAIN = [byte_level(True)]
STARCODER_CHAIN = [digits(True), byte_level(True)]
LLAMA3_CHAIN = [split(CL100K), byte_level(False)]
QWEN2_CHAIN = [split(QWEN2), byte_level(False)]
GPT4O_CHAIN = [split(O200K), byte_level(False)]
BLOOM_CHAIN = [split(BLOOM), byte_level(False)]

# name -> (output file, chain). The names and their grouping follow
# llama.cpp's list of tokenizer.ggml.pre values; the chains are the
# tokenizer.json ones of the models named.
CHAINS = {}
for n in ["default", "gpt-2", "mpt", "olmo", "jais", "phi-2", "trillion", "gigachat", "a.x-4.0",
          "mellum", "granite-docling", "exaone4"]:
    CHAINS[n] = ("gpt2", GPT2_CHAIN)                # GPT-2, GPT-NeoX, OLMo, ...
for n in ["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva",
          "minerva-7b", "mellum2"]:
    CHAINS[n] = ("starcoder", STARCODER_CHAIN)      # SmolLM2, StarCoder, Command-R, ...
for n in ["llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx", "chatglm-bpe", "glm4",
          "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"]:
    CHAINS[n] = ("llama3", LLAMA3_CHAIN)            # Llama 3.x, DBRX, GLM-4 (cl100k)
for n in ["qwen2", "qwen", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "solar-open",
          "kormo"]:
    CHAINS[n] = ("qwen2", QWEN2_CHAIN)              # Qwen 1/2/2.5/3, StableLM 2
CHAINS["qwen35"] = ("qwen35", [split(QWEN35), byte_level(False)])  # Qwen 3.5
for n in ["gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"]:
    CHAINS[n] = ("gpt4o", GPT4O_CHAIN)              # o200k: GPT-4o, gpt-oss, Llama 4
CHAINS["tekken"] = ("tekken", [split(TEKKEN), byte_level(False)])  # Mistral NeMo
CHAINS["deepseek-llm"] = ("deepseek-llm", [
    split("[\r\n]"), split(DS_LETTERS), split(DS_PUNCT), split(r"\s+$"), split(DS_CJK),
    digits(True), byte_level(False)])               # deepseek-llm-7b, DeepSeek-V2, Coder-V2
CHAINS["deepseek-coder"] = ("deepseek-coder", [
    split("[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split(DS_CJK),
    digits(True), byte_level(False)])               # deepseek-coder-6.7b
for n in ["deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"]:
    CHAINS[n] = ("deepseek-v3", [split(r"\p{N}{1,3}"), split(V3_CJK), split(V3_MAIN),
                                 byte_level(False)])  # DeepSeek-V3 / R1
CHAINS["falcon"] = ("falcon", [
    {"type": "Punctuation", "behavior": "Contiguous"}, byte_level(True), digits(False),
    split("[0-9][0-9][0-9]")])                      # falcon-7b
for n in ["bloom", "poro-chat", "gpt3-finnish"]:
    CHAINS[n] = ("bloom", BLOOM_CHAIN)              # BLOOM, Poro, GPT-3 Finnish
CHAINS["viking"] = ("viking", [split(BLOOM), digits(True), byte_level(False)])


def pre_tokenizer(chain):
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
         "normalizer": None, "pre_tokenizer": {"type": "Sequence", "pretokenizers": chain},
         "post_processor": None, "decoder": None,
         "model": {"type": "BPE", "dropout": None, "unk_token": None,
                   "continuing_subword_prefix": None, "end_of_word_suffix": None,
                   "fuse_unk": False, "byte_fallback": False, "vocab": {}, "merges": []}}
    return Tokenizer.from_str(json.dumps(j)).pre_tokenizer


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: alphabet character -> byte."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


# ---- corpus ------------------------------------------------------------------------------

LATIN = ["hello", "World", "naïve", "café", "Straße", "ÉCOLE", "über", "İstanbul", "ǅemal",
         "ﬁne", "HTMLParser", "getHTTPResponseCode", "iPhone", "camelCase", "snake_case",
         "SCREAMING_CASE", "McDonald", "ſtop", "Ærø", "ŁÓDŹ", "ǈubljana", "x", "A", "I", "µs"]
SCRIPTS = ["Ελληνικά", "ΑΒΓΔ", "ώρα", "\u1fd3", "\u0390", "русский", "ПРИВЕТ", "Ёлка",
           "Հայերեն", "ქართული", "ᲥᲐᲠᲗᲣᲚᲘ", "ᏣᎳᎩ", "ꮳꮃꭹ", "العربية", "مرحبا", "עברית",
           "नमस्ते", "हिन्दी", "বাংলা", "ภาษาไทย", "தமிழ்", "ⰀⰁⰂ", "𐐷𐐸", "𞤀𞤢", "ᴀʙᴄ",
           "ʰʲ", "ˈstress", "ʔa", "ƻ", "ǃ", "ꙮ", "ꝏ", "ꭰ", "𑢠"]
CJK = ["日本語", "中文测试", "漢字", "ひらがな", "カタカナ", "ｶﾀｶﾅ", "한국어", "한글", "龥龦",
       "\u3400", "𠀀", "ㄅㄆ", "〇", "々", "ー", "・", "テスト中", "我爱北京天安门"]
LETTERLIKE = ["\u212a", "\u2126", "ℌ", "ℓ", "№", "℃", "Ⅻ", "ⅰⅱ", "ℵ"]
FULLWIDTH = ["ＡＢＣ", "ａｂｃ", "１２３", "！？", "（）", "：；", "～"]
NUMBERS = ["١٢٣", "۴۵۶", "½", "²³", "¹", "¼¾", "Ⅻ", "①②", "𝟘𝟙", "3.14", "1,000", "1e10",
           "0x1F", "-42", "+7", "09:30", "2024-01-01", "٣", "๑๒", "१२"]
PUNCT = ["...", "!!!", "?!", "—", "–", "…", "«»", "„“", "‘’", "¿¡", "。", "，", "、", "।", "۔",
         "،", "()", "[]", "{}", "<>", "+=", "->", "=>", "&&", "||", "//", "/*", "*/", "#!", "@",
         "$", "%", "^", "~", "`", "|", "\\", "'", "\"", "'s", "'S", "'t", "'T", "'re", "'Re",
         "'VE", "'ve", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "'ſ", "'x", "''", "'/'",
         "/", "//\n", "!\n", "?\r\n", ";\n\n", "_", "__", "-", "--", "=", "==", "==="]
SYMBOLS = ["€", "£", "¥", "©", "®", "™", "°", "±", "×", "÷", "∑", "√", "≈", "≠", "∞", "→",
           "⇒", "♥", "★", "¬", "¦", "§", "¶", "^_^", "`", "¨"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪", "✨", "🔥", "❤️", "🙂🙃", "🏳️‍🌈", "#️⃣"]
MARKS = ["e\u0301", "a\u0308\u0301", "\u0301", "\u20dd", "\u0e01\u0e31", "\u0915\u094d",
         "A\u0301B", "\u0300\u0301", "x\u0332y"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "\u00a0", "\u3000",
          "\u2028", "\u0085", "\u2003", " \t\n", "\x0b", "\x0c", "\r", "\n \n", "\t\t", " \r\n "]
CONTROLS = ["\x00", "\x01", "\x1b[0m", "\x7f", "\u200b", "\u200d", "\ufeff", "\u00ad", "\u2060",
            "\u180e"]
CODE = ["def f(x):\n    return x**2", "int main(void) { return 0; }",
        "if (a && b) {\n\tx += 1;\n}", "for i in range(10):", "<div class=\"a\">",
        "SELECT * FROM t WHERE id=1;", "https://example.com/a/b?c=d&e=f", "path/to/file.txt",
        "C:\\Users\\me", "{\"key\": [1, 2, 3]}", "x = y // 2 /* c */", "#include <stdio.h>",
        "std::vector<int>", "$HOME/.bashrc", "@decorator", "a->b", "λx.x", "arr[i][j]", "i++;",
        "/usr/bin/env", "</s>", "<|im_start|>", "x=1;y=22;z=333", "print(f'{a!r}')"]
POOLS = [LATIN, LATIN, SCRIPTS, CJK, LETTERLIKE, FULLWIDTH, NUMBERS, PUNCT, PUNCT, SYMBOLS,
         EMOJI, MARKS, SPACES, CONTROLS, CODE]

HAND = [
    "", " ", "a", "Hello, world!", "Hello world", " Hello", "  Hello", "Hello ", "Hello  ",
    "   leading and trailing   ", "I'm", "I'M", "i'm", "don't", "DON'T", "Don'T", "they're",
    "THEY'RE", "we've", "WE'VE", "you'll", "YOU'LL", "he'd", "HE'D", "it's", "IT'S", "'s", "'S",
    "'sup", "x's", "'", "''", "'''", "x'", "'ſ", "Mc'ſ", "'ſtop", "'Stop", "'stop", "'LLama",
    "x'ſ1", "'ſ'ſ", "'Ll'", "rock'n'roll", "O'Neil's", "can't've",
    "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678", "123456789",
    "1234567890", "a1b22c333d4444", "1 2  3   4", "3.14159", "1,000,000", "٣٤٥٦٧", "²³¹",
    "½¼", "x²y", "Ⅻ12", "١2٣", "𝟘𝟙𝟚𝟛",
    "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "a\nb", "a\r\nb", "a\n\nb", "a \n b",
    "a  \n  b", "a\t\tb", "a\n\n\n\tb", "x\r\n  y", "  \n", "\n  ", " \n\n ", "a \r\n\r\n b",
    "foo\n\n\n", "foo   ", "foo\t\n", "\t\tfoo", "\u3000foo", "foo\u3000", "a\u00a0b", "a\u2028b",
    "a\u0085b", "a \u3000 b", "x\u200by", "a\x00b", "\x01\x02\x03", "\x1b[31mred\x1b[0m",
    "!!!", "...", "?!?!", "a...b", "a!!!b", "hello!!!", " !!!", "  !!", "—hello—", "«quote»",
    "(parens)", "[brackets]", "{braces}", "a+b=c", "a$b", "a^b|c~d`e", "100%", "#hashtag",
    "@user", "foo/bar/baz", "foo//bar", "foo/\nbar", "x/\r\n/y", ".\n", "!\r\n\r\n", "?/",
    "日本語のテキスト", "中文测试，你好！", "한국어 텍스트", "Hello世界123", "世界Hello",
    "ひらがなとカタカナ", "漢字かな交じり文", "北京2024年", "ｶﾀｶﾅ", "　全角スペース　",
    "😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ✨", "I ❤️ NY", "🙂x", "x🙂",
    "naïve café", "e\u0301e\u0301", "\u0301abc", "\u0301ABC", "ABC\u0301", "ABC\u0301def",
    "a\u0301B\u0301", "नमस्ते दुनिया", "ภาษาไทย ง่าย", "العربية لغة", "עברית קלה",
    "HTMLParser", "getHTTPResponseCode", "iPhone", "IPhone", "ABCdef", "ABC def", "ABC",
    "aBC", "AbC", "ǅemal ǄEMAL ǆemal", "ʰello", "ˈhello", "helloʰ", "Aʰa", "ÀÉÎ", "ÀÉÎàéî",
    "ΑΒΓαβγ", "Straße STRASSE", "\u212a\u2126", "ℌello", "ＡＢＣａｂｃ", "ａ１！",
    "def f(x):\n    return x**2\n", "if (x) {\n    y();\n}\n", "\tindented\n\t\tmore\n",
    "a = b;  // comment\n", "<html><body>Hi</body></html>", "key: value\nlist:\n  - a\n",
    "C:\\Program Files\\x", "https://a.b/c?d=e#f", "user@example.com", "+1 (555) 123-4567",
    "$12.50 €3,99 ¥1000", "10:30am 2024-12-31", "v1.2.3-rc.1", "0xDEADBEEF", "1e-9",
    "μ-law", "µs", "ﬁﬂ", "ẞ", "İi̇", "ǈ", "ꞏ", "ʔ", "ƻ", "ʕ", "\u1fbe", "ι",
    # punctuation newer than Unicode 8.0 (Falcon's Punctuation does not know
    # it) and two characters that were punctuation in 8.0
    "a\u2e40b", "a.\u2e5d.b", "x\u166dy", "x\U000111c9y", "\u1b7d\u1b7e", "(\u2e4f)",
]


def corpus():
    rng = random.Random(20240601)
    out = list(HAND)
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 9)):
            pool = rng.choice(POOLS)
            if pool is NUMBERS and rng.random() < 0.6:
                parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 10))))
            else:
                parts.append(rng.choice(pool))
            r = rng.random()
            if r < 0.45:
                parts.append(" ")
            elif r < 0.55:
                parts.append(rng.choice(SPACES))
        s = "".join(parts)
        if rng.random() < 0.3:
            s = " " + s
        out.append(s)
    # long runs
    out += [" " * 300 + "x", "\n" * 80, "x" + "\t" * 50 + "y", "9" * 250, "a" * 400,
            "!" * 200 + "a", " \n" * 60 + "z", "日本" * 100, "\r\n" * 50 + " q"]
    rng2 = random.Random(7)
    big = "".join(rng2.choice(rng2.choice(POOLS)) + rng2.choice(["", " ", " ", "\n"])
                  for _ in range(400))
    out.append(big)
    return out


def escape(s):
    o = []
    for ch in s:
        c = ord(ch)
        if ch == "\\":
            o.append("\\\\")
        elif ch == "\n":
            o.append("\\n")
        elif ch == "\r":
            o.append("\\r")
        elif ch == "\t":
            o.append("\\t")
        elif c < 0x20 or c == 0x7F:
            o.append("\\x%02x" % c)
        elif c >= 0x80 and unicodedata.category(ch)[0] in "ZC":
            o.append("\\u%04x" % c if c <= 0xFFFF else "\\U%08x" % c)
        else:
            o.append(ch)
    return "".join(o)


def main():
    os.makedirs(OUT, exist_ok=True)
    strings = corpus()
    for s in strings:
        assert "\ud800" > s or True
    dec = byte_decoder()
    files = {}
    with open(os.path.join(OUT, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        for s in strings:
            f.write(escape(s) + "\n")
    files["corpus.txt"] = None

    groups = {}
    for name, (fname, chain) in CHAINS.items():
        key = fname + ".txt"
        if key in groups:
            assert groups[key][1] == chain, "one file, two chains: " + key
            groups[key][0].append(name)
        else:
            groups[key] = ([name], chain)

    for key, (names, chain) in groups.items():
        pt = pre_tokenizer(chain)
        lines = []
        for s in strings:
            raw = s.encode("utf-8")
            lens = []
            for piece, _ in pt.pre_tokenize_str(s):
                lens.append(len(bytes(dec[ch] for ch in piece)))
            assert sum(lens) == len(raw), (key, s)
            lines.append(" ".join(str(n) for n in lens))
        with open(os.path.join(OUT, key), "w", encoding="utf-8", newline="\n") as f:
            f.write("# generated by scripts/gen_pretok_golden.py (tokenizers %s); do not edit\n"
                    % tokenizers.__version__)
            f.write("# names: %s\n" % " ".join(names))
            f.write("# chain: %s\n" % json.dumps(chain, ensure_ascii=True))
            for line in lines:
                f.write(line + "\n")
        files[key] = None

    with open(os.path.join(OUT, "VERSIONS"), "w", encoding="utf-8", newline="\n") as f:
        f.write("tokenizers %s\n" % tokenizers.__version__)
        f.write("python %s\n" % sys.version.split()[0])
        for key in sorted(files):
            with open(os.path.join(OUT, key), "rb") as g:
                f.write("%s  %s\n" % (hashlib.sha256(g.read()).hexdigest(), key))
    total = sum(os.path.getsize(os.path.join(OUT, k)) for k in files)
    print("%d strings, %d chains, %d names, %d bytes" % (len(strings), len(groups), len(CHAINS),
                                                           total))


if __name__ == "__main__":
    main()
