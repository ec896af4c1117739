#!/usr/bin/env bash
# `ymlopt optimize` graph rewrites: fuse.merge (q/k/v and gate/up projections of
# one input become one GEMM writing a split= tensor) on tiny GPT-2, BERT and
# LLaMA (grouped-query attention), fuse.compose on two linears with no
# activation between; the rewritten models give the original outputs, on both
# backends.
source "$(dirname "$0")/lib.sh"
y=$1
py=python3
write_ids "$tmp/ids.npy" 64
for a in gpt2 bert llama; do "$y" model init --arch $a --preset tiny --seed 5 "$tmp/$a.safetensors" >/dev/null; done
G=(workflows/models/gpt2.xml --set weights="$tmp/gpt2.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=32
   --set layers=2 --set width=96 --set heads=3 --set vocab=512 --set context=64 --set tile_n=32)
B=(workflows/models/bert.xml --set weights="$tmp/bert.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=32
   --set layers=2 --set width=96 --set heads=6 --set ffn=200 --set vocab=512 --set context=64 --set tile_n=48)
L=(workflows/models/llama.xml --set weights="$tmp/llama.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=32
   --set layers=2 --set width=96 --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512 --set tile_n=80)

# model:array:expected groups:expected merged tasks
for m in gpt2:G:6:18 bert:B:6:18 llama:L:8:20; do
  IFS=: read -r model arr groups tasks <<<"$m"
  declare -n A=$arr
  expect_rc 0 "$model fuse.merge" -- "$y" optimize "${A[@]}" --passes fuse.merge --eval --reps 1 -o "$tmp/$model"
  $py - "$tmp/$model" "$groups" "$tasks" <<'PY' || fails=$((fails + 1))
import json, sys
d, groups, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(d + "/report.json"))
log = r["pass_log"][0]
assert (log["groups"], log["tasks_merged"]) == (groups, tasks), log
(out, q), = r["quality"].items()
assert q["relative_error"] < 1e-6, q  # one GEMM over stacked weights: the same outputs
print(f"ok: {d.rsplit('/', 1)[1]}: {groups} groups, {tasks} linear tasks merged, relative error {q['relative_error']:.2g}")
PY
  unset -n A
done
grep -q 'split="48,16,16"' "$tmp/llama/llama.opt.xml" && grep -q 'split="80,80"' "$tmp/llama/llama.opt.xml" ||
  { echo "FAIL: llama q/k/v (GQA widths 48,16,16) and gate/up (80,80) merged tensors"; fails=$((fails + 1)); }
# the split= tensors run on StarPU (partition plan with uneven column tiles) as on the reference backend
for b in starpu sequential; do
  expect_rc 0 "merged llama on $b" -- "$y" run "$tmp/llama/llama.opt.xml" --backend $b -q -o "$tmp/run-$b"
done
cmp -s "$tmp/run-starpu/logits.npy" "$tmp/run-sequential/logits.npy" && echo "ok: same logits on both backends" ||
  { echo "FAIL: merged llama: backends differ"; fails=$((fails + 1)); }
# merged weights are ordinary weights for the compression passes: int8 after merging = int8 alone
expect_rc 0 "llama merge then int8" -- "$y" optimize "${L[@]}" --passes fuse.merge,quant.int8 --eval --reps 1 -o "$tmp/mq"
expect_rc 0 "llama int8" -- "$y" optimize "${L[@]}" --passes quant.int8 --eval --reps 1 -o "$tmp/q"
$py - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
t = sys.argv[1]
a, b = (json.load(open(f"{t}/{n}/report.json")) for n in ("mq", "q"))
ea, eb = (r["quality"]["logits.npy:logits"]["relative_error"] for r in (a, b))
assert abs(ea - eb) < 1e-6, (ea, eb)  # per-channel scales: the same rows, the same codes
assert len(a["pass_log"][1]["formats"]) == 2 * (2 + 2 + 1 + 1) + 1, a["pass_log"][1]  # per layer 2 qkv, 2 gate/up, o, down; head
assert abs(a["weight_bytes"]["optimized"] - b["weight_bytes"]["optimized"]) < 0.01 * b["weight_bytes"]["optimized"]
print(f"ok: merged then int8 = int8 alone (relative error {ea:.4g})")
PY

# fuse.compose: 32 -> 128 (4 tiles, bias) -> 32 (bias, gelu) composes into one 32x32 layer;
# 64 -> 8 -> 64 (a low-rank pair) would cost more and stays.
cat > "$tmp/mk.xml" <<X
<workflow name="mk">
  <data name="w1" shape="128,32" init="random" seed="1"/><data name="b1" shape="128" init="random" seed="2"/>
  <data name="w2" shape="32,128" init="random" seed="3"/><data name="b2" shape="32" init="random" seed="4"/>
  <data name="w3" shape="8,64" init="random" seed="5"/><data name="w4" shape="64,8" init="random" seed="6"/>
  <save data="w1" to="$tmp/w1.npy"/><save data="b1" to="$tmp/b1.npy"/><save data="w2" to="$tmp/w2.npy"/>
  <save data="b2" to="$tmp/b2.npy"/><save data="w3" to="$tmp/w3.npy"/><save data="w4" to="$tmp/w4.npy"/>
</workflow>
X
expect_rc 0 "weights for fuse.compose" -- "$y" run "$tmp/mk.xml" -q --backend sequential -o "$tmp/mk"
cat > "$tmp/cmp.xml" <<X
<workflow name="cmp">
  <data name="x" shape="16,32" init="random" seed="7"/>
  <data name="w1" shape="128,32" tile="32,32" src="$tmp/w1.npy"/><data name="b1" shape="128" tile="32" src="$tmp/b1.npy"/>
  <data name="w2" shape="32,128" tile="16,128" src="$tmp/w2.npy"/><data name="b2" shape="32" tile="16" src="$tmp/b2.npy"/>
  <data name="h" shape="16,128" tile="16,32"/><data name="y" shape="16,32" tile="16,16"/>
  <data name="x2" shape="16,64" init="random" seed="8"/>
  <data name="w3" shape="8,64" src="$tmp/w3.npy"/><data name="w4" shape="64,8" src="$tmp/w4.npy"/>
  <data name="t" shape="16,8"/><data name="z" shape="16,64"/>
  <par var="j" from="0" to="4">
    <task component="nn.linear" name="up(\${j})"><in port="x" data="x"/><in port="w" data="w1[\${j},0]"/><in port="b" data="b1[\${j}]"/>
      <out port="y" data="h[0,\${j}]"/><arg name="transpose_w" value="true"/></task>
  </par>
  <par var="j" from="0" to="2">
    <task component="nn.linear" name="down(\${j})"><in port="x" data="h"/><in port="w" data="w2[\${j},0]"/><in port="b" data="b2[\${j}]"/>
      <out port="y" data="y[0,\${j}]"/><arg name="transpose_w" value="true"/><arg name="activation" value="gelu"/></task>
  </par>
  <task component="nn.linear" name="thin"><in port="x" data="x2"/><in port="w" data="w3"/><out port="y" data="t"/><arg name="transpose_w" value="true"/></task>
  <task component="nn.linear" name="wide"><in port="x" data="t"/><in port="w" data="w4"/><out port="y" data="z"/><arg name="transpose_w" value="true"/></task>
  <save data="y" to="y.npy"/><save data="z" to="z.npy"/>
</workflow>
X
expect_rc 0 "fuse.compose" -- "$y" optimize "$tmp/cmp.xml" --passes fuse.compose --eval --reps 1 -o "$tmp/cmp"
$py - "$tmp/cmp" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
log = r["pass_log"][0]
assert log["composed"] == 1 and log["pairs"] == ["w1 -> w2"], log
assert log["skipped"] == ["w3 -> w4: composed costs more"], log
assert r["quality"]["y.npy:y"]["relative_error"] < 1e-5, r["quality"]
assert r["quality"]["z.npy:z"]["relative_error"] == 0, r["quality"]
x = open(sys.argv[1] + "/cmp.opt.xml").read()
assert x.count("<task") == 6, x.count("<task")  # 4 up + 2 down -> 2 composed; thin, wide; 2 saves
assert r["optimized"]["flops"] < 0.3 * r["original"]["flops"], (r["optimized"]["flops"], r["original"]["flops"])
print(f"ok: composed 32->128->32 into one layer (relative error {r['quality']['y.npy:y']['relative_error']:.2g}), kept the low-rank pair")
PY

# the language side: uneven column tiles, and their errors (exact text in tests/malformed/bad_split.*)
expect_rc 1 "bad split=" -- "$y" check tests/malformed/bad_split.xml
expect_in "split [6,3] adds up to 9 columns, but 'A' has 10" "split sum"
finish
