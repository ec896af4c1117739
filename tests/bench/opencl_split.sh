#!/usr/bin/env bash
# 1 CPU + 1 OpenCL worker against 2 CPU workers, same run, dmda: tiled GEMM
# and a GPT-2 forward. Per configuration: makespan (median), tasks, busy time
# and GFLOP per kind of worker, bytes StarPU moved each way, and StarPU's
# predicted task time per kind against the measured one. Each configuration
# runs once first to calibrate StarPU's history models (kept in one
# STARPU_HOME per configuration), then REPS timed runs.
#
#   tests/bench/opencl_split.sh [BUILD_DIR] [REPS]
#   GEMM="2048 512" GPT2="124M 128" tests/bench/opencl_split.sh build 3
#   OPENCL="--opencl 1 --opencl-on-cpus" (default; a GPU: --opencl 1)
set -euo pipefail
build=${1:-build}
reps=${2:-3}
read -r gemm_n gemm_bs <<<"${GEMM:-2048 512}"
read -r gpt_preset gpt_seq <<<"${GPT2:-124M 128}"
read -ra opencl <<<"${OPENCL:---opencl 1 --opencl-on-cpus}"
y=$build/bin/ymlopt
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; OpenCL device: $("$y" info | sed -n "s/^  \[[a-z]*\] //p" | head -1)"
"$y" model init --arch gpt2 --preset "$gpt_preset" --seed 1 "$work/gpt2.safetensors" >/dev/null
"$py" -c "import numpy as np; np.save('$work/ids.npy', (np.arange($gpt_seq) * 7919 % 50257).astype(np.int32))"

# summary DIR...: median makespan of the runs, and the last run's split
summary() {
  "$py" - "$@" <<'PY'
import json, statistics, sys
reports = [json.load(open(d + "/report.json")) for d in sys.argv[1:]]
ms = statistics.median(r["totals"]["makespan_us"] / 1e3 for r in reports)
r = reports[-1]
kind = {w["worker"]: w["kind"] for w in r["worker_stats"]}
rows = {}
for w in r["worker_stats"]:
    k = rows.setdefault(w["kind"], [0, 0.0, 0.0])
    k[0] += w["tasks"]; k[1] += w["busy_us"] / 1e3; k[2] += w["flops"] / 1e9
split = ", ".join(f"{k} {v[0]} tasks {v[1]:.0f} ms {v[2]:.2f} GFLOP" for k, v in sorted(rows.items()))
moved = ", ".join(f"{x['src']}->{x['dst']} {x['bytes'] / 2**20:.1f} MiB" for x in r["transfers"]) or "nothing"
pred = {}
for t in r["tasks"]:
    if t.get("predicted_us") is not None and t["worker_kind"]:
        p = pred.setdefault(t["worker_kind"], [0.0, 0.0, []])
        took = t["end_us"] - t["start_us"]
        p[0] += t["predicted_us"] / 1e3; p[1] += took / 1e3; p[2].append(took / t["predicted_us"])
model = ", ".join(f"{k} predicted {v[0]:.0f} ms measured {v[1]:.0f} ms (median task measured/predicted "
                  f"{statistics.median(v[2]):.2f})" for k, v in sorted(pred.items())) or "no predictions"
print(f"{ms:.1f}")
print(f"    split: {split}\n    moved: {moved}\n    StarPU's model: {model}")
PY
}

# bench NAME ARGS...: the same workflow on 2 CPU workers and on 1 CPU + 1 OpenCL worker
bench() {
  local name=$1
  shift
  declare -A med
  for cfg in cpu2 cl; do
    local args=(--backend starpu --sched dmda --quiet --starpu-home "$work/home-$name-$cfg")
    if [ $cfg = cpu2 ]; then args+=(--ncpu 2); else args+=(--ncpu 1 "${opencl[@]}"); fi
    "$y" run "$@" "${args[@]}" --out "$work/$name-$cfg-cal" >/dev/null
    local dirs=()
    for r in $(seq 1 "$reps"); do
      "$y" run "$@" "${args[@]}" --out "$work/$name-$cfg-$r" >/dev/null
      dirs+=("$work/$name-$cfg-$r")
    done
    local out
    out=$(summary "${dirs[@]}")
    med[$cfg]=$(head -1 <<<"$out")
    printf '%-8s %-14s makespan %9.1f ms\n' "$name" "$cfg" "${med[$cfg]}"
    tail -n +2 <<<"$out"
  done
  printf '%-8s 1 CPU + 1 OpenCL / 2 CPUs: %.3f\n' "$name" "$("$py" -c "print(${med[cl]} / ${med[cpu2]})")"
}

bench gemm workflows/linalg/tiled_gemm.xml --set n="$gemm_n" --set bs="$gemm_bs"
bench gpt2 workflows/models/gpt2.xml --set weights="$work/gpt2.safetensors" --set ids="$work/ids.npy" --set seq="$gpt_seq"
