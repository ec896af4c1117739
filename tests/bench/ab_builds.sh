#!/usr/bin/env bash
# Two builds of ymlopt (before and after a change) measured in one run, rounds
# alternating which goes first: the per-task overhead against raw StarPU
# (ymlopt_bench_overhead's ymlopt/raw ratio, its anchor measured in the same
# process) and the model forward time (report.json makespan) of each model.
#
#   tests/bench/ab_builds.sh BUILD_A BUILD_B [ROUNDS]
#   MODELS="gpt2:124M:128 llama:1.1B:128" tests/bench/ab_builds.sh ...
#
# Prints the medians per build and B/A for each figure. Both builds run the
# workflows of the current checkout; weights are seeded once (by BUILD_A).
# PYTHON names the python3 to use (default /usr/bin/python3; numpy not needed).
set -euo pipefail
a=${1:?usage: ab_builds.sh BUILD_A BUILD_B [ROUNDS]}
b=${2:?usage: ab_builds.sh BUILD_A BUILD_B [ROUNDS]}
rounds=${3:-5}
models=${MODELS:-"gpt2:124M:128"}
py=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for d in "$a" "$b"; do
  [[ -x $d/bin/ymlopt && -x $d/bin/ymlopt_bench_overhead ]] || { echo "no ymlopt or ymlopt_bench_overhead in $d/bin" >&2; exit 2; }
done
echo "A=$a B=$b rounds=$rounds; $(nproc) CPUs: $(lscpu | sed -n 's/^Model name: *//p')"

declare -A val  # "figure|build" -> space-separated values
add() { val["$1|$2"]+="$3 "; }

overhead() {  # build label
  local out
  out=$("$1/bin/ymlopt_bench_overhead" --reps 5)
  add "overhead ymlopt/raw (init..shutdown)" "$2" "$(awk '/^us\/task \(init..shutdown\)/ && NF == 5 {print $5}' <<<"$out")"
  add "overhead ymlopt/raw (core)" "$2" "$(awk '/^us\/task \(core\)/ && NF == 5 {print $5}' <<<"$out")"
}

forward() {  # build label arch preset seq
  local w=$work/$3-$4.safetensors
  "$1/bin/ymlopt" run workflows/models/$3.xml --set weights="$w" --set ids="$work/ids$5.npy" --set seq="$5" \
    --out "$work/run" --quiet
  add "$3-$4 seq $5 forward ms" "$2" \
    "$("$py" -c "import json; print(json.load(open('$work/run/report.json'))['totals']['makespan_us'] / 1e3)")"
}

for m in $models; do
  IFS=: read -r arch preset seq <<<"$m"
  [[ -f $work/$arch-$preset.safetensors ]] ||
    "$a/bin/ymlopt" model init --arch "$arch" --preset "$preset" --seed 1 "$work/$arch-$preset.safetensors" >/dev/null
  "$py" - "$work/ids$seq.npy" "$seq" <<'PY'  # int32 ids i * 7919 % 32000 as .npy (v1.0), without numpy
import struct, sys
n = int(sys.argv[2])
head = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
head += " " * (63 - (10 + len(head)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
    f.write(struct.pack("<%di" % n, *[i * 7919 % 32000 for i in range(n)]))
PY
done

for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="A B"; else order="B A"; fi
  for l in $order; do
    d=$a; [[ $l == B ]] && d=$b
    overhead "$d" "$l"
    for m in $models; do
      IFS=: read -r arch preset seq <<<"$m"
      forward "$d" "$l" "$arch" "$preset" "$seq"
    done
  done
  echo "round $r done"
done

med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-44s %10s %10s %8s\n' "median of $rounds" A B B/A
for key in "overhead ymlopt/raw (init..shutdown)" "overhead ymlopt/raw (core)"; do
  ma=$(med "${val["$key|A"]}"); mb=$(med "${val["$key|B"]}")
  printf '%-44s %10.3f %10.3f %8.3f\n' "$key" "$ma" "$mb" "$("$py" -c "print($mb / $ma)")"
done
for m in $models; do
  IFS=: read -r arch preset seq <<<"$m"
  key="$arch-$preset seq $seq forward ms"
  ma=$(med "${val["$key|A"]}"); mb=$(med "${val["$key|B"]}")
  printf '%-44s %10.1f %10.1f %8.3f\n' "$key" "$ma" "$mb" "$("$py" -c "print($mb / $ma)")"
done
echo "each round (in order):"
for key in "${!val[@]}"; do echo "  $key: ${val[$key]}"; done | sort
