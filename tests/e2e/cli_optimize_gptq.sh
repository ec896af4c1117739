#!/usr/bin/env bash
# `ymlopt optimize` with quant.gptq on a tiny GPT-2: calibrated on other token ids
# (--calib-sets, 8 runs), GPTQ int4-g128 has a lower relative logits error than
# round-to-nearest int4-g128 (quant.group) on the same model and input, likewise
# with act_order, asymmetric groups of 32 and int8 per channel; correct=true (each layer refit
# to the original outputs on the inputs the quantized layers before it produce, the calibration
# runs run again per layer) lowers the int4 and int8 errors further, and its first layer's codes
# are plain GPTQ's; the compressed weights file runs the original workflow with the rewritten
# workflow's logits; option errors.
source "$(dirname "$0")/lib.sh"
y=$1
write_ids "$tmp/ids.npy" 64 512 37 11
# calibration: 8 runs of other ids (512 tokens), one NAME=VALUE line each
for i in 1 2 3 4 5 6 7 8; do write_ids "$tmp/calib$i.npy" 64 512 $((53 + 12 * i)) 11; echo "ids=$tmp/calib$i.npy"; done >"$tmp/calib.txt"
"$y" model init --arch gpt2 --preset tiny --seed 5 --width 128 --heads 4 --ffn 512 "$tmp/g.safetensors" >/dev/null
G=(workflows/models/gpt2.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=128
   --set heads=4 --set vocab=512 --set context=64 --set tile_n=32 --set weights="$tmp/g.safetensors")

run() {  # run NAME PASSES [extra args]: optimize with --eval into $tmp/NAME
  local name=$1 passes=$2; shift 2
  expect_rc 0 "$name ($passes)" -- "$y" optimize "${G[@]}" --passes "$passes" --eval --reps 1 -o "$tmp/$name" "$@"
}
run rtn4 quant.group:bits=4:group=128
run gptq4 quant.gptq:bits=4:group=128 --calib-sets "$tmp/calib.txt"
run gptq4o quant.gptq:bits=4:group=128:act_order=true --calib-sets "$tmp/calib.txt"
run rtn4a quant.group:bits=4:group=32:symmetric=false
run gptq4a quant.gptq:bits=4:group=32:symmetric=false --calib-sets "$tmp/calib.txt"
run rtn8 quant.int8
run gptq8 quant.gptq:bits=8:group=0 --calib-sets "$tmp/calib.txt"
run gptq4c quant.gptq:bits=4:group=128:correct=true --calib-sets "$tmp/calib.txt"
run gptq8c quant.gptq:bits=8:group=0:correct=true --calib-sets "$tmp/calib.txt"
expect_rc 0 "sequence gptq-int4-g128 (own input as calibration)" -- "$y" optimize "${G[@]}" \
  --sequence workflows/sequences/gptq-int4-g128.xml --eval --reps 1 -o "$tmp/seq"

python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
t = sys.argv[1]
def rep(n): return json.load(open(f"{t}/{n}/report.json"))
def err(n): return rep(n)["quality"]["logits.npy:logits"]["relative_error"]
from checks import check, done
for g, r, what in [("gptq4", "rtn4", "int4 g128"), ("gptq4o", "rtn4", "int4 g128 act_order"), ("gptq4a", "rtn4a", "int4 g32 asymmetric"), ("gptq8", "rtn8", "int8 per channel")]:
    check(err(g) < 0.9 * err(r), f"{what}: GPTQ logits error {err(g):.5f} < 0.9 x round-to-nearest {err(r):.5f} (ratio {err(g) / err(r):.3f})")
    wg, wr = rep(g)["weight_bytes"], rep(r)["weight_bytes"]
    check(wg == wr, f"{what}: same weight bytes as round-to-nearest ({wg['optimized']})")
for c, g, what in [("gptq4c", "gptq4", "int4 g128"), ("gptq8c", "gptq8", "int8 per channel")]:
    check(err(c) < err(g), f"{what}: correct=true logits error {err(c):.5f} < plain GPTQ {err(g):.5f} (ratio {err(c) / err(g):.3f})")
    check(rep(c)["weight_bytes"] == rep(g)["weight_bytes"], f"{what}: correct=true keeps the bytes")
    lc = rep(c)["pass_log"][0]
    check(lc["input_shift"] > 0 and all("correct" in v for v in lc["formats"].values()),
          f"{what}: pass log input_shift {lc['input_shift']:.4g}, formats name correct")
check(err("seq") < err("rtn4"), f"sequence gptq-int4-g128 ({err('seq'):.5f}) beats int4-g128 ({err('rtn4'):.5f})")
log = rep("gptq4")["pass_log"][0]
check(log["layers"] > 0 and log["gptq_loss"] > 0 and all("quant.gptq" in v for v in log["formats"].values()),
      f"pass log: {log['layers']} layers, gptq_loss {log['gptq_loss']:.4g}")
done()
PY

# the compressed weights file runs the original workflow with the rewritten workflow's logits
expect_rc 0 "rewritten workflow runs" -- "$y" run "$tmp/gptq4/gpt2.opt.xml" -q --backend sequential -o "$tmp/flat"
expect_rc 0 "original workflow on the GPTQ file" -- "$y" run "${G[@]/$tmp\/g.safetensors/$tmp/gptq4/gpt2.opt.safetensors}" \
  -q -o "$tmp/sub"
same_file "same logits" "$tmp/flat/logits.npy" "$tmp/sub/logits.npy"
# correct=true: the first layer in program order sees the original inputs, so its codes are GPTQ's
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import sys
t = sys.argv[1]
from checks import check, done, tensor_bytes
a, b = tensor_bytes(f"{t}/gptq4/gpt2.opt.safetensors"), tensor_bytes(f"{t}/gptq4c/gpt2.opt.safetensors")
first = [k for k in a if k.startswith("h.0.attn.c_attn") and k in b]
later = [k for k in a if k.startswith("h.1.mlp.c_proj") and k in b]
check(first and all(a[k] == b[k] for k in first), f"first layer identical: {first}")
check(later and any(a[k] != b[k] for k in later), f"a later layer differs: {later}")
done()
PY
expect_rc 0 "original workflow on the correct=true file" -- "$y" run \
  "${G[@]/$tmp\/g.safetensors/$tmp/gptq4c/gpt2.opt.safetensors}" -q -o "$tmp/subc"

# option errors (a bad option value: a non-zero exit and the message)
expect_fail() {  # expect_fail DESCRIPTION -- CMD...
  local what=$1; shift 2
  out=$("$@" 2>&1) && { echo "FAIL: $what: exit 0"; fails=$((fails + 1)); return; }
  echo "ok: $what"
}
expect_fail "bits=3" -- "$y" optimize "${G[@]}" --passes quant.gptq:bits=3 -o "$tmp/bad"
expect_in "option 'bits' of quant.gptq must be 4 or 8" "bits message"
expect_fail "group=48" -- "$y" optimize "${G[@]}" --passes quant.gptq:group=48 -o "$tmp/bad"
expect_in "option 'group' of quant.gptq must be 0 (per channel), 32, 64 or 128" "group message"
expect_rc 2 "unknown option" -- "$y" optimize "${G[@]}" --passes quant.gptq:order=1 -o "$tmp/bad"
expect_in "has no option 'order'" "option message"
expect_fail "act_order=yes" -- "$y" optimize "${G[@]}" --passes quant.gptq:act_order=yes -o "$tmp/bad"
expect_in "option 'act_order' of quant.gptq must be true or false" "act_order message"
expect_fail "correct=yes" -- "$y" optimize "${G[@]}" --passes quant.gptq:correct=yes -o "$tmp/bad"
expect_in "option 'correct' of quant.gptq must be true or false" "correct message"
expect_fail "ridge=-1" -- "$y" optimize "${G[@]}" --passes quant.gptq:correct=true:ridge=-1 -o "$tmp/bad"
expect_in "option 'ridge' of quant.gptq must be >= 0" "ridge message"
expect_rc 2 "correct=true after another pass" -- "$y" optimize "${G[@]}" \
  --passes quant.embedding:bits=8,quant.gptq:correct=true -o "$tmp/bad"
expect_in "quant.gptq:correct=true must be the first pass: its calibration runs are of the original model" "first-pass message"
finish
