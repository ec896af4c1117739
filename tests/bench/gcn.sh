#!/usr/bin/env bash
# One GCN layer, relu(Â X W), as workflows/ops/gcn.xml runs it (row blocks of a
# CSR Â, op.csr_matmul per block, on the StarPU workers) against PyTorch's
# sparse CSR product on the same Â, X, W (python3-torch, as many threads as
# workers). The workflow's layer time is the span of its GEMM, aggregation and
# relu tasks (report.json), without the graph's generation and cutting.
#
#   tests/bench/gcn.sh build/bin/ymlopt [N] [F] [BLOCKS] [REPS]
set -u
bin=$1 n=${2:-100000} f=${3:-64} blocks=${4:-8} reps=${5:-3}
py=/usr/bin/python3
"$py" -c "import torch" 2>/dev/null || { echo "skip: $py has no torch (Debian python3-torch)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
spans=()
for r in $(seq "$reps"); do
  "$bin" run workflows/ops/gcn.xml --set n="$n" --set f_in="$f" --set f_out="$f" --set blocks="$blocks" \
    --set save=$([ "$r" = 1 ] && echo true || echo false) --quiet --out "$dir/run$r" || exit 1
  if [ "$r" != 1 ]; then cp "$dir/run1/"{A,A_index,A_ptr,X,W}.npy "$dir/run$r/"; fi
done
"$py" - "$dir" "$reps" <<'PY'
import json, sys, time
import numpy as np
import torch
d, reps = sys.argv[1], int(sys.argv[2])
spans, workers = [], 0
for r in range(1, reps + 1):
    rep = json.load(open(f"{d}/run{r}/report.json"))
    ts = [t for t in rep["tasks"] if t["component"] in ("blas.gemm", "op.csr_matmul", "nn.relu")]
    spans.append((max(t["end_us"] for t in ts) - min(t["start_us"] for t in ts)) / 1e6)
    workers = len(rep["workers"])
ours = min(spans)
a, col, ptr = (np.load(f"{d}/run1/{x}.npy") for x in ("A", "A_index", "A_ptr"))
x, w, h = np.load(f"{d}/run1/X.npy"), np.load(f"{d}/run1/W.npy"), np.load(f"{d}/run1/H.npy")
n, nnz = len(ptr) - 1, int(ptr[-1])
torch.set_num_threads(workers)
A = torch.sparse_csr_tensor(torch.from_numpy(ptr.astype(np.int64)), torch.from_numpy(col[:nnz].astype(np.int64)),
                            torch.from_numpy(a[:nnz]), size=(n, n))
X, W = torch.from_numpy(x), torch.from_numpy(w)
best = 1e30
for _ in range(5):
    t0 = time.perf_counter()
    ref = torch.relu(A @ (X @ W))
    best = min(best, time.perf_counter() - t0)
err = float((torch.from_numpy(h) - ref).abs().max() / ref.abs().max())
print(f"GCN layer n={n} nnz={nnz} f={x.shape[1]}->{w.shape[1]}, {workers} workers/threads")
print(f"  workflow layer span {ours*1e3:.1f} ms (best of {reps}: {', '.join(f'{s*1e3:.1f}' for s in spans)})")
print(f"  torch sparse CSR    {best*1e3:.1f} ms (best of 5), max error vs torch {err:.1e} of the largest")
print(f"RESULT gcn workflow/torch {ours / best:.2f}")
PY
