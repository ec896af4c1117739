#!/usr/bin/env bash
# Model forward time: ymlopt (StarPU, all cores) against PyTorch 1.13 (Debian's
# python3-torch, float32, same number of threads) on the same seeded weights
# and ids, same run. Prints medians, the ratio, and ymlopt's per-component split.
#
#   tests/bench/model_forward.sh [BUILD_DIR] [REPS]
#   MODELS="gpt2:124M:128 gpt2:124M:512 llama:1.1B:128" tests/bench/model_forward.sh
set -euo pipefail
build=${1:-build}
reps=${2:-3}
models=${MODELS:-"gpt2:124M:128 gpt2:124M:512 llama:1.1B:128"}
y=$build/bin/ymlopt
py=/usr/bin/python3
threads=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "ymlopt model forward benchmark: $(nproc) cores, reps=$reps, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
printf '%-14s %5s %14s %14s %8s\n' model seq "ymlopt ms" "pytorch ms" ratio
for m in $models; do
  IFS=: read -r arch preset seq <<<"$m"
  w="$work/$arch-$preset.safetensors"
  [ -f "$w" ] || "$y" model init --arch $arch --preset $preset --seed 1 "$w" >/dev/null
  info=$("$y" model info --arch $arch --preset $preset)
  layers=$(sed -n 's/.*: \([0-9]*\) layers.*/\1/p' <<<"$info")
  heads=$(sed -n 's/.* \([0-9]*\) heads.*/\1/p' <<<"$info")
  kv=$(sed -n 's/.*(\([0-9]*\) kv).*/\1/p' <<<"$info"); kv=${kv:-$heads}
  "$py" -c "import numpy as np; np.save('$work/ids.npy', (np.arange($seq) * 7919 % 32000).astype(np.int32))"
  ours=()
  for r in $(seq 1 "$reps"); do
    "$y" run workflows/models/$arch.xml --set weights="$w" --set ids="$work/ids.npy" --set seq=$seq \
      --out "$work/run" --quiet
    ours+=("$("$py" -c "import json; print(json.load(open('$work/run/report.json'))['totals']['makespan_us'] / 1e3)")")
  done
  ymed=$(printf '%s\n' "${ours[@]}" | sort -g | sed -n "$(( (reps + 1) / 2 ))p")
  tline=$("$py" tests/reference/transformers_ref.py --arch $arch --weights "$w" --ids "$work/ids.npy" --batch 1 \
    --seq $seq --layers $layers --heads $heads --kv-heads $kv --dtype float32 --threads $threads --time-reps $reps)
  tmed=$(sed -n 's/.*forward median \([0-9.]*\) ms.*/\1/p' <<<"$tline")
  printf '%-14s %5s %14.1f %14.1f %8.3f\n' "$arch-$preset" $seq "$ymed" "$tmed" "$("$py" -c "print($ymed / $tmed)")"
  "$py" - "$work/run/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["components"]
tot = sum(v["time_us"] for v in c.values())
for name, v in sorted(c.items(), key=lambda kv: -kv[1]["time_us"])[:6]:
    print(f"    {name:18s} {v['tasks']:6d} tasks {v['time_us'] / 1e3:9.1f} ms ({100 * v['time_us'] / tot:4.1f}%) {v['gflops_per_s']:7.1f} GFLOP/s")
PY
done
