#!/usr/bin/env python3
"""check_fixture.py - an independent pure-numpy Qwen2 / Llama forward that re-derives
a fixture's oracle logits from its files, proving the fixture format and the
math the C engine must implement:

  - config.json: hidden_size, num_attention_heads, num_key_value_heads,
    num_hidden_layers, rms_norm_eps, tie_word_embeddings, and rope_theta
    either top-level (transformers 4.x, the real R1 distills) or in
    rope_parameters.rope_theta (transformers 5.x).
  - safetensors: model.safetensors, or shards listed in
    model.safetensors.index.json ("weight_map"); F32 / BF16 / F16 read by
    hand from the raw header + bytes (no safetensors library), so the byte
    format is checked too.
  - math: x = embed[ids]; per layer
        h = rmsnorm(x) * w_in           (rms over the hidden dim, eps inside sqrt)
        q,k,v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv   (biases on q/k/v only; none in llama)
        RoPE rotate-half: pairs (x[i], x[i+d/2]), angle pos * theta^(-2i/d), for
        llama3 rope_scaling each frequency scaled by the published llama3 rule
        (low frequencies / factor, high kept, smooth interpolation between);
        head_dim from config.json when given (heads x head_dim may != hidden)
        GQA: q head h uses kv head h // (n_head / n_kv)
        causal softmax(q k^T / sqrt(d)) v, o_proj (no bias), residual
        h = rmsnorm(x) * w_post; x += down(silu(gate h) * up h)
    final norm, lm_head (= embed when tied).
  All in float64 for the check; compared to logits.bin.

Usage: python3 tools/check_fixture.py [fixture_dir ...]  (default: all in tests/fixtures)
Exit status 1 if any fixture differs by more than 1e-5 relative.
"""
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bf16_to_f32(raw):
    u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return u.view(np.float32)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[base + a:base + b]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = bf16_to_f32(raw)
        else:
            raise ValueError(f"{path}: {name}: dtype {dt} not handled")
        out[name] = (arr.reshape(info["shape"]).astype(np.float64), dt)
    return out


def load_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        files = sorted(set(wm.values()))
    else:
        wm, files = None, ["model.safetensors"]
    w, dtypes = {}, set()
    for fn in files:
        for k, (arr, dt) in read_safetensors(os.path.join(d, fn)).items():
            if wm is not None:
                assert wm.get(k) == fn, f"{k} in {fn}, index says {wm.get(k)}"
            w[k] = arr
            dtypes.add(dt)
    if wm is not None:
        assert set(wm) == set(w), "index weight_map and shard contents differ"
    return w, dtypes, len(files)


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def llama3(inv, rs):
    f, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    orig = rs["original_max_position_embeddings"]
    wl = 2 * np.pi / inv
    smooth = (orig / wl - lo) / (hi - lo)
    return np.where(wl < orig / hi, inv,
                    np.where(wl > orig / lo, inv / f, (1 - smooth) * inv / f + smooth * inv))


def rope(x, pos, theta, scaling=None):
    # x: (n_tok, n_heads, d); rotate-half pairing (x[i], x[i + d/2])
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        inv = llama3(inv, scaling)
    ang = pos[:, None] * inv[None, :]  # (n_tok, d/2)
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def forward(cfg, w, ids):
    H = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_theta")
    if theta is None:
        theta = cfg["rope_parameters"]["rope_theta"]
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    zero = lambda r: np.zeros(r)
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = h @ w[p + "self_attn.q_proj.weight"].T + w.get(p + "self_attn.q_proj.bias", zero(nh * hd))
        k = h @ w[p + "self_attn.k_proj.weight"].T + w.get(p + "self_attn.k_proj.bias", zero(nkv * hd))
        v = h @ w[p + "self_attn.v_proj.weight"].T + w.get(p + "self_attn.v_proj.bias", zero(nkv * hd))
        assert (p + "self_attn.q_proj.bias" in w) == (cfg.get("model_type", "qwen2") == "qwen2")
        assert p + "self_attn.o_proj.bias" not in w
        q = rope(q.reshape(n, nh, hd), pos, theta, scaling)
        k = rope(k.reshape(n, nkv, hd), pos, theta, scaling)
        v = v.reshape(n, nkv, hd)
        grp = nh // nkv
        att = np.empty((n, nh, hd))
        for hh in range(nh):
            kvh = hh // grp
            s = q[:, hh, :] @ k[:, kvh, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            att[:, hh, :] = s @ v[:, kvh, :]
        x = x + att.reshape(n, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    if cfg.get("tie_word_embeddings"):
        assert "lm_head.weight" not in w, "tied checkpoint stores lm_head.weight"
    return x @ head.T


def check(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(d, "expected.json")) as f:
        exp = json.load(f)
    w, dtypes, nfiles = load_weights(d)
    V, n = exp["vocab"], exp["n_prompt"]
    ref = np.fromfile(os.path.join(d, exp["logits_file"]), dtype="<f4").reshape(n, V)
    ids = exp["prompt_ids"] + exp["greedy_ids"]
    logits = forward(cfg, w, ids)
    err = np.abs(logits[:n] - ref).max() / np.abs(ref).max()
    greedy = [int(logits[n - 1 + i].argmax()) for i in range(len(exp["greedy_ids"]))]
    ok_greedy = greedy == exp["greedy_ids"]
    name = os.path.basename(os.path.normpath(d))
    print(f"{name}: {nfiles} file(s) {sorted(dtypes)}, tied={bool(cfg.get('tie_word_embeddings'))}, "
          f"max rel err vs logits.bin {err:.3g}, greedy(no cache, f64) "
          f"{'matches' if ok_greedy else 'DIFFERS'} ({len(greedy)} ids)")
    if "logits_native_file" in exp:
        nat = np.fromfile(os.path.join(d, exp["logits_native_file"]), dtype="<f4").reshape(n, V)
        agree = np.mean(nat.argmax(-1) == logits[:n].argmax(-1))
        print(f"  native {exp['weights_dtype']} logits: top-1 agreement {agree:.3f}, "
              f"max rel err {np.abs(nat - logits[:n]).max() / np.abs(ref).max():.3g}")
    return err <= 1e-5 and ok_greedy


def main():
    dirs = sys.argv[1:]
    if not dirs:
        base = os.path.join(ROOT, "tests", "fixtures")
        dirs = sorted(os.path.join(base, x) for x in os.listdir(base)
                      if os.path.exists(os.path.join(base, x, "expected.json"))
                      and os.path.exists(os.path.join(base, x, "config.json")))
    ok = all([check(d) for d in dirs])
    print("all fixtures OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
