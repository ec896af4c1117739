#!/usr/bin/env bash
# `ymlopt optimize` with the pass `smooth` (SmoothQuant / AWQ scales) on a tiny GPT-2:
# alone it leaves the f32 model's logits unchanged (the 1/s folded into ln_1 / ln_2,
# W diag(s) in c_attn / c_fc), and the written weights file runs the original workflow
# with the rewritten workflow's logits; followed by quantizers, and the shipped
# sequences; option errors.
source "$(dirname "$0")/lib.sh"
y=$1
write_ids "$tmp/ids.npy" 64 512 37 11
for i in 1 2 3 4; do write_ids "$tmp/calib$i.npy" 64 512 $((53 + 12 * i)) 11; echo "ids=$tmp/calib$i.npy"; done >"$tmp/calib.txt"
"$y" model init --arch gpt2 --preset tiny --seed 5 --width 128 --heads 4 --ffn 512 "$tmp/g.safetensors" >/dev/null
G=(workflows/models/gpt2.xml --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=128
   --set heads=4 --set vocab=512 --set context=64 --set tile_n=32 --set weights="$tmp/g.safetensors")

run() {  # run NAME PASSES [extra args]: optimize with --eval into $tmp/NAME
  local name=$1 passes=$2; shift 2
  expect_rc 0 "$name ($passes)" -- "$y" optimize "${G[@]}" --passes "$passes" --eval --reps 1 -o "$tmp/$name" "$@"
}
run smooth smooth --calib-sets "$tmp/calib.txt"
run awq smooth:mode=awq --calib-sets "$tmp/calib.txt"
run int8 quant.int8
run smooth8 smooth,quant.int8 --calib-sets "$tmp/calib.txt"
run rtn4 quant.group:bits=4:group=128
run awq4 smooth:mode=awq,quant.group:bits=4:group=128 --calib-sets "$tmp/calib.txt"
for seq in int8-smooth awq-int4-g128 awq-gptq-int4-g128-clip; do
  expect_rc 0 "sequence $seq (own input as calibration)" -- "$y" optimize "${G[@]}" \
    --sequence workflows/sequences/$seq.xml --eval --reps 1 -o "$tmp/seq-$seq"
done

python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
t = sys.argv[1]
def rep(n): return json.load(open(f"{t}/{n}/report.json"))
def err(n): return rep(n)["quality"]["logits.npy:logits"]["relative_error"]
from checks import check, done
for n in ("smooth", "awq"):
    log = rep(n)["pass_log"][0]
    check(log["scaled"] == 4 and len(log["skipped"]) == 4,
          f"{n}: c_attn and c_fc of both blocks scaled ({log['scaled']}), both c_proj skipped ({len(log['skipped'])})")
    check(err(n) < 1e-5, f"{n} alone: the f32 model's logits unchanged (relative error {err(n):.2e})")
check(rep("awq")["pass_log"][0]["layers"][0]["loss"] <= rep("awq")["pass_log"][0]["layers"][0]["loss_alpha0"],
      "awq: the searched alpha's calibration error is at most alpha 0's")
for a, b in (("smooth8", "int8"), ("awq4", "rtn4")):
    check(rep(a)["weight_bytes"] == rep(b)["weight_bytes"], f"{a}: the bytes of {b} ({rep(a)['weight_bytes']['optimized']})")
    print(f"  {a}: logits error {err(a):.5f} ({b}: {err(b):.5f})")
done()
PY

# the scaled weights file runs the original workflow with the rewritten workflow's logits
expect_rc 0 "rewritten workflow runs" -- "$y" run "$tmp/smooth8/gpt2.opt.xml" -q --backend sequential -o "$tmp/flat"
expect_rc 0 "original workflow on the smoothed int8 file" -- "$y" run "${G[@]/$tmp\/g.safetensors/$tmp/smooth8/gpt2.opt.safetensors}" \
  -q -o "$tmp/sub"
same_file "same logits" "$tmp/flat/logits.npy" "$tmp/sub/logits.npy"

expect_fail() {  # expect_fail DESCRIPTION -- CMD...
  local what=$1; shift 2
  out=$("$@" 2>&1) && { echo "FAIL: $what: exit 0"; fails=$((fails + 1)); return; }
  echo "ok: $what"
}
expect_fail "mode=gptq" -- "$y" optimize "${G[@]}" --passes smooth:mode=gptq -o "$tmp/bad"
expect_in "option 'mode' of smooth must be smooth or awq" "mode message"
expect_fail "alpha=2" -- "$y" optimize "${G[@]}" --passes smooth:alpha=2 -o "$tmp/bad"
expect_in "option 'alpha' of smooth must be in [0, 1]" "alpha message"
expect_rc 2 "unknown option" -- "$y" optimize "${G[@]}" --passes smooth:beta=1 -o "$tmp/bad"
expect_in "has no option 'beta'" "option message"
finish
