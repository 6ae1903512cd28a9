#!/usr/bin/env python3
"""check_gguf.py - read a GGUF written by `r1infer convert` with gguf-py and
compare it with the Hugging Face checkpoint it came from.

    python3 tools/check_gguf.py OUT.gguf HFDIR

Checks: gguf.GGUFReader reads it; general.architecture is config.json's
model_type (qwen2 or llama) and the <arch>.* hyper-parameters equal
config.json; every tensor, dequantized by gguf-py (gguf.quants.dequantize),
equals the safetensors weight within the named relative RMS error of its type
(MAX_ERR), after undoing, for llama, the Q/K row permutation of llama.cpp's
converter (its LlamaModel.permute, re-derived here); rope_freqs.weight, when
the checkpoint has llama3 rope scaling, equals the divisors llama.cpp's
converter computes. Exit status 0 when all hold.
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

# relative RMS error of a tensor written in each type (f16/bf16 rounding, quantizers)
MAX_ERR = {"F32": 0.0, "F16": 1e-3, "BF16": 5e-3, "Q8_0": 0.01, "Q6_K": 0.03, "Q4_0": 0.12, "Q4_K": 0.10,
           "Q4_1": 0.10, "Q5_0": 0.06, "Q5_1": 0.05}

LAYER = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
         "attn_q.bias": "self_attn.q_proj.bias", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_k.bias": "self_attn.k_proj.bias", "attn_v.weight": "self_attn.v_proj.weight",
         "attn_v.bias": "self_attn.v_proj.bias", "attn_output.weight": "self_attn.o_proj.weight",
         "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
         "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}
GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}


def hf_name(n):
    if n in GLOBAL:
        return GLOBAL[n]
    _, l, rest = n.split(".", 2)
    return f"model.layers.{l}.{LAYER[rest]}"


def read_safetensors(path):
    """The tensors of one .safetensors file as float32 arrays. Read here with
    numpy (an 8-byte header length, a JSON header, raw little-endian data), so
    bf16 needs no torch: a bf16 value is the top half of an f32's bits."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        data = f.read()
    kinds = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=kinds[v["dtype"]]).reshape(v["shape"])
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[k] = a
    return out


def load_hf(d):
    sd = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            sd.update(read_safetensors(os.path.join(d, fn)))
    return {k: np.asarray(v, dtype=np.float32) for k, v in sd.items()}


def unpermute(w, n_head):
    """Inverse of llama.cpp's permute(): stored row 2j+s of a head is HF row s*hd/2+j."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_factors(cfg):
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta") or rs.get("rope_theta")
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    f, lo, hi, orig = (rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                       rs["original_max_position_embeddings"])
    out = []
    for i in range(0, hd, 2):
        wl = 2 * np.pi * theta ** (i / hd)
        if wl < orig / hi:
            out.append(1.0)
        elif wl > orig / lo:
            out.append(f)
        else:
            sm = (orig / wl - lo) / (hi - lo)
            out.append(1 / ((1 - sm) / f + sm))
    return np.array(out, dtype=np.float32)


def main():
    path, hf = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(path)
    fields = {f.name: f for f in r.fields.values()}

    def val(k):
        f = fields[k]
        v = f.contents()
        return v

    cfg = json.load(open(os.path.join(hf, "config.json")))
    errs = []
    arch = cfg.get("model_type", "qwen2")
    if val("general.architecture") != arch:
        errs.append(f"architecture {val('general.architecture')}, config {arch}")
    for k, c in [("embedding_length", "hidden_size"), ("block_count", "num_hidden_layers"),
                 ("feed_forward_length", "intermediate_size"),
                 ("attention.head_count", "num_attention_heads"),
                 ("attention.head_count_kv", "num_key_value_heads")]:
        if val(f"{arch}.{k}") != cfg[c]:
            errs.append(f"{arch}.{k} = {val(f'{arch}.{k}')}, config {cfg[c]}")
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if hd * cfg["num_attention_heads"] != cfg["hidden_size"] and val(f"{arch}.attention.key_length") != hd:
        errs.append(f"{arch}.attention.key_length is not head_dim {hd}")
    sd = load_hf(hf)
    worst = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        w = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if t.name == "rope_freqs.weight":
            e = float(np.abs(w - llama3_factors(cfg)).max())
            if e > 1e-6:
                errs.append(f"rope_freqs.weight differs from llama.cpp's llama3 factors by {e:.3g}")
            continue
        if arch == "llama" and (".attn_q." in t.name or ".attn_k." in t.name):
            w = unpermute(w, cfg["num_attention_heads"] if ".attn_q." in t.name else cfg["num_key_value_heads"])
        ref = sd[hf_name(t.name)]
        if ref.shape != w.shape:
            errs.append(f"{t.name}: shape {w.shape} vs {ref.shape}")
            continue
        e = float(np.sqrt(((w - ref) ** 2).sum() / max((ref ** 2).sum(), 1e-30)))
        ty = t.tensor_type.name
        worst[ty] = max(worst.get(ty, 0.0), e)
        if e > MAX_ERR.get(ty, 0.0):
            errs.append(f"{t.name} ({ty}): rel rms err {e:.4g} > {MAX_ERR.get(ty)}")
    print(f"{path}: {len(r.tensors)} tensors; worst rel rms err by type: " +
          ", ".join(f"{k} {v:.3g} (max {MAX_ERR.get(k)})" for k, v in sorted(worst.items())))
    for e in errs:
        print("  " + e)
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main()
