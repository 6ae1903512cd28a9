#!/usr/bin/env python3
"""make_task.py - a small loglikelihood task for lm-evaluation-harness built
from the corpus r1infer's tests use (the Debian FAQ of the debian-faq
package), so `lm_eval` can run against `r1infer serve` with no dataset from
a hub.

debian_faq_cloze: each document is a passage of the FAQ cut after a
sentence; the model chooses the passage's true next sentence among 4 (the
other 3 are sentences from elsewhere in the FAQ, drawn with a fixed seed).
Scored by lm_eval as multiple_choice (acc, acc_norm): one loglikelihood
request per choice.

Writes into OUT_DIR: debian_faq_cloze.jsonl, debian_faq_cloze.yaml (the task,
pointing at the JSONL by absolute path) and, unless --no-tokenizer,
tokenizer/ (the model's tokenizer as a Hugging Face directory, exported from
the GGUF with transformers, for lm_eval's tokenizer_backend=huggingface).

Usage: python3 tools/lm_eval/make_task.py OUT_DIR [--docs 100] [--gguf MODEL.gguf]
"""
import argparse
import gzip
import json
import os
import random
import re

CORPUS = "/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

YAML = """task: debian_faq_cloze
dataset_path: json
dataset_kwargs:
  data_files:
    test: {jsonl}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def sentences(text):
    """prose paragraphs of the FAQ -> lists of sentences (layout joined)"""
    paras = []
    for block in re.split(r"\n\s*\n", text):
        lines = [l.strip() for l in block.splitlines()]
        if len(lines) < 2 or any(l.startswith(("*", "-", "$", "#")) for l in lines):
            continue
        flat = " ".join(lines)
        if not re.match(r"[A-Z]", flat) or "  " in flat or len(flat) < 200:
            continue
        sents = [s for s in re.split(r"(?<=[.?!])\s+(?=[A-Z])", flat) if 20 <= len(s) <= 300]
        if len(sents) >= 3:
            paras.append(sents)
    return paras


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--no-tokenizer", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        paras = sentences(f.read())
    rng = random.Random(14)
    pool = [s for p in paras for s in p]
    docs = []
    for p in rng.sample(paras, min(a.docs, len(paras))):
        cut = rng.randrange(1, len(p))
        right = p[cut]
        wrong = rng.sample([s for s in pool if s != right], 3)
        choices = wrong + [right]
        rng.shuffle(choices)
        docs.append({"context": " ".join(p[:cut]), "choices": choices, "label": choices.index(right)})
    jsonl = os.path.abspath(os.path.join(a.out, "debian_faq_cloze.jsonl"))
    with open(jsonl, "w") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    with open(os.path.join(a.out, "debian_faq_cloze.yaml"), "w") as f:
        f.write(YAML.format(jsonl=jsonl))
    print(f"{len(docs)} documents ({len(paras)} prose paragraphs in the FAQ) -> {jsonl}")
    if not a.no_tokenizer:
        from tokenizers import pre_tokenizers
        from transformers import AutoTokenizer
        d, g = os.path.split(os.path.abspath(a.gguf))
        tok = AutoTokenizer.from_pretrained(d, gguf_file=g)
        # transformers drops SmolLM2's Digits step when it reads a GGUF (see tools/make_ppl_fixture.py)
        tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        tok.save_pretrained(os.path.join(a.out, "tokenizer"))
        print(f"tokenizer -> {os.path.join(a.out, 'tokenizer')}")


if __name__ == "__main__":
    main()
