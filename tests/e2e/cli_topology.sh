#!/usr/bin/env bash
# --bind and the process's cpuset: workers go on the PUs this process may use
# (taskset, mpirun --bind-to core), never on PUs outside it; the report records
# the cpuset, the bind mode and each worker's PU and thread affinity; bad PU
# lists are usage errors; StarPU's CPU cap, an OpenBLAS core that ignores the
# CPU, and MPI ranks of one node sharing PUs are warned about (stderr, run.log,
# report). Needs PUs 0 and 1 (skips on a one-PU machine).
source "$(dirname "$0")/lib.sh"
y=$1
export OPENBLAS_NUM_THREADS=1
if ! taskset -c 0,1 true 2>/dev/null; then
  echo "skip: needs taskset and PUs 0 and 1"
  exit 77
fi
gemm=(workflows/linalg/tiled_gemm.xml --set n=64 --set bs=32 --quiet)
loud=(workflows/linalg/tiled_gemm.xml --set n=64 --set bs=32)  # machine warnings print without --quiet

# placement DIR CPUSET BIND PUS [AFFINITY]: report.json's machine section.
# PUS: the workers' PUs ("-1,-1" when unbound); AFFINITY: every worker's mask
placement() {
  python3 - "$@" <<'PY'
import json, sys
d, cpuset, bind, pus = sys.argv[1:5]
m = json.load(open(d + "/report.json"))["machine"]
want_cpuset = [int(x) for x in cpuset.split(",")]
assert m["cpuset"] == want_cpuset, ("cpuset", m["cpuset"])
assert m["bind"] == bind, ("bind", m["bind"])
got = [w["pu"] for w in m["workers"]]
assert got == [int(x) for x in pus.split(",")], ("worker PUs", got)
aff = [int(x) for x in sys.argv[5].split(",")] if len(sys.argv) > 5 else None
for w in m["workers"]:
    want = aff if aff is not None else [w["pu"]]
    assert w["affinity"] == want, (w["name"], "affinity", w["affinity"], "expected", want)
print("cpuset %s, --bind %s: workers %s" % (m["cpuset"], m["bind"], [(w["name"], w["pu"], w["affinity"]) for w in m["workers"]]))
PY
}

# auto: the process's cpuset, whatever taskset narrowed it to (StarPU 1.3 alone
# would bind worker 0 to PU 0 under taskset -c 1)
expect_rc 0 "taskset -c 0, --ncpu 0" -- taskset -c 0 "$y" run "${gemm[@]}" --ncpu 0 --out "$tmp/t0"
expect_rc 0 "  report: cpuset [0], every worker on PU 0" -- placement "$tmp/t0" 0 auto 0
echo "  $out"
expect_rc 0 "taskset -c 1" -- taskset -c 1 "$y" run "${gemm[@]}" --out "$tmp/t1"
expect_rc 0 "  report: cpuset [1], the worker on PU 1" -- placement "$tmp/t1" 1 auto 1
echo "  $out"
expect_rc 0 "taskset -c 0,1" -- taskset -c 0,1 "$y" run "${gemm[@]}" --out "$tmp/t01"
expect_rc 0 "  report: one worker per PU" -- placement "$tmp/t01" 0,1 auto 0,1
expect_rc 0 "taskset -c 0,1 --bind cores" -- taskset -c 0,1 "$y" run "${gemm[@]}" --bind cores --out "$tmp/cores"
expect_rc 0 "  report: one worker per core" -- placement "$tmp/cores" 0,1 cores 0,1

# explicit lists
expect_rc 0 "--bind 1" -- taskset -c 0,1 "$y" run "${gemm[@]}" --bind 1 --out "$tmp/b1"
expect_rc 0 "  report: the worker on PU 1" -- placement "$tmp/b1" 0,1 list 1
expect_rc 0 "--bind 0,1 --ncpu 2" -- taskset -c 0,1 "$y" run "${gemm[@]}" --bind 0,1 --ncpu 2 --out "$tmp/b01"
expect_rc 0 "  report: workers on PUs 0 and 1" -- placement "$tmp/b01" 0,1 list 0,1
python3 - "$tmp/b01" <<'PY' || { echo "FAIL: tasks name workers that do not exist"; fails=$((fails + 1)); }
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
names = [w["name"] for w in r["machine"]["workers"]]
assert names == r["workers"], (names, r["workers"])
assert all(t["worker"] in names for t in r["tasks"])
PY
expect_rc 2 "--bind 5: a PU outside the cpuset" -- taskset -c 0,1 "$y" run "${gemm[@]}" --bind 5
expect_in "ymlopt: error: --bind: PU 5 is not in this process's cpuset (usable PUs: 0,1)" "--bind 5 message"
expect_rc 2 "--bind 1 under taskset -c 0" -- taskset -c 0 "$y" run "${gemm[@]}" --bind 1
expect_in "ymlopt: error: --bind: PU 1 is not in this process's cpuset (usable PUs: 0)" "--bind 1 message"
expect_rc 2 "--bind 1-0" -- "$y" run "${gemm[@]}" --bind 1-0
expect_in "ymlopt: error: --bind: range 1-0 goes backwards" "--bind 1-0 message"
expect_rc 2 "--bind sockets" -- "$y" run "${gemm[@]}" --bind sockets
expect_in "ymlopt: error: --bind: expected auto, none, cores or a list of PU numbers like 0,2,4-7, got 'sockets'" "--bind sockets message"

# none: StarPU does not bind; the workers keep the process's mask
expect_rc 0 "--bind none" -- taskset -c 0,1 "$y" run "${gemm[@]}" --bind none --out "$tmp/none"
expect_rc 0 "  report: workers unbound, free on 0-1" -- placement "$tmp/none" 0,1 none -1,-1 0,1

# warnings: --ncpu beyond the PUs (workers share them) and beyond StarPU's build cap
cap=$("$y" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["starpu"]["max_cpus"])')
n=$((cap + 2))
expect_rc 0 "--ncpu $n on 2 PUs" -- taskset -c 0,1 "$y" run "${gemm[@]}" --ncpu $n --out "$tmp/many"
w1="--ncpu $n asks for more CPU workers than the 2 PUs --bind auto gives (usable PUs: 0,1): workers will share PUs"
w2="--ncpu $n exceeds this StarPU build's limit of $cap CPU workers; using $cap"
for w in "$w1" "$w2"; do
  expect_in "ymlopt: warning: $w" "--ncpu $n: stderr"
  grep -qF -- "warning: $w" "$tmp/many/run.log" || { echo "FAIL: run.log lacks: $w"; fails=$((fails + 1)); }
  python3 -c 'import json, sys; assert sys.argv[2] in json.load(open(sys.argv[1]))["warnings"]' "$tmp/many/report.json" "$w" ||
    { echo "FAIL: report warnings lack: $w"; fails=$((fails + 1)); }
done
expect_rc 0 "  report: $cap workers over PUs 0,1,0,1..." -- placement "$tmp/many" 0,1 auto "$(python3 -c "print(','.join(str(i % 2) for i in range($cap)))")"

# OpenBLAS: a core name it does not know (always), and the pre-AVX2 core it picks
# on this CPU when OPENBLAS_CORETYPE is unset (only where it does pick one)
expect_rc 0 "OPENBLAS_CORETYPE=Bogus" -- env OPENBLAS_CORETYPE=Bogus "$y" run "${loud[@]}" --out "$tmp/bogus"
expect_in "ymlopt: warning: OPENBLAS_CORETYPE=Bogus but OpenBLAS uses core '" "unknown OpenBLAS core: stderr"
grep -qF "warning: OPENBLAS_CORETYPE=Bogus but OpenBLAS uses core '" "$tmp/bogus/run.log" ||
  { echo "FAIL: run.log lacks the OPENBLAS_CORETYPE warning"; fails=$((fails + 1)); }
python3 -c 'import json, sys; assert any(w.startswith("OPENBLAS_CORETYPE=Bogus but") for w in json.load(open(sys.argv[1]))["machine"]["warnings"])' \
  "$tmp/bogus/report.json" || { echo "FAIL: report machine.warnings lack the OPENBLAS_CORETYPE warning"; fails=$((fails + 1)); }
core=$(env -u OPENBLAS_CORETYPE "$y" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["machine"]["blas"]["core"])')
if grep -qw avx2 /proc/cpuinfo && grep -qiwE "prescott|core2|penryn|dunnington|nehalem|atom|sandybridge|generic" <<<"$core"; then
  expect_rc 0 "OpenBLAS on core $core, CPU with AVX2" -- env -u OPENBLAS_CORETYPE "$y" run "${loud[@]}" --out "$tmp/oldcore"
  expect_in "ymlopt: warning: OpenBLAS uses core '$core' but the CPU supports AVX2" "old OpenBLAS core: stderr"
  grep -qF "warning: OpenBLAS uses core '$core' but the CPU supports AVX2" "$tmp/oldcore/run.log" ||
    { echo "FAIL: run.log lacks the OpenBLAS core warning"; fails=$((fails + 1)); }
  good=Haswell
  grep -qw avx512f /proc/cpuinfo && good=SkylakeX
  expect_rc 0 "OPENBLAS_CORETYPE=$good: no core warning" -- env OPENBLAS_CORETYPE=$good "$y" run "${loud[@]}" --out "$tmp/good"
  if grep -qF "OpenBLAS uses core" <<<"$out"; then echo "FAIL: core warning with OPENBLAS_CORETYPE=$good"; fails=$((fails + 1)); fi
else
  echo "note: OpenBLAS picks core '$core' here: no old-core warning to check"
fi
# AVX2 kernels on an AVX-512 CPU
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  expect_rc 0 "OPENBLAS_CORETYPE=Haswell on AVX-512" -- env OPENBLAS_CORETYPE=Haswell "$y" run "${loud[@]}" --out "$tmp/haswell"
  expect_in "ymlopt: warning: OpenBLAS uses core 'Haswell' (AVX2 kernels) but the CPU supports AVX-512: set OPENBLAS_CORETYPE=SkylakeX" \
    "AVX2 OpenBLAS core on AVX-512: stderr"
fi

# ymlopt info: the usable PUs and where a default run would put its workers
expect_rc 0 "info under taskset -c 1" -- taskset -c 1 "$y" info
expect_in "Usable PUs (cgroup and affinity of this process): 1" "info: usable PUs"
expect_in "Default binding --bind auto: 1 CPU worker on PU 1" "info: default binding"
expect_rc 0 "info --json" -- taskset -c 0,1 "$y" info --json
python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["machine"]["cpuset"] == [0, 1] and j["bind"]["pus"] == [0, 1], j["bind"]' "$out" ||
  { echo "FAIL: info --json cpuset/bind"; fails=$((fails + 1)); }

# MPI: each rank's own cpuset and workers in the merged report; ranks sharing PUs warned about
if ! command -v mpirun >/dev/null || ! "$y" run --help | grep -q starpu-mpi; then
  echo "note: no mpirun or no StarPU-MPI in this build: MPI checks skipped"
  finish
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
ranks() {
  python3 - "$@" <<'PY'
import json, sys
d, mode = sys.argv[1:3]
r = json.load(open(d + "/report.json"))
per = r["mpi"]["per_rank"]
sets = [p["placement"]["cpuset"] for p in per]
overlap = [w for w in r.get("warnings", []) if w.startswith("MPI ranks 0 and 1 on node ")]
unbound = [w for w in r.get("warnings", []) if "shares PUs with other ranks of its node: --bind auto leaves its workers unbound" in w]
if mode == "distinct":
    for p in per:  # --bind auto: every worker pinned inside its rank's own cpuset
        pl = p["placement"]
        assert pl["bind"] == "auto" and pl["workers"], pl
        for w in pl["workers"]:
            assert w["pu"] in pl["cpuset"] and w["affinity"] == [w["pu"]], (p["rank"], w, pl["cpuset"])
    assert sets[0] and sets[1] and not set(sets[0]) & set(sets[1]), sets
    assert not overlap and not unbound, (overlap, unbound)
else:
    # ranks sharing PUs: pinning both ranks' workers (and their polling MPI
    # threads) to the same PUs starves them, so auto leaves them unbound
    for p in per:
        pl = p["placement"]
        assert pl["bind"] == "none" and all(w["pu"] == -1 for w in pl["workers"]), pl
    assert set(sets[0]) & set(sets[1]), sets
    assert overlap and len(unbound) == 2, r.get("warnings")
print("rank cpusets", sets, "workers", [[w["pu"] for w in p["placement"]["workers"]] for p in per])
PY
}
mpi2() { timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$@"; }
expect_rc 0 "mpirun -np 2 --bind-to core" -- mpi2 --bind-to core "$y" run "${gemm[@]}" --backend starpu-mpi --out "$tmp/mpi-core"
expect_rc 0 "  each rank on its own core, its workers inside it" -- ranks "$tmp/mpi-core" distinct
echo "  $out"
expect_rc 0 "mpirun -np 2 --bind-to none" -- mpi2 --bind-to none "$y" run "${gemm[@]}" --backend starpu-mpi --out "$tmp/mpi-none"
expect_in "ymlopt: warning: MPI ranks 0 and 1 on node $(hostname) share PUs 0,1 (cpusets 0,1 and 0,1): their workers compete" "overlapping ranks: stderr"
grep -qF "warning: MPI ranks 0 and 1 on node" "$tmp/mpi-none/run.log" || { echo "FAIL: run.log lacks the overlap warning"; fails=$((fails + 1)); }
expect_rc 0 "  the overlap is in the report" -- ranks "$tmp/mpi-none" overlap
echo "  $out"
finish
