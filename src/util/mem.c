/*
 * mem.c - the memory a loaded model lives in: a model file read into private
 * memory (the --no-mmap image), the anonymous page-backed arena converted
 * weights go into, giving back the pages of a tensor that has been converted
 * (so a load peaks at the model plus one tensor, not two models), locking
 * pages (--mlock) and how much memory the machine can still give. Nothing
 * here knows what a tensor or a model is.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

#define HUGE_PAGE ((size_t)2 << 20)

void *r1_pages_alloc(size_t bytes, const char *what) {
    size_t n = bytes ? bytes : 1;
    /* large buffers start on a 2 MiB boundary, so that all of them can be
     * huge pages: map a huge page more and trim both ends */
    size_t extra = n >= ((size_t)32 << 20) ? HUGE_PAGE : 0;
    if (n > SIZE_MAX - extra) n = SIZE_MAX - extra; /* mmap fails below, with the message */
    uint8_t *p = mmap(NULL, n + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        r1_err("out of memory: %s needs %.2f GiB (%s)", what, (double)bytes / (1u << 30), strerror(errno));
        return NULL;
    }
    if (extra) {
        uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
        size_t ps = page_size(), len = (n + ps - 1) & ~(ps - 1);
        if (a > p) munmap(p, (size_t)(a - p));
        if (p + n + extra > a + len) munmap(a + len, (size_t)(p + n + extra - (a + len)));
        p = a;
#ifdef MADV_HUGEPAGE
        madvise(p, n, MADV_HUGEPAGE); /* fewer TLB misses, faster faults */
#endif
    }
    return p;
}

void r1_pages_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes ? bytes : 1);
}

int r1_file_read_private(struct r1_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return r1_err("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return r1_err("%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        return r1_err("%s: file is empty", path);
    }
    uint8_t *p = r1_pages_alloc(size, "reading the file into memory (--no-mmap)");
    if (!p) {
        close(fd);
        return r1_err_prefix("%s", path);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t r = read(fd, p + done, size - done > ((size_t)1 << 30) ? (size_t)1 << 30 : size - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            r1_pages_free(p, size);
            close(fd);
            return r1_err("%s: read failed after %zu of %zu bytes: %s", path, done, size,
                          e ? strerror(e) : "the file shrank while reading");
        }
        done += (size_t)r;
    }
    close(fd);
    f->data = p;
    f->size = size;
    f->anon = 1;
    return 0;
}

void r1_mem_release(const void *p, size_t bytes) {
    if (!p || !bytes) return;
    size_t ps = page_size();
    uintptr_t lo = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1), hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(ps - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int r1_mem_lock(const void *p, size_t bytes) {
    if (!p || !bytes) return 0;
    size_t ps = page_size();
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(ps - 1);
    if (mlock((void *)lo, (uintptr_t)p + bytes - lo) == 0) return 0;
    int e = errno;
    struct rlimit rl;
    if ((e == ENOMEM || e == EPERM) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        return r1_err("cannot lock %.2f GiB in memory: %s (the locked-memory limit is %.2f GiB; raise "
                      "it with `ulimit -l unlimited` or in /etc/security/limits.conf, or run without --mlock)",
                      (double)bytes / (1u << 30), strerror(e), (double)rl.rlim_cur / (1u << 30));
    return r1_err("cannot lock %.2f GiB in memory: %s", (double)bytes / (1u << 30), strerror(e));
}

/* A "Key:   N kB" line of /proc/meminfo in bytes; 0 when absent. */
static uint64_t meminfo(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) return 0;
    p += strlen(key);
    while (*p == ' ' || *p == ':') p++;
    return strtoull(p, NULL, 10) * 1024;
}

/* The number in a one-line file (cgroup memory.max / memory.current);
 * UINT64_MAX for "max", absent or unreadable. */
static uint64_t read_number(const char *path) {
    char buf[64];
    FILE *fp = fopen(path, "r");
    if (!fp) return UINT64_MAX;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    if (n == 0 || buf[0] < '0' || buf[0] > '9') return UINT64_MAX;
    return strtoull(buf, NULL, 10);
}

uint64_t r1_mem_available(void) {
    uint64_t avail = UINT64_MAX;
    size_t len = 0;
    char *mi = r1_file_read("/proc/meminfo", &len);
    if (mi) {
        uint64_t a = meminfo(mi, "MemAvailable");
        if (a) avail = a + meminfo(mi, "SwapFree");
        free(mi);
    }
    /* a container's limit (cgroup v2), which /proc/meminfo does not show */
    uint64_t max = read_number("/sys/fs/cgroup/memory.max"), cur = read_number("/sys/fs/cgroup/memory.current");
    if (max != UINT64_MAX && cur != UINT64_MAX) {
        uint64_t left = max > cur ? max - cur : 0;
        if (left < avail) avail = left;
    }
    /* the address-space limit (ulimit -v) bounds what a process can map */
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        uint64_t used = 0;
        char *st = r1_file_read("/proc/self/status", &len);
        if (st) used = meminfo(st, "VmSize"), free(st);
        uint64_t left = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
        if (left < avail) avail = left;
    }
    return avail;
}
