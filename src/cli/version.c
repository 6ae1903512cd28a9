/*
 * version.c - `r1infer --version`: the version, the git commit the binary
 * was built from (build/gen/version.h, written by the Makefile from `git
 * describe --always --dirty`; "unknown" outside a git checkout), the cpu
 * kernel sets compiled in (and which of them this CPU runs) and the
 * backends built.
 */
#include <stdio.h>

#include "cli/cli.h"
#include "kernels/cpu/cpu.h"
#include "version.h"

int cmd_version(void) {
    printf("r1infer %s (commit %s)\n", R1_VERSION, R1_GIT_COMMIT);
    const struct r1_cpu_isa *cur = r1_cpu_current();
    printf("cpu kernel sets:");
    for (int i = 0; r1_cpu_isas[i]; i++)
        printf(" %s%s", r1_cpu_isas[i]->name,
               r1_cpu_isas[i] == cur         ? " (in use)"
               : r1_cpu_isas[i]->available() ? ""
                                             : " (not on this CPU)");
    printf("\nbackends: ref cpu");
#ifdef R1_OPENCL
    printf(" opencl");
#endif
#ifdef R1_CUDA
    printf(" cuda");
#endif
    printf("\n");
    return 0;
}
