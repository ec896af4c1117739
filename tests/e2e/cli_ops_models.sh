#!/usr/bin/env bash
# GPT-2 and BERT written with op.matmul (workflows/ops/gpt2.xml, bert.xml): the
# same logits and hidden states as workflows/models' nn.linear/nn.attention
# workflows on the same checkpoint (1e-5 of the largest), with every product of
# the model an op.matmul task.
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
expect_rc 0 "bert (ops)" -- "$bin" run workflows/ops/bert.xml "${bert[@]}" --quiet --out "$tmp/b_ops"
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
finish
