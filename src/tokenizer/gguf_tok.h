/*
 * gguf_tok.h - a tokenizer into a GGUF file being written (gguf_tok.c; the
 * reading side is r1_tokenizer_load_gguf).
 */
#ifndef R1_TOKENIZER_GGUF_TOK_H
#define R1_TOKENIZER_GGUF_TOK_H

#include "gguf/gguf.h"

/* The tokenizer.ggml.* keys (and tokenizer.chat_template) from a model
 * directory's tokenizer.json + tokenizer_config.json, the token list padded
 * to `vocab` with unused "[PADn]" entries. bos/eos: ids, or -1 to take them
 * from tokenizer_config.json. */
int r1_gguf_w_tokenizer(struct r1_gguf_writer *w, const char *dir, int vocab, int bos, int eos);

#endif
