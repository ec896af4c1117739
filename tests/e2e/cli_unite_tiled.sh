#!/usr/bin/env bash
# MIRAM on a tiled sparse operator (workflows/unite/miram_tiled.xml): LAPACK's
# eigenvalues; one co-method's cycles equal eigen.iram_cycle's (meram.xml) to
# the bit; under StarPU-MPI a co-method on a group of ranks multiplies each
# row block on the rank that owns it and gives the single-rank result to the bit.
bin=$1
. "$(dirname "$0")/lib.sh"
need_numpy
wf=workflows/unite/miram_tiled.xml
expect_rc 0 "miram_tiled.xml checks" -- "$bin" check "$wf"
expect_in "ok: workflow 'miram-tiled'" "check summary"

args=(--set n=1000 --set blocks=3 --set tol=1e-9 --quiet)
expect_rc 0 "three co-methods on one process" -- "$bin" run "$wf" "${args[@]}" --set save_matrix=true --out "$tmp/one"
"$py" - "$tmp/one" <<'PY' || fails=$((fails + 1))
import json, sys
import numpy as np
from checks import check, done, saved_matrix
d = sys.argv[1]
exact = np.linalg.eigvals(saved_matrix(d))
exact = exact[np.argsort(-np.abs(exact))][:2]
vals = np.load(d + "/values.npy")
got = vals[:, 0] + 1j * vals[:, 1]
err = max(abs(got - exact) / abs(exact))
r = json.load(open(d + "/report.json"))
u = r["unites"][0]
check(err < 1e-8 and r["status"] == "ok", "the two largest |λ| of LAPACK (max relative error %.1e), winner %s" % (err, u["winner"]))
check(sorted(c["name"] for c in u["comethods"]) == ["iram10", "iram12", "iram8"], "three co-methods")
done()
PY

# one co-method: the tiled cycle is eigen.iram_cycle operation for operation
expect_rc 0 "one tiled co-method" -- "$bin" run "$wf" "${args[@]}" --set subspaces=12 --out "$tmp/t12"
expect_rc 0 "meram.xml's IRAM(12)" -- "$bin" run workflows/unite/meram.xml --set n=1000 --set tol=1e-9 \
  --set subspaces=12 --quiet --out "$tmp/m12"
same() {  # WHAT DIR1 DIR2: values.npy and vectors.npy equal to the bit
  "$py" - "$@" <<'PY' || fails=$((fails + 1))
import sys
import numpy as np
from checks import check, done
what, a, b = sys.argv[1:4]
same = all(np.array_equal(np.load(a + f), np.load(b + f)) for f in ("/values.npy", "/vectors.npy"))
check(same, what)
done()
PY
}
same "tiled IRAM(12) = eigen.iram_cycle IRAM(12), to the bit" "$tmp/t12" "$tmp/m12"

if command -v mpirun >/dev/null && "$bin" run --help | grep -q starpu-mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1
  expect_rc 0 "one co-method on 2 MPI ranks" -- timeout 200 mpirun --oversubscribe -np 2 "$bin" run "$wf" "${args[@]}" \
    --set subspaces=12 --backend starpu-mpi --ncpu 1 --out "$tmp/mpi2"
  same "2 ranks = one process, to the bit" "$tmp/mpi2" "$tmp/t12"
  # two co-methods on 4 ranks: groups {0, 1} and {2, 3}, each multiplying its row blocks on both of its ranks
  expect_rc 0 "two co-methods on 4 MPI ranks" -- timeout 250 mpirun --oversubscribe -np 4 "$bin" run "$wf" "${args[@]}" \
    --set subspaces=10,12 --set exchange=false --set tol=1e-6 --backend starpu-mpi --ncpu 1 --out "$tmp/mpi4"
  "$py" - "$tmp/mpi4" <<'PY' || fails=$((fails + 1))
import json, sys
from checks import check, done
r = json.load(open(sys.argv[1] + "/report.json"))
ranks = {}
for t in r["tasks"]:
    if t["component"] in ("eigen.block_matvec", "eigen.arnoldi_step"):
        key = t["name"][:4] if t["component"] == "eigen.block_matvec" else "step"
        ranks.setdefault(key, set()).add(t["rank"])
check(ranks == {"av10": {0, 1}, "av12": {2, 3}, "step": {0, 2}},
      "row blocks on each group's two ranks, steps on the leaders: %s" % sorted(ranks.items()))
done()
PY
  # the winner alone on one process: the same cycles and pairs
  winner=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['unites'][0]['winner'])" "$tmp/mpi4/report.json")
  expect_rc 0 "the winner ($winner) alone on one process" -- "$bin" run "$wf" "${args[@]}" --set subspaces="${winner#iram}" \
    --set tol=1e-6 --out "$tmp/one4"
  same "4 ranks' winner = the same co-method on one process, to the bit" "$tmp/mpi4" "$tmp/one4"
fi

# a row block with more nonzeros than its room: the count is named
expect_rc 1 "too little room per block" -- "$bin" run "$wf" --set n=1000 --set bcap=100 --quiet --out "$tmp/small"
expect_in "holds" "the block's nonzero count"
expect_in "but 'block' has room for 100" "the room"
finish
