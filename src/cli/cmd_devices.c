/*
 * cmd_devices.c - `r1infer devices`: every backend's devices in one list:
 * the CPU (model, cores, the ISA features it reports and the kernel set the
 * cpu backend chose), the OpenCL platforms and devices with their memory
 * (index = --cl-device), and the CUDA devices when built with CUDA.
 */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"
#ifdef R1_OPENCL
#include "kernels/opencl/opencl.h"
#endif
#ifdef R1_CUDA
#include "kernels/cuda/cuda.h"
#endif

int cmd_devices(int argc, char **argv) {
    if (argc > 1) {
        int help = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help");
        fprintf(help ? stdout : stderr, "usage: r1infer devices   (lists the devices of every backend)\n");
        return help ? 0 : 2;
    }
    struct bench_machine mach;
    bench_machine_probe(&mach, "cpu", r1_physical_cores());
    printf("cpu (--backend cpu, ref):\n  %s, %d logical CPUs, %d physical "
           "cores\n  features: %s\n",
           mach.cpu, mach.n_cpus, r1_physical_cores(), mach.features);
    if (mach.isa[0]) printf("  kernel set: %s\n", mach.isa);
#ifdef R1_OPENCL
    printf("opencl (--backend opencl, --cl-device N):\n");
    r1_opencl_list(stdout);
#else
    printf("opencl: not in this build (install ocl-icd-opencl-dev "
           "opencl-c-headers and rebuild)\n");
#endif
#ifdef R1_CUDA
    int n = r1_cuda_device_count();
    printf("cuda (--backend cuda, --gpu N): %d device%s\n", n, n == 1 ? "" : "s");
    if (n > 0 && r1_backend_find("cuda")) {
        char name[128];
        int sms = 0, cc = 0;
        size_t mem = 0;
        if (!r1_cuda_device_info(name, sizeof name, &sms, &mem, &cc))
            printf("  [in use] %s, compute capability %d.%d, %d SMs, %.2f GiB\n", name, cc / 10, cc % 10, sms,
                   mem / 1073741824.0);
    }
#else
    printf("cuda: not in this build (make CUDA=1)\n");
#endif
    return 0;
}
