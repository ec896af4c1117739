#!/usr/bin/env bash
# One GCN layer, relu(Â X W), as workflows/ops/gcn.xml runs it (row blocks of a
# CSR Â, op.csr_matmul per block, on the StarPU workers) against SciPy's CSR
# product (python3-scipy; its sparse product is one thread, X W on numpy's BLAS)
# and PyTorch's sparse CSR product (python3-torch, as many threads as workers)
# on the same Â, X, W. The workflow's layer time is the span of its GEMM, aggregation and
# relu tasks (report.json), without the graph's generation and cutting; the
# layer is computed REPS times in the run (repeat=) and the best warm one counts.
#
#   tests/bench/gcn.sh build/bin/ymlopt [N] [F] [BLOCKS] [REPS]
set -u
bin=$1 n=${2:-100000} f=${3:-64} blocks=${4:-8} reps=${5:-4}
py=/usr/bin/python3
"$py" -c "import torch, scipy" 2>/dev/null || { echo "skip: $py lacks torch or scipy (python3-torch, python3-scipy)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" run workflows/ops/gcn.xml --set n="$n" --set f_in="$f" --set f_out="$f" --set blocks="$blocks" \
  --set repeat="$reps" --set save=true --quiet --out "$dir/run" || exit 1
"$py" - "$dir" "$reps" <<'PY'
import json, sys, time
import numpy as np
import scipy.sparse
import torch
d, reps = sys.argv[1], int(sys.argv[2])
rep = json.load(open(f"{d}/run/report.json"))
workers = len(rep["workers"])
spans = []
for r in range(reps):
    ts = [t for t in rep["tasks"] if t["name"].startswith((f"xw{r}(", f"aggregate{r}(", f"relu{r}("))]
    spans.append((max(t["end_us"] for t in ts) - min(t["start_us"] for t in ts)) / 1e6)
ours = min(spans[1:]) if reps > 1 else spans[0]
a, col, ptr = (np.load(f"{d}/run/{x}.npy") for x in ("A", "A_index", "A_ptr"))
x, w, h = np.load(f"{d}/run/X.npy"), np.load(f"{d}/run/W.npy"), np.load(f"{d}/run/H.npy")
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
S = scipy.sparse.csr_matrix((a[:nnz], col[:nnz], ptr), shape=(n, n))
best_sp = 1e30
for _ in range(5):
    t0 = time.perf_counter()
    ref_sp = np.maximum(S @ (x @ w), 0)
    best_sp = min(best_sp, time.perf_counter() - t0)
err_sp = float(np.abs(h - ref_sp).max() / np.abs(ref_sp).max())
print(f"GCN layer n={n} nnz={nnz} f={x.shape[1]}->{w.shape[1]}, {workers} workers/threads")
print(f"  workflow layer span {ours*1e3:.1f} ms warm (repetitions: {', '.join(f'{s*1e3:.1f}' for s in spans)}; the first cold)")
print(f"  torch sparse CSR    {best*1e3:.1f} ms (best of 5), max error vs torch {err:.1e} of the largest")
print(f"  scipy CSR           {best_sp*1e3:.1f} ms (best of 5), max error vs scipy {err_sp:.1e} of the largest")
print(f"RESULT gcn workflow/torch {ours / best:.2f}")
print(f"RESULT gcn workflow/scipy {ours / best_sp:.2f}")
PY
