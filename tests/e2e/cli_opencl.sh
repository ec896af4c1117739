#!/usr/bin/env bash
# Whole workflows on 1 CPU + 1 OpenCL worker (PoCL's device on the CPU, which
# StarPU uses with --opencl 1 --opencl-on-cpus): results equal the sequential
# backend's, tasks run on both workers and StarPU moves data between the
# memory nodes; --where opencl sends every task that has an OpenCL kernel
# there; a task pinned where="opencl" that cannot run there is an error naming
# it. Skips (77) without OpenCL kernels, PoCL or a StarPU with OpenCL.
source "$(dirname "$0")/lib.sh"
y=$1
need_numpy
info=$("$y" info --json)
if ! "$py" -c '
import json, sys
j = json.loads(sys.argv[1])
ok = j["opencl"]["built"] and j["starpu"]["opencl"] and any(d for p in j["opencl"]["platforms"] for d in p["devices"])
sys.exit(0 if ok else 1)' "$info"; then
  if [ -e /etc/OpenCL/vendors/pocl.icd ]; then  # set up as CI is: this must run, not skip
    echo "FAIL: PoCL is installed, but ymlopt info lacks the OpenCL kernels, the device or StarPU's OpenCL"
    exit 1
  fi
  echo "skip: needs the OpenCL kernels, an OpenCL device (pocl-opencl-icd) and a StarPU with OpenCL"
  exit 77
fi
devices=(--backend starpu --ncpu 1 --opencl 1 --opencl-on-cpus)
ocl=("${devices[@]}" -q)

# same A B TOL: the arrays of two .npy files agree within TOL (relative to max |B|, or 1)
same() {
  "$py" - "$@" <<'PY'
import sys, numpy as np
a, b, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
err = float(np.max(np.abs(a.astype(np.float64) - b))) / max(1.0, float(np.max(np.abs(b))))
print(f"max error {err:.3g} (tol {tol})")
sys.exit(0 if a.shape == b.shape and err <= tol else 1)
PY
}
# same_st A B TOL: the one tensor of two safetensors files agrees within TOL
same_st() {
  "$py" - "$@" <<'PY'
import sys, numpy as np
from checks import header, tensor_bytes
def load(p):
    (name, h), = header(p).items()
    return np.frombuffer(tensor_bytes(p)[name], dtype={"F32": np.float32, "F64": np.float64}[h["dtype"]]).astype(np.float64)
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
err = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))
print(f"max error {err:.3g} (tol {tol})")
sys.exit(0 if a.shape == b.shape and err <= tol else 1)
PY
}
# split DIR [opencl-only]: the report shows tasks on both kinds of worker and bytes
# moved each way; with opencl-only, every task whose component has an OpenCL kernel ran there
split() {
  "$py" - "$1" "${2:-}" "$comps_with_opencl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
kinds = {w["kind"]: w["tasks"] for w in r["worker_stats"]}
moved = {(x["src"], x["dst"]): x["bytes"] for x in r["transfers"]}
assert r["status"] == "ok", r.get("error")
assert kinds.get("cpu", 0) > 0 and kinds.get("opencl", 0) > 0, kinds
assert moved.get(("RAM", "OpenCL 0"), 0) > 0 and moved.get(("OpenCL 0", "RAM"), 0) > 0, moved
assert r["totals"]["bytes_moved"] == sum(moved.values())
assert r["machine"]["devices_probed"], "a run with OpenCL workers probes the devices"
with_cl = set(sys.argv[3].split())
if sys.argv[2]:
    wrong = [(t["id"], t["component"], t["worker_kind"]) for t in r["tasks"]
             if (t["worker_kind"] == "opencl") != (t["component"] in with_cl)]
    assert not wrong, wrong[:5]
print(f"tasks per kind {kinds}, bytes moved {moved}")
PY
}
comps_with_opencl=$("$y" components | sed -nE 's/^([a-z0-9_.]+) +\[cpu(,cuda)?,opencl.*/\1/p' | tr '\n' ' ')
[ -n "$comps_with_opencl" ] || { echo "FAIL: ymlopt components lists no component with an OpenCL kernel"; fails=$((fails + 1)); }

cat >"$tmp/axpy.xml" <<'EOF'
<workflow name="axpy">
  <param name="n" type="int" default="384"/>
  <param name="t" type="int" default="96"/>
  <data name="a" shape="${n},${n}" tile="${t},${t}" init="random" seed="1"/>
  <data name="b" shape="${n},${n}" tile="${t},${t}" init="random" seed="2"/>
  <data name="c" shape="${n},${n}" tile="${t},${t}"/>
  <par var="i" from="0" to="${n/t}">
    <par var="j" from="0" to="${n/t}">
      <task component="tensor.add" name="add ${i},${j}">
        <in port="a" data="a[${i},${j}]"/> <in port="b" data="b[${i},${j}]"/> <out port="c" data="c[${i},${j}]"/>
        <arg name="alpha" value="2"/>
      </task>
      <task component="tensor.scale"><inout port="x" data="c[${i},${j}]"/><arg name="alpha" value="0.5"/></task>
    </par>
  </par>
  <save data="c" to="c.npy"/>
</workflow>
EOF

# elementwise tiles, then tiled GEMM and Cholesky, on both kinds of worker (dmda)
expect_rc 0 "axpy tiles sequential" -- "$y" run "$tmp/axpy.xml" --backend sequential -q -o "$tmp/axpy-seq"
expect_rc 0 "axpy tiles on CPU + OpenCL (dmda)" -- "$y" run "$tmp/axpy.xml" "${devices[@]}" --sched dmda -o "$tmp/axpy-cl"
same_file "axpy: bit-identical to the sequential run" "$tmp/axpy-cl/c.npy" "$tmp/axpy-seq/c.npy"
expect_in "workers: cpu " "summary shows the CPU/accelerator split"
expect_in "moved: RAM -> OpenCL 0" "summary shows the bytes moved"
expect_rc 0 "axpy: tasks on both workers, bytes moved both ways" -- split "$tmp/axpy-cl"
echo "  $out"
expect_rc 0 "axpy with --where opencl" -- "$y" run "$tmp/axpy.xml" "${ocl[@]}" --where opencl -o "$tmp/axpy-where"
same_file "axpy --where opencl: the same result" "$tmp/axpy-where/c.npy" "$tmp/axpy-seq/c.npy"
expect_rc 0 "axpy --where opencl: every task with an OpenCL kernel ran there" -- split "$tmp/axpy-where" opencl-only
expect_rc 0 "axpy --where cpu: no task on the OpenCL worker" -- "$y" run "$tmp/axpy.xml" "${ocl[@]}" --where cpu -o "$tmp/axpy-cpu"
expect_rc 0 "--where cpu kept every task on the CPU" -- ran_on "$tmp/axpy-cpu" cpu

# tiled GEMM (blas.gemm on either worker) and Cholesky (potrf on the CPU, trsm, syrk and
# gemm anywhere; its check, L L^T against A within 1e-12, runs in the workflow)
gemm=(workflows/linalg/tiled_gemm.xml --set n=384 --set bs=96 --set save=true)
expect_rc 0 "tiled GEMM sequential" -- "$y" run "${gemm[@]}" --backend sequential -q -o "$tmp/gemm-seq"
expect_rc 0 "tiled GEMM on CPU + OpenCL (dmda)" -- "$y" run "${gemm[@]}" "${ocl[@]}" --sched dmda -o "$tmp/gemm-cl"
expect_rc 0 "tiled GEMM: C as on the sequential backend" -- same_st "$tmp/gemm-cl/C.safetensors" "$tmp/gemm-seq/C.safetensors" 1e-5
echo "  $out"
expect_rc 0 "tiled GEMM: tasks on both workers, bytes moved both ways" -- split "$tmp/gemm-cl"
echo "  $out"
chol=(workflows/linalg/cholesky.xml --set n=480 --set bs=96)
expect_rc 0 "Cholesky on CPU + OpenCL (dmda), L L^T = A within 1e-12" -- "$y" run "${chol[@]}" "${ocl[@]}" --sched dmda -o "$tmp/chol"
expect_rc 0 "Cholesky: tasks on both workers, bytes moved both ways" -- split "$tmp/chol"
echo "  $out"
expect_rc 0 "potrf (no OpenCL kernel) on the CPU" -- ran_on "$tmp/chol" cpu blas.potrf

# a <unite> of two co-methods (tiled elementwise updates in runtime loops, a norm as
# the score), both run to the end: the gathered winner as on the sequential backend
cat >"$tmp/unite.xml" <<'EOF'
<workflow name="unite-opencl">
  <data name="best" shape="192,192" init="zeros"/>
  <data name="score" dtype="f64" shape="1" init="zeros"/>
  <unite name="u" exit="all">
    <par var="k" values="1,2">
      <comethod name="m${k}">
        <data name="x${k}" shape="192,192" tile="64,64" init="random" seed="${k}"/>
        <data name="d${k}" shape="192,192" tile="64,64" init="random" seed="${k + 10}"/>
        <data name="n${k}" dtype="f64" shape="1" init="zeros"/>
        <until cond="n${k} gt 1000" max="6">
          <par var="i" from="0" to="3">
            <par var="j" from="0" to="3">
              <task component="tensor.add">
                <in port="a" data="x${k}[${i},${j}]"/> <in port="b" data="d${k}[${i},${j}]"/>
                <out port="c" data="x${k}[${i},${j}]"/> <arg name="beta" value="${k}"/>
              </task>
              <task component="tensor.scale"><inout port="x" data="d${k}[${i},${j}]"/><arg name="alpha" value="1.5"/></task>
            </par>
          </par>
          <task component="tensor.norm"><in port="x" data="x${k}"/><out port="out" data="n${k}"/></task>
        </until>
        <publish name="best" data="x${k}" score="n${k}"/>
      </comethod>
    </par>
  </unite>
  <gather name="best" into="best" score="score" better="max"/>
  <save data="best" to="best.npy"/>
</workflow>
EOF
expect_rc 0 "unite sequential" -- "$y" run "$tmp/unite.xml" --backend sequential -q -o "$tmp/unite-seq"
expect_rc 0 "unite on CPU + OpenCL (dmda)" -- "$y" run "$tmp/unite.xml" "${ocl[@]}" --sched dmda -o "$tmp/unite-cl"
expect_rc 0 "unite: the gathered winner as on the sequential backend" -- same "$tmp/unite-cl/best.npy" "$tmp/unite-seq/best.npy" 1e-6
echo "  $out"
expect_rc 0 "unite: tasks on both workers, bytes moved both ways" -- split "$tmp/unite-cl"
echo "  $out"

# the tiny GPT-2, BERT and LLaMA forwards (nn.linear, attention, norms, activations, RoPE
# and embedding on either worker): outputs as on the sequential backend
write_ids "$tmp/ids.npy" 64
for a in gpt2 bert llama; do "$y" model init --arch $a --preset tiny --seed 5 "$tmp/$a.safetensors" >/dev/null; done
common=(--set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96 --set vocab=512)
G=(workflows/models/gpt2.xml --set weights="$tmp/gpt2.safetensors" "${common[@]}" --set heads=3 --set context=64 --set tile_n=32)
B=(workflows/models/bert.xml --set weights="$tmp/bert.safetensors" "${common[@]}" --set heads=6 --set ffn=200 --set context=64
   --set tile_n=48)
L=(workflows/models/llama.xml --set weights="$tmp/llama.safetensors" "${common[@]}" --set heads=6 --set kv_heads=2 --set ffn=160
   --set tile_n=80)
for m in gpt2:G:logits bert:B:hidden llama:L:logits; do
  IFS=: read -r name arr outname <<<"$m"
  declare -n wf=$arr
  expect_rc 0 "$name forward sequential" -- "$y" run "${wf[@]}" --backend sequential -q -o "$tmp/$name-seq"
  expect_rc 0 "$name forward on CPU + OpenCL (dmda)" -- "$y" run "${wf[@]}" "${ocl[@]}" --sched dmda -o "$tmp/$name-cl"
  expect_rc 0 "$name: $outname as on the sequential backend" -- same "$tmp/$name-cl/$outname.npy" "$tmp/$name-seq/$outname.npy" 1e-4
  echo "  $out"
  expect_rc 0 "$name: tasks on both workers, bytes moved both ways" -- split "$tmp/$name-cl"
  echo "  $out"
  expect_rc 0 "$name forward with --where opencl" -- "$y" run "${wf[@]}" "${ocl[@]}" --where opencl -o "$tmp/$name-where"
  expect_rc 0 "$name --where opencl: $outname as on the sequential backend" -- \
    same "$tmp/$name-where/$outname.npy" "$tmp/$name-seq/$outname.npy" 1e-4
  expect_rc 0 "$name --where opencl: every task with an OpenCL kernel ran there" -- split "$tmp/$name-where" opencl-only
  unset -n wf
done

# StarPU-MPI: 2 ranks, each with 1 CPU + 1 OpenCL worker, the tiny GPT-2: the same logits,
# and the merged report has both ranks' OpenCL workers and transfers
if command -v mpirun >/dev/null && "$y" run --help | grep -q starpu-mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
  expect_rc 0 "gpt2 on 2 StarPU-MPI ranks with an OpenCL worker each" -- timeout 120 mpirun --oversubscribe -np 2 \
    "$y" run "${G[@]}" --backend starpu-mpi --ncpu 1 --opencl 1 --opencl-on-cpus -q -o "$tmp/gpt2-mpi"
  expect_rc 0 "gpt2 on 2 ranks: logits as on the sequential backend" -- \
    same "$tmp/gpt2-mpi/logits.npy" "$tmp/gpt2-seq/logits.npy" 1e-4
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))
ranks = {w["worker"].split(":")[0] for w in r["worker_stats"] if w["kind"] == "opencl" and w["tasks"] > 0}
moved = {x["src"].split(":")[0] for x in r["transfers"] if x["bytes"] > 0}
assert ranks == {"0", "1"} and moved == {"0", "1"}, (ranks, moved)' "$tmp/gpt2-mpi/report.json" &&
    echo "ok: both ranks ran tasks on their OpenCL worker and moved data" ||
    { echo "FAIL: the merged report lacks a rank's OpenCL tasks or transfers"; fails=$((fails + 1)); }
else
  echo "note: no mpirun or no starpu-mpi backend: the StarPU-MPI run with OpenCL workers is not checked"
fi

# faults on the device: an OpenCL program that fails to build (a plugin's kernel) and
# a kernel that finds a bad token id (nn.embedding): that task fails with its file:line,
# exit 1, and the outputs are not written
plugin=${YMLOPT_OPENCL_FAULT_PLUGIN:-}
if [ -n "$plugin" ]; then
  cat >"$tmp/build.xml" <<'EOF'
<workflow name="opencl-build">
  <data name="x" shape="64,64" init="random"/>
  <task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="3"/></task>
  <task component="test.opencl_build" name="broken"><inout port="x" data="x"/></task>
  <save data="x" to="x.npy"/>
</workflow>
EOF
  expect_rc 0 "the plugin's task on the CPU" -- "$y" run "$tmp/build.xml" --plugin "$plugin" "${ocl[@]}" --where cpu -o "$tmp/build-cpu"
  expect_rc 1 "an OpenCL build error" -- "$y" run "$tmp/build.xml" --plugin "$plugin" "${ocl[@]}" --where opencl -o "$tmp/build"
  expect_in "build.xml:4:3: error: task 'broken' (component test.opencl_build) failed on an OpenCL worker: OpenCL build of 'twice' failed" \
    "names the task, its file:line and the worker"
  [ ! -e "$tmp/build/x.npy" ] && echo "ok: nothing saved" || { echo "FAIL: x.npy written by a failed run"; fails=$((fails + 1)); }
else
  echo "note: YMLOPT_OPENCL_FAULT_PLUGIN unset (ctest sets it): the OpenCL build error is not checked"
fi
write_ids "$tmp/bad_ids.npy" 64 600
expect_rc 1 "a bad token id found on the device" -- "$y" run "${G[@]}" --set ids="$tmp/bad_ids.npy" "${ocl[@]}" --where opencl \
  -o "$tmp/bad-ids"
expect_in "failed on an OpenCL worker" "names the worker"
expect_in "gpt2.xml:" "names the workflow's line"
[ ! -e "$tmp/bad-ids/logits.npy" ] && echo "ok: no logits saved" || { echo "FAIL: logits written by a failed run"; fails=$((fails + 1)); }

# pinned tasks
sed 's/<task component="tensor.add" /<task component="tensor.add" where="opencl" /' "$tmp/axpy.xml" >"$tmp/pin.xml"
expect_rc 0 "where=\"opencl\" on the adds" -- "$y" run "$tmp/pin.xml" "${ocl[@]}" -o "$tmp/pin"
expect_rc 0 "every pinned add ran on the OpenCL worker" -- ran_on "$tmp/pin" opencl tensor.add
expect_rc 1 "where=\"opencl\" without OpenCL workers" -- "$y" run "$tmp/pin.xml" --ncpu 1 -q -o "$tmp/pin-none"
expect_in "pin.xml:9:" "the error names the task's file and line"
expect_in "has where=\"opencl\": no OpenCL workers were asked for (--opencl N)" "and says why"
# a tile larger than the device's memory (StarPU's limit, 1 MiB): a pinned task is an
# error before anything runs, an unpinned one stays on the CPU
expect_rc 1 "where=\"opencl\" on a task larger than the device's memory" -- env STARPU_LIMIT_OPENCL_MEM=1 \
  "$y" run "$tmp/pin.xml" "${ocl[@]}" --set n=768 --set t=768 -o "$tmp/pin-big"
expect_in "do not fit in its OpenCL device's memory (1 MiB)" "the error names the device's memory"
[ ! -e "$tmp/pin-big/c.npy" ] && echo "ok: nothing saved" || { echo "FAIL: c.npy written by a failed run"; fails=$((fails + 1)); }
expect_rc 0 "--where opencl on tasks larger than the device's memory" -- env STARPU_LIMIT_OPENCL_MEM=1 \
  "$y" run "$tmp/axpy.xml" "${ocl[@]}" --where opencl --set n=768 --set t=768 -o "$tmp/big"
expect_rc 0 "tasks too large for the device ran on the CPU" -- ran_on "$tmp/big" cpu
sed 's/<task component="tensor.add" /<task component="tensor.add" where="gpu" /' "$tmp/axpy.xml" >"$tmp/gpu.xml"
expect_rc 1 "where=\"gpu\"" -- "$y" run "$tmp/gpu.xml" -q -o "$tmp/gpu"
expect_in "gpu.xml:9:" "names the file and line"
expect_in "where=\"gpu\" is not a kind of worker" "says what is wrong"
sed 's/<save /<task component="io.save" where="opencl"><in port="x" data="c"\/><arg name="path" value="d.npy"\/><\/task><save /' \
  "$tmp/axpy.xml" >"$tmp/io.xml"
expect_rc 1 "where=\"opencl\" on a component without an OpenCL kernel" -- "$y" run "$tmp/io.xml" "${ocl[@]}" -o "$tmp/io"
expect_in "io.save runs on the host only" "says why"

# bad usage: exit 2
expect_rc 2 "--where opencl without --opencl" -- "$y" run "$tmp/axpy.xml" --where opencl -q -o "$tmp/u1"
expect_rc 2 "--where gpu" -- "$y" run "$tmp/axpy.xml" --where gpu -q -o "$tmp/u2"
expect_rc 2 "--opencl with the sequential backend" -- "$y" run "$tmp/axpy.xml" --opencl 1 --backend sequential -q -o "$tmp/u3"
expect_rc 2 "--opencl-on-cpus without --opencl" -- "$y" run "$tmp/axpy.xml" --opencl-on-cpus -q -o "$tmp/u4"
finish
