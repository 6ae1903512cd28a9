/*
 * backend.c - the OpenCL backend: device choice, context and in-order queue,
 * the kernel program (kernels.cl, embedded at build time) built once per
 * device and cached on disk, device memory handed out as addresses, the
 * device hooks (struct r1_device_ops) and the r1_backend_opencl table.
 *
 * Device addresses: OpenCL 1.2 has buffers, not pointers, but the engine
 * does pointer arithmetic on device memory (runtime/device.c, session.c).
 * Every alloc therefore reserves a range of a private address space (never
 * dereferenced on the host) backed by one cl_mem; a kernel argument is the
 * (cl_mem, byte offset) of the address, found by a lookup in the table.
 *
 * Errors: each OpenCL call is checked by CL_CHECK, which names the call and
 * the error code's name; kernels return nothing, so a failure is recorded
 * and reported by the next sync or download (runtime/device_common.c, as
 * for the cuda backend).
 * Environment names read here, in one place:
 *   R1_CL_DEVICE=N           device index over all platforms (--cl-device N)
 *   R1_CL_PREFILL=own|clblast  prefill matmuls (clblast.c)
 *   R1_CL_MATMUL=group|item  matmul kernels: a work-group per row with a
 *                            local reduction (default on GPUs) or a work-item
 *                            per row (default on CPU devices)
 *   R1_CL_CACHE=0            do not read or write the program cache
 * One in-order queue per process; ops from several threads are queued one at
 * a time (ops.c), so several sessions (serve --parallel) may share it.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/env.h"
#include "kernels/opencl/opencl.h"
#include "kernels/opencl/opencl_impl.h"
#include "kernels/device_common.h"
#include "util/util.h"

extern const char r1cl_source[]; /* kernels.cl, generated C array (Makefile) */
extern const unsigned r1cl_source_len;

struct buf {
    uintptr_t base;
    size_t size;
    cl_mem mem;
};

struct r1cl_state r1cl;
static struct {
    struct buf *bufs;
    int n, cap;
    uintptr_t next; /* next free address */
} g = {.next = (uintptr_t)1 << 44};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* g */
static struct r1_device_error errs = R1_DEVICE_ERROR_INIT;

/* ---------------------------------------------------------------- errors */

static const struct {
    cl_int code;
    const char *name;
} cl_errors[] = {
    {CL_SUCCESS, "CL_SUCCESS"},
    {CL_DEVICE_NOT_FOUND, "CL_DEVICE_NOT_FOUND"},
    {CL_DEVICE_NOT_AVAILABLE, "CL_DEVICE_NOT_AVAILABLE"},
    {CL_COMPILER_NOT_AVAILABLE, "CL_COMPILER_NOT_AVAILABLE"},
    {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
    {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
    {CL_PROFILING_INFO_NOT_AVAILABLE, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {CL_MEM_COPY_OVERLAP, "CL_MEM_COPY_OVERLAP"},
    {CL_IMAGE_FORMAT_MISMATCH, "CL_IMAGE_FORMAT_MISMATCH"},
    {CL_IMAGE_FORMAT_NOT_SUPPORTED, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
    {CL_MAP_FAILURE, "CL_MAP_FAILURE"},
    {CL_MISALIGNED_SUB_BUFFER_OFFSET, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {CL_COMPILE_PROGRAM_FAILURE, "CL_COMPILE_PROGRAM_FAILURE"},
    {CL_LINKER_NOT_AVAILABLE, "CL_LINKER_NOT_AVAILABLE"},
    {CL_LINK_PROGRAM_FAILURE, "CL_LINK_PROGRAM_FAILURE"},
    {CL_DEVICE_PARTITION_FAILED, "CL_DEVICE_PARTITION_FAILED"},
    {CL_KERNEL_ARG_INFO_NOT_AVAILABLE, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
    {CL_INVALID_DEVICE_TYPE, "CL_INVALID_DEVICE_TYPE"},
    {CL_INVALID_PLATFORM, "CL_INVALID_PLATFORM"},
    {CL_INVALID_DEVICE, "CL_INVALID_DEVICE"},
    {CL_INVALID_CONTEXT, "CL_INVALID_CONTEXT"},
    {CL_INVALID_QUEUE_PROPERTIES, "CL_INVALID_QUEUE_PROPERTIES"},
    {CL_INVALID_COMMAND_QUEUE, "CL_INVALID_COMMAND_QUEUE"},
    {CL_INVALID_HOST_PTR, "CL_INVALID_HOST_PTR"},
    {CL_INVALID_MEM_OBJECT, "CL_INVALID_MEM_OBJECT"},
    {CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {CL_INVALID_IMAGE_SIZE, "CL_INVALID_IMAGE_SIZE"},
    {CL_INVALID_SAMPLER, "CL_INVALID_SAMPLER"},
    {CL_INVALID_BINARY, "CL_INVALID_BINARY"},
    {CL_INVALID_BUILD_OPTIONS, "CL_INVALID_BUILD_OPTIONS"},
    {CL_INVALID_PROGRAM, "CL_INVALID_PROGRAM"},
    {CL_INVALID_PROGRAM_EXECUTABLE, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {CL_INVALID_KERNEL_NAME, "CL_INVALID_KERNEL_NAME"},
    {CL_INVALID_KERNEL_DEFINITION, "CL_INVALID_KERNEL_DEFINITION"},
    {CL_INVALID_KERNEL, "CL_INVALID_KERNEL"},
    {CL_INVALID_ARG_INDEX, "CL_INVALID_ARG_INDEX"},
    {CL_INVALID_ARG_VALUE, "CL_INVALID_ARG_VALUE"},
    {CL_INVALID_ARG_SIZE, "CL_INVALID_ARG_SIZE"},
    {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
    {CL_INVALID_WORK_DIMENSION, "CL_INVALID_WORK_DIMENSION"},
    {CL_INVALID_WORK_GROUP_SIZE, "CL_INVALID_WORK_GROUP_SIZE"},
    {CL_INVALID_WORK_ITEM_SIZE, "CL_INVALID_WORK_ITEM_SIZE"},
    {CL_INVALID_GLOBAL_OFFSET, "CL_INVALID_GLOBAL_OFFSET"},
    {CL_INVALID_EVENT_WAIT_LIST, "CL_INVALID_EVENT_WAIT_LIST"},
    {CL_INVALID_EVENT, "CL_INVALID_EVENT"},
    {CL_INVALID_OPERATION, "CL_INVALID_OPERATION"},
    {CL_INVALID_GL_OBJECT, "CL_INVALID_GL_OBJECT"},
    {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
    {CL_INVALID_MIP_LEVEL, "CL_INVALID_MIP_LEVEL"},
    {CL_INVALID_GLOBAL_WORK_SIZE, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {CL_INVALID_PROPERTY, "CL_INVALID_PROPERTY"},
    {CL_INVALID_IMAGE_DESCRIPTOR, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {CL_INVALID_COMPILER_OPTIONS, "CL_INVALID_COMPILER_OPTIONS"},
    {CL_INVALID_LINKER_OPTIONS, "CL_INVALID_LINKER_OPTIONS"},
    {CL_INVALID_DEVICE_PARTITION_COUNT, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};

const char *r1cl_err_name(cl_int e) {
    for (size_t i = 0; i < sizeof cl_errors / sizeof cl_errors[0]; i++)
        if (cl_errors[i].code == e) return cl_errors[i].name;
    return "unknown OpenCL error";
}

int r1cl_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = r1_device_error_vset(&errs, fmt, ap);
    va_end(ap);
    return rc;
}

int r1cl_check(cl_int e, const char *call, const char *file, int line) {
    if (e == CL_SUCCESS) return 0;
    return r1cl_fail("OpenCL error %s (%d) from %s at %s:%d", r1cl_err_name(e), (int)e, call, file, line);
}

/* Report (and clear) a failure recorded since the last call. */
static int take_failure(void) { return r1_device_error_take(&errs); }

/* ------------------------------------------------------------- addresses */

int r1cl_resolve(const void *p, cl_mem *mem, cl_ulong *off) {
    if (!p) { /* an unused argument: any valid buffer */
        *mem = r1cl.dummy, *off = 0;
        return 0;
    }
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&mu);
    for (int i = g.n - 1; i >= 0; i--)
        if (a >= g.bufs[i].base && a < g.bufs[i].base + g.bufs[i].size) {
            *mem = g.bufs[i].mem, *off = a - g.bufs[i].base;
            pthread_mutex_unlock(&mu);
            return 0;
        }
    pthread_mutex_unlock(&mu);
    return r1cl_fail("opencl: address %p is not in any device buffer", p);
}

/* ------------------------------------------------------------- devices */

#define MAX_DEV 64
static int list_devices(cl_platform_id *plat, cl_device_id *dev) {
    cl_uint np = 0;
    cl_platform_id ps[16];
    if (clGetPlatformIDs(16, ps, &np) != CL_SUCCESS) return 0;
    int n = 0;
    for (cl_uint i = 0; i < np && i < 16; i++) {
        cl_uint nd = 0;
        cl_device_id ds[MAX_DEV];
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, MAX_DEV, ds, &nd) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd && n < MAX_DEV; j++) {
            if (plat) plat[n] = ps[i];
            if (dev) dev[n] = ds[j];
            n++;
        }
    }
    return n;
}

int r1_opencl_device_count(void) { return list_devices(NULL, NULL); }

static void dev_str(cl_device_id d, cl_device_info what, char *out, size_t cap) {
    out[0] = 0;
    if (clGetDeviceInfo(d, what, cap, out, NULL) != CL_SUCCESS) snprintf(out, cap, "?");
    out[cap - 1] = 0;
}

static int has_ext(cl_device_id d, const char *ext) {
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS) return 0;
    char *s = malloc(n + 1);
    if (!s) return 0;
    int found = clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, s, NULL) == CL_SUCCESS && strstr(s, ext);
    free(s);
    return found;
}

int r1_opencl_list(FILE *f) {
    cl_platform_id plat[MAX_DEV];
    cl_device_id dev[MAX_DEV];
    int n = list_devices(plat, dev);
    cl_platform_id last = NULL;
    for (int i = 0; i < n; i++) {
        char s[256], v[256], drv[128];
        if (plat[i] != last) {
            clGetPlatformInfo(plat[i], CL_PLATFORM_NAME, sizeof s, s, NULL);
            clGetPlatformInfo(plat[i], CL_PLATFORM_VERSION, sizeof v, v, NULL);
            s[255] = v[255] = 0;
            fprintf(f, "  platform: %s (%s)\n", s, v);
            last = plat[i];
        }
        cl_ulong mem = 0, maxa = 0;
        cl_uint cu = 0;
        cl_device_type type = 0;
        clGetDeviceInfo(dev[i], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
        clGetDeviceInfo(dev[i], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxa, &maxa, NULL);
        clGetDeviceInfo(dev[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
        clGetDeviceInfo(dev[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
        dev_str(dev[i], CL_DEVICE_NAME, s, sizeof s);
        dev_str(dev[i], CL_DEVICE_VERSION, v, sizeof v);
        dev_str(dev[i], CL_DRIVER_VERSION, drv, sizeof drv);
        fprintf(f,
                "    [%d] %s: %s, %s, driver %s, %u compute units, %.2f GiB (max "
                "alloc %.2f GiB), fp16 %s\n",
                i,
                type & CL_DEVICE_TYPE_GPU   ? "gpu"
                : type & CL_DEVICE_TYPE_CPU ? "cpu"
                                            : "accelerator",
                s, v, drv, cu, mem / 1073741824.0, maxa / 1073741824.0,
                has_ext(dev[i], "cl_khr_fp16") ? "arithmetic (cl_khr_fp16)" : "storage (vload_half)");
    }
    if (n == 0) fprintf(f, "  no OpenCL platform (install an ICD, e.g. pocl-opencl-icd)\n");
    return n;
}

/* ---------------------------------------------------------- program cache */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int cache_path(char *out, size_t cap, uint64_t key, int mkdirs) {
    const char *env = r1_env("R1_CL_CACHE");
    if (env && !strcmp(env, "0")) return -1;
    const char *xdg = r1_env("XDG_CACHE_HOME"), *home = r1_env("HOME");
    char dir[512];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/r1infer", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/r1infer", home);
    else return -1;
    if (mkdirs) {
        char parent[512];
        snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(dir, '/') - dir), dir);
        mkdir(parent, 0755);
        mkdir(dir, 0755);
    }
    snprintf(out, cap, "%s/opencl-%016llx.bin", dir, (unsigned long long)key);
    return 0;
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *p = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)len)) &&
            fread(p, 1, (size_t)len, f) != (size_t)len) {
            free(p);
            p = NULL;
        }
        *n = (size_t)len;
    }
    fclose(f);
    return p;
}

static void write_cache(const char *path, cl_program prog) {
    size_t n = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0) return;
    unsigned char *bin = malloc(n);
    if (!bin) return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
        char tmp[640];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            int ok = fwrite(bin, 1, n, f) == n;
            ok = fclose(f) == 0 && ok;
            if (!ok || rename(tmp, path) != 0) unlink(tmp);
        }
    }
    free(bin);
}

static int build_log_error(cl_program prog, cl_int e, const char *what) {
    size_t n = 0;
    clGetProgramBuildInfo(prog, r1cl.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *log = malloc(n + 1);
    if (log) {
        log[0] = 0;
        clGetProgramBuildInfo(prog, r1cl.device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
        log[n] = 0;
        fprintf(stderr, "r1infer: OpenCL build log of kernels.cl (%s):\n%s\n", r1cl.dev_name, log);
        free(log);
    }
    return r1_err("OpenCL error %s (%d) from clBuildProgram (%s) on %s; the "
                  "build log is above",
                  r1cl_err_name(e), (int)e, what, r1cl.dev_name);
}

/* -cl-fp32-correctly-rounded-divide-sqrt where the device has it: the q8_0
 * KV quantizer's two divisions must round as the host's do (its bytes are
 * compared with the reference's); OpenCL 1.2 allows them 2.5 ulp otherwise. */
static char BUILD_OPTS[96] = "-cl-std=CL1.2";

static int build_program(void) {
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(r1cl.device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS &&
        (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT))
        snprintf(BUILD_OPTS, sizeof BUILD_OPTS, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt");
    char drv[128], plat[256];
    dev_str(r1cl.device, CL_DRIVER_VERSION, drv, sizeof drv);
    clGetPlatformInfo(r1cl.platform, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
    plat[255] = 0;
    uint64_t key = 0xcbf29ce484222325ull;
    key = fnv(key, r1cl.dev_name, strlen(r1cl.dev_name) + 1);
    key = fnv(key, drv, strlen(drv) + 1);
    key = fnv(key, plat, strlen(plat) + 1);
    key = fnv(key, BUILD_OPTS, strlen(BUILD_OPTS) + 1);
    key = fnv(key, r1cl_source, r1cl_source_len);
    char path[600];
    int cached = !cache_path(path, sizeof path, key, 0);
    cl_int e;
    if (cached) {
        size_t n = 0;
        unsigned char *bin = read_file(path, &n);
        if (bin) {
            const unsigned char *bp = bin;
            cl_int st = 0;
            cl_program p = clCreateProgramWithBinary(r1cl.ctx, 1, &r1cl.device, &n, &bp, &st, &e);
            free(bin);
            if (e == CL_SUCCESS && st == CL_SUCCESS &&
                clBuildProgram(p, 1, &r1cl.device, BUILD_OPTS, NULL, NULL) == CL_SUCCESS) {
                r1cl.prog = p;
                return 0;
            }
            if (e == CL_SUCCESS) clReleaseProgram(p); /* stale or foreign: rebuild from source */
        }
    }
    const char *src = r1cl_source;
    size_t len = r1cl_source_len;
    cl_program p = clCreateProgramWithSource(r1cl.ctx, 1, &src, &len, &e);
    if (CL_CHECK_E(e, "clCreateProgramWithSource")) return take_failure();
    e = clBuildProgram(p, 1, &r1cl.device, BUILD_OPTS, NULL, NULL);
    if (e != CL_SUCCESS) {
        int rc = build_log_error(p, e, "kernels.cl");
        clReleaseProgram(p);
        return rc;
    }
    r1cl.prog = p;
    if (cached && !cache_path(path, sizeof path, key, 1)) write_cache(path, p);
    return 0;
}

/* ------------------------------------------------------------------ init */

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

static int make_kernel(cl_kernel *k, const char *name, size_t need_wg) {
    cl_int e;
    *k = clCreateKernel(r1cl.prog, name, &e);
    if (e != CL_SUCCESS)
        return r1cl_fail("OpenCL error %s (%d) from clCreateKernel(%s)", r1cl_err_name(e), (int)e, name);
    size_t wg = 0;
    if (CL_CHECK(clGetKernelWorkGroupInfo(*k, r1cl.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL))) return -1;
    if (wg < need_wg)
        return r1cl_fail("backend 'opencl': kernel %s runs at most %zu work-items "
                         "per group on %s; it needs %zu",
                         name, wg, r1cl.dev_name, need_wg);
    return 0;
}

static int opencl_init_locked(void) {
    if (r1cl.ready) return 0;
    cl_platform_id plat[MAX_DEV];
    cl_device_id dev[MAX_DEV];
    int n = list_devices(plat, dev);
    if (n == 0)
        return r1_err("backend 'opencl': no OpenCL platform or device found. "
                      "Install a driver (an ICD: "
                      "pocl-opencl-icd for the CPU, or your GPU vendor's), check "
                      "with 'clinfo -l', or choose "
                      "--backend cpu");
    const int idx = r1_device_env_index("R1_CL_DEVICE", "--cl-device", n, "OpenCL", "; see 'r1infer devices'");
    if (idx < 0) return -1;
    static const char *const prefills[] = {"own", "clblast"}, *const onoff[] = {"0", "1"},
                             *const forms[] = {"group", "item"};
    const int prefill = r1_env_choice("R1_CL_PREFILL", prefills, 2, 2); /* 2: unset */
    if (prefill < 0) return -1;
    if (prefill == 1 && !r1_opencl_has_clblast())
        return r1_err("R1_CL_PREFILL=clblast: this build has no CLBlast "
                      "(install libclblast-dev and "
                      "rebuild)");
    r1cl.clblast = prefill == 2 ? -1 : prefill; /* -1: by device type, below */
    if (r1_env_choice("R1_CL_CACHE", onoff, 2, 1) < 0) return -1;
    r1cl.platform = plat[idx], r1cl.device = dev[idx];
    dev_str(r1cl.device, CL_DEVICE_NAME, r1cl.dev_name, sizeof r1cl.dev_name);
    char profile[64];
    dev_str(r1cl.device, CL_DEVICE_PROFILE, profile, sizeof profile);
    /* vload_half / vstore_half (f16 storage) are core in the full profile only */
    if (strcmp(profile, "FULL_PROFILE") && !has_ext(r1cl.device, "cl_khr_fp16"))
        return r1_err("backend 'opencl': %s (%s) has no fp16 support (neither the "
                      "full profile's vload_half nor "
                      "cl_khr_fp16); the f16 KV cache and weights need it. Choose "
                      "another --cl-device",
                      r1cl.dev_name, profile);
    cl_ulong mem = 0, maxa = 0, lmem = 0;
    size_t maxwg = 0;
    clGetDeviceInfo(r1cl.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(r1cl.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxa, &maxa, NULL);
    clGetDeviceInfo(r1cl.device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(r1cl.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
    if (mem < ((cl_ulong)256 << 20))
        return r1_err("backend 'opencl': %s has %.0f MiB of global memory; r1infer "
                      "needs at least 256 MiB",
                      r1cl.dev_name, mem / 1048576.0);
    if (maxwg < R1CL_NORM_WG || lmem < 16384)
        return r1_err("backend 'opencl': %s allows %zu work-items per group and "
                      "%lu bytes of local memory; the "
                      "kernels need %d and 16 KiB",
                      r1cl.dev_name, maxwg, (unsigned long)lmem, R1CL_NORM_WG);
    r1cl.mem = mem, r1cl.max_alloc = maxa, r1cl.local_mem = lmem;
    cl_device_type type = 0;
    cl_uint cu = 0;
    clGetDeviceInfo(r1cl.device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(r1cl.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    r1cl.groups_cap = type & CL_DEVICE_TYPE_CPU ? 16 * (int)(cu ? cu : 1) : 0;
    r1cl.item = (type & CL_DEVICE_TYPE_CPU) != 0;
    /* prefill: on PoCL our kernel beat CLBlast (11.3 vs 9.3 tok/s at 512
     * tokens, 1.5b bf16, README); on GPUs CLBlast's tiled SGEMM is expected
     * to win (unmeasured) */
    if (r1cl.clblast < 0) r1cl.clblast = !(type & CL_DEVICE_TYPE_CPU) && r1_opencl_has_clblast();
    const int form = r1_env_choice("R1_CL_MATMUL", forms, 2, r1cl.item);
    if (form < 0) return -1;
    r1cl.item = form;
    cl_int e;
    r1cl.ctx = clCreateContext(NULL, 1, &r1cl.device, NULL, NULL, &e);
    if (CL_CHECK_E(e, "clCreateContext")) return take_failure();
    r1cl.queue = clCreateCommandQueue(r1cl.ctx, r1cl.device, 0, &e);
    if (CL_CHECK_E(e, "clCreateCommandQueue")) return take_failure();
    r1cl.dummy = clCreateBuffer(r1cl.ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    if (CL_CHECK_E(e, "clCreateBuffer")) return take_failure();
    if (build_program()) return -1;
    if (make_kernel(&r1cl.k_matmul, "matmul", R1CL_WG) || make_kernel(&r1cl.k_gate_up, "gate_up_silu", R1CL_WG) ||
        make_kernel(&r1cl.k_matmul_item, "matmul_item", 1) ||
        make_kernel(&r1cl.k_gate_up_item, "gate_up_silu_item", 1) || make_kernel(&r1cl.k_embedding, "embedding", 1) ||
        make_kernel(&r1cl.k_rms_norm, "rms_norm", R1CL_NORM_WG) || make_kernel(&r1cl.k_rope, "rope_qk", 1) ||
        make_kernel(&r1cl.k_kv_append, "kv_append", 1) || make_kernel(&r1cl.k_kv_append_q8, "kv_append_q8", 1) ||
        make_kernel(&r1cl.k_attention, "attention", R1CL_ATT_WG) ||
        make_kernel(&r1cl.k_argmax, "argmax", R1CL_NORM_WG) || make_kernel(&r1cl.k_dequant, "dequant_f32", 1))
        return take_failure();
    r1cl.ready = 1;
    return 0;
}

static int opencl_init(void) {
    pthread_mutex_lock(&init_mu);
    int rc = opencl_init_locked();
    pthread_mutex_unlock(&init_mu);
    return rc;
}

int r1_opencl_device_info(char *desc, size_t cap, size_t *mem, int *units) {
    if (!r1cl.ready) return r1_err("the opencl backend is not initialized");
    char drv[128], plat[256];
    dev_str(r1cl.device, CL_DRIVER_VERSION, drv, sizeof drv);
    clGetPlatformInfo(r1cl.platform, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
    plat[255] = 0;
    cl_uint cu = 0;
    clGetDeviceInfo(r1cl.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    if (desc && cap) snprintf(desc, cap, "%s (%s, driver %s)", r1cl.dev_name, plat, drv);
    if (mem) *mem = (size_t)r1cl.mem;
    if (units) *units = (int)cu;
    return 0;
}

int r1_opencl_is_cpu(void) {
    cl_device_type type = 0;
    return r1cl.ready && clGetDeviceInfo(r1cl.device, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
           (type & CL_DEVICE_TYPE_CPU);
}

void r1_opencl_set_prefill(int clblast) { r1cl.clblast = clblast && r1_opencl_has_clblast(); }
int r1_opencl_set_matmul(int item) {
    int old = r1cl.item;
    r1cl.item = item != 0;
    return old;
}

/* ----------------------------------------------------------- device ops */

static void *dev_alloc(size_t bytes, const char *what) {
    if (bytes == 0) bytes = 16;
    if (bytes > r1cl.max_alloc) {
        r1_err("out of OpenCL device memory: %s needs %.2f GiB in one buffer; %s "
               "allows %.2f GiB per buffer and "
               "has %.2f GiB (try a smaller --ctx or --dtype q8_0)",
               what, bytes / 1073741824.0, r1cl.dev_name, r1cl.max_alloc / 1073741824.0, r1cl.mem / 1073741824.0);
        return NULL;
    }
    cl_int e;
    cl_mem m = clCreateBuffer(r1cl.ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e == CL_SUCCESS) {
        const cl_uchar zero = 0;
        e = clEnqueueFillBuffer(r1cl.queue, m, &zero, 1, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS) e = clFinish(r1cl.queue); /* PoCL allocates lazily: fail here, not later */
        if (e != CL_SUCCESS) clReleaseMemObject(m);
    }
    if (e != CL_SUCCESS) {
        r1_err("out of OpenCL device memory (%s): %s needs %.2f GiB; %s has %.2f "
               "GiB (try a smaller --ctx or "
               "--dtype q8_0)",
               r1cl_err_name(e), what, bytes / 1073741824.0, r1cl.dev_name, r1cl.mem / 1073741824.0);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    if (g.n == g.cap) {
        int cap = g.cap ? 2 * g.cap : 64;
        struct buf *nb = realloc(g.bufs, sizeof *nb * (size_t)cap);
        if (!nb) {
            pthread_mutex_unlock(&mu);
            clReleaseMemObject(m);
            r1_err("out of memory");
            return NULL;
        }
        g.bufs = nb, g.cap = cap;
    }
    uintptr_t base = g.next;
    g.next += (bytes + 4096 + 4095) & ~(uintptr_t)4095; /* a gap: one past the end is no other buffer */
    g.bufs[g.n++] = (struct buf){base, bytes, m};
    pthread_mutex_unlock(&mu);
    return (void *)base;
}

static void dev_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < g.n; i++)
        if (g.bufs[i].base == (uintptr_t)p) {
            clReleaseMemObject(g.bufs[i].mem); /* OpenCL keeps it until queued work is done */
            g.bufs[i] = g.bufs[--g.n];
            break;
        }
    pthread_mutex_unlock(&mu);
}

static int dev_upload(void *dst, const void *src, size_t bytes) {
    cl_mem m;
    cl_ulong off;
    if (r1cl_resolve(dst, &m, &off)) return take_failure();
    if (CL_CHECK(clEnqueueWriteBuffer(r1cl.queue, m, CL_TRUE, off, bytes, src, 0, NULL, NULL))) return take_failure();
    return 0;
}

static int dev_sync(void) {
    CL_CHECK(clFinish(r1cl.queue));
    return take_failure();
}

static int dev_download(void *dst, const void *src, size_t bytes) {
    cl_mem m;
    cl_ulong off;
    if (r1cl_resolve(src, &m, &off)) return take_failure();
    CL_CHECK(clEnqueueReadBuffer(r1cl.queue, m, CL_TRUE, off, bytes, dst, 0, NULL, NULL));
    return take_failure();
}

static int dev_weights_ok(enum r1_dtype t) {
    static const enum r1_dtype held[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_BF16, R1_DTYPE_Q8_0, R1_DTYPE_Q4_0};
    return r1_device_weights_check("opencl", t, held, sizeof held / sizeof held[0],
                                   "load with --dtype q8_0 (or bf16, q4_0), which converts at load");
}

static size_t dev_scratch_floats(int n_batch, int n_head, int head_dim, int n_ctx) {
    (void)n_batch, (void)n_head, (void)head_dim, (void)n_ctx;
    return 16; /* attention keeps its scores in local memory */
}

static size_t alloc_cap;
static size_t dev_max_alloc(void) {
    return alloc_cap && alloc_cap < r1cl.max_alloc ? alloc_cap : (size_t)r1cl.max_alloc;
}
size_t r1_opencl_set_max_alloc(size_t bytes) {
    size_t old = alloc_cap;
    alloc_cap = bytes;
    return old;
}

double r1_opencl_copy_gbps(size_t bytes, int reps) {
    if (!r1cl.ready) return r1_err("the opencl backend is not initialized");
    void *a = dev_alloc(bytes, "the copy probe"), *b = a ? dev_alloc(bytes, "the copy probe") : NULL;
    double best = 0;
    if (a && b) {
        cl_mem ma, mb;
        cl_ulong oa, ob;
        r1cl_resolve(a, &ma, &oa), r1cl_resolve(b, &mb, &ob);
        for (int i = 0; i < reps + 1; i++) {
            double t0 = r1_now();
            if (CL_CHECK(clEnqueueCopyBuffer(r1cl.queue, ma, mb, 0, 0, bytes, 0, NULL, NULL)) ||
                CL_CHECK(clFinish(r1cl.queue)))
                break;
            double gbps = 2.0 * (double)bytes / ((r1_now() - t0) * 1e9);
            if (i > 0 && gbps > best) best = gbps;
        }
    }
    dev_free(a), dev_free(b);
    return take_failure() ? -1.0 : best;
}

static const struct r1_device_ops opencl_dev = {
    .alloc = dev_alloc,
    .free = dev_free,
    .upload = dev_upload,
    .download = dev_download,
    .sync = dev_sync,
    .weights_ok = dev_weights_ok,
    .scratch_floats = dev_scratch_floats,
    .max_alloc = dev_max_alloc, /* no graphs: each op is queued as it comes */
};

const struct r1_backend r1_backend_opencl = {
    .name = "opencl",
    .fn =
        {
            [R1_K_EMBEDDING] = r1cl_embedding,
            [R1_K_RMS_NORM] = r1cl_rms_norm,
            [R1_K_QKV_BIAS] = r1cl_qkv_bias,
            [R1_K_ROPE_QK] = r1cl_rope_qk,
            [R1_K_KV_APPEND] = r1cl_kv_append,
            [R1_K_ATTENTION_GQA] = r1cl_attention_gqa,
            [R1_K_MATVEC_ADD] = r1cl_matvec_add,
            [R1_K_GATE_UP_SILU] = r1cl_gate_up_silu,
            [R1_K_LM_HEAD] = r1cl_lm_head,
            [R1_K_ARGMAX] = r1cl_argmax,
        },
    .init = opencl_init,
    .kv_dtype = R1_DTYPE_F16,
    .dev = &opencl_dev,
};
