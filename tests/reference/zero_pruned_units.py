#!/usr/bin/env python3
"""The reference for structured pruning: a model with heads / FFN neurons removed
computes what the original model computes when the removed units' input columns
of the consumer layer (o_proj, down_proj, ...) are zero. This writes that
zeroed copy of the ORIGINAL weights from the masks `ymlopt optimize` logged
(prune.heads / prune.neurons: consumer key, declared shape and layout, mask), so
the original workflow can run it. Independent of ymlopt's rewriting: numpy only.

  zero_pruned_units.py REPORT.json ORIGINAL.safetensors OUT.safetensors
"""
import json
import struct
import sys

import numpy as np

TYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I8": np.int8}


def main(report, src, dst):
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__", None)
    arrays = {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]], TYPES[v["dtype"]])
              .reshape(v["shape"]).copy() for k, v in hdr.items()}
    removed = 0
    for p in json.load(open(report))["pass_log"]:
        if not p["pass"].startswith(("prune.heads", "prune.neurons")):
            continue
        for layer in p["layers"]:
            w = arrays[layer["consumer"]]
            stored = w.shape
            w = w.reshape(layer["shape"])  # as the workflow declares it (USE-lite's may be reshaped)
            mask = np.array(layer["mask"], bool)
            in_dim = 1 if layer["layout"] == "nk" else 0  # [out, in] or [in, out] (GPT-2 Conv1D, TF)
            unit = w.shape[in_dim] // mask.size
            cols = np.repeat(~mask, unit)
            if in_dim == 0:
                w[cols, :] = 0
            else:
                w[:, cols] = 0
            arrays[layer["consumer"]] = w.reshape(stored)
            removed += int((~mask).sum())
    if removed == 0:
        sys.exit("zero_pruned_units: the report removes no unit")
    names = {v: k for k, v in TYPES.items()}
    out, blobs, off = {}, [], 0
    for k, a in arrays.items():
        b = a.tobytes()
        out[k] = {"dtype": names[a.dtype.type], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    print(f"{removed} units zeroed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
