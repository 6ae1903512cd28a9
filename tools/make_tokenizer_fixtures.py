#!/usr/bin/env python3
"""make_tokenizer_fixtures.py - a Llama-3-style tokenizer and its encodings,
made with Hugging Face tokenizers (the library transformers uses).

The real Llama 3 / DeepSeek-R1-Distill-Llama tokenizer cannot be downloaded
here, so this builds one of the same kind: byte-level BPE trained on
tools/fixture_corpus.txt, the Llama 3 pre-tokenizer (Split on Llama 3's regex,
then ByteLevel without its own regex), ignore_merges true, a TemplateProcessing
post-processor that adds BOS, and the DeepSeek-R1 distill's special tokens.
A few whole words are added to the vocab with no merges leading to them, so
ignore_merges decides their encoding. tests/fixtures/tok_llama3/ gets:
    tokenizer.json, tokenizer_config.json (the R1 distill chat template),
    encode-vectors.jsonl  {"text", "ids" (without BOS), "ids_special" (with)}
Run from the repo root: python3 tools/make_tokenizer_fixtures.py
Needs: tokenizers (pip install tokenizers; transformers brings it).
"""
import json
import os

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tok_llama3")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
SPECIALS = [BOS, EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"]
# whole words put in the vocab without merges: only ignore_merges finds them
WHOLE = ["zyxwvut", "Ġzyxwvut", "Ġquokka", "ĠQuokkas"]

TEXTS = [
    "Hello world", "Hello, World! HELLO world.", "I'M sure it'S fine; they'LL see, we'd go.",
    "1234567890 and 12 and 3.14159 and 1,000,000", "  leading spaces and trailing   ",
    "tabs\tand\nnewlines\n\n\nand \r\n windows", "zyxwvut quokka Quokkas zyxwvuts",
    "café naïve Ünïcode 東京 日本語 😀👍🏽 ok", "<｜User｜>Hi<｜Assistant｜><think>\nhmm\n</think>done",
    "def f(x):\n    return x**2  # square\n", "A" * 40, "   ", "", "x", "'s 's 'S 's's",
    "e.g. i.e. U.S.A. http://example.com/a?b=c&d=e", "— – - ‐ … “quotes” ‘single’",
]


def main():
    with open(os.path.join(ROOT, "tools", "fixture_corpus.txt"), encoding="utf-8") as f:
        corpus = f.read()
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([corpus] * 4, trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for w in WHOLE:
        vocab.setdefault(w, len(vocab))
    spec["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens(SPECIALS)
    bos = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                       special_tokens=[(BOS, bos)])
    os.makedirs(OUT, exist_ok=True)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    with open(os.path.join(ROOT, "data/tokenizers/deepseek-r1-distill-qwen/tokenizer_config.json")) as f:
        tmpl = json.load(f)["chat_template"]
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": BOS, "eos_token": EOS,
           "chat_template": tmpl, "tokenizer_class": "LlamaTokenizerFast",
           "made_by": f"tools/make_tokenizer_fixtures.py, tokenizers {tokenizers.__version__}"}
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(OUT, "encode-vectors.jsonl"), "w") as f:
        for t in TEXTS + corpus.split("\n\n")[:40]:
            rec = {"text": t, "ids": tok.encode(t, add_special_tokens=False).ids,
                   "ids_special": tok.encode(t, add_special_tokens=True).ids}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    n = len(TEXTS) + len(corpus.split("\n\n")[:40])
    print(f"wrote {OUT}: vocab {tok.get_vocab_size()}, {n} vectors; "
          f"'zyxwvut quokka' -> {tok.encode('zyxwvut quokka', add_special_tokens=False).tokens}")


if __name__ == "__main__":
    main()
