# Sourced by the LLaMA benchmarks: llama_shape YMLOPT PRESET sets layers, width,
# heads, kv, ffn and vocab from `ymlopt model info --arch llama --preset PRESET`
# (in the caller's scope: a caller's locals of those names get them).
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
