/*
 * machine.c - what the benchmark ran on: CPU model, online CPUs, L3 size,
 * the ISA features the CPU reports, the kernel set the cpu backend chose
 * (when it exposes one), OS, toolchain, git revision and submitter. Reads
 * /proc and /sys; never fails (unknown fields say "unknown").
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "util/env.h"
#include "bench/bench.h"
#ifdef R1_OPENCL
#include "kernels/opencl/opencl.h"
#endif
#include "kernels/cpu/cpu.h"

/* Weak: a build whose cpu backend does not expose its kernel set still links. */
#pragma weak r1_cpu_current

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    size_t k = 0;
    while (s[k] && isspace((unsigned char)s[k])) k++;
    memmove(s, s + k, strlen(s + k) + 1);
}

static void cpu_model(char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* x86: "model name"; some ARM kernels: "Model" or "Hardware" */
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5) && strncmp(line, "Hardware", 8)) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        snprintf(out, cap, "%s", colon + 1);
        trim(out);
        break;
    }
    fclose(f);
}

/* "Intel(R) Xeon(R) Processor" -> "intel-xeon-processor" */
static void slugify(const char *in, char *out, size_t cap) {
    size_t n = 0;
    int dash = 0;
    for (const char *p = in; *p && n + 1 < cap; p++) {
        if (!strncmp(p, "(R)", 3) || !strncmp(p, "(r)", 3)) {
            p += 2;
            continue;
        }
        if (!strncmp(p, "(TM)", 4) || !strncmp(p, "(tm)", 4)) {
            p += 3;
            continue;
        }
        if (isalnum((unsigned char)*p)) {
            if (dash && n) out[n++] = '-';
            if (n + 1 < cap) out[n++] = (char)tolower((unsigned char)*p);
            dash = 0;
        } else if (*p == '.' && n && isdigit((unsigned char)out[n - 1]) && isdigit((unsigned char)p[1])) {
            out[n++] = '.';
            dash = 0;
        } else {
            dash = 1;
        }
    }
    out[n] = 0;
    if (!n) snprintf(out, cap, "unknown-cpu");
}

static size_t l3_bytes(void) {
    /* the largest cache level cpu0 reports */
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            size_t v = strtoull(buf, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
/* F16C from CPUID leaf 1 (ecx bit 29): gcc 12 and clang 14 have no
 * __builtin_cpu_supports name for it */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static void features(char *out, size_t cap) {
    out[0] = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    static const char *const names[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni", "avx512bf16"};
    int have[7] = {
        __builtin_cpu_supports("avx2"),      __builtin_cpu_supports("fma"),      has_f16c(),
        __builtin_cpu_supports("avx512f"),   __builtin_cpu_supports("avx512bw"), __builtin_cpu_supports("avx512vnni"),
        __builtin_cpu_supports("avx512bf16")};
    size_t n = 0;
    for (int i = 0; i < 7; i++)
        if (have[i] && n < cap) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? " " : "", names[i]);
#else
    snprintf(out, cap, "%s", "");
#endif
}

static void git_sha(char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    char buf[64];
    if (fgets(buf, sizeof buf, p)) {
        trim(buf);
        int ok = buf[0] != 0;
        for (char *c = buf; *c; c++)
            if (!isxdigit((unsigned char)*c)) ok = 0;
        if (ok && strlen(buf) < cap) memcpy(out, buf, strlen(buf) + 1);
    }
    pclose(p);
}

void bench_machine_probe(struct bench_machine *m, const char *backend, int threads) {
    memset(m, 0, sizeof *m);
    cpu_model(m->cpu, sizeof m->cpu);
    slugify(m->cpu, m->slug, sizeof m->slug);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    m->n_cpus = online > 0 ? (int)online : 1;
    m->threads = threads;
    m->l3_bytes = l3_bytes();
    features(m->features, sizeof m->features);
    snprintf(m->impl_lang, sizeof m->impl_lang, "%s",
             backend && (!strcmp(backend, "opencl") || !strcmp(backend, "cuda")) ? backend : "c");
#ifdef R1_OPENCL
    if (backend && !strcmp(backend, "opencl")) {
        size_t mem = 0;
        int units = 0;
        char d[256];
        if (!r1_opencl_device_info(d, sizeof d, &mem, &units))
            snprintf(m->device, sizeof m->device, "opencl: %s, %d compute units, %.2f GiB", d, units,
                     mem / 1073741824.0);
    }
#endif
    if (backend && !strcmp(backend, "cpu") && r1_cpu_current) {
        const struct r1_cpu_isa *isa = r1_cpu_current();
        if (isa && isa->name) snprintf(m->isa, sizeof m->isa, "%s", isa->name);
    }
    struct utsname u;
    snprintf(m->os, sizeof m->os, "unknown");
    if (uname(&u) == 0) {
        size_t a = strnlen(u.sysname, 32), b = strnlen(u.release, sizeof m->os - 34);
        memcpy(m->os, u.sysname, a);
        m->os[a] = ' ';
        memcpy(m->os + a + 1, u.release, b);
        m->os[a + 1 + b] = 0;
    }
#if defined(__clang__)
    snprintf(m->toolchain, sizeof m->toolchain, "clang %d.%d.%d", __clang_major__, __clang_minor__,
             __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(m->toolchain, sizeof m->toolchain, "gcc %s", __VERSION__);
#else
    snprintf(m->toolchain, sizeof m->toolchain, "unknown");
#endif
    git_sha(m->git_sha, sizeof m->git_sha);
    const char *user = r1_env("USER");
    snprintf(m->submitter, sizeof m->submitter, "%s", user && *user ? user : "r1infer");
}
