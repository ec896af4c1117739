#!/usr/bin/env bash
# MERAM written as a workflow (workflows/unite/meram.xml: <unite> of ERAM
# co-methods exchanging Ritz pairs through publish/gather) vs each ERAM alone
# (the same workflow with one co-method), same matrices, same run; ARPACK's
# IRAM on the same matrix from ymlopt_bench_meram as the anchor.
#   tests/bench/unite_meram.sh [BUILD_DIR] [REPS]
#   MPI_RANKS=3 tests/bench/unite_meram.sh build 3   # MERAM under --backend starpu-mpi:
#     one co-method per rank (--ncpu 1 each), exchanging by MPI messages
#   MAPPINGS="fair shared" tests/bench/unite_meram.sh build 3   # MERAM under each
#     <unite mapping=>: fair (the workflow's default: equal worker time per
#     co-method, as with a core each) and shared (the workers serve the
#     co-methods' tasks in turn); default "fair shared"
#   CASES="cd1600" tests/bench/unite_meram.sh build 3         # a subset (cd1600 cd900 disc1000)
#   NCPU=1 tests/bench/unite_meram.sh build 3   # MERAM in one process on 1 worker (--ncpu 1):
#     under fair, co-methods take turns by worker time received
#   IMPLICIT=1 tests/bench/unite_meram.sh build 3   # MIRAM: IRAM co-methods (--set implicit=true)
#     against each IRAM alone; subspaces 6 8 10 (an implicit restart needs k < m - 1)
#   SUBSPACES="5 7 10" (the co-methods' subspace sizes; default 5 7 10, with IMPLICIT=1 6 8 10)
# Prints per run: the winner, cycles and matvecs (summed from the trace: m per
# explicit cycle, m - k' per implicit one) of every co-method, the busiest
# co-method's matvecs (the critical path with one core per co-method) and the
# summed work; and the united run's busiest / best single.
set -euo pipefail
build=${1:-build}
reps=${2:-3}
bin=$build/bin/ymlopt
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# name | --set arguments (cd: 2-D convection-diffusion, rho = 1000, n = 40^2 and
# 30^2; cd1600 is ymlopt_bench_meram's hard case: ERAM(5) alone stalls)
all_cases=("cd1600|--set kind=convection_diffusion --set n=1600 --set k=2 --set rho=1000"
           "cd900|--set kind=convection_diffusion --set n=900 --set k=2 --set rho=1000"
           "disc1000|--set kind=disc --set n=1000 --set k=4 --set top=3,2.6+0.5i,2.2")
cases=()
for c in "${all_cases[@]}"; do
  case " ${CASES:-cd1600 cd900 disc1000} " in *" ${c%%|*} "*) cases+=("$c") ;; esac
done
mappings=${MAPPINGS:-fair shared}
implicit=${IMPLICIT:-0}
[ "$implicit" = 1 ] && alg=IRAM united=MIRAM impl="--set implicit=true" || alg=ERAM united=MERAM impl="--set implicit=false"
subspaces=${SUBSPACES:-$([ "$implicit" = 1 ] && echo "6 8 10" || echo "5 7 10")}
summary() {  # RUN_DIR LABEL
  "$py" - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
u = r["unites"][0]
# matvecs per co-method: every cycle task's own count, from the trace
tr = json.load(open(sys.argv[1] + "/trace.json"))
ev = tr["traceEvents"] if isinstance(tr, dict) else tr
cycle = {t["id"]: t["comethod"] for t in r["tasks"] if t["component"] in ("eigen.eram_cycle", "eigen.iram_cycle")}
mv = {}
for e in ev:
    a = e.get("args", {})
    if e.get("ph") == "X" and a.get("id") in cycle and "matvecs" in a:
        mv[cycle[a["id"]]] = mv.get(cycle[a["id"]], 0) + int(a["matvecs"])
rows = []
for c in u["comethods"]:
    rows.append((c["name"], c["status"], c["iterations"], mv.get(c["name"], 0), c.get("worker_s", 0)))
busiest = max(x[3] for x in rows); total = sum(x[3] for x in rows)
# the saved eigenvalues against LAPACK's (numpy.linalg.eigvals of the saved matrix)
import numpy as np
sys.path.insert(0, "tests/e2e")
from checks import saved_matrix
a = saved_matrix(sys.argv[1]); v = np.load(sys.argv[1] + "/values.npy")
k = v.shape[0]
exact = np.linalg.eigvals(a); exact = exact[np.argsort(-np.abs(exact))][:k]
got = v[:, 0] + 1j * v[:, 1]
err = max(min(abs(g - e) for e in exact) / abs(g) for g in got)
print("%-10s winner %-7s busiest %6d  total %6d  wall %.2f s  vs LAPACK %s (%.1e)  | %s" % (sys.argv[2], u["winner"],
      busiest, total, r["totals"]["makespan_us"] / 1e6, "ok" if err < 1e-6 else "WRONG", err,
      "  ".join("%s %s %d/%d %.2fs" % x for x in rows)))
right = err < 1e-6 and any(c["winner"] and c["status"] == "converged" for c in u["comethods"])
print("RESULT", busiest, total, 1 if right else 0)
PY
}
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  echo "== $name: $args, tol 1e-8, $reps repetitions, backend starpu (2 workers)"
  declare -A best=()
  for m in $subspaces; do
    # shellcheck disable=SC2086
    "$bin" run workflows/unite/meram.xml $args $impl --set subspaces=$m --set max_restarts=20000 --set save_matrix=true --quiet --out "$out/$name-$m" >/dev/null
    line=$(summary "$out/$name-$m" "$alg($m)")
    echo "$line" | grep -v RESULT
    best[$m]=$(echo "$line" | awk '/^RESULT/ {print ($4 ? $2 : 1e18)}')
  done
  single=$(printf '%s\n' "${best[@]}" | sort -g | head -1)  # the best single co-method alone that found the right values
  sub=$(echo $subspaces | tr ' ' ',')
  for map in $mappings; do
  busy=()
  for rep in $(seq 1 "$reps"); do
    # shellcheck disable=SC2086
    if [ -n "${MPI_RANKS:-}" ]; then
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} \
        mpirun --oversubscribe -np "$MPI_RANKS" "$bin" run workflows/unite/meram.xml $args $impl --set subspaces=$sub --set max_restarts=20000 \
        --set mapping=$map --set save_matrix=true --quiet --backend starpu-mpi --ncpu 1 --out "$out/$name-meram$rep" >/dev/null 2>&1
    else
      "$bin" run workflows/unite/meram.xml $args $impl --set subspaces=$sub --set max_restarts=20000 --set mapping=$map --set save_matrix=true --quiet \
        ${NCPU:+--ncpu $NCPU} --out "$out/$name-meram$rep" >/dev/null
    fi
    line=$(summary "$out/$name-meram$rep" "$united ${map}${MPI_RANKS:+ ($MPI_RANKS ranks)}${NCPU:+ ($NCPU worker(s))} #$rep")
    echo "$line" | grep -v RESULT
    busy+=("$(echo "$line" | awk '/^RESULT/ {print $2}')")
  done
  med=$(printf '%s\n' "${busy[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v m="$med" -v s="$single" -v map="$map" -v u="$united" -v a="$alg" 'BEGIN {printf "%s (%s) busiest co-method, median: %d matvecs = %.2fx the best single %s (%d)\n", u, map, m, m / s, a, s}'
  done
done
if [ -x "$build/bin/ymlopt_bench_meram" ]; then
  for c in "${cases[@]}"; do
    case ${c%%|*} in cd1600) nx=40 ;; cd900) nx=30 ;; *) continue ;; esac
    echo "== anchor: ARPACK IRAM (ncv 10) and the C++ eigen.meram on the same convection-diffusion matrix (CSR, n = $nx^2)"
    "$build/bin/ymlopt_bench_meram" --only cd --cd $nx --k 2 --reps 1 | tail -8
  done
fi
