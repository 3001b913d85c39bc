#!/usr/bin/env python3
"""tokenizer-peer.py: the peer of `kvik bench tokenizer`, Hugging Face
`tokenizers` (Rust) measured on the same vocabulary, corpus and documents.

Runs with the Python of the virtualenv ~/.cache/kvik/tok-venv:

    python3 -m venv ~/.cache/kvik/tok-venv
    ~/.cache/kvik/tok-venv/bin/pip install -r scripts/tokenizer-requirements.txt
    ~/.cache/kvik/tok-venv/bin/python bench/tokenizer-peer.py --gguf VOCAB.gguf \
        --corpus ~/.cache/kvik/corpus/english.txt --threads 2

The tokenizer is built from the GGUF's tokenizer.ggml.* keys (vocabulary,
merges, token types; read by the small GGUF reader below) as a byte-level
BPE with the pre-tokenizer Hugging Face uses for that tokenizer.ggml.pre
name, saved once as tokenizer.json under ~/.cache/kvik/tok-peer/ and loaded
from there (Tokenizer.from_file, as applications load it). Control tokens
are added as special tokens and not parsed from the text
(encode_special_tokens), user-defined ones as plain added tokens: the same
rules as kvik with parse_special off.

Documents, tests and figures are those of src/tools/bench_tokenizer.h:
stream (every document once, the BPE cache cleared before each repetition),
repeat (the first documents, >= 4 KiB, as often as the corpus is long),
first (a fresh process: import, load, encode the first >= 64 KiB). One
thread is TOKENIZERS_PARALLELISM=false (encode_batch runs on the calling
thread); N threads is RAYON_NUM_THREADS=N. Each thread count runs in a child
process of its own, since Rayon fixes its pool at first use.

Prints one JSON line: seconds (median), MB/s and tokens/s per test, the
token count and the CRC-32 of all ids (little-endian int32), which kvik
compares with its own.

A second peer, OpenAI's tiktoken, runs when it is installed and the
vocabulary can be written as tiktoken ranks: its pre-tokenizer is one regex
(gpt-2 and the llama3 family, whose pattern is cl100k_base's) and its ids
are in merge order (rank = id, as in GPT-2's vocabulary and in files written
by `kvik vocab-import` from tiktoken's own ranks). The Encoding is built from
the GGUF's normal tokens (bytes -> id) and that regex; its figures are the
stream and repeat tests (encode_ordinary per document on one thread,
encode_ordinary_batch with num_threads=N), reported under tiktoken_* keys
with its own CRC-32, or tiktoken_error saying why it did not run.
"""
import argparse
import array
import hashlib
import json
import mmap
import os
import struct
import subprocess
import sys
import time
import zlib

DOC_MAX = 16384        # TOKBENCH_DOC_MAX
REPEAT_MIN = 4096      # TOKBENCH_REPEAT_MIN
FIRST_MIN = 65536      # TOKBENCH_FIRST_MIN
T_START = time.perf_counter()

try:
    import tokenizers
    from tokenizers import Tokenizer, AddedToken, decoders, models, pre_tokenizers
except ImportError:
    venv = os.path.expanduser("~/.cache/kvik/tok-venv")
    sys.stderr.write(
        "tokenizer-peer.py: the Python package 'tokenizers' is missing from %s "
        "(the virtualenv %s is %s); create it with:\n"
        "  python3 -m venv %s && %s/bin/pip install -r scripts/tokenizer-requirements.txt\n"
        % (sys.executable, venv, "there" if os.path.isdir(venv) else "missing", venv, venv))
    sys.exit(3)
T_IMPORTED = time.perf_counter()


# ---- GGUF metadata (the header and key/value section only) ---------------------

class GGUFError(Exception):
    pass


def read_gguf_metadata(path, wanted_prefix="tokenizer."):
    """Returns {key: value} for the keys starting with wanted_prefix."""
    with open(path, "rb") as f:  # mapped: a model file may be large; only its head is read
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise GGUFError("%s: truncated at byte %d" % (path, pos))
        b = data[pos:pos + n]
        pos += n
        return b

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def string():
        n = u64()
        return take(n).decode("utf-8", errors="surrogateescape")

    scalars = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}

    def value(t, depth=0):
        if t in scalars:
            fmt = scalars[t]
            return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
        if t == 8:
            return string()
        if t == 9 and depth < 8:
            et, n = u32(), u64()
            if et in scalars:
                fmt = scalars[et]
                size = struct.calcsize(fmt)
                raw = take(size * n)
                return list(struct.unpack("<%d%s" % (n, fmt[1]), raw))
            return [value(et, depth + 1) for _ in range(n)]
        raise GGUFError("%s: bad value type %d at byte %d" % (path, t, pos))

    if take(4) != b"GGUF":
        raise GGUFError("%s: not a GGUF file" % path)
    version = u32()
    if version not in (2, 3):
        raise GGUFError("%s: GGUF version %d" % (path, version))
    u64()  # tensors
    n_kv = u64()
    out = {}
    for _ in range(n_kv):
        key = string()
        out_value = value(u32())
        if key.startswith(wanted_prefix):
            out[key] = out_value
    return out


# ---- building the Hugging Face tokenizer ---------------------------------------

GPT2_PRE = {"default", "gpt-2", "mpt", "olmo", "jais"}
DIGITS_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}
LLAMA3_PRE = {"llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral", "superbpe"}

# The single regexes of the byte-level pre-tokenizers tiktoken can reproduce.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"""
                  r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")


def tiktoken_pattern(pre):
    if pre in GPT2_PRE:
        return GPT2_PATTERN
    if pre in LLAMA3_PRE:
        return LLAMA3_PATTERN
    return None


def byte_decoder():
    """GPT-2's byte-level alphabet, character -> byte."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, k = {}, 0
    for b in range(256):
        if b in keep:
            out[chr(b)] = b
        else:
            out[chr(0x100 + k)] = b
            k += 1
    return out


def build_tokenizer(meta):
    model = meta.get("tokenizer.ggml.model")
    pre = meta.get("tokenizer.ggml.pre", "default")
    if model != "gpt2":
        raise GGUFError("tokenizer.ggml.model %r: only gpt2 (byte-level BPE) is built here" % model)
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)  # the first of duplicate texts wins, as in kvik
    merges = []
    for m in meta.get("tokenizer.ggml.merges", []):
        sp = m.find(" ", 1)
        if sp > 0:
            merges.append((m[:sp], m[sp + 1:]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                               ignore_merges=pre in LLAMA3_PRE))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in GPT2_PRE:
        tok.pre_tokenizer = byte_level
    elif pre in DIGITS_PRE:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in LLAMA3_PRE:  # as Llama 3's tokenizer.json
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(tokenizers.Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
             pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    else:
        raise GGUFError("tokenizer.ggml.pre %r: no Hugging Face equivalent set up here" % pre)
    tok.decoder = decoders.ByteLevel()
    added = []
    for i, t in enumerate(tokens):
        if types[i] in (3, 4) and t:  # CONTROL, USER_DEFINED
            added.append(AddedToken(t, special=types[i] == 3, normalized=False))
    if added:
        tok.add_tokens(added)
    return tok


def cached_tokenizer_json(gguf):
    """Path of the tokenizer.json built from gguf (built on first use)."""
    st = os.stat(gguf)
    key = hashlib.sha1(("%s|%d|%d|%s" % (os.path.abspath(gguf), st.st_size, st.st_mtime_ns,
                                         tokenizers.__version__)).encode()).hexdigest()[:16]
    d = os.path.join(os.environ.get("KVIK_CACHE", os.path.expanduser("~/.cache/kvik")), "tok-peer")
    path = os.path.join(d, "%s-%s.json" % (os.path.basename(gguf), key))
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        tok = build_tokenizer(read_gguf_metadata(gguf))
        tmp = "%s.tmp%d" % (path, os.getpid())
        tok.save(tmp)
        os.replace(tmp, path)
    return path


def load(json_path):
    tok = Tokenizer.from_file(json_path)
    tok.encode_special_tokens = True  # control tokens in the text stay text (parse_special off)
    return tok


# ---- documents (as src/tools/bench_tokenizer.c cuts them) ----------------------

def split_docs(data):
    docs, start, n = [], 0, len(data)
    while start < n:
        a = data.find(b"\n\n", start)
        end = a + 2 if a >= 0 else n
        if end - start > DOC_MAX:
            b = data.find(b"\n", start + DOC_MAX)
            end = b + 1 if b >= 0 else n
        docs.append(data[start:end])
        start = end
    return docs


def prefix(docs, nbytes):
    out, total = [], 0
    for d in docs:
        if total >= nbytes:
            break
        out.append(d)
        total += len(d)
    return out, total


# ---- measuring -----------------------------------------------------------------

def encoder(tok):
    fast = getattr(tok, "encode_batch_fast", None)  # no offsets: the closest to kvik's work
    return (fast, "encode_batch_fast") if fast else (tok.encode_batch, "encode_batch")


def clear_cache(tok):
    f = getattr(tok.model, "_clear_cache", None)
    if f:
        f()
    return bool(f)


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def rate(secs, nbytes, ntok):
    s = max(median(secs), 1e-9)
    return {"seconds": s, "mb_s": nbytes / s / 1e6, "tok_s": ntok / s}


def worker(args):
    """Stream and repeat tests in this process (threads set by the parent)."""
    tok = load(args.json)
    enc, api = encoder(tok)
    data = open(args.corpus, "rb").read()
    docs = [d.decode("utf-8", errors="replace") for d in split_docs(data)]
    # the ids once, for the parity check
    crc, ntok = 0, 0
    for e in enc(docs):
        ids = e.ids
        ntok += len(ids)
        crc = ids_crc(ids, crc)
    secs = []
    for _ in range(args.reps):
        cleared = clear_cache(tok)
        t0 = time.perf_counter()
        enc(docs)
        secs.append(time.perf_counter() - t0)
    out = {"api": api, "cache_cleared": cleared, "bytes": len(data), "docs": len(docs),
           "tokens": ntok, "crc32": crc, "stream": rate(secs, len(data), ntok)}
    rep_docs, rep_len = prefix(split_docs(data), REPEAT_MIN)
    rep = b"".join(rep_docs).decode("utf-8", errors="replace")
    count = max(1, (len(data) + rep_len // 2) // rep_len) if rep_len else 1
    batch = [rep] * count
    rep_tok = len(tok.encode(rep, add_special_tokens=False).ids) * count
    secs = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        enc(batch)
        secs.append(time.perf_counter() - t0)
    out["repeat"] = rate(secs, rep_len * count, rep_tok)
    print(json.dumps(out))


def ids_crc(ids, crc):
    return zlib.crc32(array.array("i", ids).tobytes() if sys.byteorder == "little"
                      else struct.pack("<%di" % len(ids), *ids), crc)


def tiktoken_encoding(gguf):
    """A tiktoken Encoding of the GGUF's vocabulary, or a string saying why not."""
    try:
        import tiktoken
    except ImportError:
        return "the Python package 'tiktoken' is not installed (scripts/tokenizer-requirements.txt)"
    meta = read_gguf_metadata(gguf)
    pre = meta.get("tokenizer.ggml.pre", "default")
    pattern = tiktoken_pattern(pre)
    if meta.get("tokenizer.ggml.model") != "gpt2" or pattern is None:
        return "tokenizer.ggml.pre %r is not one regex tiktoken can run" % pre
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    dec = byte_decoder()
    ranks = {}
    for i, t in enumerate(tokens):
        if types[i] == 1 and all(c in dec for c in t):
            ranks.setdefault(bytes(dec[c] for c in t), i)
    if any(bytes([b]) not in ranks for b in range(256)):
        return "the vocabulary lacks a token for some single byte"
    return tiktoken.Encoding("kvik-" + os.path.basename(gguf), pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens={}), tiktoken.__version__


def tiktoken_worker(args):
    """tiktoken's stream and repeat tests on `args.threads` threads."""
    got = tiktoken_encoding(args.gguf)
    if isinstance(got, str):
        print(json.dumps({"error": got}))
        return
    enc, version = got
    data = open(args.corpus, "rb").read()
    docs = [d.decode("utf-8", errors="replace") for d in split_docs(data)]
    nt = args.threads

    def run(batch):
        if nt == 1:
            return [enc.encode_ordinary(d) for d in batch]
        return enc.encode_ordinary_batch(batch, num_threads=nt)

    crc, ntok = 0, 0
    for ids in run(docs):
        ntok += len(ids)
        crc = ids_crc(ids, crc)
    secs = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        run(docs)
        secs.append(time.perf_counter() - t0)
    out = {"version": version, "tokens": ntok, "crc32": crc, "stream": rate(secs, len(data), ntok)}
    rep_docs, rep_len = prefix(split_docs(data), REPEAT_MIN)
    rep = b"".join(rep_docs).decode("utf-8", errors="replace")
    count = max(1, (len(data) + rep_len // 2) // rep_len) if rep_len else 1
    rep_tok = len(enc.encode_ordinary(rep)) * count
    secs = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        run([rep] * count)
        secs.append(time.perf_counter() - t0)
    out["repeat"] = rate(secs, rep_len * count, rep_tok)
    print(json.dumps(out))


def first_call(args):
    """A fresh process: import (done above), load, encode the first documents."""
    t0 = time.perf_counter()
    tok = load(args.json)
    t1 = time.perf_counter()
    data = open(args.corpus, "rb").read()
    docs, nbytes = prefix(split_docs(data), FIRST_MIN)
    docs = [d.decode("utf-8", errors="replace") for d in docs]
    enc, _ = encoder(tok)
    t2 = time.perf_counter()
    enc(docs)
    t3 = time.perf_counter()
    print(json.dumps({"import_ms": (T_IMPORTED - T_START) * 1e3, "load_ms": (t1 - t0) * 1e3,
                      "first_ms": (t3 - t2) * 1e3, "bytes": nbytes}))


def child(args, mode, threads):
    env = dict(os.environ)
    env["TOKENIZERS_PARALLELISM"] = "false" if threads == 1 else "true"
    env["RAYON_NUM_THREADS"] = str(threads)
    env["RAYON_RS_NUM_CPUS"] = str(threads)
    cmd = [sys.executable, os.path.abspath(__file__), mode, "--json-path", args.json,
           "--corpus", args.corpus, "--reps", str(args.reps), "--threads", str(threads)]
    if args.gguf:
        cmd += ["--gguf", args.gguf]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True)
    return json.loads(p.stdout.decode().strip().splitlines()[-1]), (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "worker", "first", "tiktoken"])
    ap.add_argument("--gguf", help="a GGUF file with a gpt2 (byte-level BPE) vocabulary")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-first", action="store_true", help="skip the fresh-process test")
    ap.add_argument("--json-path", dest="json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode == "worker":
        return worker(args)
    if args.mode == "first":
        return first_call(args)
    if args.mode == "tiktoken":
        return tiktoken_worker(args)
    if not args.gguf:
        ap.error("--gguf is required")
    try:
        args.json = cached_tokenizer_json(args.gguf)
    except (GGUFError, KeyError, OSError) as e:
        sys.stderr.write("tokenizer-peer.py: %s\n" % e)
        return 2
    out = {"peer": "tokenizers", "version": tokenizers.__version__, "threads": args.threads,
           "reps": args.reps}
    for name, t in (("1t", 1), ("nt", args.threads)):
        w, _ = child(args, "worker", t)
        for k in ("api", "cache_cleared", "bytes", "docs", "tokens", "crc32"):
            out[k] = w[k]
        out["stream_" + name] = w["stream"]
        out["repeat_" + name] = w["repeat"]
        if not args.no_first:
            runs = [child(args, "first", t) for _ in range(args.reps)]
            fs = [r[0] for r in runs]
            first_ms = median([f["first_ms"] for f in fs])
            out["first_" + name] = {
                "import_ms": median([f["import_ms"] for f in fs]),
                "load_ms": median([f["load_ms"] for f in fs]),
                "pool_ms": 0.0,
                "first_ms": first_ms,
                "process_ms": median([r[1] for r in runs]),
                "mb_s": fs[0]["bytes"] / 1e6 / max(first_ms * 1e-3, 1e-9),
            }
    for name, t in (("1t", 1), ("nt", args.threads)):
        w, _ = child(args, "tiktoken", t)
        if "error" in w:
            out["tiktoken_error"] = w["error"]
            break
        for k in ("version", "tokens", "crc32"):
            out["tiktoken_" + k] = w[k]
        out["tiktoken_stream_" + name] = w["stream"]
        out["tiktoken_repeat_" + name] = w["repeat"]
    print(json.dumps(out, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
