#!/usr/bin/env bash
# MIRAM as a workflow (workflows/unite/meram.xml, its defaults) on small dense
# problems against ARPACK (dnaupd/dneupd, ncv 10, 2 threads) and the C++
# eigen::meram on the same matrices (ymlopt_bench_eigen_suite --mtx), each
# checked against LAPACK dgeev. Matrices: Q T Qᵀ (eigen.generate kind=schur),
# n = 1000 by default, four spectra, three seeds each:
#   sign       1, 0.99 wanted, -0.985 competing (bulk |z| <= 0.96)
#   separated  1, 0.8 (bulk |z| <= 0.5)
#   pair       a dominant pair 0.9 ± 0.3i (bulk |z| <= 0.8)
#   clustered  1, 0.995 (bulk |z| <= 0.97)
# The workflow's time is its solve: from its first cycle task to its last task
# (trace.json), not the matrix's generation.
#
#   tests/bench/eigen_small_dense.sh [BUILD_DIR] [SEEDS] [N]      # build, 3, 1000
# Exits 1 when the workflow fails or returns other values than LAPACK's on any
# matrix (ARPACK's misses are reported, not failures).
set -u
wrong=0
build=${1:-build}
seeds=${2:-3}
n=${3:-1000}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "MIRAM workflow vs ARPACK on dense Q T Qᵀ, n = $n, k = 2, tol 1e-8; $(date -u '+%F %H:%M') UTC"
lscpu | sed -n 's/^Model name: *//p; s/^CPU(s): */CPUs: /p' | paste -sd ' '
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %4s | %9s %5s | %9s %5s %6s | %9s %5s | %s\n" case seed "wf s" ok "ARPACK s" ok mv "C++ s" ok "wf / ARPACK"
cases=("sign|1, 0.99, -0.985|0.96" "separated|1, 0.8|0.5" "pair|0.9+0.3i|0.8" "clustered|1, 0.995|0.97")
for c in "${cases[@]}"; do
  IFS='|' read -r name top radius <<<"$c"
  for seed in $(seq 2 $((seeds + 1))); do
    d=$tmp/$name-$seed
    "$build/bin/ymlopt" run workflows/unite/meram.xml --set kind=schur --set n="$n" --set "top=$top" \
      --set radius="$radius" --set matrix_seed="$seed" --set save_matrix=true --quiet --out "$d" >/dev/null 2>"$d.err"
    rc=$?
    "$py" - "$d" "$tmp/$name-$seed.mtx" <<'PY'
import sys
import numpy as np
a = np.load(sys.argv[1] + "/A.npy")
with open(sys.argv[2], "w") as f:
    f.write("%%%%MatrixMarket matrix array real general\n%d %d\n" % a.shape)
    f.write("\n".join("%.17g" % v for v in a.T.reshape(-1)) + "\n")
PY
    row=$("$build/bin/ymlopt_bench_eigen_suite" --mtx "$tmp/$name-$seed.mtx" | grep "\.mtx ")
    "$py" - "$d" "$rc" "$name" "$seed" "$row" <<'PY'
import json, sys
import numpy as np
d, rc, name, seed, row = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split()
# row: NAME n nnz | ARPACK_s mv ok | MIRAM_s mv check ok | ratio
ar_s, ar_mv, ar_ok, cc_s, cc_ok = float(row[4]), int(row[5]), row[6], float(row[8]), row[11]
wf_s, wf_ok = float("nan"), "no"
if rc == 0:
    t = json.load(open(d + "/trace.json"))
    ev = [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("ph") == "X"]
    solve = [e for e in ev if e.get("cat") in ("eigen.iram_cycle", "eigen.eram_cycle", "eigen.ritz_select")]
    wf_s = (max(e["ts"] + e["dur"] for e in solve) - min(e["ts"] for e in solve)) / 1e6
    a, v = np.load(d + "/A.npy"), np.load(d + "/values.npy")
    e = np.linalg.eigvals(a)
    e = e[np.argsort(-np.abs(e))][:3]
    err = max(min(abs(complex(x, y) - w) / abs(w) for w in e) for x, y in v[:, :2])
    wf_ok = "yes" if err < 1e-6 else "bad"
print("%-10s %4s | %9.3f %5s | %9.3f %5s %6d | %9.3f %5s | %.2f" % (name, seed, wf_s, wf_ok, ar_s, ar_ok, ar_mv, cc_s,
                                                                   cc_ok, wf_s / ar_s))
sys.exit(0 if wf_ok == "yes" else 1)
PY
    [ $? -eq 0 ] || wrong=$((wrong + 1))
  done
done
[ "$wrong" -eq 0 ] || { echo "the workflow failed or was wrong on $wrong matrices"; exit 1; }
