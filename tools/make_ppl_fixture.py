#!/usr/bin/env python3
"""make_ppl_fixture.py - the Hugging Face oracle for `r1infer perplexity`.

Scores the corpus (the Debian FAQ, /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz
of the Debian package debian-faq) with the default model, SmolLM2-135M-Instruct
(the Q4_1 GGUF of scripts/get-model.sh, which transformers dequantizes to
float32), the way r1infer and llama.cpp's perplexity tool score a text:
back-to-back windows of CTX tokens, each from an empty cache, the tokens
after position CTX/2 scored (row j predicts token j + 1, for j in
CTX/2 .. CTX-2). Log-softmax in float64.

Writes tests/fixtures/ppl_debian_faq/expected.json:
  {"corpus": {package, version, file, bytes, sha256}, "model_sha256",
   "ctx", "n_chunks", "ids": the first n_chunks * ctx token ids,
   "window_nll": the sum of -logprob over each window's scored tokens,
   "count", "ppl", "versions"}
test_perplexity.c checks r1infer's tokenization of the same text against
"ids" and its f32 perplexity against "window_nll" and "ppl".

Install: pip install torch transformers gguf numpy; apt-get install debian-faq
Run from the repo root: python3 tools/make_ppl_fixture.py [GGUF]
"""
import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import torch
from tokenizers import pre_tokenizers
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
CORPUS = "/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"
OUT = os.path.join(ROOT, "tests", "fixtures", "ppl_debian_faq")
CTX = 512
N_CHUNKS = 4


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else GGUF
    d, f = os.path.split(os.path.abspath(path))
    torch.set_num_threads(2)
    with gzip.open(CORPUS, "rb") as fh:
        raw = fh.read()
    text = raw.decode("utf-8")
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    # transformers builds the GGUF's tokenizer with ByteLevel alone; SmolLM2's
    # tokenizer.json (and llama.cpp's "smollm" pre-tokenizer) split digits off
    # first, which changes "\n\n1." from ["\n\n", "1", "."] to ["\n", "\n", ...].
    # Restore the real pre-tokenizer so the ids are the model's own.
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    # the GGUF says add_bos_token false: the text's ids as they are
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= CTX * N_CHUNKS
    first = CTX // 2
    window_nll, count = [], 0
    for c in range(N_CHUNKS):
        win = ids[c * CTX:(c + 1) * CTX]
        with torch.no_grad():
            logits = model(torch.tensor([win])).logits[0].double()
        lp = torch.log_softmax(logits, dim=-1)
        rows = torch.arange(first, CTX - 1)
        nll = -lp[rows, torch.tensor(win[first + 1:CTX])]
        window_nll.append(float(nll.sum()))
        count += len(rows)
        print(f"window {c}: mean nll {float(nll.mean()):.6f}")
    ppl = float(np.exp(sum(window_nll) / count))
    with open(path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    try:
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "debian-faq"], capture_output=True,
                                 text=True).stdout.strip()
    except OSError:
        version = "?"
    exp = {"corpus": {"package": "debian-faq", "version": version, "file": CORPUS, "bytes": len(raw),
                      "sha256": hashlib.sha256(raw).hexdigest(), "n_tokens": len(ids)},
           "model": f, "model_sha256": sha, "ctx": CTX, "n_chunks": N_CHUNKS, "first": first,
           "ids": ids[:CTX * N_CHUNKS], "window_nll": window_nll, "count": count, "ppl": ppl,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "numpy": np.__version__}}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "expected.json"), "w") as fh:
        json.dump(exp, fh, indent=None, separators=(",", ":"))
        fh.write("\n")
    print(f"{len(ids)} tokens; PPL over {N_CHUNKS} windows of {CTX}: {ppl:.6f} ({count} tokens scored)")


if __name__ == "__main__":
    main()
