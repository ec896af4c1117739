#!/usr/bin/env bash
# Semiring workflows (workflows/ops): all-pairs shortest paths by tiled (min, +)
# squaring against numpy's Floyd-Warshall, to the bit (integer weights: every sum
# is exact); a GCN layer relu(Â X W) on row blocks of a CSR Â against numpy, and
# on 2 StarPU-MPI ranks (each its row blocks) against one process, to the bit.
bin=$1
. "$(dirname "$0")/lib.sh"
need_numpy
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(3)
n = 300
w = np.where(rng.random((n, n)) < 0.02, rng.integers(1, 10, (n, n)), np.inf).astype(np.float32)
w[rng.random((n, n)) < 0.002] = -1  # a few negative edges
w = np.where(w < 0, np.where(np.arange(n)[:, None] < np.arange(n)[None, :], -1, np.inf), w).astype(np.float32)  # forward only: no negative cycle
np.fill_diagonal(w, 0)
np.save(sys.argv[1] + "/w.npy", w)
d = w.astype(np.float64)
for k in range(n):
    d = np.minimum(d, d[:, k, None] + d[None, k, :])
np.save(sys.argv[1] + "/floyd.npy", d)
PY
expect_rc 0 "apsp.xml checks" -- "$bin" check workflows/ops/apsp.xml --set graph="$tmp/w.npy" --set n=300 --set bs=128
expect_rc 0 "apsp on 3 x 3 tiles (edge tiles of 44)" -- "$bin" run workflows/ops/apsp.xml --set graph="$tmp/w.npy" \
  --set n=300 --set bs=128 --quiet --out "$tmp/apsp"
"$py" - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done
d = np.load(sys.argv[1] + "/apsp/dist.npy")
want = np.load(sys.argv[1] + "/floyd.npy")
check(np.array_equal(d.astype(np.float64), want), "distances equal to Floyd-Warshall's (%d finite, %d negative)" % (np.isfinite(want).sum(), (want < 0).sum()))
r = json.load(open(sys.argv[1] + "/apsp/report.json"))
squares = [t for t in r["tasks"] if t["component"] == "op.matmul"]
workers = {t["worker"] for t in squares}
check(len(squares) == 9 * 27 and len(workers) >= min(2, len(r["workers"])),
      "9 squarings of 27 tile products, on %d workers" % len(workers))
done()
PY
expect_rc 1 "a graph of another size" -- "$bin" run workflows/ops/apsp.xml --set graph="$tmp/w.npy" --set n=200 --quiet \
  --out "$tmp/bad"
expect_in "w.npy" "the file is named"
# Viterbi: 40 states, 300 steps, against numpy's Viterbi
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(5)
S, T = 40, 300
logA = np.log(rng.dirichlet(np.ones(S) * 0.3, S)).astype(np.float32)
logpi = np.log(rng.dirichlet(np.ones(S))).astype(np.float32)[None, :]
E = np.log(rng.dirichlet(np.ones(S) * 0.5, T)).astype(np.float32)
for name, x in (("logA", logA), ("logpi", logpi), ("E", E)):
    np.save(f"{sys.argv[1]}/{name}.npy", x)
delta = logpi[0] + E[0]
psi = np.zeros((T, S), dtype=np.int64)
for t in range(1, T):
    cand = delta[:, None] + logA          # [from, to], in f32 as the workflow
    psi[t] = cand.argmax(axis=0)
    delta = cand.max(axis=0) + E[t]
path = np.zeros(T, dtype=np.int64)
path[-1] = delta.argmax()
for t in range(T - 1, 0, -1):
    path[t - 1] = psi[t, path[t]]
np.save(sys.argv[1] + "/viterbi_path.npy", path)
np.save(sys.argv[1] + "/viterbi_score.npy", np.array([delta.max()]))
PY
expect_rc 0 "viterbi" -- "$bin" run workflows/ops/viterbi.xml --set trans="$tmp/logA.npy" --set start="$tmp/logpi.npy" \
  --set emit="$tmp/E.npy" --set states=40 --set steps=300 --quiet --out "$tmp/viterbi"
"$py" - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done
d = sys.argv[1]
got, want = np.load(d + "/viterbi/path.npy")[0], np.load(d + "/viterbi_path.npy")
check(np.array_equal(got, want), "the Viterbi path is numpy's (%d steps)" % len(want))
r = json.load(open(d + "/viterbi/report.json"))
score = [t["results"]["score"] for t in r["tasks"] if t["component"] == "op.backtrack"][0]
check(abs(score - float(np.load(d + "/viterbi_score.npy")[0])) < 1e-3, "its log-likelihood %.4f" % score)
done()
PY

# GCN: n = 3000 in 3 row blocks (the last of 1000 rows), f 16 -> 8
gcn=(--set n=3000 --set f_in=16 --set f_out=8 --set blocks=3 --set degree=6 --quiet)
expect_rc 0 "gcn layer" -- "$bin" run workflows/ops/gcn.xml "${gcn[@]}" --set save=true --out "$tmp/gcn"
"$py" - "$tmp/gcn" <<'PY' || fails=$((fails + 1))
import sys
import numpy as np
from checks import check, done
d = sys.argv[1]
a, col, ptr = np.load(d + "/A.npy"), np.load(d + "/A_index.npy"), np.load(d + "/A_ptr.npy")
x, w, h = np.load(d + "/X.npy").astype(np.float64), np.load(d + "/W.npy").astype(np.float64), np.load(d + "/H.npy")
n, nnz = len(ptr) - 1, int(ptr[-1])
rows = np.repeat(np.arange(n), np.diff(ptr))
dense = np.zeros((n, n))
dense[rows, col[:nnz]] = a[:nnz]
deg = (dense != 0).sum(axis=1)
check(np.array_equal(dense, dense.T) and np.all(np.diag(dense) > 0), "Â symmetric with self loops")
check(np.allclose(dense[rows, col[:nnz]], 1 / np.sqrt(deg[rows] * deg[col[:nnz]]), rtol=1e-6), "Â = D^-1/2 (A + I) D^-1/2")
want = np.maximum(dense @ (x @ w), 0)
err = np.abs(h - want).max() / np.abs(want).max()
check(err < 1e-5, "H = relu(Â X W) as numpy's (max error %.1e of the largest)" % err)
done()
PY
if command -v mpirun >/dev/null && "$bin" run --help | grep -q starpu-mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1
  expect_rc 0 "gcn layer on 2 MPI ranks" -- timeout 120 mpirun --oversubscribe -np 2 "$bin" run workflows/ops/gcn.xml \
    "${gcn[@]}" --backend starpu-mpi --ncpu 1 --out "$tmp/gcn2"
  "$py" - "$tmp/gcn" "$tmp/gcn2" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done
one, two = sys.argv[1:3]
check(np.array_equal(np.load(one + "/H.npy"), np.load(two + "/H.npy")), "2 ranks = one process, to the bit")
r = json.load(open(two + "/report.json"))
ranks = {t["rank"] for t in r["tasks"] if t["component"] == "op.csr_matmul"}
check(ranks == {0, 1}, "row blocks aggregated on both ranks: %s" % sorted(ranks))
done()
PY
fi
finish
