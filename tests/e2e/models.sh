#!/usr/bin/env bash
# Model workflows on seeded checkpoints against an independent PyTorch forward
# (tests/reference/transformers_ref.py, float64), two shapes per architecture:
# sequence lengths that are multiples of no tile size, head counts that are
# not powers of two, batches of several sequences, grouped-query attention.
source "$(dirname "$0")/lib.sh"
y=$1
py=/usr/bin/python3
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  echo "skip: $py has no torch/numpy (Debian python3-torch python3-numpy; scripts/test.sh installs them)"
  exit 77
fi
ref=tests/reference/transformers_ref.py
# case ARCH WORKFLOW OUTPUT BATCH SEQ "model overrides" "workflow overrides" "reference args"
case_() {
  local arch=$1 wf=$2 outf=$3 batch=$4 seq=$5 model=$6 sets=$7 refargs=$8
  local d="$tmp/$arch-$batch-$seq"
  mkdir -p "$d"
  "$y" model init --arch $arch --preset tiny --seed $seq $model "$d/w.safetensors" >/dev/null || { fails=$((fails + 1)); return; }
  "$py" -c "import numpy as np; np.save('$d/ids.npy', (np.arange($batch * $seq) * 37 % 512).astype(np.int32))"
  local set_args=(--set weights="$d/w.safetensors" --set ids="$d/ids.npy" --set batch=$batch --set seq=$seq)
  for s in $sets; do set_args+=(--set "$s"); done
  expect_rc 0 "$arch batch=$batch seq=$seq runs" -- "$y" run "$wf" "${set_args[@]}" --out "$d/run" --quiet
  expect_rc 0 "$arch batch=$batch seq=$seq matches PyTorch" -- "$py" $ref --arch $arch --weights "$d/w.safetensors" \
    --ids "$d/ids.npy" --batch $batch --seq $seq --compare "$d/run/$outf" --tol 1e-4 $refargs
  echo "  $out"
}
case_ gpt2 workflows/models/gpt2.xml logits.npy 2 7 "" \
  "layers=2 width=96 heads=3 vocab=512 context=64 tile_n=40 tile_vocab=100" "--layers 2 --heads 3"
case_ gpt2 workflows/models/gpt2.xml logits.npy 1 19 "--heads 6" \
  "layers=2 width=96 heads=6 vocab=512 context=64 tile_n=64 tile_vocab=512" "--layers 2 --heads 6"
case_ bert workflows/models/bert.xml hidden.npy 2 13 "" \
  "layers=2 width=96 heads=6 ffn=200 vocab=512 context=64 tile_n=48" "--layers 2 --heads 6"
case_ bert workflows/models/bert.xml hidden.npy 1 30 "--heads 3" \
  "layers=2 width=96 heads=3 ffn=200 vocab=512 context=64 tile_n=37" "--layers 2 --heads 3"
case_ llama workflows/models/llama.xml logits.npy 2 11 "" \
  "layers=2 width=96 heads=6 kv_heads=2 ffn=160 vocab=512 tile_n=48 tile_vocab=100" "--layers 2 --heads 6 --kv-heads 2"
case_ llama workflows/models/llama.xml logits.npy 1 17 "--kv-heads 3" \
  "layers=2 width=96 heads=6 kv_heads=3 ffn=160 vocab=512 tile_n=70 tile_vocab=128" "--layers 2 --heads 6 --kv-heads 3"
# dry runs: the footprint predicted from declarations equals what a real run reports
d="$tmp/gpt2-2-7"
expect_rc 0 "dry run of a run that fits" -- "$y" run workflows/models/gpt2.xml --set weights="$d/w.safetensors" \
  --set ids="$d/ids.npy" --set batch=2 --set seq=7 --set layers=2 --set width=96 --set heads=3 --set vocab=512 \
  --set context=64 --set tile_n=40 --set tile_vocab=100 --dry-run
python3 - "$d/run/report.json" "$out" <<'PY' || fails=$((fails + 1))
import json, re, sys
r = json.load(open(sys.argv[1]))
dry = sys.argv[2]
flops = float(re.search(r"work: ([0-9.]+) GFLOP", dry).group(1)) * 1e9
params = float(re.search(r"parameters \(src= data\): ([0-9.]+) MiB", dry).group(1)) * 2**20
assert abs(flops - r["totals"]["flops"]) <= 5e5 + 1e-3 * flops, (flops, r["totals"]["flops"])
assert abs(params - r["memory"]["parameter_total"]) <= 0.06 * 2**20, (params, r["memory"]["parameter_total"])
print("dry run matches the real run: %.3f GFLOP, %.2f MiB of parameters" % (flops / 1e9, params / 2**20))
PY
# LLaMA-7B on paper: 6,738,415,616 f32 parameters = 25705.0 MiB (the published count), no weights needed
expect_rc 0 "dry run of llama 7B" -- "$y" run workflows/models/llama.xml --set layers=32 --set width=4096 --set heads=32 \
  --set kv_heads=32 --set ffn=11008 --set vocab=32000 --set seq=2048 --set weights=/nonexistent.safetensors --dry-run
expect_in "parameters (src= data): 25705.0 MiB" "LLaMA-7B parameter bytes"
finish
