/* cmd_convert.c - placeholder until the 'convert' command lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_convert(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "r1infer convert: not built yet\n");
    return 2;
}
