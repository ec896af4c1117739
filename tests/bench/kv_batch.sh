#!/usr/bin/env bash
# A batch of prompts of different lengths in one `ymlopt generate` (one prefill
# of all of them, then a decode step per token of every sequence still going,
# the KV cache in blocks from a pool) against the same prompts run one after
# the other: decode tokens/s of each, the cache's blocks in use at most and
# their MiB against a cache that reserves the longest context for every
# sequence, the peak RSS, and whether each sequence's greedy tokens are those
# of its prompt alone.
#
#   tests/bench/kv_batch.sh [BUILD_DIR|YMLOPT_BINARY]             # llama 1.1B q4_0, batches 1 2 4 8
#   PRESET=tiny DTYPE=f32 BATCHES="1 3" NEW=8 tests/bench/kv_batch.sh build   # the ctest smoke
#
# Env: PRESET (llama preset, default 1.1B), DTYPE (f32, q8_0 or q4_0: the
# weights `ymlopt optimize --sequence workflows/sequences/DTYPE.xml` writes;
# default q4_0), BATCHES (default "1 2 4 8"), LENGTHS (prompt lengths, cycled;
# default "32 64 128 256"), NEW (tokens per sequence, 32), BLOCK (tokens per
# block, 16), THREADS (nproc), KEEP=DIR keeps the files (and the model).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
arg=${1:-build}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "kv_batch: no ymlopt binary at $y" >&2; exit 2; }
preset=${PRESET:-1.1B} dtype=${DTYPE:-q4_0} new_n=${NEW:-32} block=${BLOCK:-16} threads=${THREADS:-$(nproc)}
read -r -a batches <<<"${BATCHES:-1 2 4 8}"
read -r -a lengths <<<"${LENGTHS:-32 64 128 256}"
py=/usr/bin/python3
"$py" -c "import numpy" 2>/dev/null || { echo "skip: $py lacks numpy"; exit 77; }
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
export STARPU_SILENT=1
cd "$here"
source tests/bench/llama_shape.sh
llama_weights "$y" "$preset" "$dtype" "$work"
gen=("$y" generate --model "$w" --set heads="$heads" --set kv_heads="$kv" --set block="$block" -n "$new_n" --ignore-eos
  --ncpu "$threads")

echo "kv_batch: llama $preset $dtype, prompts of ${lengths[*]} tokens (cycled), $new_n new each, blocks of $block, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; threads=$threads"
ids_of() {  # ids_of LENGTH SEED
  "$py" -c "import sys; n, v, s = map(int, sys.argv[1:4]); print(','.join(str((i * 7919 + s * 104729) % v) for i in range(n)))" \
    "$1" "$vocab" "$2"
}
# decode tokens/s from a run's stderr, and its pool line's blocks and MiB
parse() {
  "$py" - "$1" <<'PY'
import re, sys
e = open(sys.argv[1]).read()
m = re.search(r"decode: (\d+) tokens in ([0-9.]+) ms", e)
p = re.search(r"KV cache: at most (\d+) of its (\d+) blocks in use \(([0-9.]+) of ([0-9.]+) MiB\)", e)
print(m.group(1), m.group(2), *p.groups())
PY
}
fails=0
printf '| batch | prompt tokens | decode tokens/s, batch | one by one | **speed-up** | blocks at most / pool | cache MiB at most | MiB reserving the longest context | peak RSS MiB | same tokens as alone |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for b in "${batches[@]}"; do
  args=() total=0 longest=0
  one_tokens=0 one_ms=0 same=0
  for s in $(seq 0 $((b - 1))); do
    len=${lengths[$((s % ${#lengths[@]}))]}
    ids=$(ids_of "$len" "$s")
    args+=(--ids "$ids")
    total=$((total + len)); [ "$len" -gt "$longest" ] && longest=$len
    d=$work/one-$s-$len
    if [ ! -f "$d/generated.npy" ]; then
      "${gen[@]}" --ids "$ids" -o "$d" >/dev/null 2>"$d.err" || { cat "$d.err"; exit 1; }
    fi
    read -r n ms _ <<<"$(parse "$d.err")"
    one_tokens=$((one_tokens + n)); one_ms=$("$py" -c "print($one_ms + $ms)")
  done
  d=$work/batch-$b
  "${gen[@]}" "${args[@]}" -o "$d" >/dev/null 2>"$d.err" || { cat "$d.err"; exit 1; }
  read -r n ms most pool mib pool_mib <<<"$(parse "$d.err")"
  row=$("$py" - "$d" "$work" "$b" "$n" "$ms" "$one_tokens" "$one_ms" "$most" "$pool" "$mib" "$pool_mib" "$longest" "$new_n" \
    "$block" "${lengths[*]}" <<'PY'
import json, sys, numpy as np
d, work = sys.argv[1:3]
b, n, ms, on, oms, most, pool, mib, pool_mib, longest, new, block = sys.argv[3:15]
b, n, on, most, pool, longest, new, block = map(int, (b, n, on, most, pool, longest, new, block))
ms, oms, mib, pool_mib = map(float, (ms, oms, mib, pool_mib))
lengths = [int(x) for x in sys.argv[15].split()]
g = np.load(d + "/generated.npy")
same = sum(int((g[s] == np.load(f"{work}/one-{s}-{lengths[s % len(lengths)]}/generated.npy")[0]).all()) for s in range(b))
per_block = pool_mib / pool
reserve = b * -(-(longest + new) // block) * per_block
rss = json.load(open(d + "/report.json"))["totals"]["peak_rss_bytes"] / 2**20
tb, to = n / ms * 1e3, on / oms * 1e3
print(f"| {b} | {sum(lengths[s % len(lengths)] for s in range(b))} | {tb:.1f} | {to:.1f} | **{tb / to:.2f}** | {most} / {pool} "
      f"| {mib:.2f} | {reserve:.2f} | {rss:.0f} | {same} / {b} |")
sys.exit(0 if same == b else 3)
PY
) || { echo "FAIL: batch $b: a sequence's tokens differ from its prompt alone"; fails=$((fails + 1)); }
  echo "$row"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$fails" -eq 0 ] && echo "all checks passed" || { echo "$fails check(s) failed"; exit 1; }
