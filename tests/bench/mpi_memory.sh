#!/usr/bin/env bash
# Memory per rank under --backend starpu-mpi: GPT-2 124M and TinyLlama-shaped (1.1B) f32
# forwards on 1, 2 and 4 ranks (mpirun --oversubscribe, --ncpu 1 per rank), by distribution:
#   cols   the default column tiles (gpt2.xml, llama.xml)
#   tp     Megatron shards, --distribute tp (tp = ranks)
#   pp     pipeline stages, *_pipeline.xml --distribute pp (4 sequences of SEQ/4 tokens)
#   tpxpp  both, *_pipeline.xml --distribute tp=2,pp=RANKS/2 (4 ranks only)
# Per rank: peak RSS, the data it holds (allocated + mapped from the weight file), bytes
# sent and received, busy time; beside each, `ymlopt estimate` made before the run, whose
# peak RSS adds what a rank used beyond its data in the runs before (a task history of this
# script's own).
#   tests/bench/mpi_memory.sh build/bin/ymlopt [WORKDIR]   # MODELS="gpt2 llama" SEQ=128 DISTS="cols tp pp tpxpp"
# WORKDIR keeps the seeded checkpoints (1.1B: 4.4 GB) for the next call.
set -u
source "$(dirname "$0")/mpi_setup.sh"
export STARPU_SILENT=1 XDG_CACHE_HOME="$T/cache"
rm -rf "$XDG_CACHE_HOME"
seq=${SEQ:-128}
write_ids "$T/ids.npy" "$seq" 32000 37 11
declare -A WF
[ -f "$T/gpt2.safetensors" ] || "$y" model init --arch gpt2 --preset 124M "$T/gpt2.safetensors" >/dev/null
declare -A PP
WF[gpt2]="workflows/models/gpt2.xml --set weights=$T/gpt2.safetensors --set ids=$T/ids.npy --set seq=$seq"
PP[gpt2]="workflows/models/gpt2_pipeline.xml --set weights=$T/gpt2.safetensors --set ids=$T/ids.npy --set batch=4 --set seq=$((seq / 4))"
if [[ " ${MODELS:-gpt2 llama} " == *" llama "* ]]; then
  [ -f "$T/llama.safetensors" ] || "$y" model init --arch llama --preset 1.1B "$T/llama.safetensors" >/dev/null
  shape="--set layers=22 --set width=2048 --set heads=32 --set kv_heads=4 --set ffn=5632 --set vocab=32000"
  WF[llama]="workflows/models/llama.xml --set weights=$T/llama.safetensors --set ids=$T/ids.npy --set seq=$seq $shape"
  PP[llama]="workflows/models/llama_pipeline.xml --set weights=$T/llama.safetensors --set ids=$T/ids.npy --set batch=4
    --set seq=$((seq / 4)) $shape"
fi
for m in ${MODELS:-gpt2 llama}; do
  for n in 1 2 4; do
    for d in ${DISTS:-cols tp pp tpxpp}; do
      case $d in
        cols) args=(${WF[$m]}) ;;
        tp) args=(${WF[$m]} --distribute tp) ;;
        pp) args=(${PP[$m]} --distribute pp) ;;
        tpxpp) args=(${PP[$m]} --distribute tp=2,pp=$((n / 2))) ;;
        *) echo "mpi_memory: unknown distribution '$d' (cols, tp, pp, tpxpp)" >&2; exit 2 ;;
      esac
      { [ $d != cols ] && [ $n = 1 ]; } || { [ $d = tpxpp ] && [ $n -lt 4 ]; } && continue
      "$y" estimate "${args[@]}" --nodes 1 --ranks-per-node $n --ncpu 1 --cores-per-node 2 --json >"$T/$m-$d-$n.est.json"
      timeout 600 mpirun --oversubscribe -np $n "$y" run "${args[@]}" --backend starpu-mpi --ncpu 1 --quiet \
        --out "$T/$m-$d-$n" >/dev/null 2>"$T/$m-$d-$n.err" || echo "FAIL: $m $d on $n ranks (see $T/$m-$d-$n.err)"
    done
  done
done
python3 - "$T" "${DISTS:-cols tp pp tpxpp}" ${MODELS:-gpt2 llama} <<'PY'
import json, sys
T, dists = sys.argv[1], sys.argv[2].split()
mib = lambda b: "%.0f" % (b / 2**20) if b is not None else "-"
print("| model | split | ranks | rank | peak RSS MiB | estimated | held MiB (alloc + mapped) | estimated | sent MiB | received MiB | moved MiB (estimated) | busy ms | makespan ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for m in sys.argv[3:]:
    for n in (1, 2, 4):
        for d in dists:
            try:
                r, e = json.load(open(f"{T}/{m}-{d}-{n}/report.json")), json.load(open(f"{T}/{m}-{d}-{n}.est.json"))
            except OSError:
                continue
            for p, q in zip(r["mpi"]["per_rank"], e["per_rank"]):
                held = lambda x: f"{mib(x['allocated_bytes'] + x['mapped_bytes'])} ({mib(x['allocated_bytes'])} + {mib(x['mapped_bytes'])})"
                moved = f"{r['mpi']['bytes_moved'] / 2**20:.1f} ({e['bytes_moved'] / 2**20:.1f})" if p["rank"] == 0 else ""
                print(f"| {m} | {d} | {n} | {p['rank']} | {mib(p['peak_rss_bytes'])} | {mib(q['peak_rss_bytes'])} | {held(p)} | {held(q)} | "
                      f"{p['bytes_sent'] / 2**20:.1f} | {p['bytes_received'] / 2**20:.1f} | {moved} | {p['busy_us'] / 1e3:.0f} | "
                      f"{r['totals']['makespan_us'] / 1e3:.0f} |")
PY
