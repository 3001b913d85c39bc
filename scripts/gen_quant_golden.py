#!/usr/bin/env python3
"""gen_quant_golden.py — the golden data of `kvik quantize`:
tests/data/quant_golden.json, from llama.cpp's llama-quantize.

Run through scripts/gen_quant_golden.sh (which builds llama-quantize and
kvik and makes the inputs). Arguments: KVIK LLAMA_QUANTIZE LLAMA_BENCH WORKDIR.

Inputs (made by kvik, in WORKDIR): the synthetic models quant-llama3,
quant-qwen2, quant-gemma3, quant-phi3 (`kvik synth --type f32 --seed 1`) and
SmolLM2-135M-Instruct dequantized (`kvik quantize SMOL.Q4_1.gguf smol-f32.gguf F32`).
The importance matrix is a legacy .dat file written here by a formula the
test repeats (imatrix_value below): one entry per 2-D weight but
token_embd, ncall 4.

For every case llama-quantize converts the input; the JSON keeps per case
the input, the type, the options and, per tensor, its name, type and the
first 16 hex digits of the SHA-256 of its bytes. One output
(quant-llama3 Q4_K_M) is also loaded by llama-bench, which must succeed.
"""
import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_gguf  # noqa: E402

SYNTH = ["quant-llama3", "quant-qwen2", "quant-gemma3", "quant-phi3"]
ALL_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M",
             "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"]
IM = "@imatrix"  # stands for the input's importance matrix file

CASES = (
    [("quant-llama3", t, []) for t in ALL_TYPES]
    + [("quant-qwen2", t, []) for t in ALL_TYPES if t not in ("F32", "F16", "BF16")]
    + [("quant-gemma3", t, []) for t in ("Q4_K_M", "Q3_K_M", "Q3_K_L", "Q5_K_S", "Q2_K")]
    + [("quant-phi3", t, []) for t in ("Q4_K_M", "Q3_K_M", "Q2_K", "Q5_K_M")]
    + [
        ("quant-llama3", "Q4_K_M", ["--pure"]),
        ("quant-llama3", "Q3_K_M", ["--pure"]),
        ("quant-llama3", "Q4_K_M", ["--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"]),
        ("quant-llama3", "Q5_K_M", ["--output-tensor-type", "f16"]),
        ("quant-llama3", "Q3_K_M", ["--tensor-type", "attn_q=q8_0", "--tensor-type", "ffn_(up|gate)=q5_K"]),
        ("quant-llama3", "Q4_0", ["--tensor-type", "blk\\.1[0-5]\\.ffn_down=q6_K", "--pure"]),
        ("quant-llama3", "Q4_K_S", ["--leave-output-tensor"]),
        ("quant-llama3", "Q8_0", ["--token-embedding-type", "f16"]),
        ("quant-qwen2", "Q4_K_M", ["--output-tensor-type", "q4_K"]),
        ("quant-qwen2", "Q4_K_M", ["--token-embedding-type", "q8_0", "--pure"]),
        ("quant-llama3", "Q4_K_M", ["--imatrix", IM]),
        ("quant-llama3", "Q3_K_M", ["--imatrix", IM]),
        ("quant-llama3", "Q2_K_S", ["--imatrix", IM]),
        ("quant-llama3", "Q2_K", ["--imatrix", IM]),
        ("quant-llama3", "Q4_0", ["--imatrix", IM]),
        ("quant-llama3", "Q5_0", ["--imatrix", IM]),
        ("quant-llama3", "Q4_1", ["--imatrix", IM]),
        ("quant-llama3", "Q5_1", ["--imatrix", IM]),
        ("quant-llama3", "Q6_K", ["--imatrix", IM]),
        ("quant-llama3", "Q5_K_S", ["--imatrix", IM]),
        ("quant-llama3", "Q8_0", ["--imatrix", IM]),
        ("quant-qwen2", "Q4_K_M", ["--imatrix", IM]),
        ("smol", "Q4_K_M", []),
        ("smol", "Q8_0", []),
        ("smol", "Q3_K_M", []),
        ("smol", "Q6_K", ["--imatrix", IM]),
    ]
)


def imatrix_value(name, i):
    """The importance weight of column i of tensor name: exact in float32."""
    s = sum(name.encode())
    return ((i * 37 + s * 11) % 251 + 1) * 0.125


def write_imatrix(model, path):
    out = []
    for name, ne0 in imatrix_tensors(model):
        out.append((name, 4, [imatrix_value(name, i) * 4 for i in range(ne0)]))
    quant_gguf.write_legacy_imatrix(path, out, 4, "synthetic")


def imatrix_tensors(model):
    """(name, ne[0]) of the 2-D weights an imatrix covers: all but token_embd."""
    res = []
    with open(model, "rb") as f:
        r = quant_gguf.Reader(f)
        f.read(4)
        (_, n_tensors, n_kv) = r.take("IQQ")
        for _ in range(n_kv):
            r.string()
            (t,) = r.take("I")
            r.value(t)
        for _ in range(n_tensors):
            name = r.string()
            (nd,) = r.take("I")
            ne = r.take("Q" * nd)
            r.take("IQ")
            if nd >= 2 and ne[1] > 1 and name.endswith(".weight") and name != "token_embd.weight":
                res.append((name, ne[0]))
    return res


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main():
    kvik, quantize, bench, work = sys.argv[1:5]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inputs = {s: os.path.join(work, s + "-f32.gguf") for s in SYNTH}
    inputs["smol"] = os.path.join(work, "smol-f32.gguf")
    imatrices = {}
    for key, path in inputs.items():
        imatrices[key] = os.path.join(work, key + ".imatrix.dat")
        write_imatrix(path, imatrices[key])
    cases = []
    names = {}
    for inp, typ, args in CASES:
        out = os.path.join(work, "out.gguf")
        real = [imatrices[inp] if a == IM else a for a in args]
        cmd = [quantize] + real + [inputs[inp], out, typ, "2"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
        tensors, meta = quant_gguf.tensors(out)
        order = [name for name, _, _ in tensors]
        if names.setdefault(inp, order) != order:
            sys.exit("tensor order of %s changed between cases" % inp)
        case = {"input": inp, "type": typ, "args": args,
                "tensors": ["%s %s" % (t, h[:16]) for _, t, h in tensors]}
        if inp == "quant-llama3" and typ == "Q4_K_M" and args in ([], ["--imatrix", IM]):
            # the metadata: every key, with its value where it is a number or a string
            case["meta"] = {k: v for k, v in meta.items() if k != "quantize.imatrix.file"}
        cases.append(case)
        print("%-14s %-7s %-40s %d tensors" % (inp, typ, " ".join(args), len(tensors)), file=sys.stderr)
        if inp == "quant-llama3" and typ == "Q4_K_M" and not args:
            b = subprocess.run([bench, "-m", out, "-p", "16", "-n", "4", "-r", "1", "-t", "2"],
                               capture_output=True, text=True)
            if b.returncode != 0:
                sys.exit("llama-bench cannot load the Q4_K_M output:\n" + b.stderr[-2000:])
        os.remove(out)
    about = {
        "about": "llama-quantize (llama.cpp 0.3.36) outputs of kvik-made inputs; scripts/gen_quant_golden.sh. "
                 "Per input the SHA-256 of the file and its tensor names in output order; per case, per tensor in that order: "
                 "type and the first 16 hex digits of the SHA-256 of its data",
        "imatrix": "legacy .dat, ncall 4, 4 chunks, dataset 'synthetic'; weight of column i of tensor T: "
                   "((i * 37 + sum of T's bytes * 11) % 251 + 1) / 8; every 2-D weight but token_embd",
    }
    inputs_j = {s: {"synth": s, "seed": 1} for s in SYNTH}
    inputs_j["smol"] = {"dequantize": "SmolLM2-135M-Instruct.Q4_1.gguf"}
    for k, v in inputs_j.items():
        v["sha256"] = sha256_file(inputs[k])
        v["tensors"] = names[k]
    path = os.path.join(repo, "tests", "data", "quant_golden.json")
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in about.items():
            f.write("%s: %s,\n" % (json.dumps(k), json.dumps(v)))
        f.write('"inputs": {\n')
        for i, (k, v) in enumerate(inputs_j.items()):
            f.write("%s: %s%s\n" % (json.dumps(k), json.dumps(v, separators=(",", ":")),
                                    "," if i + 1 < len(inputs_j) else ""))
        f.write('},\n"cases": [\n')
        for i, c in enumerate(cases):
            f.write(json.dumps(c, separators=(",", ":")) + (",\n" if i + 1 < len(cases) else "\n"))
        f.write("]\n}\n")
    print("wrote %s: %d cases" % (path, len(cases)), file=sys.stderr)


if __name__ == "__main__":
    main()
