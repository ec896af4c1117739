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
finish
