#!/usr/bin/env python3
"""Independent PyTorch reference for ymlopt's model workflows.

Reads a safetensors checkpoint (the format parsed here with json + struct,
not with ymlopt), token ids from a .npy file, runs the architecture's forward
pass written directly with torch ops (float64), and compares with the output
ymlopt saved:

  transformers_ref.py --arch gpt2 --weights w.safetensors --ids ids.npy \
      --batch 2 --seq 7 --heads 3 [--kv-heads K] --compare logits.npy --tol 1e-4

Exit status 0 when max |ours - ref| / max |ref| <= tol (printed either way).
"""
import argparse
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I8": torch.int8}


def load_safetensors(path, dtype=torch.float64):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=DTYPES[e["dtype"]]) if end > b else torch.empty(0)
        out[name] = t.reshape(e["shape"]).to(dtype)
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def attention(q, k, v, heads, kv_heads, causal, window=0):
    # q [B, S, H*dh], k/v [B, S, KV*dh]
    B, S, _ = q.shape
    dh = q.shape[-1] // heads
    q = q.reshape(B, S, heads, dh).transpose(1, 2)
    k = k.reshape(B, S, kv_heads, dh).transpose(1, 2)
    v = v.reshape(B, S, kv_heads, dh).transpose(1, 2)
    if kv_heads != heads:  # grouped-query; skipped otherwise (no copy in an exported ONNX graph)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        if window > 0:  # Mistral's sliding window: query i sees keys i - window < j <= i
            mask |= torch.tril(torch.ones(S, S, dtype=torch.bool), -window)
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(1, 2).reshape(B, S, heads * dh)


def rope_half(x, heads, base=10000.0):
    B, S, D = x.shape
    dh = D // heads
    x = x.reshape(B, S, heads, dh)
    inv = 1.0 / (base ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh))
    ang = (torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]).to(x.dtype)  # [S, dh/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :]
    rot = torch.cat([-x[..., dh // 2:], x[..., : dh // 2]], -1)
    return (x * cos + rot * sin).reshape(B, S, D)


def gpt2(w, ids, a):
    B, S = ids.shape
    h = w["wte.weight"][ids] + w["wpe.weight"][torch.arange(S)][None]
    for i in range(a.layers):
        p = f"h.{i}."
        x = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        d = qkv.shape[-1] // 3
        o = attention(qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:], a.heads, a.heads, True)
        h = h + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        x = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        f = gelu_tanh(x @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = layer_norm(h, w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return h @ w["wte.weight"].T  # tied LM head


def bert(w, ids, a):
    B, S = ids.shape
    e = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][torch.arange(S)][None]
         + w["embeddings.token_type_embeddings.weight"][0])
    h = layer_norm(e, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], 1e-12)

    def lin(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    for i in range(a.layers):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(h, p + "attention.self." + m) for m in ("query", "key", "value"))
        o = lin(attention(q, k, v, a.heads, a.heads, False), p + "attention.output.dense")
        h = layer_norm(h + o, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], 1e-12)
        f = gelu_erf(lin(h, p + "intermediate.dense"))
        h = layer_norm(h + lin(f, p + "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], 1e-12)
    return h


def llama(w, ids, a):
    B, S = ids.shape
    h = w["model.embed_tokens.weight"][ids]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], 1e-6)
        q = rope_half(x @ w[p + "self_attn.q_proj.weight"].T, a.heads)
        k = rope_half(x @ w[p + "self_attn.k_proj.weight"].T, a.kv_heads)
        v = x @ w[p + "self_attn.v_proj.weight"].T
        h = h + attention(q, k, v, a.heads, a.kv_heads, True, a.window) @ w[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], 1e-6)
        g = x @ w[p + "mlp.gate_proj.weight"].T
        u = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], 1e-6)
    return h @ w["lm_head.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=["gpt2", "bert", "llama"])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--window", type=int, default=0, help="llama: a sliding window of this many keys (0: none)")
    ap.add_argument("--compare")
    ap.add_argument("--save")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                    help="float64 for correctness; float32 to time PyTorch as a baseline")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time-reps", type=int, default=0, help="time the forward pass: median of N runs")
    a = ap.parse_args()
    a.kv_heads = a.kv_heads or a.heads
    torch.set_num_threads(a.threads)
    w = load_safetensors(a.weights, getattr(torch, a.dtype))
    ids = torch.from_numpy(np.load(a.ids).astype(np.int64)).reshape(a.batch, a.seq)
    forward = {"gpt2": gpt2, "bert": bert, "llama": llama}[a.arch]
    with torch.no_grad():
        ref = forward(w, ids, a).reshape(a.batch * a.seq, -1)
        if a.time_reps:
            import time
            times = []
            for _ in range(a.time_reps):
                t0 = time.perf_counter()
                forward(w, ids, a)
                times.append(time.perf_counter() - t0)
            times.sort()
            print(f"pytorch {torch.__version__} {a.dtype} threads={a.threads}: forward median {times[len(times) // 2] * 1e3:.1f} ms "
                  f"over {a.time_reps} runs")
    if a.save:
        np.save(a.save, ref.numpy())
    if a.compare:
        ref = ref.to(torch.float64)
        ours = torch.from_numpy(np.load(a.compare).astype(np.float64)).reshape(ref.shape)
        err = (ours - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        print(f"{a.arch}: max relative error {err:.3e} over {tuple(ref.shape)} (tolerance {a.tol:g})")
        return 0 if err <= a.tol else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
