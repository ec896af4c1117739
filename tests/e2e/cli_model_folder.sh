#!/usr/bin/env bash
# Hugging Face model folders: `ymlopt model info PATH` and `ymlopt run WF --model PATH`.
# The folders are built here from `ymlopt model init` checkpoints the way the hub
# ships them (config.json with HF names, tensor names under a prefix, shards with
# model.safetensors.index.json); --model must give the same logits as the
# parameters typed out with --set, and every bad folder a clear error.
source "$(dirname "$0")/lib.sh"
y=$1
wf=workflows/models

# same_logits WHAT FILE DIR_A DIR_B
same_logits() { same_file "$1" "$3/$2" "$4/$2"; }

for arch in gpt2 bert llama; do
  "$y" model init --arch $arch --preset tiny --seed 3 "$tmp/$arch.safetensors" >/dev/null
done
write_ids "$tmp/ids.npy" 16
gpt2_cfg='{"model_type": "gpt2", "n_layer": 2, "n_embd": 96, "n_head": 3, "n_inner": null, "vocab_size": 512,
  "n_positions": 64, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"]}'
bert_cfg='{"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 6,
  "intermediate_size": 200, "vocab_size": 512, "max_position_embeddings": 64, "type_vocab_size": 2,
  "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute"}'
llama_cfg='{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 6,
  "num_key_value_heads": 2, "intermediate_size": 160, "vocab_size": 512, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false, "rope_scaling": null}'
hf "$tmp/gpt2.safetensors" "$tmp/gpt2" transformer. 3 "$gpt2_cfg"
hf "$tmp/bert.safetensors" "$tmp/bert" bert. 2 "$bert_cfg"
hf "$tmp/llama.safetensors" "$tmp/llama" "" 1 "$llama_cfg"
run=(--set ids="$tmp/ids.npy" --set seq=16 -q --backend sequential)

# model info
expect_rc 0 "info: sharded gpt2 folder" -- "$y" model info "$tmp/gpt2"
expect_in "gpt2 checkpoint ($tmp/gpt2/config.json, model_type 'gpt2')" "architecture from config.json"
expect_in "(3 shards), tensor names under 'transformer.'" "shards and prefix"
expect_in "layers 2, width 96, heads 3, ffn 384, vocab 512, context 64, eps 1e-05, embeddings tied" "shapes"
expect_in "28 tensors, 279168 parameters; F32 1116672 bytes" "counts and bytes by dtype"
expect_rc 0 "info: llama folder" -- "$y" model info "$tmp/llama"
expect_in "heads 6 (2 kv), ffn 160" "grouped-query heads"
expect_in "lm_head_key=lm_head.weight" "untied LM head"
expect_rc 0 "info: a lone safetensors file" -- "$y" model info "$tmp/gpt2.safetensors"
expect_in "no config.json: shapes from the tensors" "source of the shapes"
expect_in "undetermined (no config.json gives them, no tensor shape fixes them): heads" "what is missing"

# --model gives what --set gives
for arch in gpt2 bert llama; do
  out_file=logits.npy
  [ $arch = bert ] && out_file=hidden.npy
  expect_rc 0 "$arch: run --model" -- "$y" run $wf/$arch.xml --model "$tmp/$arch" "${run[@]}" -o "$tmp/m_$arch"
done
expect_rc 0 "gpt2: run with the shapes typed out" -- "$y" run $wf/gpt2.xml "${run[@]}" -o "$tmp/s_gpt2" \
  --set weights="$tmp/gpt2.safetensors" --set layers=2 --set width=96 --set heads=3 --set ffn=384 --set vocab=512 --set context=64
same_logits "gpt2: --model (3 shards, prefix) = --set" logits.npy "$tmp/m_gpt2" "$tmp/s_gpt2"
expect_rc 0 "bert: run with the shapes typed out" -- "$y" run $wf/bert.xml "${run[@]}" -o "$tmp/s_bert" \
  --set weights="$tmp/bert.safetensors" --set layers=2 --set width=96 --set heads=6 --set ffn=200 --set vocab=512 --set context=64
same_logits "bert: --model (2 shards, prefix) = --set" hidden.npy "$tmp/m_bert" "$tmp/s_bert"
expect_rc 0 "llama: run with the shapes typed out" -- "$y" run $wf/llama.xml "${run[@]}" -o "$tmp/s_llama" \
  --set weights="$tmp/llama.safetensors" --set layers=2 --set width=96 --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512
same_logits "llama: --model = --set" logits.npy "$tmp/m_llama" "$tmp/s_llama"
# a shard index is a src= of its own, without --model
expect_rc 0 "gpt2: weights= a shard index" -- "$y" run $wf/gpt2.xml "${run[@]}" -o "$tmp/i_gpt2" \
  --set weights="$tmp/gpt2/model.safetensors.index.json" --set prefix=transformer. --set layers=2 --set width=96 \
  --set heads=3 --set ffn=384 --set vocab=512 --set context=64
same_logits "gpt2: weights=INDEX = the single file" logits.npy "$tmp/i_gpt2" "$tmp/s_gpt2"
# --set overrides --model
expect_rc 0 "gpt2: --model with --set layers=1" -- "$y" run $wf/gpt2.xml --model "$tmp/gpt2" --set layers=1 "${run[@]}" -o "$tmp/m1"
expect_rc 0 "gpt2: one layer typed out" -- "$y" run $wf/gpt2.xml "${run[@]}" -o "$tmp/s1" \
  --set weights="$tmp/gpt2.safetensors" --set layers=1 --set width=96 --set heads=3 --set ffn=384 --set vocab=512 --set context=64
same_logits "gpt2: --set layers=1 wins over config.json" logits.npy "$tmp/m1" "$tmp/s1"
# tied embeddings: no lm_head.weight, the LM head reads the embedding table
python3 - "$tmp/llama.safetensors" "$tmp/llama_eq.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); d = bytearray(b[8 + n:])
e, l = h["model.embed_tokens.weight"]["data_offsets"], h["lm_head.weight"]["data_offsets"]
d[l[0]:l[1]] = d[e[0]:e[1]]
open(sys.argv[2], "wb").write(b[:8 + n] + bytes(d))
PY
hf "$tmp/llama.safetensors" "$tmp/llama_tied" "" 1 "${llama_cfg/\"tie_word_embeddings\": false/\"tie_word_embeddings\": true}" lm_head.weight
hf "$tmp/llama_eq.safetensors" "$tmp/llama_eq" "" 1 "$llama_cfg"
expect_rc 0 "llama tied: info" -- "$y" model info "$tmp/llama_tied"
expect_in "lm_head_key=model.embed_tokens.weight" "the LM head reads the embedding table"
expect_rc 0 "llama tied: run" -- "$y" run $wf/llama.xml --model "$tmp/llama_tied" "${run[@]}" -o "$tmp/t1"
expect_rc 0 "llama untied, lm_head = embeddings: run" -- "$y" run $wf/llama.xml --model "$tmp/llama_eq" "${run[@]}" -o "$tmp/t2"
same_logits "llama: tied embeddings = an LM head equal to them" logits.npy "$tmp/t1" "$tmp/t2"
# --prompt: the folder's tokenizer.json makes the ids (a byte-level BPE of the fuzz seeds)
cp tests/fuzz/corpus_tokenizer/seed_bytelevel_bpe.json "$tmp/llama/tokenizer.json"
expect_rc 0 "llama: tokenize with the folder's tokenizer" -- "$y" tokenize --model "$tmp/llama" --special "hello there, the world"
python3 - "$tmp/prompt_ids.npy" "$out" <<'PY'
import json, struct, sys
ids = json.loads(sys.argv[2])
hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % len(ids)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<%di" % len(ids), *ids))
PY
n=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$out")
expect_rc 0 "llama: run --prompt" -- "$y" run $wf/llama.xml --model "$tmp/llama" --prompt "hello there, the world" \
  -q --backend sequential -o "$tmp/p1"
expect_rc 0 "llama: the same ids given as a file" -- "$y" run $wf/llama.xml --model "$tmp/llama" \
  --set ids="$tmp/prompt_ids.npy" --set seq="$n" -q --backend sequential -o "$tmp/p2"
same_logits "llama: --prompt = its ids" logits.npy "$tmp/p1" "$tmp/p2"
# the run record keeps --model and --prompt: --resume runs the same model on the same ids
expect_rc 0 "llama: checkpointed run with --model and --prompt" -- "$y" run $wf/llama.xml --model "$tmp/llama" \
  --prompt "hello there, the world" -q --backend sequential --checkpoint tasks -o "$tmp/p3"
expect_rc 0 "llama: --resume" -- "$y" run --resume "$tmp/p3" -q --backend sequential
same_logits "llama: the resumed run's logits" logits.npy "$tmp/p1" "$tmp/p3"
expect_rc 2 "--prompt without --model" -- "$y" run $wf/llama.xml --prompt hi -q -o "$tmp/x"
expect_in "--prompt needs --model DIR" "message"
expect_rc 2 "--prompt with --set seq" -- "$y" run $wf/llama.xml --model "$tmp/llama" --prompt hi --set seq=4 -q -o "$tmp/x"
expect_in "--prompt sets ids, seq and batch: drop --set seq=4" "message"
expect_rc 1 "--prompt without a tokenizer.json" -- "$y" run $wf/bert.xml --model "$tmp/bert" --prompt hi -q -o "$tmp/x"
expect_in "$tmp/bert/tokenizer.json: cannot open" "message"
cp tests/fuzz/corpus_tokenizer/seed_bytelevel_bpe.json "$tmp/gpt2/tokenizer.json"
expect_rc 1 "a prompt longer than the context" -- "$y" run $wf/gpt2.xml --model "$tmp/gpt2" --prompt "$(printf 'x %.0s' $(seq 70))" -q -o "$tmp/x"
expect_in "tokens, longer than the model's context of 64" "message"

# shapes from the tensors alone: heads must be given
expect_rc 2 "lone file: heads undetermined" -- "$y" run $wf/gpt2.xml --model "$tmp/gpt2.safetensors" "${run[@]}" -o "$tmp/x"
expect_in "the checkpoint does not determine parameter 'heads'" "message"
expect_in "use --set heads=VALUE" "what to do"
expect_rc 0 "lone file with --set heads" -- "$y" run $wf/gpt2.xml --model "$tmp/gpt2.safetensors" --set heads=3 "${run[@]}" -o "$tmp/lone"
same_logits "gpt2: shapes from the tensors + heads = --set" logits.npy "$tmp/lone" "$tmp/s_gpt2"

# a bf16 folder: refused by the f32 workflows with the command that widens it; `convert` widens it
"$y" model init --arch llama --preset tiny --seed 5 --dtype bf16 "$tmp/l16.safetensors" >/dev/null
hf "$tmp/l16.safetensors" "$tmp/llama16" "" 2 "$llama_cfg"
echo '{"model": {"type": "BPE", "vocab": {}, "merges": []}}' >"$tmp/llama16/tokenizer.json"
expect_rc 1 "bf16 folder to the f32 workflow" -- "$y" run $wf/llama.xml --model "$tmp/llama16" "${run[@]}" -o "$tmp/x"
expect_in "holds bf16 weights and $wf/llama.xml computes in f32: widen them once with \`ymlopt convert $tmp/llama16 $tmp/llama16-f32\`" "message"
expect_rc 0 "info names the tokenizer" -- "$y" model info "$tmp/llama16"
expect_in "tokenizer: $tmp/llama16/tokenizer.json (ymlopt tokenize --model $tmp/llama16)" "message"
expect_rc 1 "tokenize --model: a tokenizer that encodes nothing it does not know" -- "$y" tokenize --model "$tmp/llama16" hi
expect_in "token 'h' is not in the vocabulary and the model has no unk_token" "message"
expect_rc 2 "tokenize with both --model and --tokenizer" -- "$y" tokenize --model "$tmp/llama16" --tokenizer x.json hi
expect_rc 0 "convert a bf16 folder" -- "$y" convert "$tmp/llama16" "$tmp/llama16-f32"
expect_in "run it with: ymlopt run workflows/models/llama.xml --model $tmp/llama16-f32" "next step"
[ -f "$tmp/llama16-f32/config.json" ] && [ -f "$tmp/llama16-f32/tokenizer.json" ] || { echo "FAIL: config and tokenizer not copied"; fails=$((fails + 1)); }
expect_rc 0 "run the widened folder" -- "$y" run $wf/llama.xml --model "$tmp/llama16-f32" "${run[@]}" -o "$tmp/w1"
python3 - "$tmp/l16.safetensors" "$tmp/l32.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); h.pop("__metadata__", None); d = b[8 + n:]
out, chunks, off = {}, [], 0
for k, v in h.items():
    raw = d[v["data_offsets"][0]:v["data_offsets"][1]]
    assert v["dtype"] == "BF16"
    wide = b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))  # bf16 -> f32: the high half
    out[k] = {"dtype": "F32", "shape": v["shape"], "data_offsets": [off, off + len(wide)]}
    off += len(wide); chunks.append(wide)
hj = json.dumps(out).encode(); hj += b" " * (-len(hj) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(chunks))
PY
expect_rc 0 "the same weights widened by Python" -- "$y" run $wf/llama.xml "${run[@]}" -o "$tmp/w2" \
  --set weights="$tmp/l32.safetensors" --set layers=2 --set width=96 --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512
same_logits "llama: convert's f32 = bf16 widened independently" logits.npy "$tmp/w1" "$tmp/w2"

# bad folders
mkdir -p "$tmp/empty" && touch "$tmp/empty/pytorch_model.bin"
expect_rc 1 "no weights" -- "$y" model info "$tmp/empty"
expect_in "no weights: expected model.safetensors, or shards and model.safetensors.index.json (pytorch_model.bin is not read" "message"
expect_rc 1 "no weights (--model)" -- "$y" run $wf/gpt2.xml --model "$tmp/empty" "${run[@]}" -o "$tmp/x"
expect_in "ymlopt: error: --model: $tmp/empty: no weights" "message"
hf "$tmp/gpt2.safetensors" "$tmp/badjson" "" 1 $'{\n  "model_type": "gpt2",\n  "n_layer": 2,,\n}'
expect_rc 1 "config.json not JSON" -- "$y" model info "$tmp/badjson"
expect_in "$tmp/badjson/config.json: line 3, column 16: not valid JSON" "file, line and column"
hf "$tmp/gpt2.safetensors" "$tmp/contra" "" 1 "${gpt2_cfg/\"n_inner\": null/\"n_inner\": 400}"
expect_rc 1 "config contradicts the tensors" -- "$y" model info "$tmp/contra"
expect_in "'h.0.mlp.c_fc.weight' is [96, 384] but $tmp/contra/config.json gives [96, 400]" "names both"
hf "$tmp/gpt2.safetensors" "$tmp/layers3" "" 2 "${gpt2_cfg/\"n_layer\": 2/\"n_layer\": 3}"
expect_rc 1 "config has more layers than the weights" -- "$y" model info "$tmp/layers3"
expect_in "no tensor 'h.2.ln_1.weight': $tmp/layers3/config.json gives 3 layers" "message"
hf "$tmp/llama.safetensors" "$tmp/scaled" "" 1 "${llama_cfg/\"rope_scaling\": null/\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0\}}"
expect_rc 1 "rope_scaling" -- "$y" model info "$tmp/scaled"
expect_in "'rope_scaling' is" "message"
expect_in "the llama workflow computes plain RoPE, without scaling" "why"
hf "$tmp/llama.safetensors" "$tmp/windowed" "" 1 "${llama_cfg/\"rope_scaling\": null/\"sliding_window\": 4096}"
expect_rc 0 "a sliding window (Mistral's)" -- "$y" model info "$tmp/windowed"
expect_in ", sliding window 4096" "the window"
# a workflow without the window would compute another model: an error, not a warning
python3 - $wf/llama.xml "$tmp/llama_nowindow.xml" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'\s*<param name="window"[^>]*/>', "", s, flags=re.S).replace('<arg name="window" value="${window}"/>', "")
assert "window" not in s
open(sys.argv[2], "w").write(s)
PY
expect_rc 1 "a windowed folder on a workflow without a window" -- \
  "$y" run "$tmp/llama_nowindow.xml" --model "$tmp/windowed" "${run[@]}" -o "$tmp/x"
expect_in "--model $tmp/windowed gives window=4096 but the workflow has no parameter 'window': it is the model's sliding window" "message"
expect_rc 0 "the windowed folder on llama.xml" -- "$y" run $wf/llama.xml --model "$tmp/windowed" "${run[@]}" -o "$tmp/x"
hf "$tmp/llama.safetensors" "$tmp/unwindowed" "" 1 "${llama_cfg/\"rope_scaling\": null/\"sliding_window\": 4096, \"use_sliding_window\": false}"
expect_rc 0 "a sliding window not used" -- "$y" model info "$tmp/unwindowed"
grep -qF "sliding window" <<<"$out" && { echo "FAIL: use_sliding_window false still gives a window"; fails=$((fails + 1)); }
hf "$tmp/llama.safetensors" "$tmp/badwindow" "" 1 "${llama_cfg/\"rope_scaling\": null/\"sliding_window\": -3}"
expect_rc 1 "a negative sliding window" -- "$y" model info "$tmp/badwindow"
expect_in "'sliding_window' is -3, not a positive integer" "message"
hf "$tmp/llama.safetensors" "$tmp/typo" "" 1 '{"model_type": "lama"}'
expect_rc 1 "unknown model_type" -- "$y" model info "$tmp/typo"
expect_in "model_type 'lama': the model workflows compute gpt2, bert and llama (and mistral) (did you mean 'llama'?)" "message"
expect_rc 1 "a gpt2 folder to the llama workflow" -- "$y" run $wf/llama.xml --model "$tmp/gpt2" "${run[@]}" -o "$tmp/x"
expect_in "is a gpt2 checkpoint but $wf/llama.xml computes llama: use $wf/gpt2.xml" "message"
cp -r "$tmp/bert" "$tmp/noshard" && rm "$tmp/noshard/model-00002-of-00002.safetensors"
expect_rc 1 "a missing shard" -- "$y" model info "$tmp/noshard"
expect_in "$tmp/noshard/model-00002-of-00002.safetensors: cannot open" "message"
cp -r "$tmp/bert" "$tmp/lying" && sed -i 's/"bert.pooler.dense.bias": "model-00002/"bert.pooler.dense.bias": "model-00001/' "$tmp/lying/model.safetensors.index.json"
expect_rc 1 "an index naming the wrong shard" -- "$y" model info "$tmp/lying"
expect_in "maps 'bert.pooler.dense.bias' to $tmp/lying/model-00001-of-00002.safetensors, which has no such tensor" "message"
cp -r "$tmp/bert" "$tmp/escape" && sed -i 's#"bert.pooler.dense.bias": "model-00002-of-00002.safetensors"#"bert.pooler.dense.bias": "../x.safetensors"#' "$tmp/escape/model.safetensors.index.json"
expect_rc 1 "an index leaving its folder" -- "$y" model info "$tmp/escape"
expect_in "maps to '../x.safetensors', which is not a file in the index's folder" "message"
expect_rc 1 "a key the index does not map" -- "$y" run $wf/bert.xml "${run[@]}" -o "$tmp/x" \
  --set weights="$tmp/bert/model.safetensors.index.json" --set layers=2 --set width=96 --set heads=6 --set ffn=200 \
  --set vocab=512 --set context=64
expect_in "model.safetensors.index.json maps no tensor 'embeddings.word_embeddings.weight' (did you mean 'bert.embeddings.word_embeddings.weight'?)" "message with a suggestion"
expect_rc 2 "--model without a value" -- "$y" run $wf/gpt2.xml --model
finish
