#!/usr/bin/env bash
# `ymlopt model`: seeded checkpoints with the published parameter counts and
# names, read back by an independent parser.
source "$(dirname "$0")/lib.sh"
y=$1
expect_rc 0 "gpt2 124M count" -- "$y" model info --arch gpt2 --preset 124M
expect_in "124439808 parameters" "GPT-2 small has 124,439,808 weights (tied LM head)"
expect_rc 0 "bert base count" -- "$y" model info --arch bert --preset base
expect_in "109482240 parameters" "bert-base-uncased with pooler"
expect_rc 0 "llama 1.1B count" -- "$y" model info --arch llama --preset 1.1B
expect_in "1100048384 parameters" "TinyLlama-1.1B"
expect_rc 2 "unknown preset" -- "$y" model init --arch llama --preset big "$tmp/x.safetensors"
expect_in "unknown llama preset 'big' (expected 1.1B, 7B, tiny)" "message"
expect_rc 2 "bad heads" -- "$y" model info --arch gpt2 --preset tiny --heads 5
expect_in "width 96 is not a multiple of heads 5" "message"
for arch in gpt2 bert llama; do
  expect_rc 0 "$arch tiny init" -- "$y" model init --arch $arch --preset tiny --seed 7 "$tmp/$arch.safetensors"
done
"$y" model init --arch llama --preset tiny --seed 7 "$tmp/llama2.safetensors" >/dev/null
cmp -s "$tmp/llama.safetensors" "$tmp/llama2.safetensors" || { echo "FAIL: same seed, different bytes"; fails=$((fails + 1)); }
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, math, struct, sys
d = sys.argv[1]
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h, b[8 + n:]
h, data = read(d + "/llama.safetensors")
meta = h.pop("__metadata__")
assert meta["ymlopt.arch"] == "llama" and meta["ymlopt.seed"] == "7", meta
q = h["model.layers.1.self_attn.q_proj.weight"]
assert q["dtype"] == "F32" and q["shape"] == [96, 96], q
k = h["model.layers.0.self_attn.k_proj.weight"]
assert k["shape"] == [32, 96], k          # 2 kv heads of 16
b, e = q["data_offsets"]
vals = struct.unpack("<%df" % ((e - b) // 4), data[b:e])
mean = sum(vals) / len(vals)
std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
assert abs(mean) < 0.003 and abs(std - 0.02) < 0.002, (mean, std)
n = h["model.norm.weight"]
b, e = n["data_offsets"]
assert set(struct.unpack("<96f", data[b:e])) == {1.0}
g, _ = read(d + "/gpt2.safetensors")
assert g["h.1.attn.c_attn.weight"]["shape"] == [96, 288] and g["wpe.weight"]["shape"] == [64, 96]
bt, _ = read(d + "/bert.safetensors")
assert bt["encoder.layer.0.intermediate.dense.weight"]["shape"] == [200, 96]
print("checkpoints ok")
PY
# the real model, when the test script could fetch it
if [ -n "${YMLOPT_USE_LITE_DIR:-}" ] && [ -f "$YMLOPT_USE_LITE_DIR/model.json" ]; then
  expect_rc 0 "convert USE-lite" -- "$y" convert "$YMLOPT_USE_LITE_DIR/model.json" "$tmp/use.safetensors"
  expect_in "61 tensors, 6975914 values" "every weight of the manifest (6,975,872 f32 parameters plus int32 and scalar tensors)"
else
  echo "skip: USE-lite not fetched (YMLOPT_USE_LITE_DIR unset)"
fi
expect_rc 1 "convert a missing model" -- "$y" convert "$tmp/none/model.json" "$tmp/x.safetensors"
expect_in "$tmp/none/model.json: cannot open" "message"
expect_rc 2 "convert without output" -- "$y" convert "$tmp/none/model.json"
finish
