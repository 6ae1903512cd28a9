#!/usr/bin/env python3
"""make_smollm_fixture.py - the Hugging Face oracle for the default model.

Loads SmolLM2-135M-Instruct.Q4_1.gguf (scripts/get-model.sh) with
transformers (from_pretrained(dir, gguf_file=...), which dequantizes every
tensor to float32) and writes tests/fixtures/smollm2/:

  expected.json  {"model_sha256", "prompts": [{"name", "kind" ("chat"|"raw"),
                  "messages" | "text", "prompt_ids", "greedy_ids" (64),
                  "logits_rows": [first, count], "logits_offset"}], "vocab", ...}
  logits.bin     little-endian float32: for each prompt, the logits of its
                 last N_LOGITS prompt positions (N_LOGITS x vocab, row-major),
                 at logits_offset floats.

The token ids come from transformers' tokenizer built from the same GGUF;
chat prompts use its apply_chat_template (the template in the file). The
model runs in float32 with eager attention; greedy ids come from a loop over
the KV cache that runs through end-of-text (as r1infer's --ignore-eos), checked
against argmax of one uncached forward over prompt + greedy. test_smollm.c compares r1infer with all of it.

Versions used for the committed fixture: see "versions" in expected.json.
Install: pip install torch transformers accelerate gguf numpy
Run from the repo root: python3 tools/make_smollm_fixture.py [GGUF]
"""
import hashlib
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "fixtures", "smollm2")
N_GEN = 64
N_LOGITS = 2

with open(os.path.join(ROOT, "tools", "fixture_corpus.txt")) as f:
    LONG_TEXT = f.read()[:1500]

PROMPTS = [
    dict(name="capital", kind="chat",
         messages=[{"role": "user", "content": "What is the capital of France?"}]),
    dict(name="haiku", kind="chat",
         messages=[{"role": "system", "content": "You are a concise assistant."},
                   {"role": "user", "content": "Write a haiku about autumn leaves."}]),
    dict(name="fox", kind="raw",
         text="The quick brown fox jumps over the lazy dog. It was the best of times, it was the"),
    dict(name="digits_unicode", kind="raw",
         text="In 1969, 3 astronauts flew 384,400 km to the Moon. Café, naïve, 東京: x = 42;\n\tdone"),
    dict(name="summary_long", kind="chat",
         messages=[{"role": "user", "content": "Summarize this text in one sentence:\n\n" + LONG_TEXT}]),
]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else GGUF
    d, f = os.path.split(os.path.abspath(path))
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    os.makedirs(OUT, exist_ok=True)
    out, logits_all, off = [], [], 0
    for p in PROMPTS:
        if p["kind"] == "chat":
            text = tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
        else:
            text = p["text"]
        ids = tok(text, add_special_tokens=p["kind"] == "raw")["input_ids"]
        with torch.no_grad():  # greedy with the KV cache, through end-of-text (--ignore-eos)
            o = model(torch.tensor([ids]), use_cache=True)
            logits = o.logits[0, -N_LOGITS:].float().numpy()
            past, greedy = o.past_key_values, [int(o.logits[0, -1].argmax())]
            while len(greedy) < N_GEN:
                o = model(torch.tensor([[greedy[-1]]]), past_key_values=past, use_cache=True)
                past = o.past_key_values
                greedy.append(int(o.logits[0, -1].argmax()))
        # greedy margin: how close each greedy step was to a tie (informative)
        with torch.no_grad():
            full = model(torch.tensor([ids + greedy[:-1]])).logits[0, len(ids) - 1:].float().numpy()
        top2 = np.sort(full, axis=-1)[:, -2:]
        margins = (top2[:, 1] - top2[:, 0]).tolist()
        nocache = [int(r.argmax()) for r in full]
        if nocache != greedy:
            i = next(i for i, (a, b) in enumerate(zip(nocache, greedy)) if a != b)
            print(f"  {p['name']}: cached/uncached greedy differ at step {i}, margin {margins[i]:.3g}")
        e = dict(p)
        e.update(prompt_ids=ids, greedy_ids=greedy, logits_offset=off,
                 logits_rows=[len(ids) - N_LOGITS, N_LOGITS],
                 min_greedy_margin=min(margins),
                 greedy_text=tok.decode(greedy))
        out.append(e)
        logits_all.append(logits.astype("<f4"))
        off += logits.size
        print(f"{p['name']}: {len(ids)} prompt ids, greedy {tok.decode(greedy)[:60]!r}..., "
              f"min margin {min(margins):.4f}")
    np.concatenate([l.ravel() for l in logits_all]).tofile(os.path.join(OUT, "logits.bin"))
    with open(path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    exp = {"model": f, "model_sha256": sha, "vocab": int(model.config.vocab_size),
           "n_gen": N_GEN, "n_logits": N_LOGITS, "logits_file": "logits.bin", "prompts": out,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "numpy": np.__version__}}
    with open(os.path.join(OUT, "expected.json"), "w") as fh:
        json.dump(exp, fh, indent=1, ensure_ascii=False)
        fh.write("\n")


if __name__ == "__main__":
    main()
