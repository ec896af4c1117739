#!/usr/bin/env bash
# Semiring workflows (workflows/ops): all-pairs shortest paths by tiled (min, +)
# squaring against numpy's Floyd-Warshall, to the bit (integer weights: every sum is exact).
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
finish
