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

# prescribed spectrum (a pair included) on a non-normal matrix; k = 4 largest |λ|
case_args=(--set n=300 --set k=4 --set "top=3, 2.6+0.5i, 2.2" --set tol=1e-9 --set save_matrix=true --quiet)
check_run() {  # DIR WHAT [PUBLISHES]: values.npy against LAPACK's eigenvalues of A.npy, the report's unite section
  "$py" - "$1" "$2" "${3:-1}" <<'PY'
import json, sys
import numpy as np
d, what, exchange = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
a = np.load(d + "/A.npy")
vals = np.load(d + "/values.npy")
exact = np.linalg.eigvals(a)
exact = exact[np.argsort(-np.abs(exact))][:4]
got = vals[:, 0] + 1j * vals[:, 1]
err = max(min(abs(g - e) for e in exact) / abs(g) for g in got)
ok = err < 1e-7 and len({round(v.real, 6) + 1j * round(abs(v.imag), 6) for v in got}) == 3
r = json.load(open(d + "/report.json"))
u = r["unites"][0]
names = sorted(c["name"] for c in u["comethods"])
ok = ok and r["status"] == "ok" and names == ["eram10", "eram5", "eram7"] and u["winner"] in names
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
expect_rc 0 "meram with a context per co-method" -- "$bin" run "$wf" "${case_args[@]}" --set mapping=contexts --out "$tmp/ctx"
check_run "$tmp/ctx" "MERAM (contexts)"
"$py" -c "
import json; r = json.load(open('$tmp/ctx/report.json'))
assert all(c['context_workers'] for c in r['unites'][0]['comethods'])" || { echo "FAIL: contexts not reported"; fails=$((fails + 1)); }
# the trace shows each co-method as its own lane group
"$py" -c "
import json; t = json.load(open('$tmp/starpu/trace.json'))['traceEvents']
names = {e['args']['name'] for e in t if e.get('name') == 'process_name'}
assert {'co-method eram5', 'co-method eram7', 'co-method eram10'} <= names, names" ||
  { echo "FAIL: co-method lanes missing from trace.json"; fails=$((fails + 1)); }
# without exchange: three ERAMs side by side, the first converged wins
expect_rc 0 "independent ERAMs" -- "$bin" run "$wf" "${case_args[@]}" --set exchange=false --out "$tmp/alone"
check_run "$tmp/alone" "ERAMs without exchange" 0

# bad usage and bad workflows
expect_rc 1 "a subspace not above k" -- "$bin" check "$wf" --set subspaces=5,4 --set k=4
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
