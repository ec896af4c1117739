#!/usr/bin/env bash
# --backend starpu-mpi on localhost: 2 and 4 ranks (oversubscribed) give the
# outputs of the single-process sequential run (tiled GEMM, blocked Cholesky
# and LU, a GPT-2 block, a power iteration in a runtime loop), rank 0 alone writes the run directory and merges every
# rank's tasks into one report.json/trace.json; a component that throws on
# rank 1 and a rank killed with kill -9 end the job with a non-zero exit
# within 30 s, never a hang.
source "$(dirname "$0")/lib.sh"
y=$1
if ! command -v mpirun >/dev/null; then
  echo "skip: no mpirun (Debian openmpi-bin libopenmpi-dev; scripts/setup.sh installs them)"
  exit 77
fi
if "$y" run --help | grep -q starpu-mpi; then :; else
  echo "skip: $y was built without StarPU-MPI (needs MPI and starpumpi-1.3 at configure time)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1
mpi() { local n=$1; shift; timeout 60 mpirun --oversubscribe -np "$n" "$y" "$@"; }

# same A B TOL: two .npy/.safetensors files hold the same tensors (max |a-b| <= TOL * max |b|)
same() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    out = {}
    if path.endswith(".npy"):
        n = struct.unpack("<H", raw[8:10])[0]
        hdr = raw[10:10 + n].decode()
        code = "d" if "<f8" in hdr else "f"
        data = raw[10 + n:]
        out["x"] = struct.unpack("<%d%s" % (len(data) // struct.calcsize(code), code), data)
        return out
    n = struct.unpack("<Q", raw[:8])[0]
    meta = json.loads(raw[8:8 + n])
    for k, v in meta.items():
        if k == "__metadata__": continue
        code = {"F32": "f", "F64": "d"}[v["dtype"]]
        b, e = v["data_offsets"]
        seg = raw[8 + n + b:8 + n + e]
        out[k] = struct.unpack("<%d%s" % (len(seg) // struct.calcsize(code), code), seg)
    return out
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (a.keys(), b.keys())
worst = 0.0
for k in a:
    assert len(a[k]) == len(b[k]), k
    scale = max(max(abs(v) for v in b[k]), 1e-30)
    worst = max(worst, max(abs(x - z) for x, z in zip(a[k], b[k])) / scale)
print("max relative difference %.3g" % worst)
sys.exit(0 if worst <= tol else 1)
PY
}

# merged N DIR: one report.json with N ranks, every task done with a rank and a
# RANK:WORKER worker, one trace lane per rank:worker, bytes moved reported;
# ranks other than 0 wrote nothing into DIR
merged() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
n, d = int(sys.argv[1]), sys.argv[2]
r = json.load(open(d + "/report.json"))
assert r["status"] == "ok" and r["backend"] == "starpu-mpi", r["status"]
assert r["mpi"]["ranks"] == n and len(r["mpi"]["per_rank"]) == n
ranks = {t["rank"] for t in r["tasks"]}
assert all(t["status"] == "done" for t in r["tasks"])
assert ranks == set(range(n)), ranks
for t in r["tasks"]:
    assert t["worker"].split(":")[0] == str(t["rank"]), t
lanes = {e["args"]["name"] for e in json.load(open(d + "/trace.json"))["traceEvents"] if e["name"] == "thread_name"}
assert lanes == set(r["workers"]) and all(":" in w for w in lanes), lanes
moved = r["mpi"]["bytes_moved"]
assert moved > 0 and moved == sum(p["bytes_received"] for p in r["mpi"]["per_rank"])
assert all(p["peak_rss_bytes"] > 2**20 for p in r["mpi"]["per_rank"]), r["mpi"]["per_rank"]  # each rank's own
extra = sorted(set(os.listdir(d)) - {"report.json", "trace.json", "dag.dot", "run.log", "starpu", "C.safetensors", "L.safetensors", "LU.safetensors", "logits.npy"})
assert not extra, extra
print("%d ranks ran %s tasks, %.2f MiB moved" % (n, sorted((p["rank"], p["tasks_run"]) for p in r["mpi"]["per_rank"]), moved / 2**20))
PY
}

# tiled GEMM (f32): C saved once, by rank 0
gemm=(workflows/linalg/tiled_gemm.xml --set n=384 --set bs=96 --set save=true --quiet)
expect_rc 0 "gemm sequential" -- "$y" run "${gemm[@]}" --backend sequential --out "$tmp/gemm-seq"
# Cholesky (f64) with the factor saved: the shipped workflow plus one <save>
sed 's|</workflow>|  <save data="A" to="L.safetensors"/>\n</workflow>|' workflows/linalg/cholesky.xml >"$tmp/cholesky.xml"
chol=("$tmp/cholesky.xml" --set n=320 --set bs=64 --quiet)
expect_rc 0 "cholesky sequential" -- "$y" run "${chol[@]}" --backend sequential --out "$tmp/chol-seq"
for n in 2 4; do
  expect_rc 0 "gemm on $n ranks" -- mpi $n run "${gemm[@]}" --backend starpu-mpi --out "$tmp/gemm-$n"
  expect_rc 0 "gemm on $n ranks equals the sequential run" -- same "$tmp/gemm-$n/C.safetensors" "$tmp/gemm-seq/C.safetensors" 1e-6
  echo "  $out"
  expect_rc 0 "gemm on $n ranks: one merged report" -- merged $n "$tmp/gemm-$n"
  echo "  $out"
  expect_rc 0 "cholesky on $n ranks" -- mpi $n run "${chol[@]}" --backend starpu-mpi --out "$tmp/chol-$n"
  expect_rc 0 "cholesky on $n ranks equals the sequential run" -- same "$tmp/chol-$n/L.safetensors" "$tmp/chol-seq/L.safetensors" 1e-12
  echo "  $out"
  expect_rc 0 "cholesky on $n ranks: one merged report with the residual check" -- merged $n "$tmp/chol-$n"
  python3 -c "
import json, sys
r = json.load(open('$tmp/chol-$n/report.json'))
res = [t for t in r['tasks'] if t['name'] == 'residual'][0]
assert res['results']['max_rel'] < 1e-12, res
" || { echo "FAIL: cholesky on $n ranks: residual"; fails=$((fails + 1)); }
done

# blocked LU without pivoting (getrf of a diagonal tile from a test plugin built here with the
# header-only SDK, then blas.trsm and blas.gemm), on an SPD matrix (stable without pivoting)
cat >"$tmp/getrf.cpp" <<'EOF'
#include <ymlopt/sdk.hpp>
// test.getrf_nopiv: a := L\U in place (L unit lower, U upper), no pivoting
namespace {
void getrf(ymlopt::KernelContext& ctx) {
  const ymlopt::TensorView& a = ctx.port(0);
  if (a.dtype != ymlopt::DType::f64 || a.rows != a.cols) throw ymlopt::KernelError("need a square f64 tile");
  double* p = a.ptr<double>();
  for (std::int64_t k = 0; k < a.rows; ++k)
    for (std::int64_t i = k + 1; i < a.rows; ++i) {
      const double l = p[i * a.ld + k] /= p[k * a.ld + k];
      for (std::int64_t j = k + 1; j < a.cols; ++j) p[i * a.ld + j] -= l * p[k * a.ld + j];
    }
}
}  // namespace
YMLOPT_PLUGIN(reg) {
  ymlopt::ComponentSpec s;
  s.name = "test.getrf_nopiv";
  s.ports = {{"a", ymlopt::Access::read_write, {ymlopt::DType::f64}, false, 2, "square tile"}};
  s.cpu = getrf;
  reg.add(std::move(s));
}
EOF
cat >"$tmp/lu.xml" <<'EOF'
<workflow name="lu">
  <param name="n" type="int" default="256"/>
  <param name="bs" type="int" default="64"/>
  <param name="nt" type="int" default="${ceildiv(n, bs)}"/>
  <data name="A" dtype="f64" shape="${n},${n}" tile="${bs},${bs}" init="spd" seed="5"/>
  <seq var="k" from="0" to="${nt}">
    <task component="test.getrf_nopiv" name="getrf(${k})"><inout port="a" data="A[${k},${k}]"/></task>
    <par var="j" from="${k+1}" to="${nt}">
      <task component="blas.trsm" name="trsm_u(${k},${j})"><in port="a" data="A[${k},${k}]"/><inout port="b" data="A[${k},${j}]"/>
        <arg name="side" value="left"/><arg name="uplo" value="lower"/><arg name="trans" value="notrans"/><arg name="diag" value="unit"/></task>
      <task component="blas.trsm" name="trsm_l(${j},${k})"><in port="a" data="A[${k},${k}]"/><inout port="b" data="A[${j},${k}]"/>
        <arg name="side" value="right"/><arg name="uplo" value="upper"/><arg name="trans" value="notrans"/><arg name="diag" value="nonunit"/></task>
    </par>
    <par var="i" from="${k+1}" to="${nt}"><par var="j" from="${k+1}" to="${nt}">
      <task component="blas.gemm" name="update(${i},${j},${k})"><in port="a" data="A[${i},${k}]"/><in port="b" data="A[${k},${j}]"/>
        <inout port="c" data="A[${i},${j}]"/><arg name="alpha" value="-1"/><arg name="beta" value="1"/></task>
    </par></par>
  </seq>
  <save data="A" to="LU.safetensors"/>
</workflow>
EOF
if g++ -std=c++20 -O2 -shared -fPIC -I components/sdk/include "$tmp/getrf.cpp" -o "$tmp/libgetrf.so" 2>"$tmp/getrf.log"; then
  lu=("$tmp/lu.xml" --plugin "$tmp/libgetrf.so" --set n=256 --set bs=64 --quiet)
  expect_rc 0 "lu sequential" -- "$y" run "${lu[@]}" --backend sequential --out "$tmp/lu-seq"
  # the factors are right: L U reproduces the matrix (saved by a run of its init alone), n=96
  expect_rc 0 "lu sequential, n=96" -- "$y" run "$tmp/lu.xml" --plugin "$tmp/libgetrf.so" --set n=96 --set bs=32 --quiet \
    --backend sequential --out "$tmp/lu96"
  printf '<workflow name="a0"><data name="A" dtype="f64" shape="96,96" init="spd" seed="5"/><save data="A" to="A.safetensors"/></workflow>\n' >"$tmp/a0.xml"
  "$y" run "$tmp/a0.xml" --backend sequential --out "$tmp/a0" --quiet
  expect_rc 0 "lu: L U = A" -- python3 - "$tmp/lu96/LU.safetensors" "$tmp/a0/A.safetensors" <<'PY'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; m = json.loads(raw[8:8 + n])
    v = [v for k, v in m.items() if k != "__metadata__"][0]; b, e = v["data_offsets"]
    x = struct.unpack("<%dd" % ((e - b) // 8), raw[8 + n + b:8 + n + e]); c = v["shape"][1]
    return [x[r * c:(r + 1) * c] for r in range(v["shape"][0])]
lu, a = load(sys.argv[1]), load(sys.argv[2])
n = len(a)
err = max(abs(sum((lu[i][k] if k < i else 1.0) * lu[k][j] for k in range(min(i, j) + 1)) - a[i][j]) for i in range(n) for j in range(n))
err /= max(abs(v) for row in a for v in row)
print("max |LU - A| / max |A| = %.2g" % err); sys.exit(0 if err < 1e-12 else 1)
PY
  echo "  $out"
  for n in 2 4; do
    expect_rc 0 "lu on $n ranks" -- mpi $n run "${lu[@]}" --backend starpu-mpi --out "$tmp/lu-$n"
    expect_rc 0 "lu on $n ranks equals the sequential run" -- same "$tmp/lu-$n/LU.safetensors" "$tmp/lu-seq/LU.safetensors" 1e-12
    echo "  $out"
  done
else
  echo "FAIL: the LU test plugin does not build"; head -5 "$tmp/getrf.log"; fails=$((fails + 1))
fi

# a GPT-2 block (one layer of the tiny model, column-tiled linears, head groups)
"$y" model init --arch gpt2 --preset tiny --seed 3 --layers 1 "$tmp/w.safetensors" >/dev/null
write_ids "$tmp/ids.npy" 14
gpt=(workflows/models/gpt2.xml --set weights="$tmp/w.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=7
  --set layers=1 --set width=96 --set heads=3 --set vocab=512 --set context=64 --set tile_n=40 --set tile_vocab=100 --quiet)
expect_rc 0 "gpt2 block sequential" -- "$y" run "${gpt[@]}" --backend sequential --out "$tmp/gpt-seq"
for n in 2 4; do
  expect_rc 0 "gpt2 block on $n ranks" -- mpi $n run "${gpt[@]}" --backend starpu-mpi --out "$tmp/gpt-$n"
  expect_rc 0 "gpt2 block on $n ranks equals the sequential run" -- same "$tmp/gpt-$n/logits.npy" "$tmp/gpt-seq/logits.npy" 1e-5
  echo "  $out"
  expect_rc 0 "gpt2 block on $n ranks: one merged report" -- merged $n "$tmp/gpt-$n"
  echo "  $out"
done

# tensor parallel (--set tp=N, Megatron): shard g's columns of c_attn and c_fc, rows of the two
# projections, on rank g. Two layers, batch 2: equal to the unsharded sequential forward; on N
# ranks the StarPU-MPI bytes equal the estimate's, and each layer moves what tp implies, no more:
# per block the LayerNorm's output to N - 1 ranks and N - 1 partial outputs back, T x width f32 each
"$y" model init --arch gpt2 --preset tiny --seed 3 --layers 2 --heads 4 "$tmp/tp.safetensors" >/dev/null
tpw=(workflows/models/gpt2.xml --set weights="$tmp/tp.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=7
  --set layers=2 --set width=96 --set heads=4 --set vocab=512 --set context=64)
expect_rc 0 "gpt2 2 layers sequential" -- "$y" run "${tpw[@]}" --quiet --backend sequential --out "$tmp/tp-seq"
for n in 2 4; do
  expect_rc 0 "gpt2 tp=$n sequential" -- "$y" run "${tpw[@]}" --set tp=$n --quiet --backend sequential --out "$tmp/tp$n-seq"
  expect_rc 0 "gpt2 tp=$n equals the unsharded forward" -- same "$tmp/tp$n-seq/logits.npy" "$tmp/tp-seq/logits.npy" 1e-5
  expect_rc 0 "gpt2 tp=$n on $n ranks" -- mpi $n run "${tpw[@]}" --set tp=$n --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/tp$n"
  expect_rc 0 "gpt2 tp=$n on $n ranks equals the unsharded forward" -- same "$tmp/tp$n/logits.npy" "$tmp/tp-seq/logits.npy" 1e-5
  for l in 1 2; do
    "$y" estimate "${tpw[@]}" --set tp=$n --set layers=$l --nodes 1 --ranks-per-node $n --ncpu 1 --json >"$tmp/tp$n-est$l.json"
  done
  expect_rc 0 "gpt2 tp=$n on $n ranks: bytes as estimated, per layer as tp implies" -- \
    python3 - "$n" "$tmp/tp$n/report.json" "$tmp/tp$n-est2.json" "$tmp/tp$n-est1.json" <<'PY'
import json, sys
n = int(sys.argv[1])
r, e2, e1 = (json.load(open(p)) for p in sys.argv[2:5])
real = [(p["bytes_sent"], p["bytes_received"]) for p in r["mpi"]["per_rank"]]
assert r["mpi"]["bytes_moved"] == e2["bytes_moved"] and real == [(p["bytes_sent"], p["bytes_received"]) for p in e2["per_rank"]]
T, width = 14, 96
layer = e2["bytes_moved"] - e1["bytes_moved"]
assert layer == 2 * 2 * (n - 1) * T * width * 4, (layer, n)
print("%d bytes moved, %d per layer = 2 blocks x 2 x (N - 1) x T x width x 4" % (e2["bytes_moved"], layer))
PY
  echo "  $out"
done

# the same for LLaMA (grouped-query attention: tp divides kv_heads), tp=2 on 2 ranks
"$y" model init --arch llama --preset tiny --seed 4 --layers 2 "$tmp/tpl.safetensors" >/dev/null
tpl=(workflows/models/llama.xml --set weights="$tmp/tpl.safetensors" --set ids="$tmp/ids.npy" --set batch=2 --set seq=7
  --set layers=2 --set width=96 --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512 --set tile_vocab=128)
expect_rc 0 "llama 2 layers sequential" -- "$y" run "${tpl[@]}" --quiet --backend sequential --out "$tmp/tpl-seq"
expect_rc 0 "llama tp=2 on 2 ranks" -- mpi 2 run "${tpl[@]}" --set tp=2 --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/tpl2"
expect_rc 0 "llama tp=2 on 2 ranks equals the unsharded forward" -- same "$tmp/tpl2/logits.npy" "$tmp/tpl-seq/logits.npy" 1e-5
for l in 1 2; do
  "$y" estimate "${tpl[@]}" --set tp=2 --set layers=$l --nodes 1 --ranks-per-node 2 --ncpu 1 --json >"$tmp/tpl2-est$l.json"
done
expect_rc 0 "llama tp=2 on 2 ranks: bytes as estimated, per layer as tp implies" -- \
  python3 - 2 "$tmp/tpl2/report.json" "$tmp/tpl2-est2.json" "$tmp/tpl2-est1.json" <<'PY'
import json, sys
n = int(sys.argv[1])
r, e2, e1 = (json.load(open(p)) for p in sys.argv[2:5])
assert r["mpi"]["bytes_moved"] == e2["bytes_moved"], (r["mpi"]["bytes_moved"], e2["bytes_moved"])
layer = e2["bytes_moved"] - e1["bytes_moved"]
assert layer == 2 * 2 * (n - 1) * 14 * 96 * 4, layer
print("%d bytes moved, %d per layer" % (e2["bytes_moved"], layer))
PY
echo "  $out"

# pipeline parallel (gpt2_pipeline.xml): layer ranges and their activations on rank s, one
# micro-batch per sequence. Equal to gpt2.xml sequential; on 2 and 4 ranks (= stages) the bytes
# equal the estimate's and are exactly what the pipeline implies: each stage boundary one
# T x width f32 activation, the lookup's output back to stage 0 (the tied table is on the last
# stage) and the ids to it, the logits to rank 0 for the save
"$y" model init --arch gpt2 --preset tiny --seed 3 --layers 4 "$tmp/pp.safetensors" >/dev/null
write_ids "$tmp/pids.npy" 32
ppw=(--set weights="$tmp/pp.safetensors" --set ids="$tmp/pids.npy" --set batch=4 --set seq=8 --set layers=4 --set width=96
  --set heads=3 --set vocab=512 --set context=64 --set tile_vocab=100)
expect_rc 0 "gpt2.xml 4 sequences sequential" -- "$y" run workflows/models/gpt2.xml "${ppw[@]}" --quiet --backend sequential --out "$tmp/pp-ref"
expect_rc 0 "gpt2_pipeline.xml sequential" -- "$y" run workflows/models/gpt2_pipeline.xml "${ppw[@]}" --quiet --backend sequential --out "$tmp/pp-seq"
expect_rc 0 "gpt2_pipeline.xml equals gpt2.xml" -- same "$tmp/pp-seq/logits.npy" "$tmp/pp-ref/logits.npy" 1e-5
for n in 2 4; do
  expect_rc 0 "gpt2 in $n stages on $n ranks" -- mpi $n run workflows/models/gpt2_pipeline.xml "${ppw[@]}" --set stages=$n --quiet \
    --backend starpu-mpi --ncpu 1 --out "$tmp/pp$n"
  expect_rc 0 "gpt2 in $n stages on $n ranks equals gpt2.xml" -- same "$tmp/pp$n/logits.npy" "$tmp/pp-ref/logits.npy" 1e-5
  "$y" estimate workflows/models/gpt2_pipeline.xml "${ppw[@]}" --set stages=$n --nodes 1 --ranks-per-node $n --ncpu 1 --json >"$tmp/pp$n-est.json"
  expect_rc 0 "gpt2 in $n stages: bytes as estimated and as the pipeline implies" -- \
    python3 - $n "$tmp/pp$n/report.json" "$tmp/pp$n-est.json" <<'PY'
import json, sys
n = int(sys.argv[1])
r, e = (json.load(open(p)) for p in sys.argv[2:4])
assert r["mpi"]["bytes_moved"] == e["bytes_moved"], (r["mpi"]["bytes_moved"], e["bytes_moved"])
T, width, vocab = 32, 96, 512
implied = (n - 1) * T * width * 4 + T * 4 + T * width * 4 + T * vocab * 4
assert r["mpi"]["bytes_moved"] == implied, (r["mpi"]["bytes_moved"], implied)
print("%d bytes moved = %d stage boundaries + ids, embeddings and logits" % (implied, n - 1))
PY
  echo "  $out"
done

# tensor parallel inside pipeline stages, chosen with --distribute.
# tpxpp NAME WF REF_DIR EXTRA ODD_COLS ARGS...: WF on 4 ranks as 2 stages of 2 shards equals REF_DIR's
# logits; its bytes equal the estimate's (--distribute auto on 2 nodes of 2), per rank, and what tp x pp
# implies for T = 32, width 96, vocab 512, 4 layers: the stage boundary, the logits to rank 0, EXTRA
# (GPT-2's ids to and lookup output from the tied table on the last stage), per layer and block the
# norm's output to the other shard and its partial back, the final norm's output to the other LM-head
# shard, and that shard's ODD_COLS logits columns to the stage's first rank (which holds the tensor)
tpxpp() {
  local name=$1 wf=$2 ref=$3 extra=$4 odd=$5; shift 5
  expect_rc 0 "$name tp=2 x 2 stages on 4 ranks (--distribute tp=2,pp=2)" -- mpi 4 run "$wf" "$@" \
    --distribute tp=2,pp=2 --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/tpp-$name"
  expect_rc 0 "$name tp=2 x 2 stages equals the one-process forward" -- same "$tmp/tpp-$name/logits.npy" "$ref/logits.npy" 1e-5
  "$y" estimate "$wf" "$@" --distribute auto --nodes 2 --ranks-per-node 2 --ncpu 1 --json >"$tmp/tpp-$name-est.json"
  expect_rc 0 "$name tp=2 x 2 stages: bytes as estimated and as tp x pp implies" -- \
    python3 - "$tmp/tpp-$name/report.json" "$tmp/tpp-$name-est.json" "$extra" "$odd" <<'PY'
import json, sys
r, e = (json.load(open(p)) for p in sys.argv[1:3])
extra, odd = int(sys.argv[3]), int(sys.argv[4])
assert r["set"]["tp"] == "2" and r["set"]["stages"] == "2", r["set"]
real = [(p["bytes_sent"], p["bytes_received"]) for p in r["mpi"]["per_rank"]]
assert real == [(p["bytes_sent"], p["bytes_received"]) for p in e["per_rank"]], (real, e["per_rank"])
T, width, vocab, layers, tp = 32, 96, 512, 4, 2
act = T * width * 4
pipeline = act + T * vocab * 4 + extra
shards = layers * 2 * 2 * (tp - 1) * act + (tp - 1) * act + T * odd * 4
assert r["mpi"]["bytes_moved"] == pipeline + shards, (r["mpi"]["bytes_moved"], pipeline + shards)
print("%d bytes moved = %d pipeline + %d shards" % (pipeline + shards, pipeline, shards))
PY
  echo "  $out"
}
ppw4=("${ppw[@]}" --set heads=4)
expect_rc 0 "gpt2.xml 4 sequences sequential, 4 heads" -- "$y" run workflows/models/gpt2.xml "${ppw4[@]}" --quiet --backend sequential --out "$tmp/pp4-ref"
tpxpp gpt2 workflows/models/gpt2_pipeline.xml "$tmp/pp4-ref" $((32 * 4 + 32 * 96 * 4)) $((86 + 86 + 82)) "${ppw4[@]}"  # odd tiles of 86 rows
expect_rc 2 "--distribute pp on gpt2.xml" -- "$y" run workflows/models/gpt2.xml "${ppw4[@]}" --distribute pp --dry-run
expect_in "gpt2.xml has no pipeline parameter 'stages' (workflows/models/gpt2_pipeline.xml has)" "names the pipeline workflow"
expect_rc 2 "--distribute tp=3 on 4 ranks" -- "$y" estimate workflows/models/gpt2_pipeline.xml "${ppw4[@]}" --distribute tp=3 --nodes 4
expect_in "3 x 1 shards and stages, but the run has 4 ranks" "says why"
expect_rc 1 "tp=3 does not divide 4 heads" -- "$y" run workflows/models/gpt2_pipeline.xml "${ppw4[@]}" --set tp=3 --dry-run
expect_in "tp=3 must divide heads (4) and ffn (384)" "the workflow's require"

# the same for LLaMA (llama_pipeline.xml; the token table on stage 0), 2 stages on 2 ranks:
# the boundary's activations and the logits to rank 0, nothing else
"$y" model init --arch llama --preset tiny --seed 4 --layers 4 "$tmp/lpp.safetensors" >/dev/null
lppw=(--set weights="$tmp/lpp.safetensors" --set ids="$tmp/pids.npy" --set batch=4 --set seq=8 --set layers=4 --set width=96
  --set heads=6 --set kv_heads=2 --set ffn=160 --set vocab=512 --set tile_vocab=128)
expect_rc 0 "llama.xml 4 sequences sequential" -- "$y" run workflows/models/llama.xml "${lppw[@]}" --quiet --backend sequential --out "$tmp/lpp-ref"
expect_rc 0 "llama in 2 stages on 2 ranks" -- mpi 2 run workflows/models/llama_pipeline.xml "${lppw[@]}" --set stages=2 --quiet \
  --backend starpu-mpi --ncpu 1 --out "$tmp/lpp2"
expect_rc 0 "llama in 2 stages on 2 ranks equals llama.xml" -- same "$tmp/lpp2/logits.npy" "$tmp/lpp-ref/logits.npy" 1e-5
expect_rc 0 "llama in 2 stages: bytes as the pipeline implies" -- python3 - "$tmp/lpp2/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
implied = 1 * 32 * 96 * 4 + 32 * 512 * 4
assert r["mpi"]["bytes_moved"] == implied, (r["mpi"]["bytes_moved"], implied)
PY
tpxpp llama workflows/models/llama_pipeline.xml "$tmp/lpp-ref" 0 $((128 + 128)) "${lppw[@]}"  # odd LM-head tiles of 128

# memory that scales with ranks: GPT-2 with 56 MiB of f32 weights in column tiles. Each rank
# holds what it owns (its tiles in blocks of their own, read from the file; wte whole on its
# owner, of which it reads its own rows), exactly as `ymlopt estimate` predicts, and its
# peak RSS falls with the ranks: every rank used to map and read every weight. Each run
# records what a rank used beyond its data (a history of its own here); the estimate made
# before the next run adds it back and predicts each rank's peak RSS within 10%
export XDG_CACHE_HOME="$tmp/cache"
# a sanitizer's shadow memory and quarantine (100+ MiB per process) make RSS say nothing of the data
sanitized=0
if ldd "$y" | grep -q 'lib[at]san'; then sanitized=1; echo "note: sanitizer build: peak RSS not compared"; fi
"$y" model init --arch gpt2 --preset tiny --seed 5 --layers 4 --width 512 --heads 8 --ffn 2048 --vocab 4096 --context 64 \
  "$tmp/m.safetensors" >/dev/null
write_ids "$tmp/mids.npy" 32
big=(workflows/models/gpt2.xml --set weights="$tmp/m.safetensors" --set ids="$tmp/mids.npy" --set seq=32 --set layers=4
  --set width=512 --set heads=8 --set vocab=4096 --set context=64)
expect_rc 0 "gpt2 56 MiB on 1 rank" -- mpi 1 run "${big[@]}" --backend starpu-mpi --ncpu 1 --quiet --out "$tmp/big-1"
for n in 2 4; do
  expect_rc 0 "estimate of gpt2 56 MiB on $n ranks" -- "$y" estimate "${big[@]}" --nodes 1 --ranks-per-node $n --ncpu 1 --json
  printf '%s\n' "$out" >"$tmp/big-est-$n.json"
  expect_rc 0 "gpt2 56 MiB on $n ranks" -- mpi $n run "${big[@]}" --backend starpu-mpi --ncpu 1 --quiet --out "$tmp/big-$n"
  expect_rc 0 "gpt2 56 MiB on $n ranks equals 1 rank" -- same "$tmp/big-$n/logits.npy" "$tmp/big-1/logits.npy" 1e-5
  expect_rc 0 "gpt2 56 MiB on $n ranks: each rank holds its share, as estimated, and its peak RSS falls, as estimated" -- \
    python3 - "$n" "$tmp/big-1/report.json" "$tmp/big-$n/report.json" "$tmp/big-est-$n.json" "$sanitized" <<'PY'
import json, sys
n, sanitized = int(sys.argv[1]), sys.argv[5] == "1"
one, r, e = (json.load(open(p)) for p in sys.argv[2:5])
held = lambda p: p["allocated_bytes"] + p["mapped_bytes"]
weights = one["memory"]["parameter_total"]
assert [held(p) for p in r["mpi"]["per_rank"]] == [held(p) for p in e["per_rank"]], (r["mpi"]["per_rank"], e["per_rank"])
assert sum(held(p) for p in r["mpi"]["per_rank"]) < 1.1 * held(one["mpi"]["per_rank"][0])  # split, not copied
rss1 = one["mpi"]["per_rank"][0]["peak_rss_bytes"]
real = [p["peak_rss_bytes"] for p in r["mpi"]["per_rank"]]
pred = [p["peak_rss_bytes"] for p in e["per_rank"]]
for p, rss, guess in zip(r["mpi"]["per_rank"], real, pred):
    assert held(p) < weights / n + weights / 4, (held(p), weights)
    assert sanitized or rss < rss1 - 0.3 * weights, (rss, rss1, weights)
    assert sanitized or abs(guess - rss) <= 0.1 * rss, (pred, real)
print("weights %.1f MiB; held per rank %s MiB; peak RSS %s MiB, estimated %s (1 rank: %.0f)" % (weights / 2**20,
      [round(held(p) / 2**20, 1) for p in r["mpi"]["per_rank"]], [round(x / 2**20) for x in real],
      [round(x / 2**20) for x in pred], rss1 / 2**20))
PY
  echo "  $out"
done
unset XDG_CACHE_HOME

# past one rank's memory: a 208 MiB GPT-2, each rank in a memory cgroup of its own limited to
# 180 MiB (as Slurm's --mem-per-cpu does). One rank refuses to start with a clear message that
# names the limit and the ranks that fit; 2 and 4 ranks run it and give the unlimited logits
if [ $sanitized = 1 ]; then
  echo "skip: sanitizer build: the runs under a memory limit"
elif cg=$(tests/e2e/in_memory_cgroup.sh --make); then
  "$y" model init --arch gpt2 --preset tiny --seed 5 --layers 4 --width 1024 --heads 8 --ffn 4096 --vocab 4096 \
    --context 64 "$tmp/l.safetensors" >/dev/null
  lg=(workflows/models/gpt2.xml --set weights="$tmp/l.safetensors" --set ids="$tmp/mids.npy" --set seq=32 --set layers=4
    --set width=1024 --set heads=8 --set vocab=4096 --set context=64 --quiet --backend starpu-mpi --ncpu 1)
  limited() { local n=$1; shift; timeout 60 mpirun --oversubscribe -np "$n" tests/e2e/in_memory_cgroup.sh "$cg" $((180 << 20)) "$y" "$@"; }
  expect_rc 0 "gpt2 208 MiB, no limit" -- mpi 1 run "${lg[@]}" --out "$tmp/lg-free"
  expect_rc 1 "gpt2 208 MiB on 1 rank limited to 180 MiB" -- limited 1 run "${lg[@]}" --out "$tmp/lg-1"
  expect_in "rank 0: out of memory: the data this rank holds need 210.3 MiB (1.9 MiB allocated, 208.5 MiB mapped from src= files) beside the" "message: what it needs"
  expect_in "MiB in use, over the limit of 180.0 MiB (cgroup " "message: the limit and where it comes from"
  expect_in "; on 2 ranks of the starpu-mpi backend each would hold at most 106.0 MiB (\`ymlopt estimate --nodes 2\` plans it)" "message: what fits"
  for n in 2 4; do
    expect_rc 0 "gpt2 208 MiB on $n ranks limited to 180 MiB each" -- limited $n run "${lg[@]}" --out "$tmp/lg-$n"
    expect_rc 0 "gpt2 208 MiB on $n limited ranks equals the unlimited run" -- same "$tmp/lg-$n/logits.npy" "$tmp/lg-free/logits.npy" 1e-5
  done
  # under the limit, the caches of packed weights (copies kept for the run: a pipeline stage
  # reads each weight once per sequence) get a quarter each of what the data leave
  expect_rc 0 "a pipeline under 180 MiB per rank" -- limited 2 run workflows/models/gpt2_pipeline.xml --set weights="$tmp/m.safetensors" \
    --set ids="$tmp/pids.npy" --set batch=4 --set seq=8 --set layers=4 --set width=512 --set heads=8 --set vocab=4096 \
    --set context=64 --set stages=2 --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/cg-pp"
  expect_rc 0 "the panel cache is capped by the memory limit" -- python3 - "$tmp/cg-pp/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
budget, held = r["kept_panels"]["f32"]["budget_bytes"], r["mpi"]["per_rank"][0]["allocated_bytes"] + r["mpi"]["per_rank"][0]["mapped_bytes"]
assert 0 <= budget <= ((180 << 20) - held) // 4, (budget, held)
print("f32 panel budget %.1f MiB beside %.1f MiB of data" % (budget / 2**20, held / 2**20))
PY
  echo "  $out"
  tests/e2e/in_memory_cgroup.sh --remove "$cg"
else
  echo "skip: $cg: the runs under a memory limit"
fi

# tensors written whole, then read as tiles on 3 ranks: the split sends each tile of D to its
# owner, and rank 2 (E is all on rank 1) has no task of its own, so it reaches the end of the run
# before its receives are posted. Hung in 5 of 5 runs until the backend waited for every transfer
# before its closing barrier (starpu_mpi_wait_for_all blocks the progress thread in MPI_Barrier).
{
  echo '<workflow name="split_rounds">'
  echo '  <param name="n" default="384"/><param name="bs" default="96"/>'
  echo '  <data name="X" shape="${n},${n}" tile="${bs},${bs}" init="ones"/>'
  for k in $(seq 1 12); do
    echo "  <data name=\"D$k\" shape=\"\${n},\${n}\" tile=\"\${bs},\${bs}\" init=\"zeros\"/>"
    echo "  <data name=\"E$k\" shape=\"\${n},\${n}\" tile=\"\${bs},\${bs}\" init=\"zeros\" owner=\"1\"/>"
    echo "  <task component=\"tensor.add\"><in port=\"a\" data=\"X\"/><in port=\"b\" data=\"X\"/><out port=\"c\" data=\"D$k\"/></task>"
    echo "  <task component=\"blas.gemm\"><in port=\"a\" data=\"D$k[0,1]\"/><in port=\"b\" data=\"D$k[1,0]\"/><inout port=\"c\" data=\"E$k[1,1]\"/></task>"
  done
  echo '  <save data="E12" to="E12.safetensors"/>'
  echo '</workflow>'
} >"$tmp/split_rounds.xml"
expect_rc 0 "whole-then-tiles sequential" -- "$y" run "$tmp/split_rounds.xml" --quiet --backend sequential --out "$tmp/split-seq"
expect_rc 0 "whole-then-tiles on 3 ranks (a rank with no task receives its tiles)" -- \
  mpi 3 run "$tmp/split_rounds.xml" --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/split-3"
expect_rc 0 "whole-then-tiles on 3 ranks equals the sequential run" -- same "$tmp/split-3/E12.safetensors" "$tmp/split-seq/E12.safetensors" 1e-6

# distribute= and owner= move the tiles: everything on rank 1 moves only what rank 0 saves
sed -e 's|<data name="A" \(.*\)/>|<data name="A" \1 owner="1"/>|' -e 's|<data name="B" \(.*\)/>|<data name="B" \1 owner="1"/>|' \
  -e 's|<data name="C" \(.*\)/>|<data name="C" \1 owner="1"/>|' workflows/linalg/tiled_gemm.xml >"$tmp/gemm_owner.xml"
expect_rc 0 "gemm with owner=1" -- mpi 2 run "$tmp/gemm_owner.xml" --set n=384 --set bs=96 --set save=true --quiet \
  --backend starpu-mpi --out "$tmp/gemm-owner"
python3 -c "
import json
r = json.load(open('$tmp/gemm-owner/report.json'))
ranks = {t['rank'] for t in r['tasks'] if t['component'] == 'blas.gemm'}
assert ranks == {1}, ranks
assert r['mpi']['bytes_moved'] == 384 * 384 * 4, r['mpi']  # C's tiles to rank 0 for the save, nothing else
print('  owner=1: every gemm on rank 1, %d bytes moved' % r['mpi']['bytes_moved'])
" || { echo "FAIL: owner=1"; fails=$((fails + 1)); }
expect_rc 0 "gemm with owner=1 equals the sequential run" -- same "$tmp/gemm-owner/C.safetensors" "$tmp/gemm-seq/C.safetensors" 1e-6

# distribute="rows" (tile row i on rank i % N) gives the same C; "replicate" on A and B: every
# rank starts with their value, so only C's tiles move (to rank 0 for the save)
sed -e 's|\(<data name="[ABC]" [^/]*\)/>|\1 distribute="rows"/>|' workflows/linalg/tiled_gemm.xml >"$tmp/gemm_rows.xml"
expect_rc 0 "gemm with distribute=rows" -- mpi 2 run "$tmp/gemm_rows.xml" --set n=384 --set bs=96 --set save=true --quiet \
  --backend starpu-mpi --out "$tmp/gemm-rows"
expect_rc 0 "gemm with distribute=rows equals the sequential run" -- same "$tmp/gemm-rows/C.safetensors" "$tmp/gemm-seq/C.safetensors" 1e-6
sed -e 's|\(<data name="[AB]" [^/]*\)/>|\1 distribute="replicate"/>|' workflows/linalg/tiled_gemm.xml >"$tmp/gemm_repl.xml"
expect_rc 0 "gemm with A and B replicated" -- mpi 2 run "$tmp/gemm_repl.xml" --set n=384 --set bs=96 --set save=true --quiet \
  --backend starpu-mpi --out "$tmp/gemm-repl"
expect_rc 0 "gemm with A and B replicated equals the sequential run" -- same "$tmp/gemm-repl/C.safetensors" "$tmp/gemm-seq/C.safetensors" 1e-6
python3 -c "
import json
r = json.load(open('$tmp/gemm-repl/report.json'))
assert r['mpi']['bytes_moved'] == 384 * 384 * 4 // 2, r['mpi']  # rank 1's half of C, to rank 0
print('  replicate: %d bytes moved' % r['mpi']['bytes_moved'])
" || { echo "FAIL: replicate"; fails=$((fails + 1)); }
# placement attributes are checked by the compiler
printf '<workflow name="x">\n<data name="A" shape="4,4" tile="2,2" distribute="block-cyclc-2d" owner="${-1}"/>\n</workflow>\n' >"$tmp/bad.xml"
expect_rc 1 "bad distribute= and owner=" -- "$y" check "$tmp/bad.xml"
expect_in "unknown distribute 'block-cyclc-2d' (did you mean 'block-cyclic-2d'?)" "distribute= misspelt"
expect_in "owner=-1 is negative" "negative owner="

# a runtime loop (workflows/linalg/power_iteration.xml: <until> on scalars the tasks write, A
# written whole then read as tiles): every rank evaluates the condition from the owner's value;
# the same iterations and bitwise the same x as the sequential run, and lambda = LAPACK's largest
# eigenvalue modulus of the saved matrix
power=(workflows/linalg/power_iteration.xml --set n=384 --set bs=96 --set save=true --quiet)
expect_rc 0 "power iteration sequential" -- "$y" run "${power[@]}" --backend sequential --out "$tmp/power-seq"
for n in 2 4; do
  expect_rc 0 "power iteration on $n ranks" -- mpi $n run "${power[@]}" --backend starpu-mpi --out "$tmp/power-$n"
  expect_rc 0 "power iteration on $n ranks equals the sequential run" -- same "$tmp/power-$n/x.npy" "$tmp/power-seq/x.npy" 0
  echo "  $out"
  /usr/bin/python3 - "$tmp/power-$n" "$tmp/power-seq" "$n" <<'PY' || { echo "FAIL: power iteration on $n ranks: loop and eigenvalue"; fails=$((fails + 1)); }
import json, sys
import numpy as np
d, seq, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
r, s = json.load(open(d + "/report.json")), json.load(open(seq + "/report.json"))
assert r["status"] == "ok" and r["mpi"]["ranks"] == n, r["status"]
it = r["loops"][0]["iterations"]
assert it == s["loops"][0]["iterations"] and 5 < it < r["loops"][0]["max"], (r["loops"], s["loops"])
ran = {p["rank"]: p["tasks_run"] for p in r["mpi"]["per_rank"]}
assert sum(ran.values()) > it * 16 and all(v > 0 for v in ran.values()), ran  # 16 gemm tiles per iteration
lam = float(np.load(d + "/lambda.npy")[0])
ref = max(abs(np.linalg.eigvals(np.load(d + "/A.npy"))))
assert abs(lam - ref) <= 1e-8 * ref, (lam, ref)
print("  %d ranks: %d iterations, tasks per rank %s, lambda %.12f (LAPACK %.12f)" % (n, it, sorted(ran.items()), lam, ref))
PY
done
# a kernel throwing on rank 1 inside a loop: every rank stops after that iteration (they agree
# after each part), the job ends non-zero, and the error names rank 1's task
cat >"$tmp/loop_throws.xml" <<'EOF'
<workflow name="loop_throws">
  <data name="A" shape="64,64" tile="32,32" init="random" seed="1"/>
  <data name="B" shape="64,64" tile="32,32" init="zeros"/>
  <data name="c" dtype="f64" shape="1" init="zeros"/>
  <until cond="c ge 1e30" max="50">
    <par var="i" from="0" to="2"><par var="j" from="0" to="2">
      <task component="tensor.copy" name="copy(${i},${j})"><in port="x" data="A[${i},${j}]"/><out port="y" data="B[${i},${j}]"/></task>
    </par></par>
    <task component="io.load" name="broken load in a loop"><out port="y" data="B[0,1]"/><arg name="path" value="/nonexistent/b01.npy"/></task>
    <task component="tensor.norm"><in port="x" data="B"/><out port="out" data="c"/></task>
  </until>
</workflow>
EOF
start=$(date +%s)
expect_rc 1 "a component throwing on rank 1 inside a loop fails the job" -- \
  mpi 2 run "$tmp/loop_throws.xml" --backend starpu-mpi --out "$tmp/loop-throws"
expect_in "rank 1: $tmp/loop_throws.xml:9:5: error: task 'broken load in a loop' (component io.load) failed" \
  "the loop failure names rank 1's task"
[ $(($(date +%s) - start)) -le 30 ] || { echo "FAIL: the failing loop took more than 30 s"; fails=$((fails + 1)); }
# <unite> on rank groups: co-method i on rank i % size, the winner's kept data
# saved (x = 2 m for the winner c<m>), the co-methods' records merged on rank 0
cat >"$tmp/unite.xml" <<'EOF'
<workflow name="unite">
  <data name="x" dtype="f64" shape="1" init="zeros"/>
  <unite name="race" exit="all" save_exit="x">
    <par var="m" values="1,2,3">
      <comethod name="c${m}" keep="v${m}">
        <data name="v${m}" dtype="f64" shape="1" init="value" value="${m}"/>
        <task component="tensor.scale" name="scale${m}"><inout port="x" data="v${m}"/><arg name="alpha" value="2"/></task>
      </comethod>
    </par>
  </unite>
  <save data="x" to="x.npy"/>
</workflow>
EOF
for n in 2 3; do
  expect_rc 0 "a unite on $n ranks" -- mpi $n run "$tmp/unite.xml" --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/unite-$n"
  python3 - "$tmp/unite-$n" "$n" <<'PY' || { echo "FAIL: unite on $n ranks"; fails=$((fails + 1)); }
import json, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
r = json.load(open(d + "/report.json"))
u = r["unites"][0]
assert [c["status"] for c in u["comethods"]] == ["converged"] * 3, u
m = int(u["winner"][1:])
raw = open(d + "/x.npy", "rb").read()
x = struct.unpack("<d", raw[-8:])[0]
assert x == 2 * m, (x, m)
ranks = {t["name"]: t["rank"] for t in r["tasks"] if t["name"].startswith("scale")}
assert ranks == {"scale%d" % k: (k - 1) % n for k in (1, 2, 3)}, ranks
print("ok: unite on %d ranks: winner c%d, x = %g, co-methods on ranks %s" % (n, m, x, ranks))
PY
done
# tiled co-method data: GEMMs on tiles of inputs owned across the ranks (one
# written before the unite), the winner's tiled result saved and written again
# after the unite; X = (m / 2) A B for the winner c<m>, on 1 (sequential), 2, 3 and 4 ranks
cat >"$tmp/tiled.xml" <<'EOF'
<workflow name="tiled">
  <data name="A" dtype="f64" shape="64,64" tile="32,32" init="random" seed="1"/>
  <data name="B" dtype="f64" shape="64,64" tile="32,32" init="random" seed="2"/>
  <data name="X" dtype="f64" shape="64,64" tile="32,32" init="zeros"/>
  <data name="s" dtype="f64" shape="1" init="zeros"/>
  <task component="tensor.scale"><inout port="x" data="A[1,0]"/><arg name="alpha" value="3"/></task>
  <unite name="u" exit="all" save_exit="X">
    <par var="m" values="1,2,3">
      <comethod name="c${m}" keep="C${m}">
        <data name="C${m}" dtype="f64" shape="64,64" tile="32,32" init="zeros"/>
        <data name="n${m}" dtype="f64" shape="1" init="zeros"/>
        <par var="i" from="0" to="2"><par var="j" from="0" to="2"><seq var="k" from="0" to="2">
          <task component="blas.gemm"><in port="a" data="A[${i},${k}]"/><in port="b" data="B[${k},${j}]"/>
            <inout port="c" data="C${m}[${i},${j}]"/><arg name="beta" value="1"/><arg name="alpha" value="${m}"/></task>
        </seq></par></par>
        <task component="tensor.scale"><inout port="x" data="C${m}"/><arg name="alpha" value="0.5"/></task>
        <task component="tensor.norm"><in port="x" data="C${m}"/><out port="out" data="n${m}"/></task>
        <publish name="norms" data="C${m}" score="n${m}"/>
      </comethod>
    </par>
  </unite>
  <task component="tensor.scale"><inout port="x" data="X[0,1]"/><arg name="alpha" value="2"/></task>
  <save data="X" to="X.npy"/>
</workflow>
EOF
expect_rc 0 "tiled co-methods, sequential" -- "$y" run "$tmp/tiled.xml" --quiet --backend sequential --out "$tmp/tiled-seq"
for n in 2 3 4; do
  expect_rc 0 "tiled co-methods on $n ranks" -- mpi $n run "$tmp/tiled.xml" --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/tiled-$n"
  python3 - "$tmp/tiled-seq" "$tmp/tiled-$n" <<'PY' || { echo "FAIL: tiled co-methods on $n ranks"; fails=$((fails + 1)); }
import json, struct, sys
def load(d):
    raw = open(d + "/X.npy", "rb").read()
    n = struct.unpack("<H", raw[8:10])[0]
    data = raw[10 + n:]
    m = int(json.load(open(d + "/report.json"))["unites"][0]["winner"][1:])
    return m, struct.unpack("<%dd" % (len(data) // 8), data)
ms, xs = load(sys.argv[1])
mm, xm = load(sys.argv[2])
err = max(abs(a / ms - b / mm) for a, b in zip(xs, xm)) / max(abs(a / ms) for a in xs)
assert err < 1e-14, err
print("ok: X from c%d on ranks = X from c%d sequential, scaled (max relative difference %.1e)" % (mm, ms, err))
PY
done

# co-methods on rank groups of several ranks (more ranks than co-methods): each
# co-method's tiles on its group, its loop's tasks on the ranks that own them,
# its loop conditions, stops (exit first, budget) and gathers agreed by the
# group; a task failing on the second rank of a group fails the co-method
# alone, with that rank's message; results = the sequential run's
cat >"$tmp/groups.xml" <<'EOF'
<workflow name="groups">
  <param name="exit" type="string" default="all"/>
  <param name="cond" type="float" default="1"/>
  <param name="broken" type="bool" default="false"/>
  <data name="A" dtype="f64" shape="64,64" tile="32,32" init="random" seed="1"/>
  <data name="X" dtype="f64" shape="64,64" tile="32,32" init="zeros"/>
  <unite name="u" exit="${exit}" budget_s="1.5" save_exit="X">
    <par var="m" values="1,2">
      <comethod name="c${m}" keep="C${m}">
        <data name="C${m}" dtype="f64" shape="64,64" tile="32,32" init="zeros"/>
        <data name="G${m}" dtype="f64" shape="64,64" init="zeros"/>
        <data name="n${m}" dtype="f64" shape="1" init="value" value="1e30"/>
        <data name="gn${m}" dtype="f64" shape="1" init="zeros"/>
        <par var="i" from="0" to="2"><par var="j" from="0" to="2">
          <task component="tensor.copy"><in port="x" data="A[${i},${j}]"/><out port="y" data="C${m}[${i},${j}]"/></task>
        </par></par>
        <until cond="n${m} le ${cond}" max="1000000">
          <if cond="${broken}"><if cond="${m == 1}">
            <task component="io.load" name="broken"><out port="y" data="C${m}[0,1]"/><arg name="path" value="/nonexistent/c.npy"/></task>
          </if></if>
          <par var="i" from="0" to="2"><par var="j" from="0" to="2">
            <task component="tensor.scale" name="s${m}(${i},${j})"><inout port="x" data="C${m}[${i},${j}]"/>
              <arg name="alpha" value="${cond > 0 ? 0.5 / m : 1}"/></task>
          </par></par>
          <task component="tensor.norm"><in port="x" data="C${m}"/><out port="out" data="n${m}"/></task>
          <publish name="ch" data="C${m}" score="n${m}"/>
          <gather name="ch" into="G${m}" score="gn${m}"/>
        </until>
      </comethod>
    </par>
  </unite>
  <save data="X" to="X.npy"/>
</workflow>
EOF
expect_rc 0 "co-methods on groups, sequential" -- "$y" run "$tmp/groups.xml" --quiet --backend sequential --out "$tmp/groups-seq"
for n in 4 5; do
  for run in all first broken budget; do
    case $run in
      all) set --;; first) set -- --set exit=first;; broken) set -- --set broken=true;;
      budget) set -- --set exit=budget --set cond=-1;;
    esac
    start=$(date +%s)
    expect_rc 0 "co-methods on groups of $n ranks, $run" -- mpi $n run "$tmp/groups.xml" --quiet --backend starpu-mpi --ncpu 1 "$@" --out "$tmp/groups-$n-$run"
    python3 - "$tmp" "$n" "$run" "$(($(date +%s) - start))" <<'PY' || { echo "FAIL: co-methods on groups of $n ranks, $run"; fails=$((fails + 1)); }
import json, struct, sys
tmp, n, run, took = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def load(d):
    raw = open(d + "/X.npy", "rb").read()
    k = struct.unpack("<H", raw[8:10])[0]
    data = raw[10 + k:]
    return json.load(open(d + "/report.json")), struct.unpack("<%dd" % (len(data) // 8), data)
r, x = load("%s/groups-%d-%s" % (tmp, n, run))
_, xs = load(tmp + "/groups-seq")
c = {c["name"]: c for c in r["unites"][0]["comethods"]}
groups = {1: {0, 1}, 2: {2, 3} if n == 4 else {2, 3, 4}}
# the scale tasks ran on two ranks of their co-method's group (the owners of
# the tile columns: a 1 x 2 or 1 x 3 grid over the group)
ran = {}
for t in r["tasks"]:
    if t["name"].startswith("s") and t.get("rank") is not None:
        ran.setdefault(int(t["name"][1]), set()).add(t["rank"])
for m, ranks in ran.items():  # (broken: c1's scales after the failure did not run on rank 1)
    assert ranks <= groups[m] and (len(ranks) == 2 or (run, m) == ("broken", 1)), (m, ran)
assert 2 in ran, ran
status = [c["c1"]["status"], c["c2"]["status"]]
if run == "all":
    assert status == ["converged"] * 2, c
    assert (c["c1"]["iterations"], c["c2"]["iterations"]) == (6, 3), c
    assert (c["c1"]["gathers"], c["c2"]["publishes"]) == (6, 3), c
    assert x == xs, "X differs from the sequential run's"
elif run == "first":  # either winner gives A / 64; the other stopped (or converged before the stop came)
    assert "converged" in status and set(status) <= {"converged", "stopped"}, c
    assert x == xs, "X differs from the sequential run's"
elif run == "broken":
    assert c["c1"]["status"] == "failed" and c["c2"]["winner"] and c["c2"]["iterations"] == 3, c
    assert c["c1"]["error"].startswith("rank 1: ") and "task 'broken' (component io.load) failed" in c["c1"]["error"], c["c1"]["error"]
    assert x == xs
else:  # budget: the loops never converge; the budget stops every rank of a group alike
    assert status == ["stopped"] * 2, c  # (0 iterations too, on a host so loaded that the copies took the budget)
    assert took < 30, took
print("ok: %d ranks, %s: %s" % (n, run, ", ".join("%s %s after %d" % (k, v["status"], v["iterations"]) for k, v in sorted(c.items()))))
PY
  done
done

# the united compression search on 2 ranks (int4-g128 on rank 0, GPTQ on rank
# 1): int4-g128 alone breaks the bound on every unit of this model at once, and
# with nothing left to try it waits while GPTQ, on the other rank, is at work
# (KernelContext::remote_peers_at_work) and stops after a last look once GPTQ
# is idle or done, having adopted GPTQ's configuration. Before, it stopped
# within 0.1 s, first to converge, and the unite chose its uncompressed
# configuration (1,619,072 bytes, error 0).
"$y" model init --arch gpt2 --preset tiny --width 128 --heads 4 --seed 3 "$tmp/cg.safetensors" >/dev/null
write_ids "$tmp/cids.npy" 32
csets="weights=$tmp/cg.safetensors ids=$tmp/cids.npy batch=2 seq=16 layers=2 width=128 heads=4 ffn=384 vocab=512 context=64 tile_n=32"
expect_rc 0 "united compression search on 2 ranks" -- mpi 2 run workflows/unite/compress.xml --set model=workflows/models/gpt2.xml \
  --set "sets=$csets" --set budget=60 --set err_bound=0.03 --set strategies=2,3 --set max_layers=16 --quiet \
  --backend starpu-mpi --ncpu 1 --out "$tmp/compress-2"
python3 - "$tmp/compress-2" <<'PY' || { echo "FAIL: united compression search on 2 ranks"; fails=$((fails + 1)); }
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
c = {c["name"]: c for c in r["unites"][0]["comethods"]}
fin = [t["results"] for t in r["tasks"] if t["name"] == "finish"][0]
p = json.load(open(sys.argv[1] + "/compress/pareto.json"))
f32 = max(q["bytes"] for q in p["all_points"])
assert [c["strategy2"]["status"], c["strategy3"]["status"]] == ["converged"] * 2, c
# (370-400 kB in most runs; 570 kB seen twice on a loaded host, when the co-methods'
# crossovers took another path; the failure this guards against chose all of f32)
assert fin["bytes"] < f32 / 2 and 0 < fin["err"] <= 0.03, (fin, f32)
print("ok: int4-g128 waited for GPTQ on the other rank (ended at %.2f s, GPTQ at %.2f s); chosen %d bytes of %d, error %.4f"
      % (c["strategy2"]["end_s"], c["strategy3"]["end_s"], fin["bytes"], f32, fin["err"]))
PY

# co-methods on two ranks writing the same data are refused, before anything runs
cat >"$tmp/clash.xml" <<'EOF'
<workflow name="clash">
  <data name="x" dtype="f64" shape="1" init="zeros"/>
  <data name="y" dtype="f64" shape="1" init="zeros"/>
  <unite name="u1" exit="all">
    <comethod name="a"><task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task></comethod>
    <comethod name="b"><task component="tensor.scale"><inout port="x" data="y"/><arg name="alpha" value="2"/></task></comethod>
  </unite>
  <unite name="u2" exit="all">
    <comethod name="c"><task component="tensor.scale"><inout port="x" data="y"/><arg name="alpha" value="2"/></task></comethod>
    <comethod name="d"><task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task></comethod>
  </unite>
</workflow>
EOF
expect_rc 0 "the same unites run on --backend starpu" -- "$y" run "$tmp/clash.xml" --quiet --out "$tmp/clash-starpu"
expect_rc 1 "co-methods on two ranks writing one data are refused" -- mpi 2 run "$tmp/clash.xml" --quiet --backend starpu-mpi --out "$tmp/clash-mpi"
expect_in "$tmp/clash.xml:9:5: error: data 'y': unite 'u1' co-method 'b' and unite 'u2' co-method 'c' write it, and they run on different rank groups under starpu-mpi" "the refusal names the data and both co-methods"

# a co-method whose task throws on rank 1 fails alone; when every co-method fails, the job does (exit 1, no hang)
cat >"$tmp/cmfail.xml" <<'EOF'
<workflow name="cmfail">
  <data name="x" dtype="f64" shape="1" init="zeros"/>
  <unite name="race" exit="all" save_exit="x">
    <comethod name="good" keep="g">
      <data name="g" dtype="f64" shape="1" init="value" value="5"/>
      <task component="tensor.scale"><inout port="x" data="g"/><arg name="alpha" value="2"/></task>
    </comethod>
    <comethod name="bad" keep="b">
      <data name="b" dtype="f64" shape="1" init="zeros"/>
      <task component="io.load" name="broken load"><out port="y" data="b"/><arg name="path" value="/nonexistent/b.npy"/></task>
    </comethod>
  </unite>
  <save data="x" to="x.npy"/>
</workflow>
EOF
expect_rc 0 "a failing co-method on rank 1 fails alone" -- mpi 2 run "$tmp/cmfail.xml" --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/cmfail"
python3 -c "
import json, struct
r = json.load(open('$tmp/cmfail/report.json'))
c = {c['name']: c for c in r['unites'][0]['comethods']}
assert r['status'] == 'ok' and c['good']['winner'] and c['bad']['status'] == 'failed', c
assert c['bad']['error'].endswith('cmfail.xml:10:7: error: task \'broken load\' (component io.load) failed: /nonexistent/b.npy: cannot open: No such file or directory'), c['bad']['error']
assert struct.unpack('<d', open('$tmp/cmfail/x.npy', 'rb').read()[-8:])[0] == 10.0
print('ok: the failed co-method is reported with its error, the other one won (x = 10)')
" || { echo "FAIL: a failing co-method under starpu-mpi"; fails=$((fails + 1)); }
sed 's|init="value" value="5"/>|init="value" value="5"/><task component="io.load"><out port="y" data="g"/><arg name="path" value="/nonexistent/g.npy"/></task>|' \
  "$tmp/cmfail.xml" >"$tmp/allfail.xml"
expect_rc 1 "every co-method failing fails the job" -- mpi 2 run "$tmp/allfail.xml" --quiet --backend starpu-mpi --ncpu 1 --out "$tmp/allfail"
expect_in "allfail.xml:3:3: error: every co-method of unite 'race' failed:" "the failure names the unite"
expect_in "co-method 'bad': $tmp/allfail.xml:10:7: error: task 'broken load' (component io.load) failed" "and each co-method's error"

# a component that throws on rank 1 (io.load of a missing file into a tile rank 1 owns)
cat >"$tmp/throws.xml" <<'EOF'
<workflow name="throws">
  <data name="A" shape="64,64" tile="32,32" init="random" seed="1"/>
  <data name="B" shape="64,64" tile="32,32" init="zeros"/>
  <par var="i" from="0" to="2"><par var="j" from="0" to="2">
    <task component="tensor.copy" name="copy(${i},${j})"><in port="x" data="A[${i},${j}]"/><out port="y" data="B[${i},${j}]"/></task>
  </par></par>
  <task component="io.load" name="broken load"><out port="y" data="B[0,1]"/><arg name="path" value="/nonexistent/b01.npy"/></task>
  <task component="tensor.scale"><inout port="x" data="B"/><arg name="alpha" value="2"/></task>
</workflow>
EOF
start=$(date +%s)
expect_rc 1 "a component throwing on rank 1 fails the job" -- mpi 2 run "$tmp/throws.xml" --backend starpu-mpi --out "$tmp/throws"
expect_in "rank 1: " "the failure names its rank"
expect_in "task 'broken load' (component io.load) failed" "the failure names its task"
[ $(($(date +%s) - start)) -le 30 ] || { echo "FAIL: the failing job took more than 30 s"; fails=$((fails + 1)); }
python3 -c "
import json
r = json.load(open('$tmp/throws/report.json'))
t = [t for t in r['tasks'] if t['name'] == 'broken load'][0]
assert r['status'] == 'failed' and t['status'] == 'failed' and t['rank'] == 1, t
" || { echo "FAIL: the report records the failed task and its rank"; fails=$((fails + 1)); }

# a rank killed with kill -9 in the middle of a run: the job ends, non-zero, within 30 s
cat >"$tmp/long.xml" <<'EOF'
<workflow name="long">
  <data name="A" dtype="f64" shape="768,768" tile="128,128" init="random" seed="1"/>
  <data name="C" dtype="f64" shape="768,768" tile="128,128" init="zeros"/>
  <seq var="r" from="0" to="4000">
    <par var="i" from="0" to="6"><par var="j" from="0" to="6">
      <task component="blas.gemm"><in port="a" data="A[${i},${j}]"/><in port="b" data="A[${j},${i}]"/>
        <inout port="c" data="C[${i},${j}]"/><arg name="beta" value="1"/><arg name="alpha" value="1e-3"/></task>
    </par></par>
  </seq>
</workflow>
EOF
start=$(date +%s)
timeout 45 mpirun --oversubscribe -np 2 "$y" run "$tmp/long.xml" --backend starpu-mpi --out "$tmp/long" >"$tmp/long.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # rank 1 is the ymlopt child with OMPI_COMM_WORLD_RANK=1
  for p in $(pgrep -P "$(pgrep -P $job -n mpirun || echo $job)" 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
# kill only once both ranks are inside the run (each rank's board shows a task:
# rank 0 has its SIGTERM handler by then); a fixed sleep raced a slow start
# (StarPU + MPI init under ASan on a loaded machine took more than 2 s)
board_busy() { [ -s "$1" ] && od -An -td8 -v "$1" | tr -s ' \n' '\n' | grep -qv '^0*$'; }
for _ in $(seq 1 300); do
  board_busy "$tmp/long/rank-0.running" && board_busy "$tmp/long/rank-1.running" && break
  sleep 0.1
done
sleep 1
if [ -n "$victim" ]; then
  kill -9 "$victim"
  wait $job
  rc=$?
  rm -rf "${TMPDIR:-/tmp}/ymlopt-starpu-rank1-$victim"  # a killed rank cannot remove its STARPU_HOME
  took=$(($(date +%s) - start))
  out=$(cat "$tmp/long.log")
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $took -gt 30 ]; then
    echo "FAIL: kill -9 of rank 1: exit $rc after ${took}s"; echo "$out" | tail -5; fails=$((fails + 1))
  else
    echo "ok: kill -9 of rank 1 ends the job (exit $rc after ${took}s)"
  fi
  expect_in "rank 1 with PID" "the message names the dead rank"
  expect_in "rank 1: " "rank 0 reports what rank 1 was doing"
  grep -qE "rank 1: (running|idle, last ran) task blas.gemm #" <<<"$out" ||
    { echo "FAIL: the message names the task the dead rank was running (or last ran)"; fails=$((fails + 1)); }
  [ ! -e "$tmp/long/rank-0.running" ] || [ -e "$tmp/long/rank-1.running" ] || { echo "FAIL: no record of rank 1's task"; fails=$((fails + 1)); }
  echo "$out" | grep -E "rank [0-9]+:|signal" | sed 's/^/  /'
else
  echo "FAIL: could not find rank 1's process"; fails=$((fails + 1)); kill $job 2>/dev/null; wait $job
fi
finish
