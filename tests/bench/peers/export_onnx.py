#!/usr/bin/env python3
"""ONNX graph of the reference forward (tests/reference/transformers_ref.py)
on a safetensors checkpoint, for ONNX Runtime:

  export_onnx.py --arch gpt2 --weights w.safetensors --seq 128 --layers 12 --heads 12 \
      [--kv-heads K] [--int8] --out model.onnx

float32, static shapes [1, seq], input "ids" (int64), output "out" (logits for
gpt2/llama, hidden states for bert). --int8 rewrites every linear (MatMul with
a weight initializer) as ONNX Runtime's quantize_dynamic does: per-column
symmetric int8 weights (scale = max|w| / 127, codes round(w / scale) in
[-127, 127], ymlopt's quant.int8 rule) and DynamicQuantizeLinear activations
(uint8, one scale and zero point per tensor), i.e. DynamicQuantizeLinear +
MatMulInteger + Cast + Mul, which ORT fuses into DynamicQuantizeMatMul. The
MatMul that makes the graph output (GPT-2's LM head, tied to the embedding)
stays float32, as ymlopt leaves tied weights uncompressed.
"""
import argparse
import io
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import transformers_ref as ref  # noqa: E402


class Forward(torch.nn.Module):
    """The reference forward with the checkpoint's tensors as buffers (ONNX initializers)."""

    def __init__(self, fn, weights, args):
        super().__init__()
        self.fn, self.args, self.names = fn, args, list(weights)
        for name, t in weights.items():
            self.register_buffer(name.replace(".", "__"), t)

    def forward(self, ids):
        w = {n: getattr(self, n.replace(".", "__")) for n in self.names}
        return self.fn(w, ids, self.args)


def export_f32(a):
    """Returns the serialized float32 ONNX model."""
    w = ref.load_safetensors(a.weights, torch.float32)
    fn = {"gpt2": ref.gpt2, "bert": ref.bert, "llama": ref.llama}[a.arch]
    model = Forward(fn, w, argparse.Namespace(layers=a.layers, heads=a.heads, kv_heads=a.kv_heads or a.heads))
    ids = torch.zeros(1, a.seq, dtype=torch.int64)
    buf = io.BytesIO()
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # shapes are static on purpose
    with torch.no_grad():
        torch.onnx.export(model, (ids,), buf, input_names=["ids"], output_names=["out"], opset_version=14,
                          do_constant_folding=True)
    return buf.getvalue()


def quantize_weight(w):
    """Per-column symmetric int8 of a [K, N] MatMul weight: codes, scales [N]."""
    amax = np.abs(w).max(axis=0)
    scale = np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)
    x = w * (np.float32(1) / scale)
    q = np.clip(np.sign(x) * np.floor(np.abs(x) + np.float32(0.5)), -127, 127)  # roundf: half away from zero
    return q.astype(np.int8), scale


def to_int8(blob):
    """Rewrites the linears of a float32 ONNX model as dynamic int8; returns (model, count)."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load_from_string(blob)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    outputs = {o.name for o in g.output}
    nodes, count = [], 0
    for node in g.node:
        b = inits.get(node.input[1]) if node.op_type == "MatMul" else None
        if b is None or len(b.dims) != 2 or node.output[0] in outputs:
            nodes.append(node)
            continue
        q, scale = quantize_weight(numpy_helper.to_array(b))
        p = f"{node.name or node.output[0]}_q"
        g.initializer.extend([numpy_helper.from_array(q, p + "_w"), numpy_helper.from_array(scale, p + "_ws"),
                              numpy_helper.from_array(np.zeros(q.shape[1], np.int8), p + "_wzp")])
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [node.input[0]], [p + "_x", p + "_xs", p + "_xzp"]),
            helper.make_node("MatMulInteger", [p + "_x", p + "_w", p + "_xzp", p + "_wzp"], [p + "_acc"]),
            helper.make_node("Mul", [p + "_xs", p + "_ws"], [p + "_s"]),
            helper.make_node("Cast", [p + "_acc"], [p + "_accf"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [p + "_accf", p + "_s"], [node.output[0]]),
        ]
        count += 1
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(m)
    return m, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=["gpt2", "bert", "llama"])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    blob = export_f32(a)
    if not a.int8:
        with open(a.out, "wb") as f:
            f.write(blob)
        print(f"{a.out}: float32, {len(blob) / 2**20:.1f} MiB")
        return 0
    import onnx
    m, count = to_int8(blob)
    onnx.save(m, a.out)
    print(f"{a.out}: {count} linears in dynamic int8, {os.path.getsize(a.out) / 2**20:.1f} MiB")
    return 0 if count else 1


if __name__ == "__main__":
    sys.exit(main())
