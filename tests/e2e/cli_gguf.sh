#!/usr/bin/env bash
# `ymlopt export` (GGUF) and `ymlopt convert X.gguf`: tiny llama and GPT-2
# checkpoints, f32 and `ymlopt optimize`'s q8_0/q4_0. Each export is read back
# by an independent GGUF reader written here from the format's specification
# (numpy): every tensor equals the checkpoint's, dequantized as ggml defines
# Q8_0/Q4_0 and laid out as llama.cpp's convert_hf_to_gguf.py lays it out (GPT-2
# Conv1D transposed, llama q/k rows permuted). Export -> convert -> export
# gives the same file byte for byte, convert gives back every tensor, and the
# converted file runs the workflow with the same logits. Bad files: exit 1
# naming the file.
source "$(dirname "$0")/lib.sh"
y=$1
need_numpy
write_ids "$tmp/ids.npy" 64
"$y" model init --arch llama --preset tiny --seed 3 "$tmp/l.safetensors" >/dev/null
"$y" model init --arch gpt2 --preset tiny --seed 3 "$tmp/g.safetensors" >/dev/null
L=(workflows/models/llama.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512 --backend sequential -q)
G=(workflows/models/gpt2.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=3 --set vocab=512 --set context=64 --set tile_n=32 --backend sequential -q)
for s in q8_0 q4_0; do
  expect_rc 0 "llama $s" -- "$y" optimize "${L[@]:0:19}" --set weights="$tmp/l.safetensors" \
    --sequence workflows/sequences/$s.xml -o "$tmp/l-$s"
  expect_rc 0 "gpt2 $s" -- "$y" optimize "${G[@]:0:21}" --set weights="$tmp/g.safetensors" \
    --sequence workflows/sequences/$s.xml -o "$tmp/g-$s"
done

# ref ST GGUF ARCH HEADS KV_HEADS: the GGUF's tensors, read and dequantized by the
# spec, against the checkpoint's (dense, or its q8_0/q4_0 codes and scales)
ref() {
  "$py" - "$@" <<'PY'
import json, struct, sys
import numpy as np
st, gpath, arch, heads, kv_heads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def read_st(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    meta = h.pop("__metadata__", {})
    dt = {"F32": np.float32, "F16": np.float16, "I8": np.int8}
    return meta, {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], dt[v["dtype"]]).reshape(v["shape"])
                  for k, v in h.items()}

def read_gguf(p):  # GGUF v3 as the specification writes it
    b = open(p, "rb").read(); at = 0
    def take(fmt):
        nonlocal at; v = struct.unpack_from("<" + fmt, b, at); at += struct.calcsize("<" + fmt); return v
    def string():
        nonlocal at; (n,) = take("Q"); s = b[at:at + n].decode(); at += n; return s
    scal = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def value(t):
        if t == 8: return string()
        if t == 9:
            et, n = take("IQ"); return [value(et) for _ in range(n)]
        return take(scal[t])[0]
    assert b[:4] == b"GGUF"; at = 4
    version, nt, nkv = take("IQQ"); assert version == 3
    kv = {}
    for _ in range(nkv):
        k = string(); (t,) = take("I"); kv[k] = value(t)
    infos = []
    for _ in range(nt):
        name = string(); (nd,) = take("I"); ne = take("%dQ" % nd); t, off = take("IQ"); infos.append((name, ne, t, off))
    align = kv.get("general.alignment", 32); start = (at + align - 1) // align * align
    out = {}
    for name, ne, t, off in infos:
        rows, cols = (ne[1], ne[0]) if len(ne) == 2 else (1, ne[0])
        o = start + off
        if t == 0: a = np.frombuffer(b, np.float32, rows * cols, o)
        elif t in (8, 2):  # Q8_0: f16 d + 32 int8; Q4_0: f16 d + 16 bytes, element j low nibble, j + 16 high
            bb = 34 if t == 8 else 18; nb = rows * cols // 32
            raw = np.frombuffer(b, np.uint8, nb * bb, o).reshape(nb, bb)
            d = raw[:, :2].copy().view(np.float16).astype(np.float32)
            if t == 8: q = raw[:, 2:].view(np.int8).astype(np.float32)
            else: q = np.concatenate([raw[:, 2:] & 15, raw[:, 2:] >> 4], axis=1).astype(np.float32) - 8
            a = (q * d).reshape(-1)
        else: raise SystemExit(f"type {t} of {name}")
        out[name] = a.reshape(rows, cols) if len(ne) == 2 else a
    return kv, out

meta, w = read_st(st)
kv, g = read_gguf(gpath)
def hf(key):  # the checkpoint's weight, dequantized from ymlopt's own layout: [n, k] codes, pairs (2j, 2j+1)
    if key in w: return w[key].astype(np.float32)
    q, s = w[key + ".w"], w[key + ".w_scale"].astype(np.float32)
    if q.shape[1] != s.shape[1] * 32:
        u = q.view(np.uint8); q = np.stack([u & 15, u >> 4], axis=2).reshape(q.shape[0], -1).astype(np.float32) - 8
    deq = (q.astype(np.float32).reshape(q.shape[0], -1, 32) * s[:, :, None]).reshape(q.shape[0], -1)
    return deq if "layout=nk" in meta["ymlopt.format." + key] else deq.T
def permute(x, n_head):  # convert_hf_to_gguf.py's LlamaModel.permute
    return x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
pairs = []
if arch == "llama":
    pairs += [("model.embed_tokens.weight", "token_embd.weight", None), ("model.norm.weight", "output_norm.weight", None),
              ("lm_head.weight", "output.weight", None)]
    for l in range(kv["llama.block_count"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        pairs += [(p + "input_layernorm.weight", b + "attn_norm.weight", None),
                  (p + "self_attn.q_proj.weight", b + "attn_q.weight", heads),
                  (p + "self_attn.k_proj.weight", b + "attn_k.weight", kv_heads),
                  (p + "self_attn.v_proj.weight", b + "attn_v.weight", None),
                  (p + "self_attn.o_proj.weight", b + "attn_output.weight", None),
                  (p + "post_attention_layernorm.weight", b + "ffn_norm.weight", None),
                  (p + "mlp.gate_proj.weight", b + "ffn_gate.weight", None),
                  (p + "mlp.up_proj.weight", b + "ffn_up.weight", None),
                  (p + "mlp.down_proj.weight", b + "ffn_down.weight", None)]
else:
    pairs += [("wte.weight", "token_embd.weight", None), ("wpe.weight", "position_embd.weight", None),
              ("ln_f.weight", "output_norm.weight", None), ("ln_f.bias", "output_norm.bias", None)]
    for l in range(kv["gpt2.block_count"]):
        for h, gname in (("ln_1", "attn_norm"), ("attn.c_attn", "attn_qkv"), ("attn.c_proj", "attn_output"),
                         ("ln_2", "ffn_norm"), ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down")):
            pairs += [(f"h.{l}.{h}.weight", f"blk.{l}.{gname}.weight", "T" if "." in h else None),
                      (f"h.{l}.{h}.bias", f"blk.{l}.{gname}.bias", None)]
assert len(pairs) == len(g), (len(pairs), len(g))
for key, gname, fix in pairs:
    x = hf(key)
    if fix == "T": x = x.T  # a Conv1D weight [in, out]
    elif isinstance(fix, int): x = permute(x, fix)
    assert x.shape == g[gname].shape and np.array_equal(x, g[gname]), (key, gname)
assert kv["general.architecture"] == arch and kv[arch + ".attention.head_count"] == heads
assert len(kv["tokenizer.ggml.tokens"]) == g["token_embd.weight"].shape[0]
print(f"{len(pairs)} tensors equal, {kv['general.file_type']=}")
PY
}

# each checkpoint: export, the reference reading, convert, export again, run
roundtrip() {
  local name=$1 st=$2 arch=$3 heads=$4 kv=$5
  shift 5
  expect_rc 0 "$name: export" -- "$y" export "$st" "$tmp/$name.gguf" --arch "$arch" --preset tiny
  expect_rc 0 "$name: the GGUF read by the spec equals the checkpoint" -- ref "$st" "$tmp/$name.gguf" "$arch" "$heads" "$kv"
  expect_rc 0 "$name: convert" -- "$y" convert "$tmp/$name.gguf" "$tmp/$name.safetensors"
  expect_in "run it with: ymlopt run workflows/models/$arch.xml --set weights=$tmp/$name.safetensors --set layers=2" \
    "convert says how to run it"
  expect_rc 0 "$name: export of the converted file" -- "$y" export "$tmp/$name.safetensors" "$tmp/$name.2.gguf"
  same_file "$name: export -> convert -> export gives the same GGUF" "$tmp/$name.gguf" "$tmp/$name.2.gguf"
  expect_rc 0 "$name: logits of the checkpoint" -- "$y" run "$@" --set weights="$st" -o "$tmp/$name.run1"
  expect_rc 0 "$name: logits of the converted file" -- "$y" run "$@" --set weights="$tmp/$name.safetensors" -o "$tmp/$name.run2"
  same_file "$name: the same logits" "$tmp/$name.run1/logits.npy" "$tmp/$name.run2/logits.npy"
  # the converted file alone: its tensors and the hyper-parameters convert recorded
  expect_rc 0 "$name: model info of the converted file" -- "$y" model info "$tmp/$name.safetensors"
  expect_in "heads $heads" "the heads from the GGUF"
  # the same run without the shapes: they come from the file
  local own=() skip=0 a
  for a in "$@"; do
    if [ $skip = 1 ]; then skip=0; [[ "$a" =~ ^(layers|width|heads|kv_heads|ffn|vocab|context)= ]] || own+=(--set "$a"); continue; fi
    if [ "$a" = --set ]; then skip=1; continue; fi
    own+=("$a")
  done
  expect_rc 0 "$name: --model on the converted file" -- "$y" run "${own[@]}" --model "$tmp/$name.safetensors" -o "$tmp/$name.run3"
  same_file "$name: --model gives the same logits" "$tmp/$name.run2/logits.npy" "$tmp/$name.run3/logits.npy"
}
roundtrip llama "$tmp/l.safetensors" llama 6 2 "${L[@]}"
roundtrip gpt2 "$tmp/g.safetensors" gpt2 3 3 "${G[@]}"
for s in q8_0 q4_0; do
  roundtrip "llama-$s" "$tmp/l-$s/llama.opt.safetensors" llama 6 2 "${L[@]}"
  roundtrip "gpt2-$s" "$tmp/g-$s/gpt2.opt.safetensors" gpt2 3 3 "${G[@]}"
done
expect_rc 0 "f16 export" -- "$y" export "$tmp/l.safetensors" "$tmp/l16.gguf" --arch llama --preset tiny --outtype f16
expect_in "(16 F16, 5 F32)" "matrices F16, norms F32"

# bad input: exit 1 naming the file; bad usage: exit 2
head -c 1000 "$tmp/llama.gguf" >"$tmp/cut.gguf"
expect_rc 1 "a truncated GGUF" -- "$y" convert "$tmp/cut.gguf" "$tmp/cut.safetensors"
expect_in "$tmp/cut.gguf: " "names the file"
expect_in "(truncated or corrupt)" "says it is cut short"
[ ! -e "$tmp/cut.safetensors" ] && echo "ok: nothing written" || { echo "FAIL: output of a failed convert"; fails=$((fails + 1)); }
# found by fuzz_gguf: block_count 1526726657 in a file of a few tensors (it hung listing their names)
expect_rc 1 "a GGUF lying about its layers" -- timeout 20 "$y" convert tests/fuzz/corpus_gguf/block-count-lie.gguf "$tmp/lie.safetensors"
expect_in "llama.block_count is 1526726657 but the file holds" "says the block count lies"
# found by fuzz_gguf: a zero-sized attn_k among well-formed tensors (it was converted)
expect_rc 1 "a GGUF tensor of the wrong shape" -- "$y" convert tests/fuzz/corpus_gguf/zero-sized-q8_0.gguf "$tmp/z.safetensors"
expect_in "tensor 'blk.0.attn_k.weight' is [1152921504606847008, 0] but the hyper-parameters" "names the tensor and both shapes"
expect_rc 0 "int8 per channel (not a llama.cpp format)" -- "$y" optimize "${L[@]:0:19}" --set weights="$tmp/l.safetensors" \
  --sequence workflows/sequences/int8.xml -o "$tmp/l-int8"
expect_rc 1 "export of per-channel int8" -- "$y" export "$tmp/l-int8/llama.opt.safetensors" "$tmp/i8.gguf" --heads 6
expect_in "not one of llama.cpp's block formats" "says why"
expect_rc 1 "export without the head count" -- "$y" export "$tmp/l.safetensors" "$tmp/nh.gguf"
expect_in "--heads N" "asks for it"
expect_rc 2 "export to another format" -- "$y" export "$tmp/l.safetensors" "$tmp/x.bin" --heads 6
expect_rc 2 "--outtype q2" -- "$y" export "$tmp/l.safetensors" "$tmp/x.gguf" --heads 6 --outtype q2
finish
