#!/usr/bin/env python3
"""make_gguf_fixtures.py - GGUF test data for r1infer, made with gguf-py.

1. tests/fixtures/quants/<type>.bin: random blocks of every quantized type
   r1infer reads, with the values gguf-py's reference dequantization
   (gguf.quants.dequantize) gives for them. Layout (little-endian):
       "R1QV" u32 ggml_type  u32 n_blocks  u32 block_bytes  u32 block_elems
       n_blocks*block_bytes bytes of blocks, then n_blocks*block_elems f32.
   Every byte is random except the f16 scales, which are drawn so they are
   finite, so all bit patterns of the quants and 6-bit scales are covered.

2. tests/fixtures/gguf/<name>.gguf from the Hugging Face fixtures in
   tests/fixtures/<hf>/ (made by tools/make_fixtures.py), with GGUF names,
   shapes innermost-first, q/k NOT permuted for qwen2, and for llama
   permuted as llama.cpp's converter does (its LlamaModel.permute, re-derived
   below) with llama3 scaling as rope_freqs.weight, plus <name>.json:
       {"hf": fixture dir, "logits": file of expected logits or null,
        "types": {gguf tensor name pattern: type}}
   For float files the expected logits are the fixture's own logits.bin
   (f32 compute on exactly representable weights). For quantized files
   <name>.logits.bin holds the logits Hugging Face transformers computes
   (float32, eager attention) with every weight replaced by its gguf-py
   dequantization: the exact oracle for the quantized model.

gguf-py 0.19 has no quantizer for the K-quants, so Q4_K, Q5_K and Q6_K
blocks for the model fixtures are made by the small min/max quantizers below
(the same method as src/kernels/quants.c); their dequantization is always
gguf-py's.

Run from the repo root:  python3 tools/make_gguf_fixtures.py
Needs: numpy, gguf (pip install gguf), torch + transformers for step 2.
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
QDIR = os.path.join(FIX, "quants")
GDIR = os.path.join(FIX, "gguf")

QK_K = 256

# f16 fields (byte offsets) of each block type
F16_FIELDS = {
    T.Q4_0: [0], T.Q8_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def make_quant_vectors(rng):
    os.makedirs(QDIR, exist_ok=True)
    for qt, f16s in F16_FIELDS.items():
        elems, bsize = gguf.GGML_QUANT_SIZES[qt]
        n = 8 if elems == QK_K else 32
        blocks = rng.integers(0, 256, size=(n, bsize), dtype=np.uint8)
        for off in f16s:
            d = rng.uniform(-2.0, 2.0, size=n).astype(np.float16)
            d[0] = 0.0  # a zero scale, too
            blocks[:, off:off + 2] = d.view(np.uint8).reshape(n, 2)
        want = dequantize(blocks.reshape(-1), qt).astype(np.float32).reshape(-1)
        assert want.size == n * elems and np.all(np.isfinite(want))
        path = os.path.join(QDIR, f"{qt.name.lower()}.bin")
        with open(path, "wb") as f:
            f.write(b"R1QV" + struct.pack("<IIII", int(qt), n, bsize, elems))
            f.write(blocks.tobytes())
            f.write(want.astype("<f4").tobytes())
        print(f"wrote {path} ({n} blocks)")


# ---- K-quant quantizers (min/max, no search) ----

def f16r(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def q4_k_quantize(w):
    """w: (rows, cols) float32, cols % 256 == 0 -> (rows, cols/256*144) uint8"""
    x = w.reshape(-1, 8, 32).astype(np.float32)
    nb = x.shape[0]
    lo = np.minimum(x.min(axis=2), 0)
    hi = np.maximum(x.max(axis=2), 0)
    scale = (hi - lo) / 15
    mins = -lo
    d = f16r(scale.max(axis=1) / 63)
    dmin = f16r(mins.max(axis=1) / 63)
    df, dmf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df > 0, np.clip(np.rint(scale / df), 0, 63), 0).astype(np.uint8)
        m = np.where(dmf > 0, np.clip(np.rint(mins / dmf), 0, 63), 0).astype(np.uint8)
    dl = (df * sc.astype(np.float32))[:, :, None]
    ml = (dmf * m.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(dl > 0, np.clip(np.rint((x + ml) / dl), 0, 15), 0).astype(np.uint8)
    s12 = np.zeros((nb, 12), np.uint8)
    s12[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s12[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s12[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    q = q.reshape(nb, 4, 2, 32)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2), s12, qs], axis=1)
    return out.reshape(w.shape[0], -1)


def q5_k_quantize(w):
    x = w.reshape(-1, 8, 32).astype(np.float32)
    nb = x.shape[0]
    lo = np.minimum(x.min(axis=2), 0)
    hi = np.maximum(x.max(axis=2), 0)
    scale = (hi - lo) / 31
    mins = -lo
    d = f16r(scale.max(axis=1) / 63)
    dmin = f16r(mins.max(axis=1) / 63)
    df, dmf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df > 0, np.clip(np.rint(scale / df), 0, 63), 0).astype(np.uint8)
        m = np.where(dmf > 0, np.clip(np.rint(mins / dmf), 0, 63), 0).astype(np.uint8)
    dl = (df * sc.astype(np.float32))[:, :, None]
    ml = (dmf * m.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(dl > 0, np.clip(np.rint((x + ml) / dl), 0, 31), 0).astype(np.uint8)
    s12 = np.zeros((nb, 12), np.uint8)
    s12[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s12[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s12[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    qh = np.zeros((nb, 32), np.uint8)
    for s in range(8):
        qh |= ((q[:, s, :] >> 4) & 1) << s
    ql = (q & 0xF).reshape(nb, 4, 2, 32)
    qs = (ql[:, :, 0, :] | (ql[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2), s12, qh, qs], axis=1)
    return out.reshape(w.shape[0], -1)


def q6_k_quantize(w):
    x = w.reshape(-1, 16, 16).astype(np.float32)
    nb = x.shape[0]
    idx = np.abs(x).argmax(axis=2)
    big = np.take_along_axis(x, idx[:, :, None], axis=2)[:, :, 0]
    scale = big / -32
    j = np.abs(scale).argmax(axis=1)
    smax = np.take_along_axis(scale, j[:, None], axis=1)[:, 0]
    d = f16r(smax / -128)
    df = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df != 0, np.clip(np.rint(scale / df), -128, 127), 0).astype(np.int8)
    dl = (df * sc.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(dl != 0, np.clip(np.rint(x / dl), -32, 31), 0).astype(np.int16) + 32
    q = q.astype(np.uint8).reshape(nb, 2, 4, 32)  # [h][r][l], group g = 4h + r
    ql = np.zeros((nb, 2, 64), np.uint8)
    qh = np.zeros((nb, 2, 32), np.uint8)
    for r in range(4):
        ql[:, :, 32 * (r % 2):32 * (r % 2) + 32] |= (q[:, :, r, :] & 0xF) << (4 * (r // 2))
        qh |= (q[:, :, r, :] >> 4) << (2 * r)
    out = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8), d.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(w.shape[0], -1)


KQ = {T.Q4_K: q4_k_quantize, T.Q5_K: q5_k_quantize, T.Q6_K: q6_k_quantize}


def encode(w, qt):
    """-> (array for add_tensor, raw_dtype, dequantized float32 weights)"""
    if qt == T.F32:
        a = w.astype(np.float32)
        return a, None, a
    if qt == T.F16:
        a = w.astype(np.float16)
        return a, None, a.astype(np.float32)
    blocks = KQ[qt](w) if qt in KQ else quantize(w.astype(np.float32), qt)
    deq = dequantize(blocks, qt).astype(np.float32).reshape(w.shape)
    return blocks, qt, deq


# ---- model fixtures ----

HF_LAYER = [
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_q.weight", "self_attn.q_proj.weight"), ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.weight", "self_attn.k_proj.weight"), ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.weight", "self_attn.v_proj.weight"), ("attn_v.bias", "self_attn.v_proj.bias"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"), ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
]

# name -> (hf fixture, {tensor kind: type}, exact oracle is the HF fixture's own logits)
MODELS = {
    "gqa2_f32": ("gqa2_f32", {"*": T.F32}),
    "f16": ("f16", {"*": T.F16}),
    "mha_q8_0": ("mha_bf16", {"*": T.Q8_0, "token_embd": T.BF16}),
    "gqa2_q4_1_mix": ("gqa2_f32", {"attn_q": T.Q5_1, "attn_k": T.Q4_1, "attn_v": T.Q5_1,
                                   "attn_output": T.Q4_0, "ffn_gate": T.Q4_1, "ffn_up": T.Q4_1,
                                   "ffn_down": T.Q5_0, "token_embd": T.Q8_0, "output": T.Q5_1}),
    # Q4_K_M-like: q/k/gate/up Q4_K, v Q6_K, o Q5_K; ffn_down has 384 columns
    # (no K-quant fits), so Q5_0 / Q8_0 as llama.cpp falls back; tied Q6_K embedding
    "tied_q4_k_m": ("gqa4_tied_f32", {"attn_q": T.Q4_K, "attn_k": T.Q4_K, "attn_v": T.Q6_K,
                                      "attn_output": T.Q5_K, "ffn_gate": T.Q4_K, "ffn_up": T.Q4_K,
                                      "ffn_down.0": T.Q5_0, "ffn_down": T.Q8_0, "token_embd": T.Q6_K}),
    # llama: permuted Q/K, rope_freqs, explicit head_dim (key_length)
    "llama_f32": ("llama_gqa_f32", {"*": T.F32}),
    "llama_q4_1": ("llama_gqa_f32", {"*": T.Q4_1, "token_embd": T.Q8_0}),
}


def permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf LlamaModel.permute: within each head,
    rows (j, j + hd/2) become rows (2j, 2j + 1), for its interleaved rope."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg, theta, hd):
    """rope_freqs.weight as llama.cpp's converter computes it for llama3 scaling."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
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


def type_for(spec, name, layer):
    if name.endswith(".bias") or "norm" in name:
        return T.F32
    kind = name.split(".")[0]
    for key in (f"{kind}.{layer}", kind, "*"):
        if key in spec:
            return spec[key]
    return T.F32


def make_model(out_name, hf_name, spec):
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM

    hf_dir = os.path.join(FIX, hf_name)
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    exp = json.load(open(os.path.join(hf_dir, "expected.json")))
    sd = {}
    for fn in sorted(os.listdir(hf_dir)):
        if fn.endswith(".safetensors"):
            sd.update(load_file(os.path.join(hf_dir, fn)))
    sd = {k: v.float().numpy() for k, v in sd.items()}
    n_layer = cfg["num_hidden_layers"]
    tied = cfg.get("tie_word_embeddings", False)
    rope = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta") or 10000.0

    arch = cfg.get("model_type", "qwen2")
    llama = arch == "llama"
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    path = os.path.join(GDIR, out_name + ".gguf")
    w = gguf.GGUFWriter(path, arch)
    w.add_name(out_name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layer)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if llama:
        w.add_rope_dimension_count(hd)
        if hd * n_head != cfg["hidden_size"]:
            w.add_key_length(hd)
            w.add_value_length(hd)
        if cfg.get("rope_scaling") or (cfg.get("rope_parameters") or {}).get("rope_type") == "llama3":
            w.add_tensor("rope_freqs.weight", llama3_rope_factors(cfg, float(rope), hd))

    names = [("token_embd.weight", "model.embed_tokens.weight", -1)]
    for l in range(n_layer):
        names += [(f"blk.{l}.{g}", f"model.layers.{l}.{h}", l) for g, h in HF_LAYER
                  if f"model.layers.{l}.{h}" in sd]
    names.append(("output_norm.weight", "model.norm.weight", -1))
    if not tied:
        names.append(("output.weight", "lm_head.weight", -1))
    deq_sd, types = {}, {}
    quantized = False
    for gname, hname, layer in names:
        qt = type_for(spec, gname.split(".", 2)[-1] if gname.startswith("blk.") else gname, layer)
        heads = (n_head if ".attn_q." in gname else n_kv if ".attn_k." in gname else 0) if llama else 0
        wt = permute(sd[hname], heads) if heads else sd[hname]
        arr, raw, deq = encode(wt, qt)
        if heads:  # back to HF's row order for the oracle: rows quantize independently
            deq = deq.reshape(heads, deq.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(deq.shape)
        quantized |= qt not in (T.F32, T.F16)
        w.add_tensor(gname, arr, raw_dtype=raw)
        deq_sd[hname] = torch.from_numpy(deq.copy())
        types[gname] = qt.name
    if tied:
        deq_sd["lm_head.weight"] = deq_sd["model.embed_tokens.weight"]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    meta = {"hf": hf_name, "types": types, "quantized": quantized}
    if quantized:
        cls = LlamaForCausalLM if llama else Qwen2ForCausalLM
        model = cls.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
        model.load_state_dict(deq_sd, strict=False)
        model.eval()
        with torch.no_grad():
            ids = torch.tensor([exp["prompt_ids"]])
            logits = model(ids).logits[0].float().numpy()
        lf = out_name + ".logits.bin"
        logits.astype("<f4").tofile(os.path.join(GDIR, lf))
        meta["logits"] = lf
    else:
        meta["logits"] = None  # the fixture's logits.bin
    json.dump(meta, open(os.path.join(GDIR, out_name + ".json"), "w"), indent=1)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    rng = np.random.default_rng(1234)
    make_quant_vectors(rng)
    os.makedirs(GDIR, exist_ok=True)
    only = sys.argv[1:]
    for name, (hf, spec) in MODELS.items():
        if not only or name in only:
            make_model(name, hf, spec)


if __name__ == "__main__":
    main()
