"""What the e2e scripts' Python checks share (lib.sh puts this folder on PYTHONPATH).

    from checks import check, done, header, metadata
    check(err < 0.05, f"error {err:.4f}")   # prints "ok: ..." or "FAIL: ..."
    done()                                   # exit 1 if any check failed
"""
import json
import struct
import sys

_failed = False


def check(cond, what):
    """Prints 'ok: WHAT' or 'FAIL: WHAT'; a failure makes done() exit 1."""
    global _failed
    print(("ok: " if cond else "FAIL: ") + what)
    _failed = _failed or not cond


def done():
    sys.exit(1 if _failed else 0)


def _read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def header(path):
    """A safetensors file's tensors: name -> {dtype, shape, data_offsets}."""
    h = _read_header(path)
    h.pop("__metadata__", None)
    return h


def metadata(path):
    """A safetensors file's __metadata__ (str -> str)."""
    return _read_header(path).get("__metadata__", {})


def tensor_bytes(path):
    """A safetensors file's tensors: name -> their raw bytes."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        f.seek(8 + n)
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header(path).items()}


def saved_matrix(d):
    """The matrix workflows/unite/meram.xml saved in folder d (save_matrix=true), dense:
    A.npy itself, or with format=csr A.npy (values), A_index.npy and A_ptr.npy."""
    import os
    import numpy as np
    a = np.load(d + "/A.npy")
    if not os.path.exists(d + "/A_ptr.npy"):
        return a
    ptr, col = np.load(d + "/A_ptr.npy"), np.load(d + "/A_index.npy")
    n, nnz = len(ptr) - 1, int(ptr[-1])
    dense = np.zeros((n, n))
    np.add.at(dense, (np.repeat(np.arange(n), np.diff(ptr)), col[:nnz]), a[:nnz])
    return dense
