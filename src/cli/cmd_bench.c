/* cmd_bench.c - placeholder until the 'bench' command lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "r1infer bench: not built yet\n");
    return 2;
}
