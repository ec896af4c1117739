#!/usr/bin/env bash
# GPT-2 and BERT written with op.matmul (workflows/ops/gpt2.xml, bert.xml): the
# same logits and hidden states as workflows/models' nn.linear/nn.attention
# workflows on the same checkpoint (1e-5 of the largest), with every product of
# the model an op.matmul task. sparse.propagate on a GPT-2 pruned to zero blocks
# (head 1 of layer 0, a tile of 128 neurons of layer 1): the optimized DAG holds
# exactly the surviving tasks and gives the same logits, to the bit.
bin=$1
. "$(dirname "$0")/lib.sh"
need_numpy
"$bin" model init --arch gpt2 --preset tiny --seed 3 "$tmp/g.safetensors" >/dev/null || { echo "FAIL: model init"; exit 1; }
"$bin" model init --arch bert --preset tiny --seed 5 "$tmp/b.safetensors" >/dev/null || { echo "FAIL: model init"; exit 1; }
"$py" -c "import numpy as np; np.save('$tmp/ids.npy', np.random.default_rng(1).integers(0, 512, 2 * 40).astype(np.int32))"
gpt=(--set weights="$tmp/g.safetensors" --set ids="$tmp/ids.npy" --set layers=2 --set width=96 --set heads=3 --set ffn=384
     --set vocab=512 --set context=64 --set batch=2 --set seq=40)
bert=(--set weights="$tmp/b.safetensors" --set ids="$tmp/ids.npy" --set layers=2 --set width=96 --set heads=6 --set ffn=200
      --set vocab=512 --set context=64 --set batch=2 --set seq=40)
expect_rc 0 "gpt2 (models)" -- "$bin" run workflows/models/gpt2.xml "${gpt[@]}" --quiet --out "$tmp/g_ref"
expect_rc 0 "gpt2 (ops), 3 ffn tiles, 3 vocabulary tiles" -- "$bin" run workflows/ops/gpt2.xml "${gpt[@]}" \
  --set tile_n=128 --set tile_vocab=200 --quiet --out "$tmp/g_ops"
expect_rc 0 "bert (models)" -- "$bin" run workflows/models/bert.xml "${bert[@]}" --quiet --out "$tmp/b_ref"
expect_rc 0 "bert (ops), ffn 200 in tiles of 64 (the last one 8 wide)" -- "$bin" run workflows/ops/bert.xml "${bert[@]}" \
  --set tile_n=64 --quiet --out "$tmp/b_ops"
expect_rc 1 "heads that do not divide the width" -- "$bin" run workflows/ops/gpt2.xml "${gpt[@]}" --set heads=5 --quiet \
  --out "$tmp/bad"
expect_in "width 96 is not a multiple of heads 5" "the message"
"$py" - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done
d = sys.argv[1]
for name, out in (("gpt2", "logits"), ("bert", "hidden")):
    ref = np.load(f"{d}/{name[0]}_ref/{out}.npy")
    ops = np.load(f"{d}/{name[0]}_ops/{out}.npy")
    err = np.abs(ref - ops).max() / np.abs(ref).max()
    check(ref.shape == ops.shape and err < 1e-5, "%s: ops = models (max error %.1e of the largest)" % (name, err))
    r = json.load(open(f"{d}/{name[0]}_ops/report.json"))
    comps = {t["component"] for t in r["tasks"]}
    check(not comps & {"nn.linear", "nn.attention", "nn.softmax", "nn.gelu"},
          "%s: no nn.linear, nn.attention, nn.softmax or nn.gelu task (%s)" % (name, ", ".join(sorted(comps))))
done()
PY
# a checkpoint with nonzero biases, pruned to zero blocks
"$py" - "$tmp/g.safetensors" "$tmp/gp.safetensors" <<'PY'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
t = {}
for k, v in head.items():
    if k != "__metadata__":
        s, e = v["data_offsets"]
        t[k] = np.frombuffer(raw[8 + n + s:8 + n + e], dtype=np.float32).reshape(v["shape"]).copy()
rng = np.random.default_rng(7)
for k in t:
    if k.endswith(".bias") and "ln_" not in k:
        t[k] = rng.normal(0, 0.02, t[k].shape).astype(np.float32)
dh = 32
for j in (1, 4, 7):  # head 1 of layer 0: its q, k and v columns and biases
    t["h.0.attn.c_attn.weight"][:, j * dh:(j + 1) * dh] = 0
    t["h.0.attn.c_attn.bias"][j * dh:(j + 1) * dh] = 0
t["h.0.attn.c_proj.weight"][dh:2 * dh] = 0
t["h.1.mlp.c_fc.weight"][:, 128:256] = 0  # neurons 128..255 of layer 1
t["h.1.mlp.c_fc.bias"][128:256] = 0
t["h.1.mlp.c_proj.weight"][128:256] = 0
meta, off, blobs = {}, 0, []
for k, v in t.items():
    b = v.tobytes()
    meta[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
hj = json.dumps(meta).encode()
hj += b" " * (-len(hj) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
PY
pruned=("${gpt[@]}" --set weights="$tmp/gp.safetensors" --set tile_n=128 --set tile_vocab=200)
expect_rc 0 "pruned gpt2 (models)" -- "$bin" run workflows/models/gpt2.xml "${pruned[@]}" --quiet --out "$tmp/p_ref"
expect_rc 0 "sparse.propagate on the pruned gpt2 (ops), --eval" -- "$bin" optimize workflows/ops/gpt2.xml "${pruned[@]}" \
  --passes sparse.propagate --eval --reps 1 --out "$tmp/p_opt"
"$py" - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done
d = sys.argv[1]
r = json.load(open(d + "/p_opt/report.json"))
log = [e for e in r["pass_log"] if e["pass"] == "sparse.propagate"][0]
want = set()
for b in (0, 1):
    want |= {f"c_attn({0},{b},{j})" for j in (1, 4, 7)} | {f"c_attn_bias({0},{b},{j})" for j in (1, 4, 7)}
    want |= {f"{n}(0,{b},1)" for n in ("scores", "logsumexp", "softmax", "values", "c_proj")}
    want |= {f"{n}(1,{b},1)" for n in ("c_fc", "c_fc_bias", "mlp_proj")}
got = set(log["removed"])
check(got == want, "removed exactly the %d tasks of the zero blocks (extra %s, missing %s)"
      % (len(want), sorted(got - want), sorted(want - got)))
check(log["tasks_after"] == log["tasks_before"] - len(want) and log["filled"] == 0,
      "%d -> %d tasks, no fill" % (log["tasks_before"], log["tasks_after"]))
check(0 < log["flops_removed"] < log["flops_before"], "flops removed: %.3g of %.3g" % (log["flops_removed"], log["flops_before"]))
xml = open(d + "/p_opt/gpt2_ops.opt.xml").read()
check(all(f'name="{n}"' not in xml for n in want) and 'name="values(0,0,0)"' in xml,
      "the optimized workflow has none of them, and the other heads")
opt = np.load(d + "/p_opt/eval-optimized/logits.npy")
orig = np.load(d + "/p_opt/eval-original/logits.npy")
ref = np.load(d + "/p_ref/logits.npy")
check(np.array_equal(opt, orig), "logits equal to the unpropagated run's, to the bit")
err = np.abs(opt - ref).max() / np.abs(ref).max()
check(err < 1e-5, "and to workflows/models/gpt2.xml's (max error %.1e of the largest)" % err)
done()
PY
finish
