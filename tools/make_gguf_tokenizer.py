#!/usr/bin/env python3
"""make_gguf_tokenizer.py - write a GGUF holding only the tokenizer of a
Hugging Face tokenizer.json (+ tokenizer_config.json), with gguf-py, the way
llama.cpp's converter lays out a gpt2-style (byte-level BPE) vocabulary:
tokens by id (added tokens in their text form; special ones CONTROL, the
others USER_DEFINED; ids without a token "[PADn]" UNUSED), merges as "a b",
bos/eos ids, add_bos_token, tokenizer.ggml.pre and the chat template.

    python3 tools/make_gguf_tokenizer.py TOKENIZER_DIR OUT.gguf [--vocab N] [--pre NAME]

Used by tests/gguf_tokenizer.sh (the ~5 MB file is made at test time).
"""
import argparse
import json
import os

import gguf
from gguf import TokenType


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=0, help="pad the token list to N entries")
    ap.add_argument("--pre", default="deepseek-r1-qwen")
    a = ap.parse_args()
    tj = json.load(open(os.path.join(a.dir, "tokenizer.json"), encoding="utf-8"))
    cfg_path = os.path.join(a.dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    vocab = dict(tj["model"]["vocab"])
    added = {t["content"]: t for t in tj.get("added_tokens", [])}
    n = max([*vocab.values(), *(t["id"] for t in added.values())]) + 1
    n = max(n, a.vocab)
    by_id = {i: t for t, i in vocab.items()}
    for t in added.values():
        by_id[t["id"]] = t["content"]
    tokens, types = [], []
    for i in range(n):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(TokenType.UNUSED)
        elif by_id[i] in added and added[by_id[i]]["id"] == i:
            tokens.append(by_id[i])
            types.append(TokenType.CONTROL if added[by_id[i]].get("special") else TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]

    def tok_id(v):
        if isinstance(v, dict):
            v = v.get("content")
        if v is None:
            return None
        return vocab.get(v, added.get(v, {}).get("id"))

    w = gguf.GGUFWriter(a.out, "qwen2")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(a.pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    bos, eos = tok_id(cfg.get("bos_token")), tok_id(cfg.get("eos_token"))
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    w.add_add_bos_token(bool(cfg.get("add_bos_token", False)))
    w.add_add_eos_token(bool(cfg.get("add_eos_token", False)))
    if isinstance(cfg.get("chat_template"), str):
        w.add_chat_template(cfg["chat_template"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {n} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
