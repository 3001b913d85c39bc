#!/bin/sh
# bench_spec.sh — alternates plain and speculative `kvik run` (greedy, one
# thread, --chat) REPS times on one prompt and prints decode tok/s, tokens,
# verification steps, draft and accepted tokens, drafts by prompt lookup and a hash of the output ids
# (equal hashes: the same greedy output).
# usage: [KVIK=build/kvik] [MODEL=target.gguf] [THREADS=1] [RUNFLAGS="..."] bench_spec.sh PROMPTFILE N REPS [spec flags...]
# RUNFLAGS go to both runs (e.g. "--kv-type f16").
K=${KVIK:-build/kvik}
M=${MODEL:-$HOME/.cache/kvik/models/SmolLM2-135M-Instruct.Q4_1.gguf}
P=$1; N=$2; R=$3; shift 3
for r in $(seq $R); do
  for mode in plain spec; do
    if [ $mode = plain ]; then extra=""; else extra="$*"; fi
    $K run -m $M -f $P --chat --temp 0 -n $N -t ${THREADS:-1} ${RUNFLAGS:-} --json $extra 2>/dev/null | python3 -c "
import json,sys;d=json.load(sys.stdin);t=d['timings'];print('$mode', t['decode_tok_s'], t['generated_tokens'], t['spec_steps'], t['spec_draft_tokens'], t['spec_accepted_tokens'], t.get('spec_lookup_drafts', 0), hash(tuple(d['generated_ids'])))"
  done
done
