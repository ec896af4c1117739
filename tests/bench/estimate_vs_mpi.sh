#!/usr/bin/env bash
# `ymlopt estimate` against real StarPU-MPI runs on this machine: tiled GEMM, Cholesky and a
# GPT-2 block on 1/2/4 ranks (mpirun --oversubscribe, --ncpu 1 per rank), REPS runs each;
# prints a markdown table of measured (median) vs predicted makespan, summed task (busy) time
# and bytes moved. The estimate models the ranks as one node with --cores-per-node 2.
#   tests/bench/estimate_vs_mpi.sh build-mpi/bin/ymlopt [WORKDIR]   # REPS=3 WORKFLOWS="gemm cholesky gpt2"
set -u
source "$(dirname "$0")/mpi_setup.sh"
"$y" model init --arch gpt2 --preset tiny --seed 3 --layers 1 "$T/w.safetensors" >/dev/null
write_ids "$T/ids.npy" 14
declare -A WF
WF[gemm]="workflows/linalg/tiled_gemm.xml --set n=2048 --set bs=512"
WF[cholesky]="workflows/linalg/cholesky.xml --set n=2048 --set bs=256 --set verify=false"
WF[gpt2]="workflows/models/gpt2.xml --set weights=$T/w.safetensors --set ids=$T/ids.npy --set batch=2 --set seq=7
  --set layers=1 --set width=96 --set heads=3 --set vocab=512 --set context=64 --set tile_n=40 --set tile_vocab=100"
WORKFLOWS=${WORKFLOWS:-gemm cholesky gpt2}
for w in $WORKFLOWS; do
  for n in 1 2 4; do
    for rep in $(seq 1 "${REPS:-3}"); do
      timeout 120 mpirun --oversubscribe -np $n "$y" run ${WF[$w]} --backend starpu-mpi --ncpu 1 --quiet \
        --out "$T/$w-$n-$rep" >/dev/null 2>"$T/$w-$n-$rep.err" || echo "FAIL: $w on $n ranks, run $rep"
    done
    "$y" estimate ${WF[$w]} --nodes 1 --ranks-per-node $n --ncpu 1 --cores-per-node 2 --json >"$T/$w-$n.est.json"
  done
done
python3 - "$T" $WORKFLOWS <<'PY'
import glob, json, statistics, sys
T = sys.argv[1]
print("| workflow | ranks | measured ms (runs) | predicted ms | pred/meas | task time measured ms | predicted | pred/meas | bytes moved measured | predicted | messages |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for w in sys.argv[2:]:
    for n in (1, 2, 4):
        js = [json.load(open(r)) for r in sorted(glob.glob(f"{T}/{w}-{n}-*/report.json"))]
        if not js: continue
        e = json.load(open(f"{T}/{w}-{n}.est.json"))
        ms = [j["totals"]["makespan_us"] / 1e3 for j in js]
        busy = statistics.median(sum(p["busy_us"] for p in j["mpi"]["per_rank"]) / 1e3 for j in js)
        pbusy = sum(p["busy_us"] for p in e["per_rank"]) / 1e3
        moved = sorted({j["mpi"]["bytes_moved"] for j in js})
        per_rank_same = all([(p["bytes_sent"], p["bytes_received"]) for p in j["mpi"]["per_rank"]] ==
                            [(p["bytes_sent"], p["bytes_received"]) for p in e["per_rank"]] for j in js)
        m = statistics.median(ms)
        print(f"| {w} | {n} | {m:.0f} ({', '.join('%.0f' % x for x in ms)}) | {e['makespan_us'] / 1e3:.0f} | "
              f"{e['makespan_us'] / 1e3 / m:.2f} | {busy:.0f} | {pbusy:.0f} | {pbusy / busy:.2f} | "
              f"{'/'.join(map(str, moved))} | {e['bytes_moved']}{' (per rank equal)' if per_rank_same else ' (PER RANK DIFFERS)'} | {e['messages']} |")
PY
