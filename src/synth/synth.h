/*
 * synth.h - random-weight model files of real shapes, for memory, start-up
 * and speed measurements (`r1infer synth`): above model/ and tokenizer/,
 * whose writers it calls.
 */
#ifndef R1_SYNTH_H
#define R1_SYNTH_H

#include "model/model.h"

/* A random-weight GGUF of config c (qwen2 shapes) at path, matrices in dt
 * (any dtype a GGUF holds that r1infer quantizes to), written tensor by
 * tensor (synth_gguf.c); the tokenizer of tokdir when given. -1 with an error. */
int r1_synth_write_gguf(const char *path, const struct r1_config *c, enum r1_dtype dt, uint64_t seed,
                        const char *tokdir, int progress);

#endif
