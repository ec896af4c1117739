#!/usr/bin/env bash
# ymlopt against ONNX Runtime (onnxruntime-node, CPU backend) on the same seeded
# weights, ids and thread count; both outputs checked against the PyTorch
# reference forward (tests/reference/transformers_ref.py, float64). Then, with
# the same REPS and SMOKE, ymlopt against llama.cpp on LLaMA
# (tests/bench/peers/llama_cpp.sh; LLAMA=0 leaves it out, LLAMA_CASES sets its CASES),
# and with DECODE=N (SMOKE: 8) their generation of N tokens (llama_cpp.sh's DECODE).
#
#   tests/bench/peers.sh [BUILD_DIR|YMLOPT_BINARY] [REPS]         # default build, 5
#   CASES="gpt2:124M:128:f32 bert:base:128:int8" tests/bench/peers.sh build 5
#   SMOKE=1 tests/bench/peers.sh build          # tiny gpt2 f32 and bert int8, 1 round (ctest)
#
# A case is ARCH:PRESET:SEQ:DTYPE, ARCH gpt2 or bert, DTYPE f32, bf16 or int8. bf16:
# ymlopt runs `ymlopt optimize --passes quant.bf16` weights (bf16 products, f32
# sums) against ORT's f32 graph (ORT's CPU backend has no bf16 MatMul). int8:
# ymlopt runs `ymlopt optimize --sequence workflows/sequences/int8.xml` weights
# (per-channel int8, activations int8 per token, W8A8); ORT runs the graph
# export_onnx.py --int8 builds (the same int8 weight codes, activations uint8
# per tensor: DynamicQuantizeMatMul, as ORT's quantize_dynamic makes).
# Each round runs one `ymlopt run` process, then one ORT process (one forward):
#   ymlopt ms  report.json makespan (forward + the save of the output .npy)
#   ORT ms     session.run + writing the output .npy, the session's first run
#   wall       the whole process (start, weights, graph, forward, save, exit)
#   warm       steady state, one process each: `ymlopt run --warmup REPS` (the median
#              of its runs after the second: the second packs the weights, which ORT
#              does when it creates the session, before its first run) and ORT with
#              REPS+1 runs (median of 2..)
# ratio = ymlopt / ORT (above 1: ymlopt is slower). Medians over REPS rounds.
# Env: THREADS (default nproc: StarPU CPU workers and ORT intra-op threads),
# TOL_F32 / TOL_BF16 / TOL_INT8 (max |out - ref| / max |ref|, defaults 1e-4 / 0.05 / 0.1;
# measured at 124M/base: f32 1e-6 both engines, bf16 ymlopt 0.004-0.006, int8 ymlopt
# 0.021-0.035, ORT 0.023-0.047),
# KEEP=DIR keeps the files, OPENBLAS_CORETYPE (tests/bench/openblas_core.sh).
# Exit 77 (skip) when ONNX Runtime cannot be fetched or Python lacks torch/onnx.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
arg=${1:-build}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "peers: no ymlopt binary at $y" >&2; exit 2; }
if [ "${SMOKE:-0}" = 1 ]; then
  reps=${2:-1}
  cases=${CASES:-"gpt2:tiny:32:f32 bert:tiny:32:int8"}
else
  reps=${2:-5}
  cases=${CASES:-"gpt2:124M:128:f32 gpt2:124M:512:f32 bert:base:128:f32 gpt2:124M:128:int8 bert:base:128:int8"}
fi
threads=${THREADS:-$(nproc)}
tol_f32=${TOL_F32:-1e-4}
tol_int8=${TOL_INT8:-0.1}
tol_bf16=${TOL_BF16:-0.05}
py=/usr/bin/python3
peers_py=$here/tests/bench/peers
source "$here/tests/bench/openblas_core.sh"
export STARPU_SILENT=1
cd "$here"

if ! "$py" -c "import torch, numpy, onnx" 2>/dev/null; then
  echo "skip: $py lacks torch, numpy or onnx (Debian python3-torch python3-numpy python3-onnx)"
  exit 77
fi
if ! peers_dir=$(scripts/fetch_peers.sh); then
  echo "skip: ONNX Runtime could not be fetched (scripts/fetch_peers.sh, above)"
  exit 77
fi
export YMLOPT_PEERS_DIR=$peers_dir
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
fails=0

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
json() { "$py" -c "import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# relerr OUT REF: max |out - ref| / max |ref| over the flattened arrays
relerr() {
  "$py" -c "import numpy as np, sys; a, r = (np.load(f).astype(np.float64).ravel() for f in sys.argv[1:3])
print('%.3e' % (np.abs(a - r).max() / max(np.abs(r).max(), 1e-30)))" "$@"
}
# check WHAT VALUE TOL: VALUE <= TOL, else counts a failure
check() {
  if "$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$2" "$3"; then
    echo "    ok: $1 $2 <= $3"
  else
    echo "    FAIL: $1 $2 > $3"; fails=$((fails + 1))
  fi
}

# prepare ARCH PRESET SEQ DTYPE: sets wf_args (ymlopt run arguments), ref_args,
# out_name, and writes $d/ids.npy, $d/ref.npy, $d/model.onnx (cached in $work)
prepare() {
  local arch=$1 preset=$2 seq=$3 dtype=$4 info layers width heads ffn vocab
  d=$work/$arch-$preset-$seq-$dtype
  mkdir -p "$d"
  local w=$work/$arch-$preset.safetensors
  [ -f "$w" ] || "$y" model init --arch "$arch" --preset "$preset" --seed 1 "$w" >/dev/null
  info=$("$y" model info --arch "$arch" --preset "$preset")
  layers=$(sed -n 's/.*: \([0-9]*\) layers.*/\1/p' <<<"$info")
  width=$(sed -n 's/.* width \([0-9]*\),.*/\1/p' <<<"$info")
  heads=$(sed -n 's/.* \([0-9]*\) heads.*/\1/p' <<<"$info")
  ffn=$(sed -n 's/.* ffn \([0-9]*\),.*/\1/p' <<<"$info")
  vocab=$(sed -n 's/.* vocab \([0-9]*\);.*/\1/p' <<<"$info")
  "$py" -c "import numpy as np; np.save('$d/ids.npy', (np.arange($seq) * 7919 % $vocab).astype(np.int32))"
  wf_args=(workflows/models/$arch.xml --set ids="$d/ids.npy" --set seq=$seq --set layers=$layers --set width=$width
    --set heads=$heads --set ffn=$ffn --set vocab=$vocab)
  [ "$preset" != tiny ] || wf_args+=(--set context=64)
  ref_args=(--arch "$arch" --weights "$w" --layers "$layers" --heads "$heads")
  out_name=logits.npy
  [ "$arch" != bert ] || out_name=hidden.npy
  local ref=$work/ref-$arch-$preset-$seq.npy
  [ -f "$ref" ] || "$py" tests/reference/transformers_ref.py "${ref_args[@]}" --ids "$d/ids.npy" --batch 1 --seq "$seq" \
    --threads "$threads" --save "$ref"
  ln -sf "$ref" "$d/ref.npy"
  local export_args=()
  if [ "$dtype" = int8 ]; then
    [ -f "$work/int8-$arch-$preset/$arch.opt.safetensors" ] || "$y" optimize "${wf_args[@]}" --set weights="$w" \
      --sequence workflows/sequences/int8.xml -o "$work/int8-$arch-$preset" >/dev/null
    w=$work/int8-$arch-$preset/$arch.opt.safetensors
    export_args=(--int8)
  elif [ "$dtype" = bf16 ]; then
    [ -f "$work/bf16-$arch-$preset/$arch.opt.safetensors" ] || "$y" optimize "${wf_args[@]}" --set weights="$w" \
      --passes quant.bf16 -o "$work/bf16-$arch-$preset" >/dev/null
    w=$work/bf16-$arch-$preset/$arch.opt.safetensors
  fi
  wf_args+=(--set weights="$w")
  "$py" "$peers_py/export_onnx.py" "${ref_args[@]}" --seq "$seq" "${export_args[@]}" --out "$d/model.onnx" | sed 's/^/    /'
}

# one_case ARCH:PRESET:SEQ:DTYPE: alternating rounds, the warm ORT run, checks; prints the table row
one_case() {
  local arch preset seq dtype r t0 t1
  IFS=: read -r arch preset seq dtype <<<"$1"
  [[ "$arch" =~ ^(gpt2|bert)$ && "$dtype" =~ ^(f32|bf16|int8)$ ]] ||
    { echo "peers: bad case '$1' (gpt2|bert:PRESET:SEQ:f32|bf16|int8)" >&2; exit 2; }
  echo "== $arch $preset seq $seq $dtype"
  prepare "$arch" "$preset" "$seq" "$dtype"
  : >"$d/rounds.tsv"
  for r in $(seq 1 "$reps"); do
    t0=$(now_ms)
    "$y" run "${wf_args[@]}" --ncpu "$threads" --out "$d/run" --quiet
    t1=$(now_ms)
    printf '%s\t%s\t' "$(json "$d/run/report.json" "d['totals']['makespan_us'] / 1e3")" $((t1 - t0)) >>"$d/rounds.tsv"
    t0=$(now_ms)
    node "$peers_py/ort_run.js" "$d/model.onnx" "$d/ids.npy" "$d/ort.npy" --threads "$threads" >"$d/ort.json"
    t1=$(now_ms)
    printf '%s\t%s\n' "$(json "$d/ort.json" "d['rounds'][0]['run_ms'] + d['rounds'][0]['save_ms']")" $((t1 - t0)) \
      >>"$d/rounds.tsv"
  done
  # ymlopt warm: REPS runs after a first one in one process (run --warmup), as ORT's warm rounds below
  "$y" run "${wf_args[@]}" --ncpu "$threads" --out "$d/warm-run" --quiet --warmup "$reps"
  node "$peers_py/ort_run.js" "$d/model.onnx" "$d/ids.npy" "$d/ort.npy" --threads "$threads" --rounds $((reps + 1)) \
    --optimized "$d/ort-optimized.onnx" >"$d/warm.json"
  local ops
  ops=$("$py" -c "import collections, onnx, sys
c = collections.Counter(n.op_type for n in onnx.load(sys.argv[1], load_external_data=False).graph.node)
print(' '.join(f'{k}:{v}' for k, v in c.most_common()))" "$d/ort-optimized.onnx")
  echo "    ORT's optimized graph: $ops"
  if [ "$dtype" = int8 ] && grep -qw "MatMulInteger" <<<"${ops//:/ }"; then
    echo "    FAIL: ORT left MatMulInteger unfused (no DynamicQuantizeMatMul / MatMulIntegerToFloat kernel)"
    fails=$((fails + 1))
  fi
  local tol=$tol_f32 ey eo
  [ "$dtype" != int8 ] || tol=$tol_int8
  [ "$dtype" != bf16 ] || tol=$tol_bf16
  ey=$(relerr "$d/run/$out_name" "$d/ref.npy")
  eo=$(relerr "$d/ort.npy" "$d/ref.npy")
  check "ymlopt max relative error vs PyTorch" "$ey" "$tol"
  check "ymlopt (last warm run) max relative error vs PyTorch" "$(relerr "$d/warm-run/$out_name" "$d/ref.npy")" "$tol"
  check "ORT max relative error vs PyTorch" "$eo" "$tol"
  "$py" - "$d/rounds.tsv" "$d/warm.json" "$d/warm-run/report.json" "$arch-$preset" "$seq" "$dtype" "$ey" "$eo" <<'PY' | tee -a "$work/table.txt"
import json, statistics as st, sys
rows = [list(map(float, l.split("\t"))) for l in open(sys.argv[1]) if l.strip()]
ym, yw, om, ow = (st.median(c) for c in zip(*rows))
warm = json.load(open(sys.argv[2]))["rounds"][1:]
ow_run = st.median(r["run_ms"] + r["save_ms"] for r in warm)
t = json.load(open(sys.argv[3]))["totals"]
yw_run = st.median(t["warmup_us"][2:] + [t["makespan_us"]]) / 1e3  # after the packing run
name, seq, dtype, ey, eo = sys.argv[4:9]
print(f"| {name} | {seq} | {dtype} | {ym:.1f} | {om:.1f} | **{ym / om:.2f}** | {yw:.0f} | {ow:.0f} | {yw / ow:.2f} "
      f"| {yw_run:.1f} | {ow_run:.1f} | **{yw_run / ow_run:.2f}** | {ey} | {eo} |")
# both sides' times include writing the output (ymlopt: io.save, with fsync; ORT: save_ms, without):
# the forward alone, on the last warm run (ymlopt: makespan less the save task's time)
save = sum(x["end_us"] - x["start_us"] for x in json.load(open(sys.argv[3]))["tasks"] if x["component"] == "io.save")
yc, oc = (t["makespan_us"] - save) / 1e3, st.median(r["run_ms"] for r in warm)
print(f"    warm forward alone (no output save): ymlopt {yc:.1f} ms (last run), ORT {oc:.1f} ms: {yc / oc:.2f}",
      file=sys.stderr)
PY
}

echo "peers: ymlopt vs ONNX Runtime, $(date -u '+%Y-%m-%d %H:%M UTC')"
flags=$(grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_tile|amx_int8|amx_bf16' /proc/cpuinfo | sort -u | xargs || true)
grep -q amx <<<"$flags" || flags+=" (no AMX)"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p')," \
  "model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; flags: $flags"
echo "load average:$(uptime | sed 's/.*load average: */ /')"
echo "threads=$threads reps=$reps OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; ymlopt $y" \
  "($("$y" --version | head -1)); onnxruntime-node $(node -p "require('$peers_dir/node_modules/onnxruntime-node/package.json').version");" \
  "torch $("$py" -c 'import torch; print(torch.__version__)')"
: >"$work/table.txt"
for c in $cases; do one_case "$c"; done
echo
echo "| model | seq | dtype | ymlopt ms | ORT ms | ratio | ymlopt wall ms | ORT wall ms | wall ratio | ymlopt warm ms | ORT warm ms | warm ratio | err ymlopt | err ORT |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
cat "$work/table.txt"
echo "load average at the end:$(uptime | sed 's/.*load average: */ /')"
if [ "${LLAMA:-1}" = 1 ]; then
  echo
  rc=0
  DECODE=0 CASES=${LLAMA_CASES:-} bash "$peers_py/llama_cpp.sh" "$y" "$reps" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || fails=$((fails + 1))
  if [ "${SMOKE:-0}" = 1 ] || [ "${DECODE:-0}" -gt 0 ]; then  # generation: prefill + KV-cache decode steps
    echo
    rc=0
    DECODE=${DECODE:-8} CASES=${LLAMA_CASES:-} bash "$peers_py/llama_cpp.sh" "$y" "$reps" || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || fails=$((fails + 1))
  fi
fi
if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
