#!/usr/bin/env bash
# ymlopt against llama.cpp (node-llama-cpp's prebuilt CPU backends) on the same
# seeded LLaMA weights and ids: the prefill of one sequence, timed, and the
# next-token distribution of every position, both engines against the PyTorch
# reference forward (float64) of the f32 model.
#
#   tests/bench/peers/llama_cpp.sh [BUILD_DIR|YMLOPT_BINARY] [REPS]            # default build, 5
#   CASES="llama:1.1B:128:f32 llama:1.1B:128:q8_0 llama:1.1B:128:q4_0" tests/bench/peers/llama_cpp.sh
#   SMOKE=1 tests/bench/peers/llama_cpp.sh build       # tiny llama f32 and q4_0, 1 round (ctest)
#   DECODE=64 PROMPT=32 tests/bench/peers/llama_cpp.sh build 3   # generation instead (below)
#
# A case is llama:PRESET:SEQ:DTYPE, DTYPE f32, q8_0 or q4_0: ymlopt runs the
# weights `ymlopt optimize --sequence workflows/sequences/DTYPE.xml` writes,
# llama.cpp their `ymlopt export` (the same codes and scales, bit for bit).
# Each round runs one `ymlopt run` process, then one llama.cpp process (two
# prefills of the ids in one context: the first, and the second, warm):
#   ymlopt ms      report.json makespan (forward + the save of the logits)
#   llama.cpp ms   its first prefill; warm: the second
#   ymlopt warm    `ymlopt run --warmup REPS` once: the median of its runs after the first
#   wall           the whole process
# ratio = ymlopt / llama.cpp (above 1: ymlopt is slower); medians over REPS.
# Errors in nats against the reference's log-softmax: the largest |d log p| of
# any position and token, and the mean KL(reference || engine) per position.
# f32: |d log p| within TOL_F32 (default 1e-2; llama.cpp's own arithmetic
# reaches 4e-3 on the 1.1B model, ours 1e-5; a wrong export is off by O(1)).
# Quantized: KL below TOL_KL (default 0.02 for q8_0, 0.5 for q4_0: 4-bit codes
# of seeded normal weights cost ~0.17 in both engines).
# DECODE=N: generation instead of the prefill: the first PROMPT ids (default 32)
# as the prompt, then N tokens, greedy, in `ymlopt generate` (a prefill, then a
# runtime loop of KV-cache decode steps) and in llama.cpp (llama_run.mjs --decode
# N), alternating REPS rounds: the prefill's ms, the decode's tokens/s over its
# N - 1 steps (ymlopt's include packing the quantized weights' panels in the
# first step; llama.cpp repacks at load) and ymlopt's median step; and how many
# greedy tokens the engines share (f32: at least the first 16; on seeded weights
# the logits are nearly flat, and a near tie parts the two f32 arithmetics later).
# Env: THREADS (default nproc), KEEP=DIR keeps the files. Exit 77 (skip) when
# node-llama-cpp cannot be fetched or Python lacks torch/numpy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
arg=${1:-build}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "llama_cpp: no ymlopt binary at $y" >&2; exit 2; }
if [ "${SMOKE:-0}" = 1 ]; then
  reps=${2:-1}
  cases=${CASES:-"llama:tiny:32:f32 llama:tiny:32:q4_0"}
else
  reps=${2:-5}
  cases=${CASES:-"llama:1.1B:128:f32 llama:1.1B:128:q8_0 llama:1.1B:128:q4_0"}
fi
threads=${THREADS:-$(nproc)}
py=/usr/bin/python3
export STARPU_SILENT=1
cd "$here"
source tests/bench/llama_shape.sh
"$py" -c "import torch, numpy" 2>/dev/null || { echo "skip: $py lacks torch or numpy"; exit 77; }
peers_dir=$(scripts/fetch_peers.sh) || { echo "skip: node-llama-cpp could not be fetched (scripts/fetch_peers.sh, above)"; exit 77; }
export YMLOPT_PEERS_DIR=$peers_dir
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
fails=0
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# errors OUT KIND REF: "max_dlogp mean_kl" of OUT (KIND logits or logp) against REF's logits
errors() {
  "$py" - "$@" <<'PY'
import sys, numpy as np
def logp(a):
    a = a - a.max(axis=1, keepdims=True)
    return a - np.log(np.exp(a).sum(axis=1, keepdims=True))
ref = np.load(sys.argv[3]).astype(np.float64)
ref = logp(ref.reshape(-1, ref.shape[-1]))
out = np.load(sys.argv[1]).astype(np.float64).reshape(ref.shape)
if sys.argv[2] == "logits": out = logp(out)
kl = (np.exp(ref) * (ref - out)).sum(axis=1).mean()
print("%.3e %.3e" % (np.abs(out - ref).max(), kl))
PY
}
check() {  # WHAT VALUE TOL
  if "$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$2" "$3"; then
    echo "    ok: $1 $2 <= $3"
  else
    echo "    FAIL: $1 $2 > $3"; fails=$((fails + 1))
  fi
}

# prepare PRESET SEQ DTYPE: $d/ids.npy, $d/ref.npy, $d/model.gguf, wf_args
prepare() {
  local preset=$1 seq=$2 dtype=$3 layers width heads kv ffn vocab w
  d=$work/llama-$preset-$seq-$dtype
  mkdir -p "$d"
  w=$work/llama-$preset.safetensors
  [ -f "$w" ] || "$y" model init --arch llama --preset "$preset" --seed 1 "$w" >/dev/null
  llama_shape "$y" "$preset"
  "$py" -c "import numpy as np; np.save('$d/ids.npy', (np.arange($seq) * 7919 % $vocab).astype(np.int32))"
  wf_args=(workflows/models/llama.xml --set ids="$d/ids.npy" --set seq=$seq --set layers=$layers --set width=$width
    --set heads=$heads --set kv_heads=$kv --set ffn=$ffn --set vocab=$vocab)
  ref_args=(--arch llama --weights "$w" --layers "$layers" --heads "$heads" --kv-heads "$kv" --ids "$d/ids.npy"
    --batch 1 --seq "$seq" --threads "$threads")
  gen_args=(--set heads="$heads" --set kv_heads="$kv")
  if [ "$dtype" != f32 ]; then
    [ -f "$work/$dtype-$preset/llama.opt.safetensors" ] || "$y" optimize "${wf_args[@]}" --set weights="$w" \
      --sequence "workflows/sequences/$dtype.xml" -o "$work/$dtype-$preset" >/dev/null
    w=$work/$dtype-$preset/llama.opt.safetensors
  fi
  wf_args+=(--set weights="$w")
  gen_args+=(--model "$w")
  "$y" export "$w" "$d/model.gguf" --arch llama --preset "$preset" | sed 's/^/    /'
}

# one_case llama:PRESET:SEQ:DTYPE: alternating rounds, checks; prints the table row
one_case() {
  local arch preset seq dtype r t0 t1 ey ky el kl tol
  IFS=: read -r arch preset seq dtype <<<"$1"
  [[ "$arch" == llama && "$dtype" =~ ^(f32|q8_0|q4_0)$ ]] || { echo "llama_cpp: bad case '$1' (llama:PRESET:SEQ:f32|q8_0|q4_0)" >&2; exit 2; }
  echo "== llama $preset seq $seq $dtype"
  prepare "$preset" "$seq" "$dtype"
  local ref=$work/ref-llama-$preset-$seq.npy
  [ -f "$ref" ] || "$py" tests/reference/transformers_ref.py "${ref_args[@]}" --save "$ref" >/dev/null
  ln -sf "$ref" "$d/ref.npy"
  : >"$d/rounds.tsv"
  for r in $(seq 1 "$reps"); do
    t0=$(now_ms)
    "$y" run "${wf_args[@]}" --ncpu "$threads" --out "$d/run" --quiet
    t1=$(now_ms)
    printf '%s\t%s\t' "$("$py" -c "import json; print(json.load(open('$d/run/report.json'))['totals']['makespan_us'] / 1e3)")" \
      $((t1 - t0)) >>"$d/rounds.tsv"
    t0=$(now_ms)
    node tests/bench/peers/llama_run.mjs "$d/model.gguf" "$d/ids.npy" "$d/llama.npy" --threads "$threads" --rounds 2 >"$d/llama.json"
    t1=$(now_ms)
    printf '%s\t%s\n' "$("$py" -c "import json; r = json.load(open('$d/llama.json'))['rounds']; print(r[0]['run_ms'], r[1]['run_ms'], sep='\t')")" \
      $((t1 - t0)) >>"$d/rounds.tsv"
  done
  # ymlopt warm: REPS runs after a first one in one process (run --warmup), as llama.cpp's second prefill
  "$y" run "${wf_args[@]}" --ncpu "$threads" --out "$d/warm-run" --quiet --warmup "$reps"
  local ewarm kwarm
  read -r ey ky < <(errors "$d/run/logits.npy" logits "$d/ref.npy")
  read -r ewarm kwarm < <(errors "$d/warm-run/logits.npy" logits "$d/ref.npy")
  # warm runs multiply f32 weights from packed panels (summed in another order): the same logits within f32 rounding
  local dwarm
  dwarm=$("$py" -c "import numpy as np, sys; a, r = (np.load(f).astype(np.float64).ravel() for f in sys.argv[1:3])
print('%.3e' % (np.abs(a - r).max() / max(np.abs(r).max(), 1e-30)))" "$d/warm-run/logits.npy" "$d/run/logits.npy")
  "$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1e-5 else 1)" "$dwarm" ||
    { echo "    FAIL: the warm run's logits differ from the first run's by $dwarm (errors $ewarm / $kwarm)"; fails=$((fails + 1)); }
  read -r el kl < <(errors "$d/llama.npy" logp "$d/ref.npy")
  if [ "$dtype" = f32 ]; then
    check "ymlopt max |d log p| vs PyTorch" "$ey" "${TOL_F32:-1e-2}"
    check "llama.cpp max |d log p| vs PyTorch" "$el" "${TOL_F32:-1e-2}"
  else
    tol=${TOL_KL:-0.02}
    [ "$dtype" = q8_0 ] || tol=${TOL_KL:-0.5}
    check "ymlopt KL vs the f32 PyTorch model" "$ky" "$tol"
    check "llama.cpp KL vs the f32 PyTorch model" "$kl" "$tol"
  fi
  "$py" - "$d/rounds.tsv" "$d/warm-run/report.json" "llama-$preset" "$seq" "$dtype" "$ey" "$ky" "$el" "$kl" <<'PY' | tee -a "$work/table.txt"
import json, statistics as st, sys
rows = [list(map(float, l.split("\t"))) for l in open(sys.argv[1]) if l.strip()]
ym, yw, lm, lwarm, lw = (st.median(c) for c in zip(*rows))
t = json.load(open(sys.argv[2]))["totals"]
ywarm = st.median(t["warmup_us"][1:] + [t["makespan_us"]]) / 1e3
name, seq, dtype, ey, ky, el, kl = sys.argv[3:10]
print(f"| {name} | {seq} | {dtype} | {ym:.1f} | {lm:.1f} | **{ym / lm:.2f}** | {ywarm:.1f} | {lwarm:.1f} | **{ywarm / lwarm:.2f}** "
      f"| {yw:.0f} | {lw:.0f} | {ey} / {ky} | {el} / {kl} |")
PY
}

# decode_case llama:PRESET:SEQ:DTYPE: generation rounds, alternating; prints the table row
decode_case() {
  local arch preset seq dtype r ids
  IFS=: read -r arch preset seq dtype <<<"$1"
  echo "== llama $preset generation: prompt $prompt_n, $decode_n tokens, $dtype"
  prepare "$preset" "$seq" "$dtype"
  ids=$("$py" -c "import numpy as np, sys; a = np.load(sys.argv[1])[:int(sys.argv[2])]; np.save(sys.argv[3], a)
print(','.join(map(str, a)))" "$d/ids.npy" "$prompt_n" "$d/prompt.npy")
  : >"$d/gen.tsv"
  for r in $(seq 1 "$reps"); do
    "$y" generate "${gen_args[@]}" --ids "$ids" -n "$decode_n" --ignore-eos --ncpu "$threads" -o "$d/gen" >/dev/null 2>"$d/gen.err" ||
      { cat "$d/gen.err"; exit 1; }
    node tests/bench/peers/llama_run.mjs "$d/model.gguf" "$d/prompt.npy" "$d/lgen.npy" --decode "$decode_n" \
      --threads "$threads" >"$d/lgen.json"
    "$py" - "$d/gen.err" "$d/lgen.json" >>"$d/gen.tsv" <<'PY'
import json, re, sys
e = open(sys.argv[1]).read()
p = float(re.search(r"prompt: \d+ tokens in ([0-9.]+) ms", e).group(1))
m = re.search(r"decode: (\d+) tokens in ([0-9.]+) ms .*median step ([0-9.]+) ms", e)
l = json.load(open(sys.argv[2]))["rounds"][0]
n = int(m.group(1))
print(p, n / float(m.group(2)) * 1e3, float(m.group(3)), l["prefill_ms"], n / l["decode_ms"] * 1e3, sep="\t")
PY
  done
  "$py" - "$d/gen.tsv" "$d/gen/generated.npy" "$d/lgen.npy" "llama-$preset" "$dtype" "$prompt_n" "$decode_n" <<'PY' | tee -a "$work/table.txt"
import statistics as st, sys, numpy as np
rows = [list(map(float, l.split("\t"))) for l in open(sys.argv[1]) if l.strip()]
yp, yt, ystep, lp, lt = (st.median(c) for c in zip(*rows))
a, b = np.load(sys.argv[2]).ravel(), np.load(sys.argv[3]).ravel()
same = int(np.argmin(np.append(a == b, False)))
name, dtype, pn, dn = sys.argv[4:8]
print(f"| {name} | {dtype} | {pn} + {dn} | {yp:.0f} | {lp:.0f} | {yt:.2f} | {lt:.2f} | **{lt / yt:.2f}** | {ystep:.1f} "
      f"| {1e3 / ystep:.2f} | {same} / {len(a)} |")
PY
  # f32: the same first 16 greedy tokens (later ones may part on a near tie of seeded weights' flat logits)
  if [ "$dtype" = f32 ] && ! "$py" -c "import numpy as np, sys; a, b = (np.load(f).ravel()[:16] for f in sys.argv[1:3])
sys.exit(0 if (a == b).all() else 1)" "$d/gen/generated.npy" "$d/lgen.npy"; then
    echo "    FAIL: f32 greedy tokens differ between ymlopt and llama.cpp within the first 16"; fails=$((fails + 1))
  fi
}

echo "peers: ymlopt vs llama.cpp, $(date -u '+%Y-%m-%d %H:%M UTC')"
flags=$(grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_tile|amx_int8|amx_bf16' /proc/cpuinfo | sort -u | xargs || true)
grep -q amx <<<"$flags" || flags+=" (no AMX)"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p')," \
  "model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; flags: $flags"
echo "load average:$(uptime | sed 's/.*load average: */ /')"
echo "threads=$threads reps=$reps; ymlopt $y ($("$y" --version | head -1))"
: >"$work/table.txt"
decode_n=${DECODE:-0}
prompt_n=${PROMPT:-32}
if [ "$decode_n" -gt 0 ]; then
  for c in $cases; do decode_case "$c"; done
  echo
  echo "| model | dtype | prompt + new | ymlopt prefill ms | llama.cpp prefill ms | ymlopt tokens/s | llama.cpp tokens/s | time ratio | ymlopt median step ms | ymlopt steady tokens/s | same greedy tokens |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$work/table.txt"
  echo "load average at the end:$(uptime | sed 's/.*load average: */ /')"
  if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "all checks passed"
  exit 0
fi
for c in $cases; do one_case "$c"; done
echo
echo "| model | seq | dtype | ymlopt ms | llama.cpp ms | ratio | ymlopt warm ms | llama.cpp warm ms | warm ratio | ymlopt wall ms | llama.cpp wall ms | ymlopt max dlogp / KL | llama.cpp max dlogp / KL |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
cat "$work/table.txt"
echo "load average at the end:$(uptime | sed 's/.*load average: */ /')"
if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
