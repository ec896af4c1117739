#!/usr/bin/env bash
# Unite and conquer from the CLI: workflows/unite/meram.xml (ERAM co-methods
# exchanging Ritz pairs through publish/gather) finds the eigenvalues LAPACK
# (numpy.linalg.eigvals) finds, on both backends and with one scheduling
# context per co-method; report.json tells what each co-method did.
bin=$1
. "$(dirname "$0")/lib.sh"
need_numpy
wf=workflows/unite/meram.xml
expect_rc 0 "meram.xml checks" -- "$bin" check "$wf"
expect_in "ok: workflow 'meram'" "check summary"

# prescribed spectrum (a pair included) on a non-normal matrix; k = 4 largest |λ|.
# Subspaces 5, 9, 12: alone, ERAM(5) stalls and ERAM(9)/(12) find LAPACK's values.
# 6, 7 and 8 alone converge to less wanted values; each cycle's check of a
# converged set (verify) catches it, so they too end on LAPACK's values (below).
case_args=(--set n=300 --set k=4 --set "top=3, 2.6+0.5i, 2.2" --set tol=1e-9 --set save_matrix=true
  --set implicit=false --set subspaces=5,9,12 --quiet)
check_run() {  # DIR WHAT [PUBLISHES [CO-METHODS]]: values.npy against LAPACK's eigenvalues of A.npy, the report's unite section
  "$py" - "$1" "$2" "${3:-1}" "${4:-eram12,eram5,eram9}" <<'PY'
import json, sys
import numpy as np
from checks import saved_matrix
d, what, exchange, want = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4].split(",")
a = saved_matrix(d)
vals = np.load(d + "/values.npy")
exact = np.linalg.eigvals(a)
exact = exact[np.argsort(-np.abs(exact))][:4]
got = vals[:, 0] + 1j * vals[:, 1]
err = max(min(abs(g - e) for e in exact) / abs(g) for g in got)
ok = err < 1e-7 and len({round(v.real, 6) + 1j * round(abs(v.imag), 6) for v in got}) == 3
r = json.load(open(d + "/report.json"))
u = r["unites"][0]
names = sorted(c["name"] for c in u["comethods"])
ok = ok and r["status"] == "ok" and names == want and u["winner"] in names
w = [c for c in u["comethods"] if c["winner"]]
ok = ok and len(w) == 1 and w[0]["status"] == "converged" and w[0]["iterations"] >= 1
ok = ok and all(c["publishes"] == (c["iterations"] if exchange else 0) for c in u["comethods"] if c["status"] != "failed")
print(("ok: " if ok else "FAIL: ") + what + ": max relative error vs LAPACK %.2e, winner %s" % (err, u["winner"]))
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || fails=$((fails + 1))
}
for backend in starpu sequential; do
  expect_rc 0 "meram on $backend" -- "$bin" run "$wf" "${case_args[@]}" --backend "$backend" --out "$tmp/$backend"
  check_run "$tmp/$backend" "MERAM ($backend)"
done
expect_rc 0 "meram with subspaces that alone converge to less wanted values" -- "$bin" run "$wf" "${case_args[@]}" \
  --set subspaces=6,7,8 --out "$tmp/s678"
check_run "$tmp/s678" "MERAM (6, 7, 8), each set checked" 1 eram6,eram7,eram8
# MIRAM: the same workflow with IRAM co-methods (eigen.iram_cycle keeps each
# co-method's factorisation in tensors; 6, 9 and 12 each find LAPACK's values alone)
for backend in starpu sequential; do
  expect_rc 0 "miram on $backend" -- "$bin" run "$wf" "${case_args[@]}" --set implicit=true --set subspaces=6,9,12 \
    --backend "$backend" --out "$tmp/miram-$backend"
  check_run "$tmp/miram-$backend" "MIRAM ($backend)" 1 iram12,iram6,iram9
done
"$py" - "$tmp/miram-starpu" <<'PY' || { echo "FAIL: MIRAM's cycles"; fails=$((fails + 1)); }
import json, sys
# own restarts are implicit (fewer than m matvecs), adopted sets restart explicitly (m)
t = json.load(open(sys.argv[1] + "/trace.json"))
ev = [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("cat") == "eigen.iram_cycle"]
assert ev, "no eigen.iram_cycle in the trace"
for e in ev:
    a, m = e["args"], int(e["name"].replace("cycle", ""))
    assert a["matvecs"] == m if a["restarts"] == 0 or a["explicit"] == 1 else 0 < a["matvecs"] < m, (e["name"], a)
assert any(e["args"]["restarts"] == 1 and e["args"]["explicit"] == 0 for e in ev), "no implicit restart"
print("ok: MIRAM cycles restart implicitly (%d cycles, %d explicit)" % (len(ev), sum(e["args"]["explicit"] for e in ev)))
PY
# a Matrix Market file kept sparse (format=csr, the default): P T Pᵀ with T upper
# triangular, its diagonal the spectrum (3, 2.5, 2.2 above a bulk in [-1.5, 1.5])
"$py" - "$tmp/m.mtx" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(3)
n = 600
d = np.concatenate([[3.0, 2.5, 2.2], rng.uniform(-1.5, 1.5, n - 3)])
rows, cols, vals = list(range(n)), list(range(n)), list(d)
for i in range(n - 1):
    for j in rng.choice(np.arange(i + 1, n), size=min(3, n - 1 - i), replace=False):
        rows.append(i); cols.append(int(j)); vals.append(rng.uniform(-0.5, 0.5))
p = rng.permutation(n)
with open(sys.argv[1], "w") as f:
    f.write("%%MatrixMarket matrix coordinate real general\n%% P T P^T, T upper triangular\n")
    f.write("%d %d %d\n" % (n, n, len(vals)))
    for r, c, v in zip(rows, cols, vals):
        f.write("%d %d %.17g\n" % (p[r] + 1, p[c] + 1, v))
PY
mtx_args=(--set matrix="$tmp/m.mtx" --set n=600 --set k=3 --set tol=1e-9 --set save_matrix=true --quiet)
expect_rc 0 "MIRAM on a Matrix Market file, kept sparse" -- "$bin" run "$wf" "${mtx_args[@]}" --set nnz=2400 \
  --out "$tmp/mtx"
"$py" - "$tmp/mtx" <<'PY' || { echo "FAIL: MIRAM on a Matrix Market file"; fails=$((fails + 1)); }
import sys
import numpy as np
from checks import saved_matrix
d = sys.argv[1]
a, v = saved_matrix(d), np.load(d + "/values.npy")
assert np.load(d + "/A_ptr.npy").shape == (601,), "not kept sparse"
e = np.linalg.eigvals(a)
e = e[np.argsort(-np.abs(e))][:3]
err = max(abs(g - x) / abs(x) for g, x in zip(sorted(v[:, 0], reverse=True), e))
assert err < 1e-8 and np.allclose(sorted(e.real, reverse=True), [3, 2.5, 2.2]), (v, e)
print("ok: MIRAM on a Matrix Market file (CSR, %d nonzeros): %s, LAPACK %s (max error %.1e)"
      % (np.load(d + "/A_ptr.npy")[-1], v[:, 0], e.real, err))
PY
expect_rc 1 "a Matrix Market file with more nonzeros than nnz" -- "$bin" run "$wf" "${mtx_args[@]}" --set nnz=1000 \
  --out "$tmp/mtx-small"
expect_in "has 2394 nonzeros but ports 'a' and 'a_index' hold 1000: size them [2394] or more" "the count that does not fit"
# a relative path is the current directory's, and a wrong n fails to compile, naming the file's size
root=$PWD abs_bin=$(realpath "$bin")
expect_rc 1 "a Matrix Market file of another size than n" -- bash -c "cd '$tmp' && '$abs_bin' check '$root/$wf' --set matrix=m.mtx --set n=500"
expect_in "m.mtx holds a 600x600 matrix (2394 entries stored, up to 2394 nonzeros) but port 'a_ptr' is 1x501 (shape 501): it needs rows + 1 = 601 pointers" "the file's size at compile time"
# the workflow's default mapping is fair (equal worker time per co-method); shared too
expect_rc 0 "meram with shared workers" -- "$bin" run "$wf" "${case_args[@]}" --set mapping=shared --out "$tmp/shared"
check_run "$tmp/shared" "MERAM (shared)"
"$py" -c "
import json; r = json.load(open('$tmp/starpu/report.json'))
assert all(c['worker_s'] > 0 for c in r['unites'][0]['comethods'])" || { echo "FAIL: worker_s not reported"; fails=$((fails + 1)); }
expect_rc 0 "meram with a context per co-method" -- "$bin" run "$wf" "${case_args[@]}" --set mapping=contexts --out "$tmp/ctx"
check_run "$tmp/ctx" "MERAM (contexts)"
"$py" -c "
import json; r = json.load(open('$tmp/ctx/report.json'))
assert all(c['context_workers'] for c in r['unites'][0]['comethods'])" || { echo "FAIL: contexts not reported"; fails=$((fails + 1)); }
# the trace shows each co-method as its own lane group
"$py" -c "
import json; t = json.load(open('$tmp/starpu/trace.json'))['traceEvents']
names = {e['args']['name'] for e in t if e.get('name') == 'process_name'}
assert {'co-method eram5', 'co-method eram9', 'co-method eram12'} <= names, names" ||
  { echo "FAIL: co-method lanes missing from trace.json"; fails=$((fails + 1)); }
# without exchange: three ERAMs side by side, the first converged wins
expect_rc 0 "independent ERAMs" -- "$bin" run "$wf" "${case_args[@]}" --set exchange=false --out "$tmp/alone"
check_run "$tmp/alone" "ERAMs without exchange" 0

# a sign competitor of nearly the same modulus (1, 0.99 wanted; -0.985): every
# converged set is checked against the operator deflated by it. The default
# (MIRAM) finds LAPACK's values; MERAM with small subspaces converges to
# (1, -0.985), and verified it must say it did not converge (exit 1, nothing
# saved) rather than save a wrong set; a budget too small to converge says so too.
sign_args=(--set kind=schur --set n=400 --set "top=1, 0.99, -0.985" --set radius=0.96 --set save_matrix=true --quiet)
check_sign() {  # DIR WHAT: values.npy holds the 2 largest |λ| of A.npy
  "$py" - "$1" "$2" <<'PY' || { echo "FAIL: $2"; fails=$((fails + 1)); }
import json, sys
import numpy as np
d = sys.argv[1]
a, v = np.load(d + "/A.npy"), np.load(d + "/values.npy")
e = np.linalg.eigvals(a)
e = e[np.argsort(-np.abs(e))][:2]
got = sorted(v[:, 0] + 1j * v[:, 1], key=lambda z: -abs(z))
err = max(abs(g - x) for g, x in zip(got, e))
assert err < 1e-6, ("values", got, "LAPACK", e)
u = json.load(open(d + "/report.json"))["unites"][0]
assert [c["status"] for c in u["comethods"] if c["winner"]] == ["converged"], u["comethods"]
print("ok: %s: %s (LAPACK %s, max error %.1e)" % (sys.argv[2], [complex(round(z.real, 6), round(z.imag, 6)) for z in got],
                                                  [complex(round(z.real, 6), round(z.imag, 6)) for z in e], err))
PY
}
expect_rc 0 "MIRAM (default) on a sign competitor" -- "$bin" run "$wf" "${sign_args[@]}" --out "$tmp/sign"
check_sign "$tmp/sign" "MIRAM (default) finds 1 and 0.99, not -0.985"
"$bin" run "$wf" "${sign_args[@]}" --set implicit=false --set max_restarts=300 --out "$tmp/sign-eram" 2>"$tmp/sign-eram.err"
rc=$?
if [ $rc -eq 0 ]; then
  check_sign "$tmp/sign-eram" "MERAM on a sign competitor, when it converges"
elif [ $rc -eq 1 ] && grep -q "no co-method converged" "$tmp/sign-eram.err" && [ ! -e "$tmp/sign-eram/values.npy" ]; then
  echo "ok: MERAM on a sign competitor: not converged, said so (exit 1), nothing saved"
else
  echo "FAIL: MERAM on a sign competitor: exit $rc, values saved: $([ -e "$tmp/sign-eram/values.npy" ] && echo yes || echo no)"
  cat "$tmp/sign-eram.err"
  fails=$((fails + 1))
fi
expect_rc 1 "a budget too small to converge" -- "$bin" run "$wf" "${sign_args[@]}" --set max_restarts=2 --out "$tmp/budget"
expect_in "unite 'meram': no co-method converged" "the budget's message"
[ ! -e "$tmp/budget/values.npy" ] || { echo "FAIL: values.npy saved by a run that did not converge"; fails=$((fails + 1)); }

# nested unites: each outer co-method races two inner ones; report.json says
# which co-method ran each inner unite, and the trace names the lanes by path
cat >"$tmp/nested.xml" <<'XML'
<workflow name="nested">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="result" dtype="f64" shape="1" init="zeros"/>
  <data name="best" dtype="f64" shape="1" init="zeros"/>
  <unite name="outer" exit="all">
    <par var="k" values="1,2">
      <comethod name="m${k}">
        <data name="r${k}" dtype="f64" shape="1" init="zeros"/>
        <unite name="inner${k}" exit="first" save_exit="r${k}">
          <comethod name="fast" keep="x${k}">
            <data name="x${k}" dtype="f64" shape="1" init="value" value="${k * 10}"/>
            <until cond="x${k} ge ${k * 10 + 3}" max="100">
              <task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="x${k}"/></task>
            </until>
          </comethod>
          <comethod name="slow" keep="y${k}">
            <data name="y${k}" dtype="f64" shape="1" init="zeros"/>
            <until cond="y${k} ge 1000000" max="1000000">
              <task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="y${k}"/></task>
            </until>
          </comethod>
        </unite>
        <publish name="best" data="r${k}" score="r${k}"/>
      </comethod>
    </par>
  </unite>
  <gather name="best" into="result" score="best" better="max"/>
  <save data="result" to="result.npy"/>
</workflow>
XML
check_nested() {  # DIR WHAT
  "$py" - "$1" "$2" <<'PY' || { echo "FAIL: $2: report or trace"; fails=$((fails + 1)); }
import json, sys
import numpy as np
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
by = {u.get("within", ""): u for u in r["unites"]}
assert set(by) == {"", "m1", "m2"}, by.keys()
assert by["m1"]["winner"] == "fast" and by["m2"]["winner"] == "fast", by
assert np.load(d + "/result.npy").tolist() == [23.0], np.load(d + "/result.npy")  # m2's, the larger
t = json.load(open(d + "/trace.json"))["traceEvents"]
lanes = {e["args"]["name"] for e in t if e.get("name") == "process_name"}
assert {"co-method m1/fast", "co-method m2/slow"} <= lanes, lanes
print("ok: %s: inner winners fast, best published 23, lanes by path" % sys.argv[2])
PY
}
expect_rc 0 "nested unites" -- "$bin" run "$tmp/nested.xml" --out "$tmp/nested" --quiet
check_nested "$tmp/nested" "nested unites"

# under StarPU-MPI each co-method runs on its rank (i % ranks), exchanging
# through messages: the same eigenvalues on 2 and 3 ranks, and the nested unites
if command -v mpirun >/dev/null && "$bin" run --help | grep -q starpu-mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1
  for n in 2 3; do
    expect_rc 0 "meram on $n MPI ranks" -- timeout 120 mpirun --oversubscribe -np $n "$bin" run "$wf" "${case_args[@]}" \
      --backend starpu-mpi --ncpu 1 --out "$tmp/mpi$n"
    check_run "$tmp/mpi$n" "MERAM (starpu-mpi, $n ranks)"
  done
  expect_rc 0 "miram on 3 MPI ranks" -- timeout 120 mpirun --oversubscribe -np 3 "$bin" run "$wf" "${case_args[@]}" \
    --set implicit=true --set subspaces=6,9,12 --backend starpu-mpi --ncpu 1 --out "$tmp/miram-mpi3"
  check_run "$tmp/miram-mpi3" "MIRAM (starpu-mpi, 3 ranks)" 1 iram12,iram6,iram9
  "$py" - "$tmp/mpi2" <<'PY' || { echo "FAIL: co-methods on ranks"; fails=$((fails + 1)); }
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
ranks = {t["name"]: t["rank"] for t in r["tasks"] if t["name"].startswith("cycle")}
assert ranks == {"cycle5": 0, "cycle9": 1, "cycle12": 0}, ranks
# (whether a gather took pairs published on the other rank depends on timing;
# the nested case below checks a cross-rank publish deterministically)
u = r["unites"][0]
src = {c["name"]: {e["source"] for e in c["exchanges"] if e["op"] == "gather"} for c in u["comethods"]}
print("ok: co-methods on ranks", ranks, "gathered from", {k: sorted(v) for k, v in src.items()})
PY
  # fair on a rank's one worker: its two co-methods (ERAM(5) and ERAM(10) on rank 0)
  # take turns by worker time received; shared they alternate part by part, so
  # ERAM(10)'s longer cycles got 2-3x the time
  expect_rc 0 "meram fair on 2 MPI ranks" -- timeout 300 mpirun --oversubscribe -np 2 "$bin" run "$wf" \
    --set kind=convection_diffusion --set n=900 --set k=2 --set rho=1000 --set max_restarts=20000 --quiet \
    --set implicit=false --set subspaces=5,7,10 --backend starpu-mpi --ncpu 1 --out "$tmp/mpi-fair"
  "$py" - "$tmp/mpi-fair" <<'PY' || { echo "FAIL: fair shares on rank 0"; fails=$((fails + 1)); }
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
w = {c["name"]: c["worker_s"] for c in r["unites"][0]["comethods"]}
# a converged set is checked (check_wanted, up to thousands of matvecs) within
# one cycle task, which fair shares cannot split: the cycles' time without those
t = json.load(open(sys.argv[1] + "/trace.json"))
ev = [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("ph") == "X" and e.get("cat") == "eigen.eram_cycle"]
cyc = {}
for e in ev:
    if "verify_matvecs" not in e.get("args", {}):
        cyc[e["name"]] = cyc.get(e["name"], 0) + e["dur"] / 1e6
c5, c10 = cyc.get("cycle5", 0), cyc.get("cycle10", 0)
ratio = max(c5, c10) / max(min(c5, c10), 1e-9)
# (< 1.8; shared gives 2-3x)
assert ratio < 1.8, ("cycle seconds on rank 0 without the checks", cyc, "worker seconds", w)
print("ok: fair on rank 0's worker: eram5 %.3f s, eram10 %.3f s of cycles (with checks %.3f, %.3f; eram7 on rank 1: %.3f s)"
      % (c5, c10, w["eram5"], w["eram10"], w["eram7"]))
PY
  expect_rc 0 "nested unites on 2 MPI ranks" -- timeout 120 mpirun --oversubscribe -np 2 "$bin" run "$tmp/nested.xml" \
    --backend starpu-mpi --ncpu 1 --out "$tmp/nested-mpi" --quiet
  check_nested "$tmp/nested-mpi" "nested unites on 2 ranks (m2's 23 published on rank 1, gathered on every rank)"
else
  echo "note: no mpirun or no StarPU-MPI build: the co-methods on MPI ranks are not run"
fi

# bad usage and bad workflows
expect_rc 1 "a subspace not above k" -- "$bin" check "$wf" --set implicit=false --set subspaces=5,4 --set k=4
expect_in "eigen.eram_cycle" "the bad co-method's task is named"
cat >"$tmp/bad.xml" <<'XML'
<workflow name="bad">
  <data name="r" dtype="f64" shape="1" init="zeros"/>
  <until cond="r gt" max="3"/>
  <unite exit="sometimes"><comethod name="a"/></unite>
</workflow>
XML
expect_rc 1 "bad condition and exit policy" -- "$bin" check "$tmp/bad.xml"
expect_in "bad.xml:3:10: error: bad condition 'r gt'" "condition syntax error located"
expect_in "bad.xml:4:10: error: exit=\"sometimes\" must be one of first, all, budget" "exit policy checked"
finish
