/*
 * cli.h - the subcommands of build/r1infer. Each takes the arguments after
 * its name (argv[0] is the subcommand) and returns the process exit code.
 */
#ifndef R1_CLI_H
#define R1_CLI_H

int cmd_run(int argc, char **argv);        /* cmd_run.c: generate from a prompt */
int cmd_chat(int argc, char **argv);       /* cmd_run.c: interactive chat */
int cmd_synth(int argc, char **argv);      /* cmd_synth.c: random-weight checkpoint */
int cmd_tokenize(int argc, char **argv);   /* cmd_tokenize.c: encode / decode */
int cmd_bench(int argc, char **argv);      /* cmd_bench.c: kernel suite + end to end */
int cmd_serve(int argc, char **argv);      /* server/: OpenAI-compatible HTTP */
int cmd_convert(int argc, char **argv);    /* cmd_convert.c: HF -> GGUF */
int cmd_perplexity(int argc, char **argv); /* cmd_perplexity.c: perplexity, KL divergence */
int cmd_devices(int argc, char **argv);    /* cmd_devices.c: every backend's devices */
int cmd_version(void);                     /* version.c: version, commit, kernel sets, backends */

#endif
