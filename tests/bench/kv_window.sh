#!/usr/bin/env bash
# A sliding-window KV cache (Mistral's `sliding_window`, `--set window=N`) in a
# long generation: for each window, the cache's blocks and MiB at most against
# the whole context's, the peak RSS, the decode tokens/s and the median step.
# A window at least as long as the context must give the tokens of no window
# (checked).
#
#   tests/bench/kv_window.sh [BUILD_DIR|YMLOPT_BINARY]        # llama 1.1B q4_0, prompt 64, 960 new
#   PRESET=tiny DTYPE=f32 PROMPT=24 NEW=24 WINDOWS="0 8" tests/bench/kv_window.sh build   # the ctest smoke
#
# Env: PRESET (llama preset, default 1.1B), DTYPE (f32, q8_0 or q4_0; default
# q4_0), PROMPT (prompt tokens, 64), NEW (tokens generated, 960), WINDOWS
# (default "0 64 256"; 0: none; the context's length is added), BLOCK (16),
# THREADS (nproc), KEEP=DIR keeps the files (and the model).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
arg=${1:-build}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "kv_window: no ymlopt binary at $y" >&2; exit 2; }
preset=${PRESET:-1.1B} dtype=${DTYPE:-q4_0} prompt_n=${PROMPT:-64} new_n=${NEW:-960} block=${BLOCK:-16}
threads=${THREADS:-$(nproc)}
read -r -a windows <<<"${WINDOWS:-0 64 256}"
windows+=($((prompt_n + new_n)))
py=/usr/bin/python3
"$py" -c "import numpy" 2>/dev/null || { echo "skip: $py lacks numpy"; exit 77; }
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
export STARPU_SILENT=1
cd "$here"
source tests/bench/llama_shape.sh
llama_weights "$y" "$preset" "$dtype" "$work"
ids=$("$py" -c "import sys; n, v = map(int, sys.argv[1:3]); print(','.join(str((i * 7919 + 104729) % v) for i in range(n)))" \
  "$prompt_n" "$vocab")

echo "kv_window: llama $preset $dtype, a prompt of $prompt_n tokens, $new_n new, blocks of $block, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; threads=$threads"
printf '| window | blocks at most / pool | cache MiB at most | peak RSS MiB | decode tokens/s | median step ms |\n'
printf '|---|---|---|---|---|---|\n'
for win in "${windows[@]}"; do
  d=$work/w$win
  "$y" generate --model "$w" --set heads="$heads" --set kv_heads="$kv" --set block="$block" --set window="$win" \
    --ids "$ids" -n "$new_n" --ignore-eos --ncpu "$threads" -o "$d" >/dev/null 2>"$d.err" || { cat "$d.err"; exit 1; }
  "$py" - "$d" "$win" "$prompt_n" "$new_n" <<'PY'
import json, re, sys
d, win, pn, nn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
e = open(d + ".err").read()
m = re.search(r"decode: (\d+) tokens in ([0-9.]+) ms .*median step ([0-9.]+) ms", e)
p = re.search(r"KV cache: at most (\d+) of its (\d+) blocks in use \(([0-9.]+) of ([0-9.]+) MiB\)", e)
r = json.load(open(d + "/report.json"))
label = "none" if win == 0 else (f"{win} (the context)" if win >= pn + nn else str(win))
print(f"| {label} | {p.group(1)} / {p.group(2)} | {float(p.group(3)):.2f} | {r['totals']['peak_rss_bytes'] / 2**20:.0f} "
      f"| {int(m.group(1)) / float(m.group(2)) * 1e3:.2f} | {float(m.group(3)):.1f} |")
PY
done
"$py" -c "import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if (a == b).all() else 1)" "$work/w0/generated.npy" "$work/w$((prompt_n + new_n))/generated.npy" ||
  { echo "FAIL: a window as long as the context changed the tokens"; exit 1; }
echo "ok: a window as long as the context gives the tokens of none"
