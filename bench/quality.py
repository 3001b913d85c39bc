#!/usr/bin/env python3
"""quality.py -- the quality table of docs/quality.md: what each
requantization of a model, and each KV-cache type, costs against the
model's own file dequantized to F32.

For each model (registry names, `kvik list`) it makes, in
$QUALITY_DIR/NAME (default ~/.cache/kvik/quality/NAME), when a row that
needs them is measured:
  base-f32.gguf     `kvik quantize FILE base-f32.gguf F32`
  imatrix.gguf      `kvik imatrix` of the file as shipped (the same weights
                    as the base, at a tenth of the F32 products' cost) over
                    the calibration slice
  base.logp         the base's log-probabilities over the scoring slice
  TYPE[-imatrix].gguf for each type, without and with the importance matrix
and measures, per configuration: file size, prefill (pp512) and decode
(tg128) speed, PPL and its ratio to the base, mean and p99 KL divergence,
the same-top-token rate, and `kvik eval`'s pass rate per tag on
tests/data/eval/cases.jsonl. Each configuration's figures are kept in
bench/quality-results/NAME/CONFIG.json (in the repository, so the table
grows across machines and runs), and a rerun measures only what is
missing (--force remeasures; --no-speed leaves the speed columns for a
later run on a quiet machine). The tables replace the part of docs/quality.md between the
markers "<!-- quality-table:begin -->" and "<!-- quality-table:end -->".

The text: english.txt of scripts/fetch-corpus.sh. The scoring slice is its
first 24576 bytes (the perplexity test's slice); the calibration slice
for the importance matrix is the next 200000 bytes, so the two never
overlap.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KVIK = os.path.join(ROOT, "build", "kvik")
CASES = os.path.join(ROOT, "tests", "data", "eval", "cases.jsonl")
DOC = os.path.join(ROOT, "docs", "quality.md")
BEGIN, END = "<!-- quality-table:begin -->", "<!-- quality-table:end -->"

MODELS = ["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m", "qwen2.5-coder-1.5b"]
TYPES = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K"]
NO_IMATRIX = {"Q8_0"}  # types that ignore an importance matrix
KV_TYPES = ["f16", "q8_0"]
SCORE_BYTES, CALIB_BYTES = 24576, 200000


def log(msg):
    print("quality: " + msg, file=sys.stderr, flush=True)


def run(args):
    log(" ".join(args))
    t0 = time.time()
    p = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if p.returncode not in (0, 1) or (p.returncode == 1 and args[1] != "eval"):
        sys.exit("quality: %s failed (exit %d)" % (args[1], p.returncode))
    log("  %.1f s" % (time.time() - t0))
    return p.stdout


def last_json(text):
    """The last line of text that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    sys.exit("quality: no JSON in the output")


def model_path(name):
    out = subprocess.run([KVIK, "list"], stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == name and "cached" in f:
            return f[-1]
    subprocess.run([KVIK, "pull", name], check=True)
    return model_path(name)


def slices(d):
    """The scoring and calibration slices, each cut after its last newline."""
    corpus = os.path.expanduser(os.environ.get("KVIK_CORPUS", "~/.cache/kvik/corpus"))
    src = os.path.join(corpus, "english.txt")
    if not os.path.exists(src):
        subprocess.run([os.path.join(ROOT, "scripts", "fetch-corpus.sh")], check=True)
    data = open(src, "rb").read()
    out = []
    for name, lo, hi in (("score.txt", 0, SCORE_BYTES), ("calib.txt", SCORE_BYTES, SCORE_BYTES + CALIB_BYTES)):
        part = data[lo:hi]
        part = part[: part.rfind(b"\n") + 1]
        path = os.path.join(d, name)
        if not os.path.exists(path) or open(path, "rb").read() != part:
            open(path, "wb").write(part)
        out.append(path)
    return out


class Model:
    def __init__(self, name, args):
        self.name, self.args = name, args
        self.dir = os.path.join(args.dir, name)
        self.results = os.path.join(args.results, name)
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.results, exist_ok=True)
        self.file = model_path(name)
        self.score, self.calib = slices(self.dir)
        self.base = os.path.join(self.dir, "base-f32.gguf")
        self.logp = os.path.join(self.dir, "base.logp")
        self.imatrix = os.path.join(self.dir, "imatrix.gguf")
        self.t = ["-t", str(args.threads)]
        self.prepared = False

    def prepare(self):
        """The base file, its log-probabilities and the importance matrix."""
        if self.prepared:
            return
        if not os.path.exists(self.base):
            run([KVIK, "quantize", self.file, self.base, "F32"] + self.t)
        if not os.path.exists(self.imatrix):
            run([KVIK, "imatrix", "-m", self.file, "-f", self.calib, "-o", self.imatrix, "-c", "512",
                 "--chunks", str(self.args.calib_chunks)] + self.t)
        res = os.path.join(self.results, "base.ppl.json")
        if not os.path.exists(self.logp) or not os.path.exists(res):
            out = run([KVIK, "perplexity", "-m", self.base, "-f", self.score, "-c", "512", "--json",
                       "--kl-divergence-base", self.logp] + self.t)
            json.dump(last_json(out), open(res, "w"), indent=1)
        self.base_ppl = json.load(open(res))
        self.prepared = True

    def configs(self):
        """(label, file, kv type, how it was made) in table order."""
        out = [("as shipped", self.file, "f32", None), ("F32 (base)", self.base, "f32", None)]
        out += [("F32, %s cache" % kv, self.base, kv, None) for kv in KV_TYPES]
        for t in self.args.types:
            out.append((t, os.path.join(self.dir, t + ".gguf"), "f32", (t, False)))
            if t not in NO_IMATRIX:
                out.append((t + " + imatrix", os.path.join(self.dir, t + "-imatrix.gguf"), "f32", (t, True)))
        return out

    def measure(self, label, path, kv, make):
        key = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
        res = os.path.join(self.results, key + ".json")
        if os.path.exists(res) and not self.args.force:
            r = json.load(open(res))
            if r.get("pp") is None and not self.args.no_speed:
                self.speed(r, path, kv)
                json.dump(r, open(res, "w"), indent=1)
            return r
        self.prepare()
        if make and (not os.path.exists(path) or self.args.force):
            t, imx = make
            run([KVIK, "quantize", self.base, path, t] + (["--imatrix", self.imatrix] if imx else []) + self.t)
        r = {"label": label, "file": os.path.basename(path), "kv": kv, "bytes": os.path.getsize(path)}
        if self.args.no_speed:
            r.update(pp=None, tg=None, read_gbs=None)
        else:
            self.speed(r, path, kv)
        if path == self.base and kv == "f32":
            p = dict(self.base_ppl, ppl_ratio=1.0, kld_mean=0.0, kld_p99=0.0, same_top_p=1.0)
        else:
            p = last_json(run([KVIK, "perplexity", "-m", path, "-f", self.score, "--kl-divergence", self.logp,
                               "--kv-type", kv, "--json"] + self.t))
        r.update({k: p[k] for k in ("ppl", "ppl_err", "ppl_ratio", "kld_mean", "kld_p99", "same_top_p")})
        e = json.loads(run([KVIK, "eval", "-m", path, "--tasks", CASES, "--kv-type", kv, "--json"] + self.t))
        r["eval"] = {k: [v["pass"], v["total"]] for k, v in e["tags"].items()}
        r["eval"]["all"] = [e["overall"]["pass"], e["overall"]["total"]]
        json.dump(r, open(res, "w"), indent=1)
        return r


    def speed(self, r, path, kv):
        """Prefill and decode speed into r; needs a quiet machine."""
        b = last_json(run([KVIK, "bench", "offline", "-m", path, "-p", "512", "-n", "128", "-r", "3",
                           "--cache-type", kv, "--json"] + self.t))
        r.update(pp=b["pp_tok_s"], tg=b["tg_tok_s"], read_gbs=b.get("read_gbs"))


def pct(pair):
    return 100.0 * pair[0] / pair[1] if pair[1] else 0.0


def table(name, shipped, rows):
    tags = sorted({t for r in rows for t in r["eval"] if t != "all"})
    out = ["### %s (`%s`)" % (name, shipped), ""]
    out.append("| file | size MB | pp512 tok/s | tg128 tok/s | PPL | PPL ratio | mean KLD | p99 KLD | same top | eval |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        pp = "-" if r["pp"] is None else "%.0f" % r["pp"]
        tg = "-" if r["tg"] is None else "%.1f" % r["tg"]
        out.append("| %s | %.1f | %s | %s | %.4f | %.4f | %.5f | %.4f | %.2f%% | %.1f%% |" % (
            r["label"], r["bytes"] / 1e6, pp, tg, r["ppl"], r["ppl_ratio"], r["kld_mean"],
            r["kld_p99"], 100 * r["same_top_p"], pct(r["eval"]["all"])))
    out += ["", "Eval pass rate per tag (%):", ""]
    out.append("| file | " + " | ".join(tags) + " |")
    out.append("|---|" + "---:|" * len(tags))
    for r in rows:
        out.append("| %s | " % r["label"] + " | ".join("%.0f" % pct(r["eval"].get(t, [0, 0])) for t in tags) + " |")
    base = next(r for r in rows if r["label"] == "F32 (base)")
    ok = [r for r in rows if r["kv"] == "f32" and pct(r["eval"]["all"]) >= pct(base["eval"]["all"]) - 2.0]
    best = min(ok, key=lambda r: r["bytes"])
    close = [r for r in rows if r["kv"] == "f32" and r["ppl_ratio"] <= 1.01]
    tight = min(close, key=lambda r: r["bytes"])
    n = base["eval"]["all"][1]
    p = pct(base["eval"]["all"]) / 100
    out += ["", "Recommendation: **%s** (%.1f MB), the smallest file whose eval pass rate (%.1f%%) stays within "
            "2 points of the base's (%.1f%%)." % (best["label"], best["bytes"] / 1e6, pct(best["eval"]["all"]),
                                                  pct(base["eval"]["all"])),
            "Over %d cases one standard error of a pass rate is %.1f points, so the 2-point rule reads noise as "
            "much as loss; the smallest file whose PPL stays within 1%% of the base's is **%s** (%.1f MB, "
            "mean KLD %.4f)." % (n, 100 * (p * (1 - p) / n) ** 0.5, tight["label"], tight["bytes"] / 1e6,
                                  tight["kld_mean"]), ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=MODELS)
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--dir", default=os.path.expanduser(os.environ.get("QUALITY_DIR", "~/.cache/kvik/quality")),
                    help="the model files made on the way")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "quality-results"),
                    help="the figures of each configuration, one JSON file each")
    ap.add_argument("--calib-chunks", type=int, default=64, help="chunks of 512 tokens for the importance matrix")
    ap.add_argument("--force", action="store_true", help="remeasure what is already measured")
    ap.add_argument("--no-speed", action="store_true",
                    help="measure everything but speed, which a later run without it fills in (speed needs a "
                         "quiet machine; the rest does not)")
    ap.add_argument("--no-doc", action="store_true", help="print the tables instead of updating docs/quality.md")
    args = ap.parse_args()
    args.types = [t.strip().upper() for t in args.types.split(",") if t.strip()]
    for name in args.models:
        m = Model(name, args)
        rows = [m.measure(*c) for c in m.configs()]
        json.dump({"shipped": os.path.basename(m.file), "rows": [r["label"] for r in rows]},
                  open(os.path.join(m.results, "table.json"), "w"), indent=1)
    # every model measured so far, this run or before, in the table's order
    lines = []
    for name in MODELS + sorted(set(args.models) - set(MODELS)):
        d = os.path.join(args.results, name)
        if not os.path.exists(os.path.join(d, "table.json")):
            continue
        t = json.load(open(os.path.join(d, "table.json")))
        rows = [json.load(open(os.path.join(d, re.sub(r"[^A-Za-z0-9_.-]+", "_", l) + ".json"))) for l in t["rows"]]
        lines += table(name, t["shipped"], rows)
    text = "\n".join(lines)
    if args.no_doc:
        print(text)
        return
    doc = open(DOC).read()
    if BEGIN not in doc or END not in doc:
        sys.exit("quality: docs/quality.md has no %s ... %s markers" % (BEGIN, END))
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    open(DOC, "w").write(head + BEGIN + "\n" + text + "\n" + END + tail)
    log("updated docs/quality.md")


if __name__ == "__main__":
    main()
