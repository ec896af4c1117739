# Sourced by the LLaMA benchmarks: llama_shape YMLOPT PRESET sets layers, width,
# heads, kv, ffn and vocab from `ymlopt model info --arch llama --preset PRESET`
# (in the caller's scope: a caller's locals of those names get them);
# llama_weights YMLOPT PRESET DTYPE WORK sets w to seeded weights of the preset
# in WORK (made once), stored as DTYPE (f32, or the weights `ymlopt optimize
# --sequence workflows/sequences/DTYPE.xml` writes), and the shape as above.
llama_shape() {
  local info
  info=$("$1" model info --arch llama --preset "$2")
  layers=$(sed -n 's/.*: \([0-9]*\) layers.*/\1/p' <<<"$info")
  width=$(sed -n 's/.* width \([0-9]*\),.*/\1/p' <<<"$info")
  heads=$(sed -n 's/.* \([0-9]*\) heads.*/\1/p' <<<"$info")
  kv=$(sed -n 's/.*(\([0-9]*\) kv).*/\1/p' <<<"$info")
  ffn=$(sed -n 's/.* ffn \([0-9]*\),.*/\1/p' <<<"$info")
  vocab=$(sed -n 's/.* vocab \([0-9]*\);.*/\1/p' <<<"$info")
}

llama_weights() {
  local y=$1 preset=$2 dtype=$3 work=$4 q
  w=$work/llama-$preset.safetensors
  [ -f "$w" ] || "$y" model init --arch llama --preset "$preset" --seed 1 "$w" >/dev/null
  llama_shape "$y" "$preset"
  [ "$dtype" = f32 ] && return
  q=$work/$dtype-$preset/llama.opt.safetensors
  /usr/bin/python3 -c "import numpy as np; np.save('$work/ids8.npy', np.arange(8, dtype=np.int32))"
  [ -f "$q" ] || "$y" optimize workflows/models/llama.xml --set weights="$w" --set ids="$work/ids8.npy" \
    --set layers="$layers" --set width="$width" --set heads="$heads" --set kv_heads="$kv" --set ffn="$ffn" \
    --set vocab="$vocab" --set seq=8 --sequence "workflows/sequences/$dtype.xml" -o "$work/$dtype-$preset" >/dev/null
  w=$q
}
