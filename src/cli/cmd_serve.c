/* cmd_serve.c - placeholder until the 'serve' command lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "r1infer serve: not built yet\n");
    return 2;
}
