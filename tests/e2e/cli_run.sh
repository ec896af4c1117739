#!/usr/bin/env bash
# Runs shipped workflows through the CLI on both backends and checks the run directory.
source "$(dirname "$0")/lib.sh"
y=$1
for backend in starpu sequential; do
  d="$tmp/qs-$backend"
  expect_rc 0 "quickstart on $backend" -- "$y" run examples/quickstart.xml --set n=384 --set bs=128 --backend $backend --out "$d"
  expect_in "blas.gemm" "summary table"
  expect_in "residual (line" "task results shown"
  for f in report.json trace.json dag.dot run.log; do
    [ -s "$d/$f" ] || { echo "FAIL: $backend: $f missing"; fails=$((fails + 1)); }
  done
  python3 - "$d" <<'PY' || fails=$((fails + 1))
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
assert r["status"] == "ok", r
t = r["totals"]
for k in ("makespan_us", "critical_path_us", "sum_task_us", "peak_rss_bytes", "flops"):
    assert t[k] > 0, k
assert t["critical_path_us"] <= t["sum_task_us"] + 1
assert len(r["tasks"]) == t["tasks"] == t["tasks_run"]
for task in r["tasks"]:
    for k in ("id", "component", "line", "worker", "start_us", "end_us", "flops", "bytes"):
        assert k in task, (k, task)
    assert task["end_us"] >= task["start_us"]
assert r["components"]["blas.gemm"]["flops"] > 0 and r["components"]["blas.gemm"]["tasks"] > 0
assert t["blas_peak_gflops"] > 0 and 0 < t["fraction_of_blas_peak"] < 10, t
assert r["components"]["blas.gemm"]["fraction_of_blas_per_core"] > 0
m = r["memory"]
assert m["allocated"] >= m["activation_total"] >= m["activation_peak"] > 0, m
assert "machine" in r and r["machine"]["cores"] >= 1
res = [x for x in r["tasks"] if x.get("name") == "residual"][0]["results"]
assert res["max_rel"] < 1e-12, res
tr = json.load(open(d + "/trace.json"))
lanes = {e["tid"] for e in tr["traceEvents"] if e["ph"] == "X"}
names = [e for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
assert len(names) == len(r["workers"]) and lanes <= set(range(len(names)))
print("report and trace ok:", len(r["tasks"]), "tasks on", r["workers"])
PY
  if command -v dot >/dev/null; then
    dot -Tsvg "$d/dag.dot" -o "$d/dag.svg" || { echo "FAIL: dag.dot is not valid DOT"; fails=$((fails + 1)); }
  fi
done
expect_rc 0 "dry run" -- "$y" run examples/quickstart.xml --set n=512 --set bs=128 --dry-run --out "$tmp/dry"
expect_in "blas.gemm                     0.638 GFLOP" "gemm flops: 2 n^3 twice + 4 Cholesky and 20 check tiles of 2 bs^3"
expect_in "peak" "activation peak"
[ ! -e "$tmp/dry" ] || { echo "FAIL: --dry-run created a run directory"; fails=$((fails + 1)); }
expect_rc 0 "graph" -- "$y" graph workflows/linalg/cholesky.xml --set n=256 --set bs=128
expect_in "digraph" "DOT output"
expect_in "blas.potrf" "tasks labelled with their component"
if command -v dot >/dev/null; then
  "$y" graph workflows/linalg/cholesky.xml --set n=256 --set bs=128 | dot -Tsvg >/dev/null || { echo "FAIL: graph output is not valid DOT"; fails=$((fails + 1)); }
fi
# YML's classic applications through the CLI, both syntaxes: each checks its own result
for app in lu gauss_jordan; do
  for form in linalg yml; do
    expect_rc 0 "$form/$app" -- "$y" run workflows/$form/$app.xml --set n=300 --set bs=64 --out "$tmp/$form-$app"
    expect_in "max_rel=" "$form/$app reports its check"
  done
done
expect_rc 0 "check" -- "$y" check workflows/models/mlp2.xml
expect_in "ok: workflow 'mlp2'" "check summary"
expect_rc 0 "components" -- "$y" components
for c in blas.gemm blas.axpy tensor.fill tensor.copy tensor.add tensor.scale tensor.transpose nn.relu nn.gelu nn.silu nn.softmax tensor.norm tensor.compare io.load io.save; do
  expect_in "$c " "component $c listed"
done
expect_rc 0 "components --json" -- "$y" components --json
python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert any(c["name"]=="blas.gemm" for c in j)' <<<"$out" || fails=$((fails + 1))
expect_rc 0 "info" -- "$y" info
expect_in "Machine:" "topology"
expect_in "StarPU: 1.3" "StarPU build"
expect_in "StarPU workers" "workers"
# what CUDA kernels were built (wherever nvcc was found) and which devices they see
grep -qE "^CUDA kernels: (built for sm_[0-9]+|not built \(no nvcc when ymlopt was configured\)); devices: " <<<"$out" ||
  { echo "FAIL: info has no 'CUDA kernels: ...; devices: ...' line"; fails=$((fails + 1)); }
# where they were built, `components` lists the components that have one (eleven), else none
cuda_built=$(grep -cE "^CUDA kernels: built for" <<<"$out")
info_out=$out
expect_rc 0 "components" -- "$y" components
with_cuda=$(grep -c "cpu,cuda" <<<"$out")
if { [ "$cuda_built" = 1 ] && [ "$with_cuda" -ge 11 ]; } || { [ "$cuda_built" = 0 ] && [ "$with_cuda" = 0 ]; }; then
  echo "ok: components lists $with_cuda with a CUDA kernel (kernels built: $cuda_built)"
else
  echo "FAIL: components lists $with_cuda with a CUDA kernel, kernels built: $cuda_built"; fails=$((fails + 1))
fi
# the OpenCL kernels (wherever OpenCL was found): tensor.fill/copy/add/scale have one
grep -qE "^OpenCL kernels: (built, CLBlast (yes|no)|not built)" <<<"$info_out" ||
  { echo "FAIL: info has no 'OpenCL kernels: ...' line"; fails=$((fails + 1)); }
grep -qE "^StarPU OpenCL workers: [0-9]+" <<<"$info_out" ||
  { echo "FAIL: info has no 'StarPU OpenCL workers: ...' line"; fails=$((fails + 1)); }
opencl_built=$(grep -cE "^OpenCL kernels: built" <<<"$info_out")
with_opencl=$(grep -cE "^tensor\.(fill|copy|add|scale)  \[cpu,opencl\]" <<<"$out")
if [ "$with_opencl" = $((4 * opencl_built)) ]; then
  echo "ok: components lists $with_opencl with an OpenCL kernel (kernels built: $opencl_built)"
else
  echo "FAIL: components lists $with_opencl with an OpenCL kernel, kernels built: $opencl_built"; fails=$((fails + 1))
fi
# with CLBlast also blas.gemm/syrk/trsm and nn.linear
clblast=$(grep -cE "^OpenCL kernels: built, CLBlast yes" <<<"$info_out")
with_clblast=$(grep -cE "^(blas\.(gemm|syrk|trsm)|nn\.linear)  \[cpu,(cuda,)?opencl\]" <<<"$out")
if [ "$with_clblast" = $((4 * clblast)) ]; then
  echo "ok: components lists $with_clblast CLBlast kernels (CLBlast: $clblast)"
else
  echo "FAIL: components lists $with_clblast CLBlast kernels, CLBlast: $clblast"; fails=$((fails + 1))
fi
# with PoCL and STARPU_OPENCL_ON_CPUS=1, StarPU starts one OpenCL worker beside the CPU one
if [ "$opencl_built" = 1 ] && [ -e /etc/OpenCL/vendors/pocl.icd ]; then
  STARPU_OPENCL_ON_CPUS=1 STARPU_NOPENCL=1 STARPU_NCPU=1 "$y" info --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
devices = [d for p in j["opencl"]["platforms"] for d in p["devices"]]
assert devices and all(d["global_mem"] > 0 and d["compute_units"] > 0 for d in devices), devices
assert j["opencl"]["starpu"]["workers"] == (1 if j["starpu"]["opencl"] else 0), j["opencl"]["starpu"]
' && echo "ok: info --json lists the OpenCL devices and StarPU's OpenCL worker" ||
    { echo "FAIL: info --json OpenCL devices or StarPU workers"; fails=$((fails + 1)); }
fi
out=$info_out
# f64 tiles: OpenBLAS's dgemm kernel on panels packed once per tile (info names it, or why
# not); the tiled product equals one untiled dgemm (verify=true: tensor.compare, tol 1e-12)
# on both backends, with the reuse on and off; a bad cache size is warned about
expect_in "f64 OpenBLAS dgemm" "info names the f64 GEMM"
for cache in 256 0; do
  for backend in starpu sequential; do
    expect_rc 0 "f64 tiled gemm, $backend, cache $cache MiB" -- env YMLOPT_GEMM_PACK_CACHE_MB=$cache \
      "$y" run workflows/linalg/tiled_gemm.xml --set n=320 --set bs=128 --set dtype=f64 --set verify=true \
      --backend $backend --out "$tmp/g64-$backend-$cache" --quiet
  done
done
YMLOPT_GEMM_PACK_CACHE_MB=0 expect_rc 0 "info with the reuse off" -- "$y" info
expect_in "f64 OpenBLAS dgemm (packed panels not reused: YMLOPT_GEMM_PACK_CACHE_MB=0)" "info says the reuse is off"
YMLOPT_GEMM_PACK_CACHE_MB=0 expect_rc 0 "info --json with the reuse off" -- "$y" info --json
python3 -c 'import json, sys; g = json.load(sys.stdin)["gemm"]["f64"]; assert g.endswith("(packed panels not reused: YMLOPT_GEMM_PACK_CACHE_MB=0)"), g' <<<"$out" ||
  { echo "FAIL: info --json gemm.f64 does not say the reuse is off"; fails=$((fails + 1)); }
YMLOPT_GEMM_PACK_CACHE_MB=lots expect_rc 0 "info with a bad cache size" -- "$y" info
expect_in "ymlopt: warning: YMLOPT_GEMM_PACK_CACHE_MB='lots' is not a size in MiB; using 256" "bad cache size warned"
# CSR products of fewer than 8 tokens run on GEMV plans kept per weight (sparse::plan_gemv)
expect_rc 0 "info" -- "$y" info
expect_in "Sparse nn.linear: CSR below 8 tokens on GEMV plans kept per weight (cache 256 MiB)" "info names the CSR plans"
# the quantized kernels are the widest this CPU runs (its flags read here from /proc/cpuinfo)
if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  isa="AVX-512 VNNI"
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then isa=AVX2; else isa=scalar; fi
expect_in "Quantized nn.linear: int8/int4 kernels for $isa" "info names the quantized kernels"
YMLOPT_SPARSE_PLAN_CACHE_MB=0 expect_rc 0 "info with CSR plans off" -- "$y" info --json
python3 -c 'import json, sys; g = json.load(sys.stdin)["sparse"]["csr below 8 tokens"]; assert g == "gathering GEMV (plans off: YMLOPT_SPARSE_PLAN_CACHE_MB=0)", g' <<<"$out" ||
  { echo "FAIL: info --json sparse does not say the plans are off"; fails=$((fails + 1)); }
# nn.linear on a 90%-sparse CSR weight with 1, 3 and 7 tokens (the plan's range) equals numpy's x W^T,
# with plans (the engine names the arrays) and without
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
/usr/bin/python3 - "$tmp" <<'PY'
import numpy as np, sys
t = sys.argv[1]
rng = np.random.default_rng(4)
n, k = 70, 200  # k: six 32-column windows and a partial one
w = rng.uniform(-1, 1, (n, k)).astype(np.float32)
w[rng.uniform(0, 1, (n, k)) < 0.9] = 0
w[5] = 0  # an empty row
rows, cols = np.nonzero(w)
np.save(t + "/csr_w.npy", w[rows, cols].astype(np.float32))
np.save(t + "/csr_col.npy", cols.astype(np.int32))
np.save(t + "/csr_ptr.npy", np.concatenate([[0], np.cumsum(np.count_nonzero(w, axis=1))]).astype(np.int32))
np.save(t + "/csr_nnz.npy", np.array([rows.size]))
for m in (1, 3, 7):
    x = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    np.save(t + "/csr_x%d.npy" % m, x)
    np.save(t + "/csr_ref%d.npy" % m, x.astype(np.float64) @ w.T.astype(np.float64))
PY
nnz=$(/usr/bin/python3 -c "import numpy; print(int(numpy.load('$tmp/csr_nnz.npy')[0]))")
for m in 1 3 7; do
  cat >"$tmp/csr$m.xml" <<X
<workflow name="csr$m">
  <data name="x" shape="$m,200" src="$tmp/csr_x$m.npy"/>
  <data name="w" shape="$nnz" src="$tmp/csr_w.npy"/>
  <data name="col" dtype="i32" shape="$nnz" src="$tmp/csr_col.npy"/>
  <data name="ptr" dtype="i32" shape="71" src="$tmp/csr_ptr.npy"/>
  <data name="y" shape="$m,70"/>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/><in port="w_index" data="col"/>
    <in port="w_ptr" data="ptr"/><out port="y" data="y"/><arg name="format" value="csr"/></task>
  <save data="y" to="y.npy"/>
</workflow>
X
  for cache in 256 0; do
    expect_rc 0 "csr linear, $m token(s), plan cache $cache" -- env YMLOPT_SPARSE_PLAN_CACHE_MB=$cache \
      "$y" run "$tmp/csr$m.xml" --out "$tmp/csr$m-$cache" --quiet
    /usr/bin/python3 -c "
import numpy as np; y = np.load('$tmp/csr$m-$cache/y.npy'); r = np.load('$tmp/csr_ref$m.npy')
e = np.abs(y - r).max() / np.abs(r).max(); assert e < 1e-6, e
import json; kept = json.load(open('$tmp/csr$m-$cache/report.json'))['prediction']['kept_bytes']
assert kept == ($cache and 8 * $nnz + 4 * 71), kept  # the plan is priced as the arrays it is built from" ||
      { echo "FAIL: csr linear, $m token(s), plan cache $cache: not numpy's x W^T"; fails=$((fails + 1)); }
  done
done
else
  echo "note: /usr/bin/python3 has no numpy: the CSR linear against numpy is not run"
fi
YMLOPT_SPARSE_PLAN_CACHE_MB=-3 expect_rc 0 "info with a bad plan cache size" -- "$y" info
expect_in "ymlopt: warning: YMLOPT_SPARSE_PLAN_CACHE_MB='-3' is not a size in MiB; using 256" "bad plan cache size warned"
expect_rc 0 "mlp with dmdas and 1 cpu" -- "$y" run workflows/models/mlp2.xml --sched dmdas --ncpu 1 --out "$tmp/mlp" --quiet
# the machine's task history (StarPU-style history model): a second run is predicted from
# the first one's task times; --no-history neither reads nor writes it
export XDG_CACHE_HOME="$tmp/cache"
for i in 1 2; do
  expect_rc 0 "mlp run $i for the history" -- "$y" run workflows/models/mlp2.xml --backend sequential --out "$tmp/h$i" --quiet
done
cp "$tmp"/cache/ymlopt/history-*.json "$tmp/history-after-2.json"
expect_rc 0 "mlp without history" -- "$y" run workflows/models/mlp2.xml --backend sequential --out "$tmp/h3" --quiet --no-history
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import glob, json, sys
t = sys.argv[1]
p = [json.load(open(f"{t}/h{i}/report.json"))["prediction"] for i in (1, 2, 3)]
n = len(json.load(open(f"{t}/h2/report.json"))["tasks"])
assert p[0]["history_tasks"] == 0 and p[1]["history_tasks"] == n and p[2]["history_tasks"] == 0, [q["history_tasks"] for q in p]
h = json.load(open(glob.glob(f"{t}/cache/ymlopt/history-*.json")[0]))["seconds"]
assert h == json.load(open(f"{t}/history-after-2.json"))["seconds"]  # the third run recorded nothing
assert min(len(v) for v in h.values()) == 2, h  # two runs recorded
print(f"ok: second run predicted from the first one's {n} task times; --no-history left the history alone")
PY
# ymlopt calibrate --quick (into this test's cache): the rates the model prices tasks with,
# CSR at one token (on its plan) among them; a run then says it is calibrated
expect_rc 0 "calibrate --quick" -- "$y" calibrate --quick
expect_in "csr    m=1     n=768   k=768" "CSR's one-token rate"
expect_rc 0 "mlp on the calibration" -- "$y" run workflows/models/mlp2.xml --backend sequential --out "$tmp/cal" --quiet
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import glob, json, sys
t = sys.argv[1]
c = json.load(open(glob.glob(f"{t}/cache/ymlopt/calibration-*.json")[0]))
assert {p["m"] for p in c["kernels"]["csr"]} == {1, 4, 128}, c["kernels"]["csr"]
assert all(p["gflops"] > 0 for v in c["kernels"].values() for p in v)
p = json.load(open(f"{t}/cal/report.json"))["prediction"]
assert p["calibrated"] and p["status"] != "uncalibrated (run ymlopt calibrate)", p["status"]
print("ok: calibrate wrote every rate; the next run is priced with it")
PY
unset XDG_CACHE_HOME
# --warmup: the workflow runs again in the same process; the report is the last run's
starpu_cuda=$("$y" info --json | python3 -c "import json, sys; print(json.load(sys.stdin)['starpu']['cuda'])")
for backend in starpu sequential; do
  expect_rc 0 "warm-up, $backend" -- "$y" run workflows/models/mlp2.xml --backend $backend --warmup 2 --out "$tmp/warm-$backend"
  expect_in "after 2 warm-up runs (makespan" "warm-up makespans in the summary"
  python3 - "$tmp/warm-$backend" "$backend" "$starpu_cuda" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
t = r["totals"]
assert len(t["warmup_us"]) == 2 and min(t["warmup_us"]) > 0, t
assert len(r["tasks"]) == t["tasks_run"] == t["tasks"], t
assert max(x["end_us"] for x in r["tasks"]) <= t["makespan_us"] + 1
print("ok: 2 warm-up runs", t["warmup_us"], "then", t["makespan_us"])
# the command's wall time by phase: each phase measured, the run split adding up to the run
ph = r["phases_us"]
assert all(ph[k] >= 0 for k in ("probe", "compile", "data", "predict", "run", "history")), ph
s = ph["run_split"]
assert abs(s["makespan"] - t["makespan_us"]) < 1 and abs(s["warmup"] - sum(t["warmup_us"])) < 1, (s, t)
assert abs(s["runtime_start_stop"] + s["setup"] + s["warmup"] + s["makespan"] - ph["run"]) < 1 and s["runtime_start_stop"] >= 0, ph
assert ph["total"] >= sum(ph[k] for k in ("probe", "compile", "data", "predict", "run", "history")) - 1, ph
print("ok: phases", {k: round(v / 1e3, 1) for k, v in ph.items() if k != "run_split"})
# no OpenCL worker asked for: no device probe, unless this StarPU may start CUDA workers
may_cuda = sys.argv[2] == "starpu" and sys.argv[3] == "True"
assert r["machine"]["devices_probed"] == may_cuda, (r["machine"]["devices_probed"], sys.argv[2:])
PY
  expect_in "wall " "the summary's wall line"
done
# nn.linear's f32 weights: a single forward packs none (first uses), a warm-up
# run packs them on their second use and reuses them after; the same logits
write_ids "$tmp/gids.npy" 64
"$y" model init --arch gpt2 --preset tiny --seed 3 "$tmp/g.safetensors" >/dev/null
G=(workflows/models/gpt2.xml --set weights="$tmp/g.safetensors" --set ids="$tmp/gids.npy" --set batch=2 --set seq=32
  --set layers=2 --set width=96 --set heads=3 --set vocab=512 --set context=64 --set tile_n=32 -q)
expect_rc 0 "gpt2 tiny, one forward" -- "$y" run "${G[@]}" --out "$tmp/gp1"
expect_rc 0 "gpt2 tiny, 2 warm-up runs" -- "$y" run "${G[@]}" --warmup 2 --out "$tmp/gp3"
python3 - "$tmp/gp1" "$tmp/gp3" <<'PY' || fails=$((fails + 1))
import json, struct, sys
one, warm = (json.load(open(d + "/report.json"))["kept_panels"]["f32"] for d in sys.argv[1:3])
assert one["packed"] == 0 and one["first_uses"] > 0 and one["bytes"] == 0, one
assert warm["packed"] == one["first_uses"] and warm["reused"] == warm["packed"] and warm["bytes"] > 0, (one, warm)
a, b = (open(d + "/logits.npy", "rb").read() for d in sys.argv[1:3])
n = (len(a) - 128) // 4
x, y = struct.unpack(f"<{n}f", a[-4 * n:]), struct.unpack(f"<{n}f", b[-4 * n:])
worst = max(abs(p - q) for p, q in zip(x, y)) / max(abs(p) for p in x)
assert worst < 1e-5, worst
print("ok: kept panels", warm, "logits within", worst)
PY
expect_rc 2 "negative --warmup" -- "$y" run workflows/models/mlp2.xml --warmup -1 --out "$tmp/w1"
expect_in "--warmup must be >= 0" "negative warm-up refused"
expect_rc 2 "--warmup with --checkpoint" -- "$y" run workflows/models/mlp2.xml --warmup 1 --checkpoint tasks --out "$tmp/w2"
expect_in "cannot be combined with --checkpoint tasks" "warm-up with checkpoints refused"
# c starts at zeros and a task adds one: every run starts from zeros again
cat >"$tmp/acc.xml" <<'XML'
<workflow name="acc">
  <data name="one" dtype="f64" shape="4" init="ones"/>
  <data name="c" dtype="f64" shape="4" init="zeros"/>
  <task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="c"/></task>
  <save data="c" to="c.npy"/>
</workflow>
XML
expect_rc 0 "--warmup on an accumulating workflow" -- "$y" run "$tmp/acc.xml" --warmup 2 --out "$tmp/w3"
python3 - "$tmp/w3/c.npy" <<'PY' || fails=$((fails + 1))
import struct, sys
b = open(sys.argv[1], "rb").read()
c = struct.unpack("<4d", b[-32:])
assert c == (1.0, 1.0, 1.0, 1.0), c
print("ok: after 2 warm-up runs c is", c)
PY
# ... but a tensor mapped from a file and written in place would carry over
sed "s|init=\"zeros\"|src=\"$tmp/w3/c.npy\"|" "$tmp/acc.xml" >"$tmp/acc-file.xml"
expect_rc 2 "--warmup writing a mapped tensor" -- "$y" run "$tmp/acc-file.xml" --warmup 1 --out "$tmp/w4"
expect_in "writes 'c', which the run maps from $tmp/w3/c.npy" "in-place write of a mapped tensor refused"
finish
