#!/usr/bin/env bash
# `ymlopt optimize`: every shipped sequence on tiny GPT-2 and LLaMA checkpoints
# with --eval; the compressed weights file runs the original workflow with the
# same outputs as the rewritten one; pass and sequence errors.
source "$(dirname "$0")/lib.sh"
y=$1
write_ids "$tmp/ids.npy" 64
"$y" model init --arch gpt2 --preset tiny --seed 3 "$tmp/g.safetensors" >/dev/null
"$y" model init --arch llama --preset tiny --seed 3 "$tmp/l.safetensors" >/dev/null
G=(workflows/models/gpt2.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=3 --set vocab=512 --set context=64 --set tile_n=32)
L=(workflows/models/llama.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512)

# value KEY... from a report.json
jq_() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); v=r
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v, list) else v[k]
print(v)" "$@"; }

for seq in workflows/sequences/*.xml; do
  name=$(basename "$seq" .xml)
  expect_rc 0 "gpt2 sequence $name" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --sequence "$seq" \
    --eval --reps 1 -o "$tmp/g-$name"
  [ -f "$tmp/g-$name/report.md" ] && [ -f "$tmp/g-$name/gpt2.opt.xml" ] || { echo "FAIL: $name outputs"; fails=$((fails + 1)); }
done
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
t = sys.argv[1]
def rep(n): return json.load(open(f"{t}/g-{n}/report.json"))
def err(n): return rep(n)["quality"]["logits.npy:logits"]["relative_error"]
def ratio(n):
    r = rep(n)["weight_bytes"]; return r["optimized"] / r["original"]
from checks import check, done
check(err("int8") < 0.05 and err("q8_0") < 0.05, f"int8 / q8_0 errors small ({err('int8'):.4f}, {err('q8_0'):.4f})")
check(ratio("int8") < 0.45 and ratio("q4_0") < 0.35, f"weight bytes int8 {ratio('int8'):.3f}x, q4_0 {ratio('q4_0'):.3f}x")
check(err("q4_0") < 0.25, f"q4_0 error {err('q4_0'):.4f}")
check(err("bf16") < 0.01 and err("bf16") < err("int8"), f"bf16 error {err('bf16'):.4f} (int8 {err('int8'):.4f})")
check(0.49 < ratio("bf16") < 0.55, f"weight bytes bf16 {ratio('bf16'):.3f}x (wpe, norms and biases kept f32)")
b = rep("bf16")["pass_log"][0]
heads = b["tied_linear_readers"].get("wte.weight", [])
check(b["tables"] == ["wte.weight"] and heads and all(h.startswith("lm_head(") for h in heads),
      f"bf16 tables {b['tables']}, the tied lm_head tiles read the same table ({heads})")
check(err("obs50") < err("magnitude50"), f"OBS 50% ({err('obs50'):.3f}) beats magnitude 50% ({err('magnitude50'):.3f})")
check(abs(err("nm24") - json.load(open(f"{t}/g-nm24/report.json"))["quality"]["logits.npy:logits"]["relative_error"]) == 0, "nm24")
check(abs(err("nm24") - err("nm24-int8")) < 0.02, "2:4 packed and 2:4 then int8 agree")
log = rep("nm24")["pass_log"]
check(abs(log[0]["sparsity"] - 0.5) < 1e-9 and log[1]["layers"] == log[0]["layers"], "2:4: half the weights, every pruned layer packed")
check(err("obs50-distill-int8") < err("obs50"), f"refit after OBS lowers the error ({err('obs50-distill-int8'):.3f})")
done()
PY

# calibration over several runs (one per line): the layer inputs are stacked
write_ids "$tmp/ids2.npy" 64
printf 'ids=%s\n\nids=%s\n' "$tmp/ids2.npy" "$tmp/ids.npy" > "$tmp/calib.txt"
expect_rc 0 "OBS with two calibration runs" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes prune.obs \
  --calib-sets "$tmp/calib.txt" --eval --reps 1 -o "$tmp/obs2"
python3 -c "
import json,sys; c=json.load(open('$tmp/obs2/report.json'))['calibration']
print(c); sys.exit(0 if c['runs'] == 2 and c['max_rows'] == 128 else 1)" || { echo "FAIL: calibration runs"; fails=$((fails + 1)); }
# prune.obs:correct=true: each layer pruned on the inputs the pruned layers before it produce,
# after a refit to the original outputs: lower logits error at the same sparsity
expect_rc 0 "OBS correct=true" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" \
  --passes prune.obs:correct=true --calib-sets "$tmp/calib.txt" --eval --reps 1 -o "$tmp/obs2c"
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
t = sys.argv[1]
from checks import check, done
def rep(n): return json.load(open(f"{t}/{n}/report.json"))
def err(n): return rep(n)["quality"]["logits.npy:logits"]["relative_error"]
a, b = rep("obs2")["pass_log"][0], rep("obs2c")["pass_log"][0]
check(err("obs2c") < err("obs2"), f"OBS correct=true logits error {err('obs2c'):.4f} < plain OBS {err('obs2'):.4f}")
check(abs(a["sparsity"] - b["sparsity"]) < 1e-9 and b["input_shift"] > 0,
      f"same sparsity {b['sparsity']:.4f}, input_shift {b['input_shift']:.4f}")
done()
PY
printf '\n' > "$tmp/empty.txt"
expect_rc 2 "empty calibration list" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes prune.obs --calib-sets "$tmp/empty.txt"
expect_in "lists no run" "message"

# low rank changes the graph; the refit of the factor pair lowers the error
expect_rc 0 "low rank r=24" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes prune.lowrank:rank=24 --eval --reps 1 -o "$tmp/lr"
expect_rc 0 "low rank + refit" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes prune.lowrank:rank=24,distill.layerwise --eval --reps 1 -o "$tmp/lrd"
python3 -c "
import json,sys
a=json.load(open('$tmp/lr/report.json'))['quality']['logits.npy:logits']['relative_error']
b=json.load(open('$tmp/lrd/report.json'))['quality']['logits.npy:logits']['relative_error']
print('low rank error', a, 'refit', b); sys.exit(0 if b < 0.8 * a else 1)" || { echo "FAIL: low-rank refit"; fails=$((fails + 1)); }

# the weights file runs the original workflow: same logits as the rewritten one (GPT-2 [k,n], LLaMA [n,k] layouts)
for m in g:G:gpt2:quant.int8 g:G:gpt2:prune.nm,sparse.nm24 l:L:llama:quant.bf16 l:L:llama:quant.group:bits=4:group=32:symmetric=false l:L:llama:prune.magnitude:sparsity=0.5; do
  IFS=: read -r f arr model passes <<<"$m"
  passes=${m#*:*:*:}
  declare -n A=$arr
  expect_rc 0 "$model $passes" -- "$y" optimize "${A[@]}" --set weights="$tmp/$f.safetensors" --passes "$passes" -o "$tmp/s"
  expect_rc 0 "$model rewritten workflow runs" -- "$y" run "$tmp/s/$model.opt.xml" -q --backend sequential -o "$tmp/s/flat"
  expect_rc 0 "$model original workflow on the compressed file" -- "$y" run "${A[@]}" --set weights="$tmp/s/$model.opt.safetensors" \
    -q -o "$tmp/s/sub"
  same_file "$model $passes: same logits" "$tmp/s/flat/logits.npy" "$tmp/s/sub/logits.npy"
  unset -n A
done

# graph rewrites: a dead task removed, then the activation folded into the linear; same output
cat > "$tmp/fz.xml" <<'X'
<workflow name="fz">
  <data name="x" shape="8,16" init="random" seed="1"/>
  <data name="w" shape="16,32" init="random" seed="2"/>
  <data name="b" shape="32" init="random" seed="3"/>
  <data name="y" shape="8,32"/>
  <data name="z" shape="8,32"/>
  <data name="dead" shape="8,32"/>
  <task component="nn.linear" name="fc"><in port="x" data="x"/><in port="w" data="w"/><in port="b" data="b"/><out port="y" data="y"/></task>
  <task component="tensor.copy" name="unused"><in port="x" data="y"/><out port="y" data="dead"/></task>
  <task component="nn.gelu" name="act"><in port="x" data="y"/><out port="y" data="z"/><arg name="approximate" value="none"/></task>
  <save data="z" to="z.npy"/>
</workflow>
X
expect_rc 0 "fuse.activation blocked, dce, fuse.activation" -- "$y" optimize "$tmp/fz.xml" --passes fuse.activation,dce,fuse.activation --eval --reps 1 -o "$tmp/fz"
python3 - "$tmp/fz" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
log = [(p["pass"], p.get("fused", p.get("removed"))) for p in r["pass_log"]]
assert log == [("fuse.activation", 0), ("dce", 1), ("fuse.activation", 1)], log
assert r["quality"]["z.npy:z"]["relative_error"] < 1e-6, r["quality"]
x = open(sys.argv[1] + "/fz.opt.xml").read()
assert x.count("<task") == 2 and 'value="gelu"' in x, x
print("ok: dce + fuse.activation: 2 tasks, same output")
PY

# LayerNorm affine folded into the linear layers reading it (random scale and shift, a tiled and an untiled reader)
cat > "$tmp/mk.xml" <<X
<workflow name="mk">
  <data name="g" shape="32" init="random" seed="4"/><data name="b" shape="32" init="random" seed="5"/>
  <data name="w1" shape="32,48" init="random" seed="6"/><data name="b1" shape="48" init="random" seed="7"/>
  <data name="w2" shape="24,32" init="random" seed="8"/>
  <save data="g" to="$tmp/ln_g.npy"/><save data="b" to="$tmp/ln_b.npy"/>
  <save data="w1" to="$tmp/ln_w1.npy"/><save data="b1" to="$tmp/ln_b1.npy"/>
  <save data="w2" to="$tmp/ln_w2.npy"/>
</workflow>
X
expect_rc 0 "parameters for the LayerNorm case" -- "$y" run "$tmp/mk.xml" -q --backend sequential -o "$tmp/mk"
cat > "$tmp/lnf.xml" <<X
<workflow name="lnf">
  <data name="x" shape="8,32" init="random" seed="1"/>
  <data name="g" shape="32" src="$tmp/ln_g.npy"/><data name="b" shape="32" src="$tmp/ln_b.npy"/>
  <data name="w1" shape="32,48" tile="32,16" src="$tmp/ln_w1.npy"/>
  <data name="b1" shape="48" tile="16" src="$tmp/ln_b1.npy"/>
  <data name="w2" shape="24,32" src="$tmp/ln_w2.npy"/>
  <data name="h" shape="8,32"/><data name="y1" shape="8,48" tile="8,16"/><data name="y2" shape="8,24"/>
  <task component="nn.layernorm" name="ln"><in port="x" data="x"/><in port="gamma" data="g"/><in port="beta" data="b"/><out port="y" data="h"/></task>
  <par var="j" from="0" to="3">
    <task component="nn.linear" name="fc1(\${j})"><in port="x" data="h"/><in port="w" data="w1[0,\${j}]"/><in port="b" data="b1[\${j}]"/><out port="y" data="y1[0,\${j}]"/></task>
  </par>
  <task component="nn.linear" name="fc2"><in port="x" data="h"/><in port="w" data="w2"/><out port="y" data="y2"/><arg name="transpose_w" value="true"/></task>
  <save data="y1" to="y1.npy"/><save data="y2" to="y2.npy"/>
</workflow>
X
expect_rc 0 "fuse.ln_affine" -- "$y" optimize "$tmp/lnf.xml" --passes fuse.ln_affine --eval --reps 1 -o "$tmp/lnf"
python3 - "$tmp/lnf" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
assert r["pass_log"][0]["folded"] == 1 and r["pass_log"][0]["layers"] == 2, r["pass_log"]
for k in ("y1.npy:y1", "y2.npy:y2"):
    e = r["quality"][k]["relative_error"]
    assert 0 < e < 1e-5, (k, e)  # changed weights, same outputs within f32 rounding
x = open(sys.argv[1] + "/lnf.opt.xml").read()
assert 'port="gamma"' not in x and 'port="beta"' not in x, "the LayerNorm keeps no affine"
print("ok: LayerNorm affine folded into 2 linear layers (one tiled), outputs within 1e-5")
PY

# usage errors (exit 2)
expect_rc 2 "unknown pass" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes quant.int9
expect_in "unknown pass 'quant.int9' (did you mean 'quant.int8'?)" "closest pass"
expect_rc 2 "unknown option" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes quant.group:bitz=4
expect_in "pass quant.group has no option 'bitz' (did you mean 'bits'?)" "closest option"
expect_rc 2 "no passes" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors"
expect_in "give exactly one of --passes and --sequence" "message"
expect_rc 0 "list passes" -- "$y" optimize --list-passes
expect_in "prune.obs" "lists prune.obs"

# a bad sequence file: compiler-format errors, exit 1
cat > "$tmp/bad.xml" <<'X'
<sequence name="bad">
  <pas name="quant.int8"/>
  <pass name="quant.group" bitz="4"/>
  <pass name="prune.nmm"/>
</sequence>
X
expect_rc 1 "bad sequence" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --sequence "$tmp/bad.xml"
expect_in "$tmp/bad.xml:2:3: error: unknown element <pas> in <sequence> (did you mean 'pass'?)" "element"
expect_in "$tmp/bad.xml:3:28: error: pass quant.group has no option 'bitz' (did you mean 'bits'?)" "option, at the attribute"
expect_in "$tmp/bad.xml:4:9: error: unknown pass 'prune.nmm' (did you mean 'prune.nm'?)" "pass name"

# a compressed weight read by another component, or declared with another shape
expect_rc 0 "int8 file" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" --passes quant.int8 -o "$tmp/q"
cat > "$tmp/misuse.xml" <<X
<workflow name="misuse">
  <data name="w" shape="96,384" src="$tmp/q/gpt2.opt.safetensors" key="h.0.mlp.c_fc.weight"/>
  <data name="v" shape="384,96" src="$tmp/q/gpt2.opt.safetensors" key="h.0.mlp.c_fc.weight"/>
  <data name="y" shape="96,384"/>
  <task component="tensor.add"><in port="a" data="w"/><in port="b" data="w"/><out port="c" data="y"/></task>
</workflow>
X
expect_rc 1 "compressed weight misuse" -- "$y" check "$tmp/misuse.xml"
expect_in "misuse.xml:3:33: error: 'h.0.mlp.c_fc.weight' in $tmp/q/gpt2.opt.safetensors (stored int8) is a [96,384] weight but data 'v' is declared [384,96]" "shape"
expect_in "misuse.xml:5:3: error: task 'tensor.add': 'w' is stored compressed (int8) in $tmp/q/gpt2.opt.safetensors: only nn.linear's port 'w' can read it" "reader"
finish
