#!/usr/bin/env bash
# The CUDA kernels' tests, StarPU's CUDA workers, and its OpenCL workers on the
# GPU (where the driver has an OpenCL library), on a borrowed GPU machine that
# has no Debian packages. BUILD_DIR must link a StarPU built with CUDA:
#
#   scripts/setup.sh build-gpu -DYMLOPT_STARPU_PREFIX="$(scripts/starpu_cuda.sh)"
#   tests/gpu/device_check.sh bundle build-gpu   # here: .gpu/bundle.tar.xz (binaries + their libraries)
#   OUT=DIR tests/gpu/device_check.sh run        # there, from the repo root: runs them, writes DIR/device_report.md
#   tests/gpu/device_check.sh ldd                # either: each library the bundle resolves, bad ones marked
#
# The bundle holds the stripped test binaries and bin/ymlopt plus every library
# they load that is neither glibc nor CUDA (libcudart excepted: small, and the one
# we compiled against); libstdc++/libgcc_s go to compat/, used only where the
# machine's own are too old. cuBLAS, cuBLASLt and cuSPARSE are dlopen'ed by
# SONAME (components/cuda_libs): `run` puts the CUDA library folders it finds
# (pip nvidia-* packages, /usr/local/cuda) on LD_LIBRARY_PATH.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=$root/.gpu
x=${TMPDIR:-/tmp}/ymlopt_gpu  # the unpacked bundle (bin/ lib/ compat/), out of .gpu/ so that .gpu/ stays small
bins=(ymlopt ymlopt_test_cuda ymlopt_test_components ymlopt_test_opencl)
py=$(command -v python3 || echo /opt/torch/.venv/bin/python3)

is_glibc() { [[ $1 =~ ^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_[a-z]+|libthread_db)\.so ]]; }
is_cuda() { [[ $1 =~ ^lib(cuda|nvidia-|cublas|cusparse|nvJitLink|cufft|curand|cusolver|nvrtc|cudnn|nccl) ]]; }
is_compat() { [[ $1 =~ ^lib(stdc\+\+|gcc_s)\.so ]]; }

bundle() {
  local build=${1:?usage: device_check.sh bundle BUILD_DIR}
  local stage=$gpu/stage b name path
  rm -rf "$gpu" && mkdir -p "$stage"/{bin,lib,compat}
  for b in "${bins[@]}"; do
    [[ -x $build/bin/$b ]] || { echo "missing $build/bin/$b (build it first)" >&2; exit 1; }
    cp "$build/bin/$b" "$stage/bin/" && strip --strip-unneeded "$stage/bin/$b"
  done
  # ldd lists the whole closure: "name => /path (addr)"
  ldd "${bins[@]/#/$build/bin/}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      if is_glibc "$name" || { is_cuda "$name" && [[ $name != libcudart.so* ]]; }; then continue; fi
      local dest=lib
      is_compat "$name" && dest=compat
      cp -L "$path" "$stage/$dest/$name" && chmod u+w "$stage/$dest/$name"
      strip --strip-unneeded "$stage/$dest/$name" 2>/dev/null || true
    done
  (cd "$stage" && find . -type f -printf '%s\t%p\n' | sort -k2) >"$gpu/MANIFEST.txt"
  echo "uncompressed: $(du -sh "$stage" | cut -f1)"
  tar -C "$stage" -cf - . | xz -T0 -6 >"$gpu/bundle.tar.xz"
  rm -rf "$stage"
  echo "bundle: $gpu/bundle.tar.xz $(du -h "$gpu/bundle.tar.xz" | cut -f1) ($(wc -l <"$gpu/MANIFEST.txt") files)"
}

unpack() {
  [[ -f $gpu/bundle.tar.xz ]] || { echo "no $gpu/bundle.tar.xz: run 'bundle BUILD_DIR' first" >&2; exit 1; }
  rm -rf "$x" && mkdir -p "$x"
  if command -v xz >/dev/null; then
    xz -dc "$gpu/bundle.tar.xz" | tar -C "$x" -xf -
  else
    "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$gpu/bundle.tar.xz" "$x"
  fi
}

# The folders of the machine's CUDA libraries: pip nvidia-* packages (any python
# that has them), then the toolkit's.
cuda_dirs() {
  local py f
  {
    for py in /opt/torch/.venv/bin/python3 python3; do
      command -v "$py" >/dev/null || continue
      "$py" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null || true
    done | sort -u | while read -r f; do
      find "$f" -maxdepth 3 -name 'lib*.so*' -path '*/lib/*' -printf '%h\n' 2>/dev/null
    done | sort -u
    for f in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [[ -d $f ]] && echo "$f"; done
  } | awk '!seen[$0]++'
}

set_library_path() {
  local dirs
  dirs=$(cuda_dirs | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # keep the machine's (libcuda.so.1 may be there)
  export LD_LIBRARY_PATH=$x/lib${dirs:+:$dirs}
  # the bundled libstdc++/libgcc_s only where the machine's own lack a version we need
  if grep -q 'not found' <<<"$(ldd "$x"/bin/* 2>&1 || true)"; then
    export LD_LIBRARY_PATH=$x/lib:$x/compat${dirs:+:$dirs}
  fi
}

# Each library the binaries resolve; a BAD line is one that is missing, too old,
# or outside the bundle while neither glibc nor CUDA. Returns 1 if any.
check_ldd() {
  local out bad=0 name path d dirs
  out=$(ldd "$x"/bin/* 2>&1 || true)
  grep 'not found' <<<"$out" | sed 's/^[[:space:]]*/BAD /' | sort -u | grep . && bad=1
  while read -r name path; do
    if is_glibc "$name" || is_cuda "$name" || [[ $path == "$x"/* ]]; then echo "ok  $name $path"
    elif is_compat "$name"; then echo "ok  $name $path (the machine's: new enough)"
    else echo "BAD $name $path (outside the bundle)"; bad=1; fi
  done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$out" | sort -u)
  # the dlopen'ed ones (components/cuda_libs): the first LD_LIBRARY_PATH folder that has them
  for name in libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libcusparse.so.12 libnvJitLink.so.13; do
    path=""
    IFS=: read -ra dirs <<<"$LD_LIBRARY_PATH"
    for d in "${dirs[@]}"; do [[ -e $d/$name ]] && { path=$d/$name; break; }; done
    echo "dlopen $name ${path:-(not on LD_LIBRARY_PATH; ld.so.cache: $(/sbin/ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}'))}"
  done
  return $bad
}

# The driver's OpenCL library as an ICD (OCL_ICD_VENDORS) when the machine has
# no /etc/OpenCL/vendors entry; false (with a note) when there is none at all.
opencl_icd() {
  if compgen -G "/etc/OpenCL/vendors/*.icd" >/dev/null; then return 0; fi
  local lib
  lib=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libnvidia-opencl.so.1" {print $NF; exit}')
  [[ -n $lib ]] || lib=$(find /usr/lib /usr/lib64 /usr/local -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
  if [[ -z $lib ]]; then
    echo "== OpenCL: no ICD and no libnvidia-opencl.so.1 on this machine: the OpenCL checks do not run" |
      tee "$OUT/opencl_note.txt"
    return 1
  fi
  mkdir -p "$x/icd" && echo "$lib" >"$x/icd/nvidia.icd"
  export OCL_ICD_VENDORS=$x/icd
}

# GPT-2 124M seq 128 through StarPU: sequential, then 1 CPU + 1 KIND (opencl or
# cuda) worker on the GPU with dmda (a calibrating run, then the measured one)
# and with --where KIND; the logits must agree (4e-4 relative), and the
# report's split goes to OUT/KIND_gpt2.txt. OPTS are the run's device options;
# OPENCL_RUN adds OpenCL ones (--opencl-on-cpus to try it on PoCL's CPU device).
#   gpt2_on cuda --ncuda 1
gpt2_on() {
  local kind=$1 d=$OUT/gpt2-$1 y=$x/bin/ymlopt rc=0
  shift
  mkdir -p "$d"
  {
    echo "== GPT-2 124M seq 128 on CPU + $kind GPU"
    timeout 60 "$y" model init --arch gpt2 --preset 124M --seed 1 "$d/w.safetensors" >/dev/null &&
      "$py" -c 'import struct, sys
n = 128; h = "{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (%d,), }" % n
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%di" % n, *[i * 7919 % 50257 for i in range(n)]))' "$d/ids.npy" || rc=1
    local wf=(workflows/models/gpt2.xml --set weights="$d/w.safetensors" --set ids="$d/ids.npy" --set seq=128 -q)
    timeout 120 "$y" run "${wf[@]}" --backend sequential -o "$d/seq" || rc=1
    for r in cal dmda; do
      timeout 120 "$y" run "${wf[@]}" --ncpu 4 "$@" --sched dmda --starpu-home "$d/home" -o "$d/$r" || rc=1
    done
    timeout 120 "$y" run "${wf[@]}" --ncpu 4 "$@" --where "$kind" -o "$d/where" || rc=1
    "$py" - "$d" "$kind" <<'PY' || rc=1
import json, struct, sys
def npy(p):
    raw = open(p, "rb").read(); n = struct.unpack("<H", raw[8:10])[0]
    return struct.unpack("<%df" % ((len(raw) - 10 - n) // 4), raw[10 + n:])
d, kind = sys.argv[1], sys.argv[2]
ref = npy(d + "/seq/logits.npy"); scale = max(abs(v) for v in ref)
for run in ("dmda", "where"):
    r = json.load(open(f"{d}/{run}/report.json"))
    err = max(abs(a - b) for a, b in zip(npy(f"{d}/{run}/logits.npy"), ref)) / scale
    kinds = {}
    for w in r["worker_stats"]:
        k = kinds.setdefault(w["kind"], [0, 0.0]); k[0] += w["tasks"]; k[1] += w["busy_us"] / 1e3
    moved = ", ".join(f"{x['src']}->{x['dst']} {x['bytes'] / 2**20:.1f} MiB" for x in r["transfers"])
    print(f"{run}: makespan {r['totals']['makespan_us'] / 1e3:.1f} ms, logits rel err {err:.2e}, "
          f"split {kinds}, moved {moved}")
    assert err < 4e-4 and kinds.get(kind, [0])[0] > 0, run
seq = json.load(open(d + "/seq/report.json"))["totals"]["makespan_us"] / 1e3
print(f"sequential: makespan {seq:.1f} ms")
PY
    echo "== GPT-2 on CPU + $kind GPU: $([[ $rc == 0 ]] && echo PASS || echo FAIL)"
  } 2>&1 | tee "$OUT/${kind}_gpt2.txt"
  grep -q "GPU: PASS" "$OUT/${kind}_gpt2.txt"
}

run() {
  : "${OUT:?set OUT to the folder for the results}"
  mkdir -p "$OUT"
  cd "$root"
  unpack
  set_library_path
  export HWLOC_PLUGINS_PATH=$x/none  # Debian's hwloc plugins are not there: do without them here too
  local log=$OUT/device_log.txt status=0
  {
    echo "== host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
    echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "== nvidia-smi"
    timeout 20 nvidia-smi -L || echo "(nvidia-smi failed: $?)"
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader |
      sed 's/^/gpu: /' || true
    echo "== ldd"
    check_ldd || echo "LDD CHECK FAILED"
  } >"$log" 2>&1
  grep -q '^LDD CHECK FAILED' "$log" && status=1
  grep -v '^ok ' "$log" || true

  echo "== ymlopt info / components" | tee "$OUT/ymlopt_info.txt"
  { timeout 30 "$x/bin/ymlopt" info && timeout 30 "$x/bin/ymlopt" components; } >>"$OUT/ymlopt_info.txt" 2>&1 || status=1
  grep -E 'CUDA|cuda' "$OUT/ymlopt_info.txt" | head -20 || true

  echo "== ymlopt_test_cuda"
  timeout 180 "$x/bin/ymlopt_test_cuda" --gtest_output="json:$OUT/cuda_tests.json" >"$OUT/cuda_tests.log" 2>&1 || status=1
  tail -5 "$OUT/cuda_tests.log"
  echo "== ymlopt_test_components --gtest_filter='NnCuda.*'"
  timeout 60 "$x/bin/ymlopt_test_components" --gtest_filter='NnCuda.*' \
    --gtest_output="json:$OUT/nn_cuda_tests.json" >"$OUT/nn_cuda_tests.log" 2>&1 || status=1
  tail -5 "$OUT/nn_cuda_tests.log"

  local names=(cuda_tests nn_cuda_tests)
  if opencl_icd; then
    echo "== ymlopt_test_opencl (OpenCL kernels against the CPU ones on the GPU)"
    timeout 180 "$x/bin/ymlopt_test_opencl" --gtest_output="json:$OUT/opencl_tests.json" >"$OUT/opencl_tests.log" 2>&1 ||
      status=1
    tail -5 "$OUT/opencl_tests.log"
    names+=(opencl_tests)
    # shellcheck disable=SC2086
    gpt2_on opencl --opencl 1 ${OPENCL_RUN:-} || status=1
  fi
  # CUDA workers: the bundle's StarPU must have CUDA (a build configured with
  # -DYMLOPT_STARPU_PREFIX=$(scripts/starpu_cuda.sh))
  if grep -q ', CUDA yes,' "$OUT/ymlopt_info.txt"; then
    gpt2_on cuda --ncuda 1 || status=1
  else
    echo "== CUDA through StarPU: FAIL: the bundle's StarPU has no CUDA (bundle a build against scripts/starpu_cuda.sh's)" |
      tee "$OUT/cuda_gpt2.txt"
    status=1
  fi

  # the report; it fails on any failure, missing result or unexpected skip
  timeout 30 "$py" "$root/tests/gpu/report.py" "$OUT" "$log" "$OUT/ymlopt_info.txt" "${names[@]}" || status=1
  echo "== device_check: $([[ $status == 0 ]] && echo PASS || echo FAIL) (report: $OUT/device_report.md)"
  return $status
}

case ${1:-} in
  bundle) shift; bundle "$@" ;;
  run) run ;;
  ldd) unpack; set_library_path; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; check_ldd ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
