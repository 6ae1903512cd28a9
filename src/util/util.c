/*
 * util.c - errors, f16 conversion, time, aligned allocation, file mapping.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "r1infer.h"

static _Thread_local char err_buf[1024];

const char *r1_last_error(void) { return err_buf; }

void r1_join_words(char *out, size_t cap, const char *const *items, int n, const char *last) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n && len < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 < n ? ", " : last;
        int w = snprintf(out + len, cap - len, "%s%s", sep, items[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

int r1_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return -1;
}

int r1_err_prefix(const char *fmt, ...) {
    char old[sizeof err_buf];
    memcpy(old, err_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    size_t at = n < 0 ? 0 : (size_t)n < sizeof err_buf ? (size_t)n : sizeof err_buf - 1;
    size_t room = sizeof err_buf - 1 - at;
    if (room >= 2) {
        memcpy(err_buf + at, ": ", 2);
        at += 2, room -= 2;
        size_t ol = strnlen(old, sizeof old - 1);
        if (ol > room) ol = room;
        memcpy(err_buf + at, old, ol);
        at += ol;
    }
    err_buf[at] = 0;
    return -1;
}

void r1_fatal(const char *file, int line, const char *what) {
    fprintf(stderr, "r1infer: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

float r1_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t r1_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00);  /* NaN */
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (absu < 0x38800000u) {                                  /* subnormal or zero in f16 */
        if (absu < 0x33000000u) return (uint16_t)sign;         /* < half of min subnormal */
        uint32_t man = (absu & 0x7fffff) | 0x800000;
        int shift = 113 - (int)(absu >> 23) + 13; /* 14..24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((absu >> 13) - (112u << 10));
    uint32_t rem = absu & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float r1_frand_normal(uint64_t *state) {
    uint64_t r = *state;
    float s = 0;
    for (int i = 0; i < 4; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        s += (float)(r >> 40) / (float)(1 << 24) - 0.5f;
    }
    *state = r;
    return s * 1.7320508f;
}

int r1_argmax(const float *x, int n) {
    float m[16];
    for (int j = 0; j < 16; j++) m[j] = x[0];
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float mx = m[0];
    for (int j = 1; j < 16; j++) mx = m[j] > mx ? m[j] : mx;
    for (i = 0; i < n; i++) /* -0 == +0: the first of either, as a plain loop picks */
        if (x[i] == mx) return i;
    return 0; /* only when x[0] is NaN and so is every lane */
}

double r1_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *r1_alloc(size_t bytes, const char *what) {
    void *p = r1_alloc_untouched(bytes, what);
    if (p) memset(p, 0, bytes ? bytes : 64);
    return p;
}

void *r1_alloc_untouched(size_t bytes, const char *what) {
    void *p = NULL;
    size_t n = bytes ? bytes : 64;
    /* big buffers (weights, KV cache) go on 2 MiB boundaries and ask for
     * transparent huge pages: fewer TLB misses when a decode step streams
     * gigabytes (the bench measured up to 2x read bandwidth on huge pages) */
    size_t align = n >= ((size_t)32 << 20) ? ((size_t)2 << 20) : 64;
    if (n > SIZE_MAX - align || posix_memalign(&p, align, (n + align - 1) & ~(align - 1)) != 0) {
        r1_err("out of memory: %s needs %.1f MiB", what, (double)bytes / (1024.0 * 1024.0));
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align > 64) madvise(p, (n + align - 1) & ~(align - 1), MADV_HUGEPAGE);
#endif
    return p;
}

int r1_file_map(struct r1_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return r1_err("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return r1_err("%s: not a regular file", path);
    }
    f->size = (size_t)st.st_size;
    if (f->size == 0) {
        close(fd);
        return r1_err("%s: file is empty", path);
    }
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return r1_err("%s: cannot map: %s", path, strerror(errno));
    }
    f->data = p;
    f->fd = fd;
    return 0;
}

void r1_file_unmap(struct r1_file *f) {
    if (f->data) munmap((void *)f->data, f->size);
    if (f->fd >= 0) close(f->fd);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

char *r1_file_read(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        r1_err("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        free(buf);
        r1_err("%s: cannot read", path);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int r1_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *r1_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

int r1_physical_cores(void) {
    /* count distinct (physical id, core id) pairs; fall back to online CPUs */
    FILE *fp = fopen("/proc/cpuinfo", "r");
    int pairs[1024][2], n = 0, phys = 0;
    if (fp) {
        char line[256];
        while (fgets(line, sizeof line, fp)) {
            int v;
            if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
            else if (sscanf(line, "core id : %d", &v) == 1) {
                int seen = 0;
                for (int i = 0; i < n; i++)
                    if (pairs[i][0] == phys && pairs[i][1] == v) seen = 1;
                if (!seen && n < 1024) {
                    pairs[n][0] = phys;
                    pairs[n][1] = v;
                    n++;
                }
            }
        }
        fclose(fp);
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = online > 0 ? (int)online : 1;
    if (online > 0 && n > online) n = (int)online;
    return n;
}
