#!/usr/bin/env bash
# The KV cache's storage in generation (ymlopt generate --kv-dtype f32|f16|i8)
# on the same LLaMA weights and prompts: the cache's bytes (per token, and at
# the run's context), the peak RSS, the decode speed, and the error against
# the f32 cache: the logits of the prompt's last position (max |d| relative to
# the f32 logits' largest, and KL(f32 || other) of their softmax), and how many
# of the greedy tokens stay the same.
#
#   tests/bench/kv_cache.sh [BUILD_DIR|YMLOPT_BINARY]            # llama 1.1B, prompts of 512, 32 tokens
#   PRESET=tiny PROMPT=64 NEW=16 PROMPTS=3 tests/bench/kv_cache.sh build
#
# Env: PRESET (llama preset, default 1.1B), PROMPT (prompt tokens, 512), NEW
# (tokens generated, 32), PROMPTS (how many prompts, 4), THREADS (nproc),
# KEEP=DIR keeps the files (and the model between runs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
arg=${1:-build}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "kv_cache: no ymlopt binary at $y" >&2; exit 2; }
preset=${PRESET:-1.1B} prompt_n=${PROMPT:-512} new_n=${NEW:-32} prompts=${PROMPTS:-4} threads=${THREADS:-$(nproc)}
py=/usr/bin/python3
"$py" -c "import numpy" 2>/dev/null || { echo "skip: $py lacks numpy"; exit 77; }
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
export STARPU_SILENT=1
w=$work/llama-$preset.safetensors
[ -f "$w" ] || "$y" model init --arch llama --preset "$preset" --seed 1 "$w" >/dev/null
source "$here/tests/bench/llama_shape.sh"
llama_shape "$y" "$preset"

echo "kv_cache: llama $preset, $prompts prompts of $prompt_n tokens, $new_n new, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; threads=$threads"
: >"$work/rows.tsv"
for p in $(seq 1 "$prompts"); do
  ids=$("$py" -c "import sys; n, v, p = map(int, sys.argv[1:4]); print(','.join(str((i * 7919 + p * 104729) % v) for i in range(n)))" \
    "$prompt_n" "$vocab" "$p")
  for dt in f32 f16 i8; do
    d=$work/p$p-$dt
    "$y" generate --model "$w" --set heads="$heads" --set kv_heads="$kv" --ids "$ids" -n 1 --kv-dtype $dt -q \
      --ncpu "$threads" -o "$d-prefill" >/dev/null
    "$y" generate --model "$w" --set heads="$heads" --set kv_heads="$kv" --ids "$ids" -n "$new_n" --ignore-eos \
      --kv-dtype $dt --ncpu "$threads" -o "$d" >/dev/null 2>"$d.err"
    "$py" - "$work/p$p-f32" "$d" "$dt" "$p" >>"$work/rows.tsv" <<'PY'
import json, re, sys, numpy as np
ref, run, dt, p = sys.argv[1:5]
r = json.load(open(run + "/report.json"))
kvc = r["memory"]["kv_cache"]
e = open(run + ".err").read()
m = re.search(r"decode: (\d+) tokens in ([0-9.]+) ms .*median step ([0-9.]+) ms", e)
a = np.load(ref + "-prefill/logits.npy").astype(np.float64).ravel()
b = np.load(run + "-prefill/logits.npy").astype(np.float64).ravel()
def logp(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())
kl = float((np.exp(logp(a)) * (logp(a) - logp(b))).sum())
g0, g1 = np.load(ref + "/generated.npy"), np.load(run + "/generated.npy")
same = int(np.argmin(np.append(g0 == g1, False)))
print(dt, p, kvc["bytes_per_token"], kvc["bytes"], r["totals"]["peak_rss_bytes"],
      int(m.group(1)) / float(m.group(2)) * 1e3, float(m.group(3)),
      np.abs(a - b).max() / np.abs(a).max(), kl, same, len(g0), sep="\t")
PY
  done
done
"$py" - "$work/rows.tsv" "$prompt_n" "$new_n" <<'PY'
import statistics as st, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
print()
print("| KV cache | bytes per token | cache at %s + %s tokens | peak RSS MiB | decode tokens/s | median step ms | logits max rel err | KL (nats) | same greedy tokens |" % (sys.argv[2], sys.argv[3]))
print("|---|---|---|---|---|---|---|---|---|")
for dt in ("f32", "f16", "i8"):
    r = [x for x in rows if x[0] == dt]
    col = lambda i: [float(x[i]) for x in r]
    print(f"| {dt} | {int(col(2)[0])} | {col(3)[0] / 2**20:.1f} MiB | {st.median(col(4)) / 2**20:.0f} | {st.median(col(5)):.2f} "
          f"| {st.median(col(6)):.1f} | {max(col(7)):.1e} | {max(col(8)):.1e} | {min(int(x[9]) for x in r)} / {r[0][10].strip()} (fewest over the prompts) |")
PY
