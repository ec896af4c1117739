#!/usr/bin/env bash
# CUDA workers through StarPU, as far as this machine allows. Everywhere: the
# --ncuda/--where cuda usage errors, and a run asking for CUDA that cannot have
# it fails (exit 1) saying why: a StarPU without CUDA, no CUDA kernels, or no
# device (a StarPU built with CUDA on a machine without a GPU, as in CI's
# sanitizer build); plain runs go on with CPU workers. With a GPU: a tiled GEMM
# and the tiny GPT-2 on CPU + CUDA workers (dmda) and with --where cuda equal the
# sequential backend, with tasks on the CUDA worker and bytes moved both ways.
source "$(dirname "$0")/lib.sh"
y=$1
need_numpy
info=$("$y" info --json)
read -r starpu_cuda kernels devices < <("$py" -c '
import json, sys
j = json.loads(sys.argv[1])
built = j["cuda"]["kernels"].startswith("built")
dev = built and not j["cuda"]["devices"].startswith("no CUDA device")
print(int(j["starpu"]["cuda"]), int(built), int(dev))' "$info")
echo "StarPU with CUDA: $starpu_cuda, CUDA kernels built: $kernels, CUDA device: $devices"
out=$("$y" info)
expect_in "StarPU: " "info names the StarPU"
if [ "$starpu_cuda" = 1 ]; then expect_in ", CUDA yes," "info: the StarPU has CUDA"; else expect_in ", CUDA no," "info: the StarPU has no CUDA"; fi

gemm=(workflows/linalg/tiled_gemm.xml --set n=512 --set bs=128 --set save=true)
# C of each run DIR... equals the sequential one (f32, 1e-5 of max |C|)
same_c() {
  "$py" - "$tmp" "$@" <<'PY'
import sys, numpy as np
from checks import header, tensor_bytes
def c(run):
    p = f"{sys.argv[1]}/{run}/C.safetensors"
    assert header(p)["C"]["dtype"] == "F32"
    return np.frombuffer(tensor_bytes(p)["C"], dtype=np.float32).astype(np.float64)
ref = c("seq")
for run in sys.argv[2:]:
    err = float(np.max(np.abs(c(run) - ref))) / float(np.max(np.abs(ref)))
    assert err < 1e-5, (run, err)
PY
}
expect_rc 0 "tiled GEMM, sequential" -- "$y" run "${gemm[@]}" --backend sequential -q -o "$tmp/seq"
# the default (--ncuda -1: every device) and --ncuda 0 run wherever StarPU runs
expect_rc 0 "tiled GEMM, StarPU with the default CUDA workers" -- "$y" run "${gemm[@]}" --sched dmda -q -o "$tmp/default"
expect_rc 0 "tiled GEMM, --ncuda 0" -- "$y" run "${gemm[@]}" --ncuda 0 -q -o "$tmp/none"
expect_rc 0 "C as on the sequential backend" -- same_c default none
expect_rc 0 "--ncuda 0 kept every task on CPUs" -- ran_on "$tmp/none" cpu

# a run that needs CUDA workers and cannot have them: exit 1, the reason, nothing saved
sed 's/<task component="blas.gemm">/<task component="blas.gemm" where="cuda">/' workflows/linalg/tiled_gemm.xml >"$tmp/pin.xml"
pin=("$tmp/pin.xml" "${gemm[@]:1}")
if [ "$kernels" = 0 ]; then
  expect_rc 1 "where=\"cuda\" without CUDA kernels" -- "$y" run "${pin[@]}" -q -o "$tmp/pin"
  expect_in "pin.xml:17:" "names the task's file and line"
  expect_in "blas.gemm has no CUDA kernel in this build" "says why"
elif [ "$devices" = 0 ]; then
  if [ "$starpu_cuda" = 1 ]; then why="StarPU started no CUDA worker (no CUDA device"; else why="this build runs no CUDA tasks: its StarPU has no CUDA"; fi
  expect_rc 1 "--where cuda without a CUDA worker" -- "$y" run "${gemm[@]}" --where cuda -q -o "$tmp/where"
  expect_in "--where cuda: $why" "says why"
  [ ! -e "$tmp/where/C.safetensors" ] && echo "ok: nothing saved" || { echo "FAIL: C written by a failed run"; fails=$((fails + 1)); }
  expect_rc 1 "where=\"cuda\" without a CUDA worker" -- "$y" run "${pin[@]}" -q -o "$tmp/pin"
  expect_in "pin.xml:17:" "names the task's file and line"
  expect_in "has where=\"cuda\": $why" "says why"
  expect_rc 1 "where=\"cuda\" with --ncuda 0" -- "$y" run "${pin[@]}" --ncuda 0 -q -o "$tmp/pin0"
  expect_in "has where=\"cuda\": " "says why"
else
  # a GPU: placement, transfers and results
  cuda=(--backend starpu --ncpu 1 --ncuda 1 --sched dmda -q)
  expect_rc 0 "tiled GEMM on CPU + CUDA (dmda)" -- "$y" run "${gemm[@]}" "${cuda[@]}" -o "$tmp/gpu"
  expect_rc 0 "tiled GEMM, --where cuda" -- "$y" run "${gemm[@]}" "${cuda[@]}" --where cuda -o "$tmp/gpu-where"
  expect_rc 0 "pinned where=\"cuda\"" -- "$y" run "${pin[@]}" "${cuda[@]}" -o "$tmp/gpu-pin"
  expect_rc 0 "C as on the sequential backend" -- same_c gpu gpu-where gpu-pin
  expect_rc 0 "tasks on both kinds of worker, bytes moved both ways" -- "$py" -c '
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
kinds = {w["kind"]: w["tasks"] for w in r["worker_stats"]}
moved = {(x["src"], x["dst"]): x["bytes"] for x in r["transfers"]}
assert kinds.get("cpu", 0) > 0 and kinds.get("cuda", 0) > 0, kinds
assert moved.get(("RAM", "CUDA 0"), 0) > 0 and moved.get(("CUDA 0", "RAM"), 0) > 0, moved' "$tmp/gpu"
  expect_rc 0 "--where cuda ran every GEMM on the GPU" -- ran_on "$tmp/gpu-where" cuda
  expect_rc 0 "where=\"cuda\" ran every GEMM on the GPU" -- ran_on "$tmp/gpu-pin" cuda
fi

# bad usage: exit 2
expect_rc 2 "--ncuda -2" -- "$y" run "${gemm[@]}" --ncuda -2 -q -o "$tmp/u1"
expect_rc 2 "--where cuda with --ncuda 0" -- "$y" run "${gemm[@]}" --where cuda --ncuda 0 -q -o "$tmp/u2"
expect_rc 2 "--ncuda with the sequential backend" -- "$y" run "${gemm[@]}" --ncuda 1 --backend sequential -q -o "$tmp/u3"
expect_rc 2 "--where gpu" -- "$y" run "${gemm[@]}" --where gpu -q -o "$tmp/u4"
expect_in "did you mean" "suggests a kind"
finish
