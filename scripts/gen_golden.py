#!/usr/bin/env python3
"""gen_golden.py -- writes the llama.cpp golden data of tests/data/golden/.

The data comes from an independent implementation, llama.cpp, through the
PyPI package llama-cpp-python (pinned in scripts/golden-requirements.txt),
run on the default model SmolLM2-135M-Instruct Q4_1. kvik's tests read it
without network access; this script is the only way it is produced.

Setup (once; builds llama.cpp from source, ~10-20 minutes on 2 cores). The
venv lives OUTSIDE the repository, by default ~/.cache/kvik/golden-venv
(override with $KVIK_GOLDEN_VENV or --venv DIR):

    python3 scripts/gen_golden.py --setup

which amounts to

    python3 -m venv ~/.cache/kvik/golden-venv
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \\
                -DGGML_F16C=ON -DGGML_BMI2=ON" CMAKE_BUILD_PARALLEL_LEVEL=2 \\
        ~/.cache/kvik/golden-venv/bin/pip install --no-cache-dir \\
        -r scripts/golden-requirements.txt

(GGML_NATIVE=OFF with a fixed AVX2 feature set so that the CPU kernels, and
so the logits, do not depend on the building machine's extra features.)

Run (from the repository root; needs the model, `make model` fetches it):

    python3 scripts/gen_golden.py [MODEL.gguf] [--out tests/data/golden]

The model defaults to $KVIK_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf, else
~/.cache/kvik/models/SmolLM2-135M-Instruct.Q4_1.gguf. If the interpreter that
runs the script lacks llama_cpp, the script re-executes itself with the venv's
python. Output is deterministic: a second run rewrites identical files
(n_threads = n_threads_batch = 2, n_batch = 512, n_ctx = 2048, seed 0 are
fixed; llama.cpp's logits may differ in the last digits with other thread or
batch counts or another build).

What is recorded (format in tests/data/golden/README.md, which this script
also writes): for each prompt, the token ids of llama.cpp's tokenizer, a
64-token greedy continuation, and the top-20 natural-log probabilities
(log-softmax of the full-vocabulary logits, computed in float64) at every
position of prompt + continuation.
"""

import argparse
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REQS = os.path.join(HERE, "golden-requirements.txt")
DEFAULT_VENV = os.environ.get("KVIK_GOLDEN_VENV") or os.path.join(
    os.path.expanduser("~"), ".cache", "kvik", "golden-venv")
# The models with golden data: registry name -> (file in the model cache,
# its sha256, a title, the output folder under tests/data). `kvik pull NAME`
# fetches each; the registry (src/api/registry.c) pins the same sha256.
MODELS = {
    "smollm2-135m": ("SmolLM2-135M-Instruct.Q4_1.gguf",
                     "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                     "SmolLM2-135M-Instruct Q4_1", "golden"),
    "qwen2.5-coder-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                           "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                           "Qwen2.5-Coder-0.5B-Instruct", "golden-qwen2.5-coder-0.5b"),
    "qwen2.5-coder-1.5b": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                           "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                           "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", "golden-qwen2.5-coder-1.5b"),
    "gemma3-270m": ("gemma-3-270m-q4_k_m.gguf",
                    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", "Gemma 3 270M Q4_K_M",
                    "golden-gemma3-270m"),
}
DEFAULT_MODEL = "smollm2-135m"
MODEL_NAME, EXPECTED_SHA256, TITLE, OUT_SUBDIR = MODELS[DEFAULT_MODEL]
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", OUT_SUBDIR)
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
              "-DGGML_F16C=ON -DGGML_BMI2=ON")

# Fixed run parameters (recorded in the README).
N_THREADS = 2
N_BATCH = 512
N_CTX = 2048
SEED = 0
N_CONT = 64
TOP_K = 20


def default_model():
    d = os.environ.get("KVIK_MODELS") or os.environ.get("KVIK_MODEL_CACHE")
    if d:
        return os.path.join(d, MODEL_NAME)
    return os.path.join(os.path.expanduser("~"), ".cache", "kvik", "models",
                        MODEL_NAME)


def setup(venv_dir):
    if not os.path.exists(os.path.join(venv_dir, "bin", "python")):
        subprocess.check_call([sys.executable, "-m", "venv", venv_dir])
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", CMAKE_ARGS)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    pip = os.path.join(venv_dir, "bin", "pip")
    # --no-cache-dir: never reuse a wheel built earlier with other CMAKE_ARGS.
    subprocess.check_call([pip, "install", "--no-cache-dir", "-r", REQS],
                          env=env)
    print("venv ready: %s\nnow run: python3 %s" % (venv_dir,
          os.path.relpath(os.path.abspath(__file__))))


# --------------------------------------------------------------------------
# Prompts. Everything here is original text written for this test set.

RIVERS = """\
Rivers are the oldest roads on Earth. Long before anyone laid a stone or \
cleared a path through a forest, water was already finding the quickest way \
downhill, cutting valleys, carrying sand and seeds, and joining distant \
places into a single moving thread. When people began to settle, they \
followed those threads. Almost every early town grew up beside a river, \
because a river offered three gifts at once: water to drink, fish to eat, \
and a way to travel that did not require a road.

A river is never the same from one day to the next. In spring it swells \
with melted snow and rain, spreads across its flood plain, and leaves behind \
a layer of fine, dark silt. Farmers learned to read these rhythms. They \
planted after the water fell back and harvested before it rose again, and \
their calendars, festivals and even their stories were shaped by the \
seasons of the current. A dry year meant hunger; a wild year meant ruined \
houses. Living by a river has always been a bargain between generosity and \
danger.

Rivers also divide. Many borders follow a channel, and many battles were \
fought over a single bridge or ford. Yet the same water that separates two \
countries is shared by both of them, and a dam built upstream changes life \
for everyone below. Engineers today measure flow in cubic metres per second, \
but the older question remains: who has the right to the water, and who \
must live with the consequences of its use?

Consider what happens to one drop of rain that lands on a mountain. It may \
sink into the soil and travel underground for years, or it may run straight \
into a stream. It joins other drops, picks up minerals and tiny living \
things, passes mills, cities and fields, and perhaps spends a season in a \
reservoir. Finally it reaches the sea, where the sun lifts it again into the \
clouds. The river, seen this way, is not a thing but a process, a loop that \
never really begins or ends.

Modern cities often hide their rivers in concrete channels or even bury \
them beneath streets. Some cities are now doing the opposite: they are \
opening the covered streams, planting trees along the banks, and inviting \
people back to the water's edge. Children who grow up near a living river \
learn that nature is not only something far away in a national park. It is \
the quiet, patient force that runs past the bakery, under the bridge, and \
out toward the horizon, still carving the land one grain at a time.
"""

CODE = '''\
def merge_intervals(intervals):
    """Merge overlapping [start, end] intervals and return them sorted."""
    if not intervals:
        return []
    intervals = sorted(intervals, key=lambda pair: pair[0])
    merged = [list(intervals[0])]
    for start, end in intervals[1:]:
        last = merged[-1]
        if start <= last[1]:
            last[1] = max(last[1], end)
        else:
            merged.append([start, end])
    return merged


def '''

FRENCH = ("La Loire est le plus long fleuve de France. Elle prend sa source "
          "au mont Gerbier-de-Jonc et traverse des châteaux célèbres, des "
          "vignobles et des villes comme Orléans, Tours et Nantes, où elle "
          "rejoint l'océan Atlantique. Au printemps, ")

CJK_RU = ("长江是中国最长的河流，全长约六千三百公里。它从青藏高原流向东海，"
          "沿途经过许多城市。\n"
          "Волга — самая длинная река в Европе. Она течёт через центр России "
          "и впадает в Каспийское море. Летом на её берегах")

NUMBERS = ("Invoice #2024-0417: 3 x $19.99 = $59.97; tax (8.25%) = $4.95; "
           "total: $64.92!!! Call +1 (555) 010-2398, ext. 42... "
           "Ratio 16:9 -> 1.777...; pi ~= 3.14159265; e^2 == 7.389? "
           "[a, b] = {x | 0 <= x < 1e-3}; 1,000,000 / 250 = 4,000. "
           "Next: ")

EMOJI = ("Weekend plan 🌞: hike 🥾 to the waterfall 🌊, picnic 🧺🍎🥖, "
         "then pizza 🍕 with friends 👩‍👩‍👧 and 🇫🇷 wine 🍷! Mood: 😀😂❤️ ")

WHITESPACE = ("Line one.\n\n\tIndented line with  two  spaces.\n"
              "    four spaces\r\nCRLF line;   trailing   \n\n\n"
              "END  ")

CHATS = {
    "chat_user": [
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "chat_multi": [
        {"role": "system",
         "content": "You are a concise assistant. Answer in one sentence."},
        {"role": "user", "content": "Name a river that flows through Paris."},
        {"role": "assistant", "content": "The Seine flows through Paris."},
        {"role": "user", "content": "How long is it, roughly?"},
    ],
}

# (file stem, name, kind, text-or-chat-key)
PROMPTS = [
    ("p01", "short_english", "text", "The capital of France is"),
    ("p02", "long_english_rivers", "text", RIVERS),
    ("p03", "python_code", "text", CODE),
    ("p04", "french", "text", FRENCH),
    ("p05", "chinese_russian", "text", CJK_RU),
    ("p06", "chat_user", "chat", "chat_user"),
    ("p07", "chat_multi_turn", "chat", "chat_multi"),
    ("p08", "numbers_punctuation", "text", NUMBERS),
    ("p09", "emoji", "text", EMOJI),
    ("p10", "very_short", "text", "Hello"),
    ("p11", "whitespace", "text", WHITESPACE),
]


# --------------------------------------------------------------------------

def render_chat(template, messages, bos, eos):
    """Render the GGUF's Jinja chat template the way HF transformers does."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        keep_trailing_newline=False)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=True,
        bos_token=bos, eos_token=eos)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ggml_info():
    import ctypes
    import llama_cpp
    libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    out = {}
    try:
        lib = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
        for fn in ("ggml_version", "ggml_commit"):
            f = getattr(lib, fn, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                out[fn] = f().decode()
    except OSError:
        pass
    out["system_info"] = llama_cpp.llama_print_system_info().decode().strip()
    return out


def log_softmax64(row):
    import numpy as np
    x = np.asarray(row, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def topk(lp, k):
    import numpy as np
    # Stable sort on -logprob: ties go to the lower token id.
    idx = np.argsort(-lp, kind="stable")[:k]
    return [(int(i), float(lp[i])) for i in idx]


def run_prompt(llm, text, add_bos, special, eog_ids):
    import numpy as np
    ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)
    assert len(ids) + N_CONT <= N_CTX
    llm.reset()
    llm.eval(ids)           # prefill, in chunks of n_batch
    cont = []
    eos_at = -1
    for k in range(N_CONT):
        row = llm.scores[llm.n_tokens - 1]
        nxt = int(np.argmax(row))            # greedy; ties -> lowest id
        if eos_at < 0 and nxt in eog_ids:
            eos_at = k
        cont.append(nxt)
        llm.eval([nxt])     # also gives the distribution after the last one
    n = len(ids) + N_CONT
    assert llm.n_tokens == n
    scores = np.array(llm.scores[:n], dtype=np.float64)
    rows = []
    for i in range(n):
        lp = log_softmax64(scores[i])
        rows.append(topk(lp, TOP_K))
    # Greedy consistency: the continuation is the argmax of the recorded rows.
    for k, t in enumerate(cont):
        assert rows[len(ids) - 1 + k][0][0] == t, (k, t)
    return ids, cont, eos_at, rows


def single_token_rows(llm, seq):
    """Full-vocab logprobs with every token evaluated on its own (batch 1).

    Only used for the README's note on llama.cpp's own batch-size noise."""
    import numpy as np
    llm.reset()
    for t in seq:
        llm.eval([t])
    return np.array([log_softmax64(r) for r in llm.scores[:len(seq)]])


def fmt_file(stem, name, kind, text, add_bos, special, ids, cont, eos_at,
             cont_bytes, rows):
    L = []
    L.append("# kvik golden data v1 -- generated by scripts/gen_golden.py; "
             "format: tests/data/golden/README.md")
    L.append("name %s" % name)
    L.append("kind %s" % kind)
    L.append("text_hex %s" % text.encode("utf-8").hex())
    L.append("add_bos %d" % int(add_bos))
    L.append("parse_special %d" % int(special))
    L.append("n_prompt %d" % len(ids))
    L.append("prompt_ids %s" % " ".join(map(str, ids)))
    L.append("n_cont %d" % len(cont))
    L.append("continuation_ids %s" % " ".join(map(str, cont)))
    L.append("eos_at %d" % eos_at)
    L.append("continuation_hex %s" % cont_bytes.hex())
    L.append("top_k %d" % TOP_K)
    L.append("n_pos %d" % len(rows))
    for i, r in enumerate(rows):
        L.append("pos %d %s" % (i, " ".join("%d:%.6f" % (t, v) for t, v in r)))
    return "\n".join(L) + "\n"


def esc(s):
    """Python-repr style escaping, without the quotes (for the README)."""
    r = repr(s)
    return r[1:-1]


PREVIEW = 120


def generate(model, out_dir, name=DEFAULT_MODEL):
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    msha = sha256_file(model)
    if EXPECTED_SHA256 and msha != EXPECTED_SHA256:
        print("warning: model sha256 %s != expected %s" % (msha,
              EXPECTED_SHA256), file=sys.stderr)
    llm = Llama(model_path=model, logits_all=True, n_ctx=N_CTX,
                n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS,
                n_threads_batch=N_THREADS, seed=SEED, verbose=False)
    md = llm.metadata
    add_bos = md.get("tokenizer.ggml.add_bos_token", "false") == "true"
    template = md.get("tokenizer.chat_template")  # None: the chat prompts are left out
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    bos_id = llama_cpp.llama_vocab_bos(vocab)
    eos_id = llama_cpp.llama_vocab_eos(vocab)
    eog_ids = {t for t in range(llm.n_vocab())
               if llama_cpp.llama_vocab_is_eog(vocab, t)}
    bos_s = llm.detokenize([bos_id], special=True).decode("utf-8")
    eos_s = llm.detokenize([eos_id], special=True).decode("utf-8")

    os.makedirs(out_dir, exist_ok=True)
    summary = []
    files = []
    noise_top20, noise_top1, noise_argmax = [], [], 0
    for stem, name, kind, src in PROMPTS:
        if kind == "chat" and template is None:
            continue
        if kind == "chat":
            text = render_chat(template, CHATS[src], bos_s, eos_s)
            special = True
        else:
            text = src
            special = False
        ids, cont, eos_at, rows = run_prompt(llm, text, add_bos, special,
                                             eog_ids)
        single = single_token_rows(llm, ids + cont)
        for i, r in enumerate(rows):
            noise_top20.extend(abs(single[i][t] - v) for t, v in r)
            noise_top1.append(abs(single[i][r[0][0]] - r[0][1]))
            noise_argmax += int(int(single[i].argmax()) != r[0][0])
        if not special:
            rt = llm.detokenize(ids)
            assert rt == text.encode("utf-8"), (stem, rt, text)
        cont_bytes = llm.detokenize(cont, prev_tokens=ids, special=True)
        body = fmt_file(stem, name, kind, text, add_bos, special, ids, cont,
                        eos_at, cont_bytes, rows)
        path = os.path.join(out_dir, stem + ".txt")
        with open(path, "w", encoding="ascii", newline="\n") as f:
            f.write(body)
        files.append((stem + ".txt", hashlib.sha256(body.encode()).hexdigest(),
                      len(body), max(len(x) for x in body.split("\n"))))
        summary.append((stem, name, kind, special, len(ids), eos_at, text,
                        cont_bytes.decode("utf-8", errors="replace")))
        print("%s %-20s n_prompt=%-4d eos_at=%-3d %r" % (
            stem, name, len(ids), eos_at,
            cont_bytes.decode("utf-8", errors="replace")[:70]))

    info = ggml_info()
    import jinja2
    versions = {
        "llama-cpp-python": llama_cpp.__version__,
        "ggml version": info.get("ggml_version", "?"),
        "ggml commit (as built)": info.get("ggml_commit", "?"),
        "numpy": np.__version__,
        "jinja2": jinja2.__version__,
        "python": "%d.%d.%d" % sys.version_info[:3],
    }
    q = lambda a, p: float(np.percentile(np.array(a), p))
    noise = ("| | median | 90% | 99% | max |\n| --- | --- | --- | --- | --- |\n"
             + "\n".join("| %s | %s |" % (lbl, " | ".join(
                 "%.3f" % q(a, p) for p in (50, 90, 99, 100)))
                 for lbl, a in (("all 20 recorded ids", noise_top20),
                                ("recorded top-1 id", noise_top1)))
             + "\n\nThe argmax differs at %d of %d positions." % (
                 noise_argmax, len(noise_top1)))
    write_readme(out_dir, versions, info["system_info"], msha, add_bos,
                 bos_id, eos_id, sorted(eog_ids), llm.n_vocab(), summary,
                 files, noise, name, template is not None)


README_FORMAT = """\
# tests/data/{out_subdir} — llama.cpp reference outputs for {title}

Produced by `scripts/gen_golden.py` (the only way they are made; it says how
to set up its pinned venv and run it) with llama.cpp through the PyPI package
llama-cpp-python, an implementation independent of kvik. **This README is
generated too**: edit the script, not this file.

## How it was made

    python3 scripts/gen_golden.py --setup   # venv ~/.cache/kvik/golden-venv, pins: scripts/golden-requirements.txt
    python3 scripts/gen_golden.py {model_arg}          # model: ~/.cache/kvik/models/{model_name}

{versions}

llama.cpp CPU features of the build: `{system_info}`
(built with `CMAKE_ARGS="{cmake_args}"`).

Run parameters: `Llama(model_path, logits_all=True, n_ctx={n_ctx},
n_batch={n_batch}, n_ubatch={n_batch}, n_threads={n_threads},
n_threads_batch={n_threads}, seed={seed})`. The prompt is evaluated in one
`eval()` call (one batch: every prompt is < {n_batch} tokens), then each
greedy token is evaluated on its own (batch of 1), exactly as a generation
loop does. With this build the output was bit-identical with 1 and 2
threads and between two builds (with and without OpenMP), but it is **not**
independent of the batch size: llama.cpp takes other CPU code paths for a
many-token batch than for a single token (a 5-token batch still matched the
single-token path exactly; the large prompts did not). Evaluating
the same sequences one token at a time instead moves the recorded logprobs by
(absolute difference, nats, over all positions of all files; computed by the
script on each run):

{noise}

So llama.cpp disagrees with itself by this much; a test of kvik against
these files needs a tolerance of that order (or should compare the top-1
only where its margin over the second id is comfortably larger), and greedy
continuations can legitimately diverge after a near-tie.

Model: `{model_name}`, sha256 `{model_sha}`. Tokenizer facts from its
metadata, used here: `tokenizer.ggml.add_bos_token` = {add_bos} (so {bos_note}), BOS id {bos_id}, EOS id {eos_id}, end-of-generation ids {eog_ids},
vocabulary size {n_vocab}.

## File format (`pNN.txt`, one per prompt)

ASCII text, `\\n` line ends, one record per line: a keyword, one space, the
value. Lines starting with `#` are comments. Long lines exist: the longest line
of any file here is {max_line} bytes (plus the newline). Records, in this order:

| keyword | value |
| --- | --- |
| `name` | short name of the prompt |
| `kind` | `text` (raw text) or `chat` (rendered with the model's chat template) |
| `text_hex` | the prompt, UTF-8 bytes as lowercase hex (2 digits a byte, no separators) |
| `add_bos` | `0`/`1`: whether tokenization added BOS (follows the metadata: always 0 here) |
| `parse_special` | `0`/`1`: whether special-token text (e.g. `<\\|im_start\\|>`) in the prompt was parsed into the special token ids (1 for `chat`, 0 for `text`) |
| `n_prompt` | number of prompt tokens |
| `prompt_ids` | the prompt token ids, space-separated: `Llama.tokenize(text_bytes, add_bos=add_bos, special=parse_special)` |
| `n_cont` | number of continuation tokens, always {n_cont} |
| `continuation_ids` | the greedy continuation (argmax of the logits; an exact tie would go to the lowest id) |
| `eos_at` | index in the continuation of the first end-of-generation token, `-1` if none. Generation does **not** stop there: all {n_cont} tokens are recorded, so tests may either stop at `eos_at` or compare all of them |
| `continuation_hex` | the continuation detokenized by llama.cpp (special tokens rendered as text), UTF-8 as hex |
| `top_k` | {top_k} |
| `n_pos` | number of `pos` lines: `n_prompt + n_cont` |
| `pos` | `pos <i> <id>:<logprob> ...` — {top_k} pairs, sorted by decreasing logprob (ties: lower id first) |

Position `i` (0-based) is the distribution of the **next** token after the
model has consumed tokens `0..i` of the sequence prompt ‖ continuation. So
`pos n_prompt-1+k`'s first id is `continuation_ids[k]`, and the last
position is the distribution after the last continuation token. A logprob is
`logit - logsumexp(all {n_vocab} logits)` (natural log), computed in float64
from llama.cpp's float32 logits and printed with `%.6f`.

## Prompts

| file | name | kind | parse_special | n_prompt | eos_at |
| --- | --- | --- | --- | --- | --- |
{prompt_table}

## Prompts and greedy continuations (decoded by llama.cpp)

Escaped with Python's `repr` rules (`\\n` is a newline); prompts cut after
{preview} characters, continuations complete.

{continuations}

## Files

| file | bytes | sha256 |
| --- | --- | --- |
{file_table}
"""


def write_readme(out_dir, versions, system_info, msha, add_bos, bos_id,
                 eos_id, eog_ids, n_vocab, summary, files, noise,
                 name=DEFAULT_MODEL, has_template=True):
    vlines = "\n".join("- %s: `%s`" % kv for kv in versions.items())
    ptab = "\n".join(
        "| `%s.txt` | %s | %s | %d | %d | %d |" % (
            stem, name, kind, int(special), n, eos_at)
        for stem, name, kind, special, n, eos_at, text, cont in summary)
    conts = "\n\n".join(
        "### `%s.txt` — %s\n\n````text\nprompt: %s%s\ngreedy: %s\n````" % (
            stem, name, esc(text[:PREVIEW]),
            "..." if len(text) > PREVIEW else "", esc(cont))
        for stem, name, kind, special, n, eos_at, text, cont in summary)
    ftab = "\n".join("| `%s` | %d | `%s` |" % (f, size, h)
                     for f, h, size, _ in files)
    max_line = max(m for _, _, _, m in files)
    text = README_FORMAT
    for k, v in {
        "model_name": MODEL_NAME, "versions": vlines,
        "system_info": system_info, "cmake_args": CMAKE_ARGS,
        "n_ctx": N_CTX, "n_batch": N_BATCH, "n_threads": N_THREADS,
        "seed": SEED, "model_sha": msha, "add_bos": str(add_bos).lower(),
        "bos_id": bos_id, "eos_id": eos_id,
        "eog_ids": ", ".join(map(str, eog_ids)), "n_vocab": n_vocab,
        "n_cont": N_CONT, "top_k": TOP_K, "prompt_table": ptab,
        "continuations": conts, "file_table": ftab,
        "preview": PREVIEW, "max_line": max_line, "noise": noise,
        "out_subdir": OUT_SUBDIR, "title": TITLE,
        "model_arg": "" if name == DEFAULT_MODEL else "--name " + name,
        "bos_note": ("BOS is added" if add_bos else "no BOS is added") + (
            "" if has_template else "; the file has no chat template, so "
            "the chat prompts p06 and p07 are left out"),
    }.items():
        text = text.replace("{%s}" % k, str(v))
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8",
              newline="\n") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=None,
                    help="GGUF model file (default: the --name model in the cache)")
    ap.add_argument("--name", default=DEFAULT_MODEL, choices=sorted(MODELS),
                    help="which model's golden data (default: %(default)s)")
    ap.add_argument("--out", default=None,
                    help="output folder (default: tests/data/ of the model)")
    ap.add_argument("--setup", action="store_true",
                    help="create the venv and install the pinned requirements")
    ap.add_argument("--venv", default=DEFAULT_VENV,
                    help="venv folder (default: %(default)s)")
    args = ap.parse_args()

    if args.setup:
        setup(args.venv)
        return
    try:
        import llama_cpp  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        py = os.path.join(args.venv, "bin", "python")
        # (compare prefixes: a venv's python is a symlink to the base one)
        if os.path.exists(py) and os.path.realpath(sys.prefix) != \
                os.path.realpath(args.venv) and \
                not os.environ.get("KVIK_GOLDEN_REEXEC"):
            os.environ["KVIK_GOLDEN_REEXEC"] = "1"
            os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("llama_cpp / numpy not importable and no venv at %s; run "
                 "`python3 %s --setup` first" % (args.venv, sys.argv[0]))
    global MODEL_NAME, EXPECTED_SHA256, TITLE, OUT_SUBDIR
    MODEL_NAME, EXPECTED_SHA256, TITLE, OUT_SUBDIR = MODELS[args.name]
    model = args.model or default_model()
    out = args.out or os.path.join(ROOT, "tests", "data", OUT_SUBDIR)
    if not os.path.exists(model):
        sys.exit("model not found: %s (run `./build/kvik pull %s`)" % (model, args.name))
    generate(model, out, args.name)


if __name__ == "__main__":
    main()
