#!/usr/bin/env python3
"""gen_arch_golden.py -- writes the llama.cpp golden data of tests/data/arch_golden/.

For each model family kvik runs (llama, llama 3 with rope_freqs, qwen2,
gemma3, phi3, phi3 with longrope) there is a tiny synthetic shape (`kvik synth --list`: tiny-*).
This script writes each one with `./build/kvik synth` (fixed seed, weight
types F16 and Q8_0, the default model's vocabulary), runs it in llama.cpp
through the PyPI package llama-cpp-python (the venv of scripts/gen_golden.py,
pinned in scripts/golden-requirements.txt), and records for one fixed
sequence of token ids (given directly: no tokenizer) the top-20 natural-log
probabilities at every position. tests/test_arch_golden.c synthesizes the
same files and compares kvik's forward pass with them. A shape whose RoPE
depends on the context (tiny-phi3-longrope) runs once per context that
chooses another set of factors (RUNS).

Setup (once; the same venv as gen_golden.py, ~/.cache/kvik/golden-venv):

    python3 scripts/gen_golden.py --setup

Run (from the repository root, after `make`; needs the default model,
`make model` fetches it):

    python3 scripts/gen_arch_golden.py [--kvik build/kvik] [--vocab GGUF] [--out DIR]

If the interpreter that runs the script lacks llama_cpp, it re-executes
itself with the venv's python. Output is deterministic: a second run
rewrites identical files (fixed threads, batch, context and seed; the K/V
cache in F32; see the README it writes).
"""

import argparse
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gen_golden  # noqa: E402  (the venv, its setup and the build facts)

DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "arch_golden")
DEFAULT_KVIK = os.path.join(ROOT, "build", "kvik")

# (shape, family as the README names it, what it exercises)
SHAPES = [
    ("tiny-llama", "llama", "tied output"),
    ("tiny-llama3", "llama 3 (rope_freqs)",
     "rope_freqs: factor 32, low 1, high 4, original context 64; head_dim key"),
    ("tiny-qwen2", "qwen2", "Q/K/V biases, NEOX rope, tied"),
    ("tiny-gemma3", "gemma3",
     "layers 0-4 slide (window 16, rope base 10000), layer 5 global (rope base 1e6); "
     "head 64 over width 128; q/k norms, post norms, GELU, sqrt(n_embd) embedding scale, tied"),
    ("tiny-phi3", "phi3", "fused attn_qkv and gate/up ffn_up, NEOX rope, untied"),
    ("tiny-phi3-longrope", "phi3 (longrope)",
     "as tiny-phi3, plus rope_factors_long (1 to 57.75) and rope_factors_short (1 to 2.19), "
     "attn_factor sqrt(1.75), original context 256 of 16384"),
]

# The runs of a shape: (golden file name, n_ctx); n_ctx None: N_CTX, and the
# file has no n_ctx record. llama.cpp chooses Phi-3's long factors when its
# context per sequence (n_ctx rounded up to a multiple of 256) exceeds the
# original context (256): n_ctx 256 (equal: not more) runs with the short
# ones, 512 with the long ones. Both are multiples of 256, so kvik, given
# the same longest sequence, sees the context llama.cpp compared.
RUNS = {
    "tiny-phi3-longrope": [("tiny-phi3-longrope-short", 256), ("tiny-phi3-longrope-long", 512)],
}
TYPES = ["f16", "q8_0"]
SYNTH_SEED = 1

# Fixed run parameters (recorded in the README).
N_THREADS = 2
N_BATCH = 512
N_CTX = 128
SEED = 0
TOP_K = 20
GGML_TYPE_F32 = 0


def token_ids():
    """80 ids below 49152: 48 from a linear congruential sequence, then the
    first 32 of them again (a repeat that attention can find, 48 positions
    back: beyond tiny-gemma3's 16-token window)."""
    a = [(i * 7919 + 1237) % 49152 for i in range(48)]
    return a + a[:32]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def synth(kvik, shape, qtype, vocab, path):
    subprocess.run([kvik, "synth", "--shape", shape, "--type", qtype, "--seed",
                    str(SYNTH_SEED), "--vocab", vocab, "-t", "2", "-o", path],
                   check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def load(path, n_ctx):
    from llama_cpp import Llama
    return Llama(model_path=path, logits_all=True, n_ctx=n_ctx,
                 n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS,
                 n_threads_batch=N_THREADS, seed=SEED, type_k=GGML_TYPE_F32,
                 type_v=GGML_TYPE_F32, verbose=False)


def logprobs(path, ids, n_ctx, one_by_one=False):
    """[len(ids)][n_vocab] float64 log-softmax of llama.cpp's logits."""
    import numpy as np
    llm = load(path, n_ctx)
    if one_by_one:
        for t in ids:
            llm.eval([t])
    else:
        llm.eval(ids)       # one batch: len(ids) < N_BATCH
    assert llm.n_tokens == len(ids)
    rows = np.array([gen_golden.log_softmax64(r) for r in llm.scores[:len(ids)]])
    n_vocab = llm.n_vocab()
    del llm
    return rows, n_vocab


def mean_kl(ref, other):
    """Mean over positions of KL(ref || other) on ref's top-20 ids, both
    renormalised over those ids (the test's measure); and the argmax
    agreement."""
    import numpy as np
    kls, agree = [], 0
    for a, b in zip(ref, other):
        top = np.argsort(-a, kind="stable")[:TOP_K]
        p = np.exp(a[top]); p /= p.sum()
        q = np.exp(b[top]); q /= q.sum()
        kls.append(float((p * np.log(p / q)).sum()))
        agree += int(a.argmax() == b.argmax())
    return float(np.mean(kls)), agree


# ---- mutations: what a wrong forward pass would compute -----------------

def gguf_layout(path):
    """(tensors {name: (ne, type, absolute offset)}, {key: (value offset, type)})."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))

        def rstr():
            return f.read(rd("Q")[0])
        assert f.read(4) == b"GGUF"
        rd("I")
        n_tensors, n_kv = rd("QQ")
        keys = {}
        for _ in range(n_kv):
            key = rstr().decode()
            t = rd("I")[0]
            keys[key] = (f.tell(), t)
            if t == 8:
                rstr()
            elif t == 9:
                et, n = rd("I")[0], rd("Q")[0]
                if et == 8:
                    for _ in range(n):
                        rstr()
                else:
                    f.seek(sizes[et] * n, 1)
            else:
                f.seek(sizes[t], 1)
        infos = []
        for _ in range(n_tensors):
            name = rstr().decode()
            nd = rd("I")[0]
            ne = rd("Q" * nd)
            t = rd("I")[0]
            off = rd("Q")[0]
            infos.append((name, ne, t, off))
        start = (f.tell() + 31) // 32 * 32   # general.alignment: 32 (not written)
    return {n: (ne, t, start + off) for n, ne, t, off in infos}, keys


def llama3_factors(dim, base, factor, low, high, orig_ctx):
    """rope_freqs values as Llama 3.1's conversion computes them (float32)."""
    import math
    import numpy as np
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    out = []
    for freq in freqs.astype(np.float64):
        wavelen = 2 * math.pi / freq
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def mutate(src, dst, what):
    """Copies src to dst with one change, or each of a tuple of changes (see
    MUTATIONS)."""
    import numpy as np
    shutil.copyfile(src, dst)
    tensors, keys = gguf_layout(src)
    changes = what if isinstance(what[0], tuple) else (what,)
    with open(dst, "r+b") as f:
        for kind, arg in changes:
            if kind in ("u32", "f32"):
                key, val = arg
                f.seek(keys[key][0])
                f.write(struct.pack("<I" if kind == "u32" else "<f", val))
            elif kind == "fill":           # every F32 tensor named *suffix := value
                suffix, val = arg
                for name, (ne, t, off) in tensors.items():
                    if name.endswith(suffix) and t == 0:
                        f.seek(off)
                        f.write(np.full(int(np.prod(ne)), val, np.float32).tobytes())
            elif kind == "copy":           # F32 tensor dst := F32 tensor src (same size)
                src_name, dst_name = arg
                ne, t, off = tensors[src_name]
                f.seek(off)
                data = f.read(int(np.prod(ne)) * 4)
                f.seek(tensors[dst_name][2])
                f.write(data)
            elif kind == "llama3_factors":  # rope_freqs := the factors of another original context
                ne, t, off = tensors["rope_freqs.weight"]
                f.seek(off)
                f.write(llama3_factors(2 * ne[0], *arg).tobytes())
            elif kind == "swap_halves":    # rows [0, n/2) <-> [n/2, n) of F16 tensors *suffix
                for name, (ne, t, off) in tensors.items():
                    if name.endswith(arg) and t == 1:
                        cols, rows = ne
                        f.seek(off)
                        a = np.frombuffer(f.read(cols * rows * 2), np.float16).reshape(rows, cols)
                        f.seek(off)
                        f.write(np.concatenate([a[rows // 2:], a[:rows // 2]]).tobytes())


LONGROPE_ONES = ("fill", ("rope_factors_long.weight", 1.0)), ("fill", ("rope_factors_short.weight", 1.0))
LONGROPE_ATTN = ("f32", ("phi3.rope.scaling.attn_factor", 1.0))

# (golden file name, description, mutation or tuple of them), run on the F16
# files
MUTATIONS = [
    ("tiny-llama3", "rope_freqs ignored (all factors 1)", ("fill", ("rope_freqs.weight", 1.0))),
    ("tiny-llama3", "rope_freqs of Llama 3.2 (original context 8192, not 64)",
     ("llama3_factors", (500000.0, 32.0, 1.0, 4.0, 8192))),
    ("tiny-qwen2", "Q/K/V biases ignored", ("fill", (".bias", 0.0))),
    ("tiny-gemma3", "no sliding window", ("u32", ("gemma3.attention.sliding_window", 4096))),
    ("tiny-gemma3", "window 15 instead of 16", ("u32", ("gemma3.attention.sliding_window", 15))),
    ("tiny-gemma3", "window 17 instead of 16", ("u32", ("gemma3.attention.sliding_window", 17))),
    ("tiny-gemma3", "sliding layers with the global rope base", ("f32", ("gemma3.rope.freq_base_swa", 1e6))),
    ("tiny-phi3", "gate and up halves of ffn_up swapped", ("swap_halves", "ffn_up.weight")),
    ("tiny-phi3-longrope-short", "rope factors ignored (all 1)", LONGROPE_ONES),
    ("tiny-phi3-longrope-short", "attn_factor ignored (1)", LONGROPE_ATTN),
    ("tiny-phi3-longrope-short", "the long factors instead of the short",
     ("copy", ("rope_factors_long.weight", "rope_factors_short.weight"))),
    ("tiny-phi3-longrope-long", "rope factors ignored (all 1)", LONGROPE_ONES),
    ("tiny-phi3-longrope-long", "attn_factor ignored (1)", LONGROPE_ATTN),
    ("tiny-phi3-longrope-long", "the short factors instead of the long",
     ("copy", ("rope_factors_short.weight", "rope_factors_long.weight"))),
    ("tiny-phi3-longrope-long", "rope factors and attn_factor ignored", LONGROPE_ONES + (LONGROPE_ATTN,)),
]


# ---- output --------------------------------------------------------------

def fmt_file(shape, family, qtype, n_ctx, file_sha, vocab_sha, n_vocab, ids, rows):
    import numpy as np
    L = ["# kvik arch golden data v1 -- generated by scripts/gen_arch_golden.py; "
         "format: tests/data/arch_golden/README.md",
         "shape %s" % shape,
         "family %s" % family,
         "type %s" % qtype,
         "seed %d" % SYNTH_SEED]
    if n_ctx is not None:
        L.append("n_ctx %d" % n_ctx)
    L += ["file_sha256 %s" % file_sha,
         "vocab_sha256 %s" % vocab_sha,
         "n_vocab %d" % n_vocab,
         "n_ids %d" % len(ids),
         "ids %s" % " ".join(map(str, ids)),
         "top_k %d" % TOP_K,
         "n_pos %d" % len(rows)]
    for i, lp in enumerate(rows):
        top = np.argsort(-lp, kind="stable")[:TOP_K]   # ties: lower id first
        L.append("pos %d %s" % (i, " ".join("%d:%.6f" % (int(t), float(lp[t])) for t in top)))
    return "\n".join(L) + "\n"


README = """\
# tests/data/arch_golden — llama.cpp reference outputs for the synthetic test shapes

Produced by `scripts/gen_arch_golden.py` (the only way they are made) with
llama.cpp through the PyPI package llama-cpp-python, an implementation
independent of kvik, on the random-weight files `kvik synth` writes for the
`tiny-*` shapes, one per model family. **This README is generated too**:
edit the script, not this file. `tests/test_arch_golden.c` writes the same
files (same shape, type, seed and vocabulary; it checks the sha256 below)
and compares kvik's forward pass with these logprobs.

## How it was made

    python3 scripts/gen_golden.py --setup   # once: venv ~/.cache/kvik/golden-venv
    make && python3 scripts/gen_arch_golden.py

{versions}

llama.cpp CPU features of the build: `{system_info}`
(built with `CMAKE_ARGS="{cmake_args}"`).

Files: `./build/kvik synth --shape SHAPE --type TYPE --seed {synth_seed}
--vocab {vocab_name}` (the default model's tokenizer, sha256 `{vocab_sha}`).
Run parameters: `Llama(path, logits_all=True, n_ctx={n_ctx},
n_batch={n_batch}, n_ubatch={n_batch}, n_threads={n_threads},
n_threads_batch={n_threads}, seed={seed}, type_k=F32, type_v=F32)` (flash
attention off, the llama-cpp-python default; the K/V cache in F32 so the
reference carries no F16 rounding of K and V). The {n_ids} ids are evaluated
in one `eval()` call, one batch.

`tiny-phi3-longrope` runs twice, since llama.cpp chooses Phi-3's factors
by its context per sequence (`n_ctx` rounded up to a multiple of 256)
against `phi3.rope.scaling.original_context_length` (256 here): with
`n_ctx=256` (equal, not more) it rotates with `rope_factors_short` (files
`tiny-phi3-longrope-short.*`), with `n_ctx=512` with `rope_factors_long`
(`tiny-phi3-longrope-long.*`). Those files carry an `n_ctx` record and the
test runs kvik with that longest sequence (both multiples of 256, so kvik
compares the context llama.cpp compared).

## Shapes

| shape | family | layers | width | heads / kv | head | notes |
| --- | --- | --- | --- | --- | --- | --- |
{shape_table}

The file conventions of each family are in `src/model/synth.h`. The ids
are the same for every file: 48 from a linear congruential sequence, then
the first 32 of them again (positions 48..79 repeat positions 0..31, further
back than tiny-gemma3's 16-token window):

    {ids}

## File format (`SHAPE.TYPE.txt`)

ASCII text, `\\n` line ends, one record per line: a keyword, one space, the
value. Lines starting with `#` are comments. Records, in this order:

| keyword | value |
| --- | --- |
| `shape` | the `kvik synth` shape |
| `family` | the family it stands for |
| `type` | the `kvik synth --type` |
| `seed` | the `kvik synth --seed` |
| `n_ctx` | optional, in the runs of a shape at several contexts: llama.cpp's `n_ctx` (else {n_ctx}); kvik runs with that longest sequence |
| `file_sha256` | sha256 of the synthesized file llama.cpp ran |
| `vocab_sha256` | sha256 of the GGUF whose tokenizer the file copies |
| `n_vocab` | logits per position |
| `n_ids` | number of ids |
| `ids` | the token ids, space-separated (position i holds ids[i]) |
| `top_k` | {top_k} |
| `n_pos` | number of `pos` lines (= n_ids) |
| `pos` | `pos <i> <id>:<logprob> ...` — {top_k} pairs, sorted by decreasing logprob (ties: lower id first) |

Position `i` is the distribution of the next token after ids `0..i`. A
logprob is `logit - logsumexp(all n_vocab logits)` (natural log), computed
in float64 from llama.cpp's float32 logits and printed with `%.6f`.

## llama.cpp against itself

Evaluating the same ids one at a time (batch of 1, llama.cpp's other CPU
code paths) instead of in one batch moves the result by this much (mean KL
over the top-20, both renormalised, as the test measures; argmax agreement):

| file | mean KL | argmax same |
| --- | --- | --- |
{noise_table}

## What the test's tolerances catch

The test asks for mean KL < 0.01 and top-1 agreement >= 99% where
llama.cpp's margin between its first two ids exceeds 0.01 nats (0.2 for the
Q8_0 files: `tests/test_arch_golden.c` says why). The same measures between the F16
file and a copy with one change that a wrong forward pass would amount to
(computed by the script with llama.cpp on each run):

| shape | change | mean KL | argmax same |
| --- | --- | --- | --- |
{mutation_table}

With Llama 3.2's own rope scaling (original context 8192) the factors
barely move these 80 positions ({l3_note}), under any tolerance: tiny-llama3
uses the same formula and factors with an original context of 64 tokens, so
they change the rotations within the sequence and a forward pass that
ignores them fails the test.

## Files

| file | bytes | sha256 |
| --- | --- | --- |
{file_table}
"""


def generate(kvik, vocab, out_dir):
    import llama_cpp
    import numpy as np

    ids = token_ids()
    vocab_sha = sha256_file(vocab)
    os.makedirs(out_dir, exist_ok=True)
    files, noise, shapes, muts = [], [], [], []
    l3_note = "not measured"
    listing = subprocess.run([kvik, "synth", "--list"], check=True,
                             capture_output=True, text=True).stdout.splitlines()
    rows_by_shape = {l.split()[0]: l.split() for l in listing[1:]}
    with tempfile.TemporaryDirectory(prefix="kvik-arch-golden-") as tmp:
        for shape, family, note in SHAPES:
            r = rows_by_shape[shape]  # shape family layers embd ff heads kv head ...
            shapes.append("| `%s` | %s | %s | %s | %s / %s | %s | %s |" % (
                shape, family, r[2], r[3], r[5], r[6], r[7], note))
            for qtype, (gname, n_ctx) in [(q, run) for q in TYPES for run in RUNS.get(shape, [(shape, None)])]:
                ctx = N_CTX if n_ctx is None else n_ctx
                path = os.path.join(tmp, "%s.%s.gguf" % (shape, qtype))
                synth(kvik, shape, qtype, vocab, path)
                fsha = sha256_file(path)
                rows, n_vocab = logprobs(path, ids, ctx)
                single, _ = logprobs(path, ids, ctx, one_by_one=True)
                kl, agree = mean_kl(rows, single)
                noise.append("| `%s.%s.txt` | %.2e | %d/%d |" % (gname, qtype, kl, agree, len(ids)))
                body = fmt_file(shape, family, qtype, n_ctx, fsha, vocab_sha, n_vocab, ids, rows)
                name = "%s.%s.txt" % (gname, qtype)
                with open(os.path.join(out_dir, name), "w", encoding="ascii", newline="\n") as f:
                    f.write(body)
                files.append("| `%s` | %d | `%s` |" % (name, len(body),
                             hashlib.sha256(body.encode()).hexdigest()))
                print("%-32s mean KL batch vs one-by-one %.2e" % (name, kl))
                if qtype != "f16":
                    os.remove(path)
                    continue
                for mname, desc, what in MUTATIONS:
                    if mname != gname:
                        continue
                    mpath = path + ".mut.gguf"
                    mutate(path, mpath, what)
                    mrows, _ = logprobs(mpath, ids, ctx)
                    mkl, magree = mean_kl(rows, mrows)
                    muts.append("| `%s` | %s | %.4f | %d/%d |" % (gname, desc, mkl, magree, len(ids)))
                    if what[0] == "llama3_factors":  # and those factors against none
                        npath = path + ".ones.gguf"
                        mutate(path, npath, ("fill", ("rope_freqs.weight", 1.0)))
                        orows, _ = logprobs(npath, ids, ctx)
                        l3_kl, l3_agree = mean_kl(mrows, orows)
                        l3_note = "mean KL %.1e between those factors and none, argmax same %d/%d" % (
                            l3_kl, l3_agree, len(ids))
                        os.remove(npath)
                    print("  %-40s mean KL %.4f" % (desc, mkl))
                    os.remove(mpath)
                os.remove(path)

    info = gen_golden.ggml_info()
    versions = {
        "llama-cpp-python": llama_cpp.__version__,
        "ggml version": info.get("ggml_version", "?"),
        "ggml commit (as built)": info.get("ggml_commit", "?"),
        "numpy": np.__version__,
        "python": "%d.%d.%d" % sys.version_info[:3],
    }
    text = README
    for k, v in {
        "versions": "\n".join("- %s: `%s`" % kv for kv in versions.items()),
        "system_info": info["system_info"], "cmake_args": gen_golden.CMAKE_ARGS,
        "synth_seed": SYNTH_SEED, "vocab_name": os.path.basename(vocab),
        "vocab_sha": vocab_sha, "n_ctx": N_CTX, "n_batch": N_BATCH,
        "n_threads": N_THREADS, "seed": SEED, "n_ids": len(ids),
        "shape_table": "\n".join(shapes), "ids": " ".join(map(str, ids)),
        "top_k": TOP_K, "noise_table": "\n".join(noise),
        "mutation_table": "\n".join(muts), "file_table": "\n".join(files),
        "l3_note": l3_note,
    }.items():
        text = text.replace("{%s}" % k, str(v))
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvik", default=DEFAULT_KVIK, help="kvik binary (default: %(default)s)")
    ap.add_argument("--vocab", default=gen_golden.default_model(),
                    help="GGUF whose tokenizer the files copy (default: %(default)s)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--venv", default=gen_golden.DEFAULT_VENV,
                    help="venv folder (default: %(default)s)")
    args = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        py = os.path.join(args.venv, "bin", "python")
        if os.path.exists(py) and os.path.realpath(sys.prefix) != \
                os.path.realpath(args.venv) and \
                not os.environ.get("KVIK_GOLDEN_REEXEC"):
            os.environ["KVIK_GOLDEN_REEXEC"] = "1"
            os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("llama_cpp / numpy not importable and no venv at %s; run "
                 "`python3 scripts/gen_golden.py --setup` first" % args.venv)
    if not os.path.exists(args.kvik):
        sys.exit("kvik not found: %s (run `make`)" % args.kvik)
    if not os.path.exists(args.vocab):
        sys.exit("vocabulary model not found: %s (run `make model`)" % args.vocab)
    generate(args.kvik, args.vocab, args.out)


if __name__ == "__main__":
    main()
