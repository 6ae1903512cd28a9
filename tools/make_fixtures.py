#!/usr/bin/env python3
"""make_fixtures.py - the Hugging Face oracle for r1infer.

Creates small random-weight Qwen2ForCausalLM checkpoints under
tests/fixtures/<name>/ (save_pretrained, safetensors) and, for each, the
outputs of Hugging Face transformers that the C tests compare against:

  expected.json   {"prompt_ids", "greedy_ids" (32 ids), "vocab", "n_prompt",
                   "weights_dtype", "logits_file", "min_margin", ...}
  logits.bin      little-endian float32, shape (n_prompt, vocab), row-major:
                  the logits of EVERY prompt position.
  logits_native.bin (bf16/f16 checkpoints only) the same, with HF running
                  natively in the checkpoint's dtype; "greedy_ids_native".

For bf16/f16 checkpoints the oracle ("logits.bin", "greedy_ids") runs in
float32 on the exactly-converted weights (bf16/f16 -> f32 is exact), so an
engine that accumulates in f32 should match it to ~1e-4 relative.

Versions used to generate the committed fixtures:
    python 3, torch 2.15.0, transformers 5.24.0, safetensors 0.8.0, numpy 2.4.6
Install:
    pip install torch transformers safetensors numpy
Run (from the repo root):
    python3 tools/make_fixtures.py            # all fixtures
    python3 tools/make_fixtures.py gqa2_f32   # just one
Then check them with an independent numpy forward:
    python3 tools/check_fixture.py

Notes
 - attn_implementation="eager" everywhere, so the numerics are plain
   matmul + softmax (no SDPA / flash kernels).
 - Random init with std 0.02 gives near-uniform logits and near-ties, so the
   weights are drawn larger (initializer_range 0.1-0.3), q/k/v biases are
   random and non-trivial, RMSNorm weights are not all ones. For each fixture
   the prompt is chosen (retrying seeds) so that every greedy step has a
   clear top-1 margin: (top1 - top2) / max|logit| >= MIN_REL_MARGIN.
 - transformers 5 writes "dtype" and "rope_parameters": {"rope_theta": ...}
   into config.json; real DeepSeek-R1-Distill checkpoints (transformers 4.x)
   have top-level "torch_dtype" and "rope_theta". Fixtures with
   legacy_config=True are rewritten to the 4.x form (and checked to reload
   identically), the others keep the 5.x form, so the loader sees both.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")
N_GEN = 32
MIN_REL_MARGIN = 2e-2

FIXTURES = [
    dict(name="gqa2_f32", dtype=torch.float32, hidden=64, n_head=4, n_kv=2, layers=2,
         ffn=160, vocab=512, tied=False, theta=1e4, eps=1e-6, init=0.2,
         n_prompt=16, legacy_config=True, shard=None, seed=1000),
    dict(name="gqa4_tied_f32", dtype=torch.float32, hidden=256, n_head=8, n_kv=2, layers=2,
         ffn=384, vocab=512, tied=True, theta=1e6, eps=1e-5, init=0.12, embed_std=0.08,
         n_prompt=20, legacy_config=False, shard="2MB", seed=2000),
    dict(name="mha_bf16", dtype=torch.bfloat16, hidden=128, n_head=4, n_kv=4, layers=3,
         ffn=320, vocab=512, tied=False, theta=1e6, eps=1e-6, init=0.15,
         n_prompt=14, legacy_config=True, shard=None, seed=3000),
    dict(name="f16", dtype=torch.float16, hidden=96, n_head=6, n_kv=2, layers=2,
         ffn=224, vocab=384, tied=False, theta=1e4, eps=1e-6, init=0.2,
         n_prompt=12, legacy_config=False, shard=None, seed=4000),
    # Trained (not random): byte-level ids (byte + 3) of TRAIN_TEXT, a few
    # hundred AdamW steps, so its next-token distributions are peaked like a
    # real model's and quantization can be judged by top-1 agreement.
    dict(name="trained_f32", dtype=torch.float32, hidden=128, n_head=4, n_kv=2, layers=2,
         ffn=384, vocab=384, tied=False, theta=1e4, eps=1e-6, init=0.02,
         n_prompt=24, legacy_config=False, shard=None, seed=5000, train=True),
    # LlamaForCausalLM as the R1 Llama distills configure it: no q/k/v bias,
    # llama3 rope scaling (original context scaled down to 64 so that with
    # head_dim 32 the low, medium and high frequency bands all occur), and an
    # explicit head_dim: 4 heads x 32 = 128 != hidden 64. Legacy config:
    # rope_theta and rope_scaling at top level, as DeepSeek-R1-Distill-Llama's.
    dict(name="llama_gqa_f32", arch="llama", dtype=torch.float32, hidden=64, n_head=4, n_kv=2,
         head_dim=32, layers=2, ffn=160, vocab=512, tied=False, theta=5e5, eps=1e-5, init=0.12,
         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                           high_freq_factor=4.0, original_max_position_embeddings=64),
         n_prompt=40, legacy_config=True, shard=None, seed=6000),
]
TRAIN_TEXT = os.path.join(ROOT, "tools", "fixture_corpus.txt")
TRAIN_STEPS, TRAIN_SEQ, TRAIN_BATCH = 800, 96, 32


def corpus_ids():
    with open(TRAIN_TEXT, "rb") as f:
        return [b + 3 for b in f.read()]


def train(model, fx, seed):
    """Next-token training on the corpus (f32, AdamW); returns the final loss."""
    ids = torch.tensor(corpus_ids(), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, TRAIN_STEPS)
    model.train()
    for step in range(TRAIN_STEPS):
        at = torch.randint(0, len(ids) - TRAIN_SEQ - 1, (TRAIN_BATCH,), generator=g)
        x = torch.stack([ids[a:a + TRAIN_SEQ] for a in at.tolist()])
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 200 == 0 or step == TRAIN_STEPS - 1:
            print(f"  train step {step}: loss {loss.item():.3f}")
    return model.eval()

DTYPE_NAME = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def model_class(fx):
    return LlamaForCausalLM if fx.get("arch") == "llama" else Qwen2ForCausalLM


def make_model(fx, seed):
    torch.manual_seed(seed)
    common = dict(
        vocab_size=fx["vocab"], hidden_size=fx["hidden"], intermediate_size=fx["ffn"],
        num_hidden_layers=fx["layers"], num_attention_heads=fx["n_head"],
        num_key_value_heads=fx["n_kv"], rms_norm_eps=fx["eps"],
        tie_word_embeddings=fx["tied"], max_position_embeddings=512, attention_dropout=0.0,
        bos_token_id=1, eos_token_id=2, initializer_range=fx["init"], hidden_act="silu",
        dtype=DTYPE_NAME[fx["dtype"]], attn_implementation="eager")
    if fx.get("arch") == "llama":
        rope = dict(fx["rope_scaling"], rope_theta=fx["theta"])
        cfg = LlamaConfig(**common, head_dim=fx["head_dim"], rope_parameters=rope,
                          attention_bias=False, mlp_bias=False)
    else:
        cfg = Qwen2Config(**common, rope_theta=fx["theta"], use_sliding_window=False,
                          sliding_window=None)
    model = model_class(fx)(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.empty_like(p).uniform_(0.5, 1.5))
            elif name.endswith(".bias"):  # q/k/v biases (Qwen2 has no others)
                p.copy_(torch.randn_like(p) * 0.5)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn_like(p) * fx.get("embed_std", 1.0))
        if fx["tied"]:
            model.tie_weights()
    return model


def load(path, dtype, fx):
    m = model_class(fx).from_pretrained(path, dtype=dtype, attn_implementation="eager")
    return m.eval()


@torch.no_grad()
def run_oracle(model, prompt):
    """All-prompt logits (1 forward), greedy ids with KV cache, and margins."""
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(ids, use_cache=True)
    logits = out.logits[0].float().numpy().copy()
    past = out.past_key_values
    nxt = int(out.logits[0, -1].float().argmax())
    greedy, step_logits = [], [out.logits[0, -1].float().numpy().copy()]
    for i in range(N_GEN):
        greedy.append(nxt)
        if i == N_GEN - 1:
            break
        o = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = o.past_key_values
        step_logits.append(o.logits[0, -1].float().numpy().copy())
        nxt = int(o.logits[0, -1].float().argmax())
    # the same greedy sequence without a cache, in one forward
    full = model(torch.tensor([prompt + greedy]), use_cache=False).logits[0].float().numpy()
    n = len(prompt)
    nocache = [int(full[n - 1 + i].argmax()) for i in range(N_GEN)]
    assert nocache == greedy, "cached and uncached greedy differ"
    margins = []
    for l in step_logits + [full[n - 1 + i] for i in range(N_GEN)]:
        s = np.sort(l)
        margins.append(float((s[-1] - s[-2]) / np.abs(l).max()))
    return logits, greedy, min(margins)


def write_legacy_config(path, fx):
    """Rewrite config.json the way transformers 4.x (and the real R1 distill
    checkpoints) have it: top-level rope_theta and torch_dtype."""
    cp = os.path.join(path, "config.json")
    with open(cp) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters", None)
    c["rope_theta"] = float(rp["rope_theta"]) if rp else fx["theta"]
    if rp and rp.get("rope_type", "default") != "default":  # llama3: the 4.x rope_scaling
        c["rope_scaling"] = {k: v for k, v in rp.items() if k != "rope_theta"}
    c["torch_dtype"] = c.pop("dtype", DTYPE_NAME[fx["dtype"]])
    c.pop("layer_types", None)
    with open(cp, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")


def build(fx):
    path = os.path.join(OUT_DIR, fx["name"])
    rng = np.random.default_rng(fx["seed"])
    for attempt in range(40):
        seed = fx["seed"] + attempt
        model = make_model(fx, seed)
        if fx.get("train"):
            model = train(model, fx, seed)
        if os.path.exists(path):
            shutil.rmtree(path)
        model = model.to(fx["dtype"])
        kw = {"max_shard_size": fx["shard"]} if fx["shard"] else {}
        model.save_pretrained(path, **kw)
        if fx["legacy_config"]:
            write_legacy_config(path, fx)
        # The oracle runs on what was saved: reload in float32 (exact upcast).
        m32 = load(path, torch.float32, fx)
        rc = m32.config
        theta = (rc.rope_parameters or {}).get("rope_theta", getattr(rc, "rope_theta", None))
        assert abs(theta - fx["theta"]) < 1e-3, f"reloaded rope_theta {theta}"
        if fx.get("rope_scaling"):
            rt = (rc.rope_parameters or {}).get("rope_type")
            assert rt == "llama3", f"reloaded rope_type {rt}"
            assert rc.head_dim == fx["head_dim"]
        assert rc.tie_word_embeddings == fx["tied"]
        if fx["tied"]:
            assert m32.lm_head.weight.data_ptr() == m32.model.embed_tokens.weight.data_ptr()
        best = None
        for _ in range(30):
            if fx.get("train"):  # an excerpt of the text it learned
                text = corpus_ids()
                at = int(rng.integers(0, len(text) - fx["n_prompt"]))
                prompt = text[at:at + fx["n_prompt"]]
            else:
                prompt = [int(x) for x in rng.integers(3, fx["vocab"], size=fx["n_prompt"])]
            logits, greedy, margin = run_oracle(m32, prompt)
            distinct = len(set(greedy))
            if distinct < 10:  # avoid degenerate 1-token loops
                continue
            if best is None or margin > best[3]:
                best = (prompt, logits, greedy, margin)
            if margin >= MIN_REL_MARGIN:
                break
        if best is not None and best[3] >= MIN_REL_MARGIN:
            break
        print(f"  {fx['name']}: seed {seed} best margin {best and best[3]:.4g}, retrying")
    else:
        raise SystemExit(f"{fx['name']}: no prompt with margin >= {MIN_REL_MARGIN}")
    prompt, logits, greedy, margin = best
    exp = {
        "prompt_ids": prompt, "greedy_ids": greedy, "vocab": fx["vocab"],
        "n_prompt": len(prompt), "weights_dtype": DTYPE_NAME[fx["dtype"]],
        "logits_file": "logits.bin", "min_margin": margin,
        "min_margin_definition": "min over the 32 greedy steps of (top1-top2)/max|logit|",
        "seed": seed, "rope_theta": fx["theta"], "tied": fx["tied"], "trained": bool(fx.get("train")),
        "arch": fx.get("arch", "qwen2"),
        "transformers": transformers.__version__, "torch": torch.__version__,
    }
    logits.astype("<f4").tofile(os.path.join(path, "logits.bin"))
    if fx["dtype"] != torch.float32:
        mn = load(path, fx["dtype"], fx)
        ln, gn, mg = run_oracle_native(mn, prompt)
        ln.astype("<f4").tofile(os.path.join(path, "logits_native.bin"))
        exp["logits_native_file"] = "logits_native.bin"
        exp["greedy_ids_native"] = gn
        agree = float(np.mean(ln.argmax(-1) == logits.argmax(-1)))
        rel = float(np.abs(ln - logits).max() / np.abs(logits).max())
        exp["native_top1_agreement"] = agree
        exp["native_max_rel_err"] = rel
        print(f"  native {DTYPE_NAME[fx['dtype']]}: top1 agreement {agree:.3f}, max rel err "
              f"{rel:.3g}, greedy prefix match "
              f"{next((i for i, (a, b) in enumerate(zip(gn, greedy)) if a != b), N_GEN)}/{N_GEN}")
    with open(os.path.join(path, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    print(f"{fx['name']}: seed {seed}, n_prompt {len(prompt)}, min margin {margin:.4g}, "
          f"max|logit| {np.abs(logits).max():.3g}, {len(set(greedy))} distinct, greedy {greedy[:8]}...")


@torch.no_grad()
def run_oracle_native(model, prompt):
    """Like run_oracle but tolerant: native low-precision greedy may differ
    between cached and uncached runs, so only the cached run is used."""
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(ids, use_cache=True)
    logits = out.logits[0].float().numpy().copy()
    past = out.past_key_values
    nxt = int(out.logits[0, -1].float().argmax())
    greedy = []
    for i in range(N_GEN):
        greedy.append(nxt)
        if i == N_GEN - 1:
            break
        o = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = o.past_key_values
        nxt = int(o.logits[0, -1].float().argmax())
    return logits, greedy, None


def main():
    torch.set_num_threads(2)
    names = sys.argv[1:]
    os.makedirs(OUT_DIR, exist_ok=True)
    for fx in FIXTURES:
        if names and fx["name"] not in names:
            continue
        build(fx)


if __name__ == "__main__":
    main()
