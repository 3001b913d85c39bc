#!/usr/bin/env bash
# run-pairs.sh OLD_KVIK NEW_KVIK [PAIRS] — `kvik run`'s own prefill and decode
# figures for two builds, run in turn (old, new, old, new, ...) so that a
# drift of the machine hits both alike; prints each pair and the medians.
# Two workloads: a long prompt (prefill, -n 16) and a short one (decode,
# -n 128), greedy, 2 threads, the default model.
set -euo pipefail
old=$1 new=$2 pairs=${3:-5}
here="$(cd "$(dirname "$0")" && pwd)"
model=$("$here/../scripts/fetch-model.sh")
prompt=$(mktemp)
trap 'rm -f "$prompt"' EXIT
head -c 2400 "$here/../docs/architecture.md" > "$prompt"

# fig BIN ARGS... -> "prefill decode" tok/s from kvik run's stderr
fig() {
  local bin=$1; shift
  "$bin" run -m "$model" --temp 0 -t 2 "$@" 2>&1 >/dev/null |
    awk '/prefill/ {for (i = 1; i <= NF; i++) if ($i == "prefill") p = $(i + 1)}
         /decode/ {for (i = 1; i <= NF; i++) if ($i == "decode") d = $(i + 1)}
         END {print p + 0, d + 0}'
}
med() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

op=() np=() od=() nd=()
printf '%-5s %12s %12s %12s %12s\n' pair "old pp" "new pp" "old tg" "new tg"
for ((i = 1; i <= pairs; i++)); do
  read -r a _ < <(fig "$old" -f "$prompt" -n 16)
  read -r b _ < <(fig "$new" -f "$prompt" -n 16)
  read -r _ c < <(fig "$old" -p "Once upon a time" -n 128)
  read -r _ d < <(fig "$new" -p "Once upon a time" -n 128)
  op+=("$a") np+=("$b") od+=("$c") nd+=("$d")
  printf '%-5s %12s %12s %12s %12s\n' "$i" "$a" "$b" "$c" "$d"
done
mo=$(printf '%s\n' "${op[@]}" | med) mn=$(printf '%s\n' "${np[@]}" | med)
do_=$(printf '%s\n' "${od[@]}" | med) dn=$(printf '%s\n' "${nd[@]}" | med)
printf '%-5s %12s %12s %12s %12s\n' median "$mo" "$mn" "$do_" "$dn"
awk -v a="$mo" -v b="$mn" -v c="$do_" -v d="$dn" \
  'BEGIN {printf "new/old: prefill %.3f, decode %.3f\n", b / a, d / c}'
