#!/usr/bin/env bash
# What checkpointing costs: the same workflow with --checkpoint none and
# --checkpoint tasks, interleaved in one run (medians of REPS), and what a
# resume of the complete checkpoint costs next to running it. Prints makespans,
# ratios, bytes persisted and the writer thread's busy time.
#
#   tests/bench/checkpoint_cost.sh [BUILD_DIR] [REPS]
#   CASES="gemm:2048:512 gpt2:124M:128" tests/bench/checkpoint_cost.sh build 5
set -euo pipefail
build=${1:-build}
reps=${2:-3}
cases=${CASES:-"gemm:2048:512 gemm:4096:1024 gpt2:124M:128"}
y=$build/bin/ymlopt
py=/usr/bin/python3
work=${WORK:-$(mktemp -d)}
trap 'rm -rf "$work"' EXIT
echo "checkpoint cost: $(nproc) cores, reps=$reps, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, run dirs on $(df --output=source "$work" | tail -1)"
printf '%-16s %6s %11s %11s %7s %10s %10s %11s %8s\n' case tasks "none ms" "tasks ms" ratio "MiB" "writer s" "resume ms" "resume/none"
med() { sort -g | sed -n "$(( (reps + 1) / 2 ))p"; }
for c in $cases; do
  IFS=: read -r kind a b <<<"$c"
  if [ "$kind" = gemm ]; then
    args=(workflows/linalg/tiled_gemm.xml --set n=$a --set bs=$b --set save=true)
  else
    w="$work/$kind-$a.safetensors"
    [ -f "$w" ] || "$y" model init --arch $kind --preset $a --seed 1 "$w" >/dev/null
    "$py" -c "import numpy as np; np.save('$work/ids.npy', (np.arange($b) * 7919 % 32000).astype(np.int32))"
    args=(workflows/models/$kind.xml --set weights="$w" --set ids="$work/ids.npy" --set seq=$b)
  fi
  none=() tasks=() resume=()
  for r in $(seq 1 "$reps"); do
    rm -rf "$work/none" "$work/ck"
    "$y" run "${args[@]}" --out "$work/none" --quiet --no-history
    none+=("$("$py" -c "import json; print(json.load(open('$work/none/report.json'))['totals']['makespan_us'] / 1e3)")")
    "$y" run "${args[@]}" --out "$work/ck" --quiet --no-history --checkpoint tasks
    tasks+=("$("$py" -c "import json; print(json.load(open('$work/ck/report.json'))['totals']['makespan_us'] / 1e3)")")
    read -r ntasks mib writer <<<"$("$py" -c "
import json; r = json.load(open('$work/ck/report.json')); c = r['checkpoint']
print(r['totals']['tasks'], c['bytes_written'] / 2**20, c['write_seconds'])")"
    "$y" run --resume "$work/ck" --quiet --no-history
    resume+=("$("$py" -c "import json; print(json.load(open('$work/ck/report.json'))['totals']['makespan_us'] / 1e3)")")
  done
  n=$(printf '%s\n' "${none[@]}" | med); t=$(printf '%s\n' "${tasks[@]}" | med); s=$(printf '%s\n' "${resume[@]}" | med)
  printf '%-16s %6s %11.1f %11.1f %7.3f %10.1f %10.2f %11.1f %8.3f\n' "$c" "$ntasks" "$n" "$t" \
    "$("$py" -c "print($t / $n)")" "$mib" "$writer" "$s" "$("$py" -c "print($s / $n)")"
done
