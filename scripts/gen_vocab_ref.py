#!/usr/bin/env python3
"""gen_vocab_ref.py -- writes tests/data/vocab_ref/: llama.cpp's token ids for
the vocabularies of the registry's real models (Gemma 3 270M, Qwen2.5-Coder
0.5B and 1.5B), read by tests/test_vocab_ref.c.

The reference is llama.cpp through the PyPI package llama-cpp-python (pinned
in scripts/golden-requirements.txt; the venv is the one scripts/gen_golden.py
sets up, ~/.cache/kvik/golden-venv or $KVIK_GOLDEN_VENV). Each model is
opened with Llama(model_path, vocab_only=True) and texts are tokenized with
Llama.tokenize(bytes, add_bos, special). If the interpreter lacks llama_cpp
the script re-runs itself with the venv's python.

Run from anywhere (the models come from the model cache, $KVIK_MODELS else
~/.cache/kvik/models; `make models-test` fetches them; a model that is not
there is left out with a message and its old files are kept):

    python3 scripts/gen_vocab_ref.py               # regenerate everything
    python3 scripts/gen_vocab_ref.py --show NAME INDEX [INDEX...]

--show prints a string of tests/data/tokenizer_parity/strings.lps and
llama.cpp's ids for it (the C test has only their hash). NAME is a model
name below (gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b).

What is written for each model NAME (formats in tests/data/vocab_ref/README.md,
which this script also writes):

  NAME.ids   a fixed list of texts (code, many scripts, CJK, emoji,
             whitespace runs, digits, HTML, the models' control-token texts
             written literally), each tokenized with special=False, with
             add_special off and on; and the golden chat conversations of
             tests/data/chat (scripts/gen_chat_golden.py) in the model's own
             template, as kvik's chat_encode must give them: the template's
             control tokens as their ids, every other stretch of text
             (template text and contents together, between two control
             tokens) tokenized with special=False, BOS first when the
             vocabulary adds one. For conversations whose contents hold no
             control-token text this equals tokenizing the whole rendering
             with special=True, which the script checks.
  NAME.hash  for every string of tests/data/tokenizer_parity/strings.lps,
             the low 24 bits of the FNV-1a hash of its ids (special=False,
             no BOS), in the KVTPHSH2 format of tests/data/tokenizer_parity.
"""

import argparse
import hashlib
import os
import struct
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "data", "vocab_ref")
STRINGS = os.path.join(ROOT, "tests", "data", "tokenizer_parity", "strings.lps")
VENV = os.environ.get("KVIK_GOLDEN_VENV") or os.path.join(
    os.path.expanduser("~"), ".cache", "kvik", "golden-venv")

# name -> (file in the model cache, chat template stem in tests/data/chat,
#          the control tokens that template writes, the rules of Ref below)
MODELS = {
    "gemma3-270m": ("gemma-3-270m-q4_k_m.gguf", "gemma", ["<start_of_turn>", "<end_of_turn>"],
                    dict(user_defined=[b"</s>"])),
    "qwen2.5-coder-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b",
                           ["<|im_start|>", "<|im_end|>"], dict(nfc=True)),
    "qwen2.5-coder-1.5b": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b",
                           ["<|im_start|>", "<|im_end|>"], dict(nfc=True)),
}

TEXTS = [
    "",
    " ",
    "Hello",
    "Hello world",
    " Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll agree: it's what they'd've done. DON'T SHOUT, we've 'quoted' it.",
    # whitespace runs
    "a  b   c    d     e",
    "    leading spaces",
    "trailing spaces    ",
    "\t\ttabs\tand\t\ttabs\t",
    "\n",
    "\n\n",
    "line one\nline two\n\nline four\n\n\n\nline eight",
    "\r\nwindows\r\nline ends\r\n",
    " \n \t \r\n  \n\n\t\t  x",
    " " * 31 + "x" + " " * 17,
    "\n" * 12,
    "\u00a0non-breaking\u00a0spaces\u2009thin\u3000ideographic",
    # digits and numbers
    "0 1 12 123 1234 12345 123456 1234567 12345678901234567890",
    "3.14159 2.71828 -42 +7 1e-10 6.022e23 0x1F 0b1010 1,000,000.00",
    "Call 555-0100 on 2024-06-11 at 23:59:59.",
    "\u0661\u0662\u0663 \u0967\u0968\u0969 \uff11\uff12\uff13 \u2460\u2461 \u00bd \u2167",
    # code
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n",
    "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "const x = {a: [1, 2, 3], 'b': \"c\"}; // comment\n/* block */",
    "{\"name\": \"kvik\", \"version\": [0, 1], \"ok\": true, \"none\": null}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "x=1;y=2;z=x**y//3%4&5|6^7~8<<9>>10!=11==12<=13>=14",
    "    if (x) {\n        y();\n    } else {\n        z();\n    }\n",
    "$ ls -la /usr/local/bin | grep -E '^-rwx' > out.txt 2>&1",
    # HTML and markup
    "<html><head><title>T</title></head><body><h1>Hi</h1><p>text</p></body></html>",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "<div class=\"x\"><br/><strong>bold</strong> <em>it</em></div>",
    "# Title\n\n## Section\n\n- item *one*\n- item **two**\n\n```python\nx = 1\n```\n",
    # scripts
    "Gr\u00fc\u00dfe aus K\u00f6ln, \u00e7a va? Cr\u00e8me br\u00fbl\u00e9e, ni\u00f1o, \u0153uvre",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
    "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "\u1100\u1161\u11a8 (Hangul jamo) e\u0301 (combining) \u212b \u00c5",
    # CJK
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
    "\u6771\u4eac\u90fd\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3002",
    "\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5: mixed \u4e2d\u6587 and English 123 \u5b57",
    "\U00020000\U0002a6d6 \u9fff \u3400",
    # emoji
    "\U0001f600\U0001f642\U0001f680\u2764\ufe0f",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family, \U0001f44d\U0001f3fd thumbs",
    "\U0001f1e9\U0001f1ea\U0001f1ef\U0001f1f5 flags \U0001f3f3\ufe0f\u200d\U0001f308",
    "I \u2764 \u2615 and \U0001f355!!!",
    # rare characters (byte fallback)
    "\U0001d538\U0001d539\U0001d53a \U00010348 \ue000\uf8ff \U000f0000",
    "\u0000nul\u0001\u0002\u001f\u007f",
    "\ufeffBOM first",
    # control-token and special texts, written literally
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "text with <start_of_turn> inside",
    "<bos><eos><pad><unk><mask>[multimodal]<start_of_image><end_of_image>",
    "<s>hello</s> world </s>\n",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|><|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call><tool_response>ok</tool_response>",
    "<|file_sep|><|repo_name|>kvik<|vision_start|><|image_pad|>",
    "<start_of_turn",
    "<|im_start",
    # a longer mixed text
    ("Tokenizers split text into pieces. \u0421\u043b\u043e\u0432\u0430, \u5b57, "
     "and \U0001f642 all become ids; 12345 digits, \t tabs,   spaces.\n") * 6,
]


def reexec_in_venv():
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV) or not os.path.exists(py):
        sys.exit("llama_cpp is not importable; set up the venv: python3 scripts/gen_golden.py --setup")
    os.execv(py, [py] + sys.argv)


try:
    import llama_cpp
except ImportError:
    reexec_in_venv()


def model_dir():
    return os.environ.get("KVIK_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "kvik", "models")


def open_vocab(path):
    return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


def read_strings():
    with open(STRINGS, "rb") as f:
        data = f.read()
    assert data[:8] == b"KVTPSTR1", STRINGS
    n, _seed = struct.unpack_from("<II", data, 8)
    pos, out = 16, []
    for _ in range(n):
        (length,) = struct.unpack_from("<I", data, pos)
        out.append((data[pos + 6:pos + 6 + length], data[pos + 4], data[pos + 5]))
        pos += 6 + length
    assert pos == len(data)
    return data, out


def fnv1a(data, h=0x811C9DC5):
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def hash_ids(ids):
    return fnv1a(b"".join(struct.pack("<i", i) for i in ids))


def tokenize(llm, text, add_special, special):
    """llama.cpp's ids; add_special adds BOS only where the vocabulary asks
    (tokenizer.ggml.add_bos_token), as kvik's add_special does."""
    return llm.tokenize(text, add_bos=add_special, special=special)


class Ref:
    """llama.cpp's tokenizer for one model, with the two rules where llama.cpp
    departs from the model's own tokenizer (Hugging Face's tokenizer.json,
    SentencePiece), which kvik follows:

    nfc           Qwen2's tokenizer.json normalizes text to NFC before
                  pre-tokenizing; llama.cpp does not. The reference is
                  llama.cpp on the NFC form of the text (Python's
                  unicodedata; strings that are not valid UTF-8 are not
                  compared).
    user_defined  texts of USER_DEFINED tokens that llama.cpp turns into
                  control tokens by their text (it takes every "</s>" for an
                  end-of-generation token, for PaddleOCR), so that with
                  special=False it encodes them as plain text. Gemma 3's
                  "</s>" (id 212) is a user-defined piece of its SentencePiece
                  model, matched anywhere in the text. The reference splits
                  the text at these texts, encodes the pieces with llama.cpp
                  and puts the token between them.

    Each record the rules change keeps llama.cpp's own ids too (see
    README.md); `changed` counts them by rule."""

    def __init__(self, llm, nfc=False, user_defined=()):
        self.llm, self.nfc = llm, nfc
        self.user_defined = []
        for t in user_defined:
            ids = tokenize(llm, t, False, True)
            assert len(ids) == 1, (t, ids)
            self.user_defined.append((t, ids[0]))
        self.changed = {"nfc": 0, "user-defined": 0}

    def raw(self, text, add_special, special):
        return tokenize(self.llm, text, add_special, special)

    def ids(self, text, add_special, special):
        """(the reference ids, the rule that changed them or None)."""
        rule = None
        if self.nfc:
            n = unicodedata.normalize("NFC", text.decode("utf-8")).encode("utf-8")
            if n != text:
                text, rule = n, "nfc"
        if not special:
            hits = [(t, i) for t, i in self.user_defined if t in text]
            if hits:
                (t, tid), = hits  # one such text per model here
                out = self.raw(b"", add_special, False)
                for k, piece in enumerate(text.split(t)):
                    if k:
                        out.append(tid)
                    if piece:
                        out += self.raw(piece, False, False)
                if out != self.raw(text, add_special, special):
                    return out, "user-defined"
        return self.raw(text, add_special, special), rule

    def record(self, text, add_special, special):
        """The reference, counted; and llama.cpp's own ids where they differ."""
        ids, rule = self.ids(text, add_special, special)
        raw = self.raw(text, add_special, special)
        if rule and raw != ids:
            self.changed[rule] += 1
            return ids, (rule, raw)
        return ids, None


# ---- chat conversations -----------------------------------------------------

def chat_module():
    sys.path.insert(0, HERE)
    import gen_chat_golden
    return gen_chat_golden


def render_parts(chat, stem, msgs, gen):
    """The rendering of msgs in template stem as a list of (text, from_template)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = chat.raise_exception
    text, eos = chat.TEMPLATES[stem]
    tmpl = env.from_string(text)

    def render(contents):
        return tmpl.render(messages=[{"role": r, "content": c} for (r, _), c in zip(msgs, contents)],
                           add_generation_prompt=gen, bos_token="", eos_token=eos)

    real = render([c for _, c in msgs])
    sentinels = ["\ue000%d\ue001" % i for i in range(len(msgs))]
    shape = render(sentinels)
    parts, rest = [], shape
    for i, s in enumerate(sentinels):
        before, found, rest = rest.partition(s)
        assert found, (stem, "content %d not rendered" % i)
        parts.append((before, True))
        role, content = msgs[i]
        # what the template makes of a content: Gemma 3 trims all but a
        # leading system message, which it folds in as it is
        if stem == "gemma" and not (i == 0 and role == "system"):
            content = content.strip()
        parts.append((content, False))
    parts.append((rest, True))
    assert "".join(p for p, _ in parts) == real, (stem, "pieces do not join to the rendering")
    return real, parts


def chat_reference(ref, controls, parts, add_bos):
    """Control tokens as ids where the template wrote them; the text between
    them encoded with special=False, one stretch at a time."""
    llm = ref.llm
    ids = [llm.token_bos()] if add_bos else []
    stretch = b""
    for text, from_template in parts:
        data = text.encode("utf-8")
        while from_template and data:
            hits = [(data.find(c.encode()), c) for c in controls if data.find(c.encode()) >= 0]
            if not hits:
                break
            at, c = min(hits)
            stretch += data[:at]
            if stretch:
                ids += ref.ids(stretch, False, False)[0]
            stretch = b""
            cid = tokenize(llm, c.encode(), False, True)
            assert len(cid) == 1, (c, cid)
            ids += cid
            data = data[at + len(c):]
        stretch += data
    if stretch:
        ids += ref.ids(stretch, False, False)[0]
    return ids


# ---- output -----------------------------------------------------------------

def hexs(b):
    return b.hex() if b else "-"


def write_ids(name, file, ref, add_bos_default, chat, stem, controls):
    llm = ref.llm
    lines = ["# llama.cpp token ids for %s (%s); made by scripts/gen_vocab_ref.py, format in README.md"
             % (name, file),
             "model %s" % file,
             "n_vocab %d" % llm.n_vocab(),
             "bos %d add_bos %d" % (llm.token_bos(), 1 if add_bos_default else 0)]
    for t in TEXTS:
        data = t.encode("utf-8")
        for add_special in (0, 1):
            ids, raw = ref.record(data, bool(add_special), False)
            lines.append("text %d %s" % (add_special, hexs(data)))
            lines.append("ids " + " ".join(str(i) for i in ids))
            if raw:
                lines.append("# llama.cpp itself (%s): %s" % (raw[0], " ".join(str(i) for i in raw[1])))
    n_chat = 0
    for conv, msgs in chat.CONVERSATIONS.items():
        if (stem, conv) in chat.RAISES:
            continue
        for gen in (1, 0):
            real, parts = render_parts(chat, stem, msgs, bool(gen))
            ids = chat_reference(ref, controls, parts, add_bos_default)
            markers = any(c in m for _, m in msgs for c in controls)
            if not markers:
                whole = ref.ids(real.encode("utf-8"), True, True)[0]
                assert whole == ids, (name, conv, gen, "stretches differ from the whole rendering")
            lines.append("chat %s %d %d" % (conv, gen, len(msgs)))
            for role, content in msgs:
                lines.append("msg %s %s" % (role, hexs(content.encode("utf-8"))))
            lines.append("ids " + " ".join(str(i) for i in ids))
            n_chat += 1
    with open(os.path.join(OUT, name + ".ids"), "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return n_chat


def write_hash(name, ref, strings_file, strings):
    # llama.cpp's byte-level BPE aborts the process on text that is not
    # valid UTF-8 (std::invalid_argument "invalid codepoint"): for those
    # vocabularies such strings are skipped (flag bit 0, hash 0)
    skip_invalid = ref.llm.metadata.get("tokenizer.ggml.model") == "gpt2"
    out = bytearray(b"KVTPHSH2")
    out += struct.pack("<IIII", len(strings), fnv1a(strings_file), 1 if skip_invalid else 0, 0)
    for s, flags, _cat in strings:
        h = 0 if skip_invalid and flags & 1 else hash_ids(ref.record(s, False, False)[0]) & 0xFFFFFF
        out += struct.pack("<I", h)[:3]
    with open(os.path.join(OUT, name + ".hash"), "wb") as f:
        f.write(out)


README = """# tests/data/vocab_ref -- llama.cpp's token ids on the real models' vocabularies

Made by `scripts/gen_vocab_ref.py` (the only way it is produced; its
docstring says how to run it) with llama.cpp through llama-cpp-python
{version} (scripts/golden-requirements.txt). Read by `tests/test_vocab_ref.c`,
which loads the same GGUF files from the model cache (`make models-test`
fetches them) and skips a model that is not there.

| name | file | size (bytes) | sha256 | texts the rules change | strings the rules change |
| --- | --- | --- | --- | --- | --- |
{rows}

## Where llama.cpp is not the reference as it is

kvik follows each model's own tokenizer (Hugging Face's tokenizer.json, the
SentencePiece model), and llama.cpp departs from it in two places; there the
reference is llama.cpp with the model's rule applied around it (class Ref in
the generator), and the `.ids` file keeps llama.cpp's own ids in a comment
after each record that changes:

- **nfc** (Qwen2.5-Coder): Qwen2's tokenizer.json normalizes text to NFC
  before pre-tokenizing (so does kvik for tokenizer.ggml.pre qwen2);
  llama.cpp does not. The reference is llama.cpp on the NFC form of the
  text (Python's unicodedata).
- **user-defined** (Gemma 3): token 212 `</s>` is USER_DEFINED in the GGUF
  (a user-defined piece of Gemma 3's SentencePiece model, matched anywhere
  in the text, as kvik matches USER_DEFINED tokens); llama.cpp makes every
  token whose text is `</s>` a control and end-of-generation token (a rule
  for PaddleOCR), which special=False then leaves as plain text. The
  reference splits the text at `</s>`, encodes the pieces with llama.cpp and
  puts 212 between them.

Text that is not valid UTF-8 is compared as llama.cpp encodes it for Gemma 3
(kvik's SentencePiece cuts such text by the lead byte alone, as llama.cpp
does); for the byte-level BPE of Qwen it is not compared (below).

## NAME.ids

Text, one record per line, fields separated by one space:

- `model FILE`, `n_vocab N`, `bos ID add_bos 0|1` (tokenizer.ggml.add_bos_token)
- `text ADD_SPECIAL HEX` then `ids ID...`: the UTF-8 bytes of a text in hex
  (`-` for the empty text) and llama.cpp's `tokenize(bytes,
  add_bos=ADD_SPECIAL, special=False)`; llama-cpp-python's add_bos is
  llama.cpp's add_special, which adds BOS only when add_bos is 1 (kvik's
  add_special does the same).
- `chat CONVERSATION GEN N`, then N lines `msg ROLE HEX` (role, content in
  hex), then `ids ID...`: the conversation of tests/data/chat in the model's
  template (Gemma 3's for gemma3-270m, which has no template of its own;
  the GGUF's for the Qwen models), with add_generation_prompt = GEN, as
  chat_encode must encode it: BOS when add_bos is 1, the template's control
  tokens as their ids, everything between two of them (template text and
  message contents together) tokenized with special=False. For
  conversations whose contents hold no control-token text these are the
  ids of the whole rendering tokenized with special=True (the generator
  checks it).

Lines starting with `#` are comments.

## NAME.hash

The format of tests/data/tokenizer_parity/README.md (`KVTPHSH2`): for each
string of tests/data/tokenizer_parity/strings.lps, the low 24 bits of the
FNV-1a hash of llama.cpp's ids (special=False, no BOS); the header holds the
FNV-1a of strings.lps, so a regenerated strings file needs this regenerated
too. Strings that are not valid UTF-8 are encoded as they are for Gemma's
SentencePiece vocabulary (flags 0); llama.cpp's byte-level BPE stops the
process on them ("invalid codepoint"), so the Qwen files skip them (flags 1,
hash 0).
"""


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--show", nargs="+", metavar="ARG", help="NAME INDEX [INDEX...]")
    args = ap.parse_args()
    strings_file, strings = read_strings()
    if args.show:
        name = args.show[0]
        if name not in MODELS:
            sys.exit("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
        ref = Ref(open_vocab(os.path.join(model_dir(), MODELS[name][0])), **MODELS[name][3])
        for idx in args.show[1:]:
            s, flags, cat = strings[int(idx)]
            if flags & 1 and ref.nfc:
                print("#%s category %d %r: not valid UTF-8, not compared" % (idx, cat, s))
                continue
            ids, raw = ref.record(s, False, False)
            print("#%s category %d %r\n  reference (%d ids, hash 0x%06x): %s"
                  % (idx, cat, s, len(ids), hash_ids(ids) & 0xFFFFFF, " ".join(map(str, ids))))
            if raw:
                print("  llama.cpp itself (%s): %s" % (raw[0], " ".join(map(str, raw[1]))))
        return
    os.makedirs(OUT, exist_ok=True)
    chat = chat_module()
    rows = []
    for name, (file, stem, controls, rules) in MODELS.items():
        path = os.path.join(model_dir(), file)
        if not os.path.isfile(path):
            print("%s: %s not cached, its files are kept as they are" % (name, path))
            continue
        ref = Ref(open_vocab(path), **rules)
        add_bos = ref.llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
        n_chat = write_ids(name, file, ref, add_bos, chat, stem, controls)
        texts = dict(ref.changed)
        write_hash(name, ref, strings_file, strings)
        strs = {k: v - texts[k] for k, v in ref.changed.items()}
        rows.append("| %s | %s | %d | %s | %s | %s |" % (
            name, file, os.path.getsize(path), sha256(path),
            ", ".join("%s %d" % kv for kv in texts.items() if rules.get(kv[0].replace("-", "_"))) or "-",
            ", ".join("%s %d" % kv for kv in strs.items() if rules.get(kv[0].replace("-", "_"))) or "-"))
        print("%s: %d texts, %d chat renderings, %d strings; changed by the rules: texts %s, strings %s"
              % (name, 2 * len(TEXTS), n_chat, len(strings), texts, strs))
        del ref
    with open(os.path.join(OUT, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write(README.format(version=llama_cpp.__version__, rows="\n".join(rows)))


if __name__ == "__main__":
    main()
