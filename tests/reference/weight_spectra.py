#!/usr/bin/env python3
"""How low-rank a TF.js model's weight matrices are: for each float matrix of at
least 100k elements, the relative Frobenius error of its best rank-r
approximation (truncated SVD, numpy in float64) at a quarter and at half of the
break-even rank r* = n k / (n + k) (where U V costs as many floats as W), and
the rank that reaches 10% error. Used for BENCHMARKS "Why no low-rank family".

  /usr/bin/python3 tests/reference/weight_spectra.py DIST_DIR   # the folder of model.json
"""
import json
import os
import sys

import numpy as np


def main():
    dist = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("YMLOPT_USE_LITE_DIR", "")
    manifest = json.load(open(os.path.join(dist, "model.json")))["weightsManifest"]
    print("| matrix | shape | r* | error at r*/4 | error at r*/2 | rank for 10% error (of min(n, k)) |")
    print("|---|---|---:|---:|---:|---:|")
    for group in manifest:
        blob = b"".join(open(os.path.join(dist, p), "rb").read() for p in group["paths"])
        off = 0
        for w in group["weights"]:
            if "quantization" in w:
                sys.exit(f"{w['name']}: quantized TF.js weights are not read here")
            n = int(np.prod(w["shape"])) if w["shape"] else 1
            dt = np.float32 if w["dtype"] == "float32" else np.int32
            a = np.frombuffer(blob, dt, n, off)
            off += n * 4
            if dt != np.float32 or n < 100000:
                continue
            m = a.reshape(-1, w["shape"][-1]).astype(np.float64)
            s = np.linalg.svd(m, compute_uv=False)
            tail = np.sqrt(np.cumsum((s ** 2)[::-1])[::-1] / np.sum(s ** 2))  # tail[r]: error at rank r
            be = m.shape[0] * m.shape[1] / (m.shape[0] + m.shape[1])
            r10 = int(np.argmax(np.append(tail, 0) <= 0.1))
            parts = w["name"].split("/")
            layer = [q for q in parts if q.startswith("Layer_")]
            name = "/".join(layer[-1:] + [q for q in parts[-5:] if not q.startswith(("Tensordot", "Reshape", "Concat",
                                                                                      "concat", "part_", "kernel"))])
            print(f"| {name} | {m.shape[0]}x{m.shape[1]} | {be:.0f} | {tail[int(be / 4)]:.3f} | "
                  f"{tail[int(be / 2)]:.3f} | {r10} ({r10 / min(m.shape):.0%}) |")


if __name__ == "__main__":
    main()
