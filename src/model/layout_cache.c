/*
 * layout_cache.c - the layout cache: a file holding a model's arena (the
 * weights converted into the kernels' layout, the norms, the rope
 * frequencies) exactly as the builder lays it out, so that a later load maps
 * it read-only and shared instead of converting, and processes on one model
 * share those pages. A cache file is written under a temporary name and
 * renamed into place, never changed where it lies; a lock file makes a
 * second process wait for the first one's file rather than write its own.
 * What is checked here is the file itself (size, header, keys); build.c
 * compares a sample of its contents with the model. Nothing here knows the
 * kernels' layouts.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "util/env.h"

#define LC_MAGIC "R1LAYOUT"
#define LC_VERSION 1u                   /* bump when a stored layout's bytes change meaning */
#define LC_DATA_OFF ((uint64_t)2 << 20) /* the arena starts on a 2 MiB boundary of the file */
#define HUGE_PAGE ((size_t)2 << 20)

/* The header at the start of a cache file; the arena follows at data_off. */
struct lc_header {
    char magic[8];         /* LC_MAGIC */
    uint32_t version;      /* LC_VERSION */
    uint32_t header_bytes; /* sizeof (struct lc_header) */
    uint64_t file_key;     /* the model files it was made from (r1_layout_file_key) */
    uint64_t plan_hash;    /* offsets, dtypes and shapes of every piece of the arena */
    uint64_t data_off;     /* where the arena starts */
    uint64_t data_bytes;   /* its size */
    char model[512];       /* the model's path, for people reading the file */
    uint64_t check;        /* r1_hash64 of every byte above */
};

uint64_t r1_hash64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t r1_layout_file_key(uint64_t key, const char *path, const uint8_t *data, size_t size) {
    struct stat st;
    uint64_t id[5] = {0};
    if (stat(path, &st) == 0)
        id[0] = (uint64_t)st.st_size, id[1] = (uint64_t)st.st_ino, id[2] = (uint64_t)st.st_mtim.tv_sec,
        id[3] = (uint64_t)st.st_mtim.tv_nsec;
    id[4] = size;
    key = r1_hash64(key, id, sizeof id);
    /* the header and the tensor index, and the end: another file of the
     * same size and time differs there */
    const size_t head = size < ((size_t)1 << 20) ? size : (size_t)1 << 20, tail = size < 65536 ? size : 65536;
    key = r1_hash64(key, data, head);
    return r1_hash64(key, data + size - tail, tail);
}

static uint64_t header_check(const struct lc_header *h) {
    return r1_hash64(0xcbf29ce484222325ull, h, offsetof(struct lc_header, check));
}

/* Map len bytes of fd at offset off (shared; writable or not) at a 2 MiB
 * boundary, or at `at` when given (replacing what is mapped there). */
static void *map_at(int fd, uint64_t off, size_t len, int writable, void *at) {
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    if (at) {
        void *p = mmap(at, len, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)off);
        return p == MAP_FAILED ? NULL : p;
    }
    /* reserve a huge page more, then map the file over the aligned part */
    uint8_t *r = mmap(NULL, len + HUGE_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)r + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (mmap(a, len, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)off) == MAP_FAILED) {
        munmap(r, len + HUGE_PAGE);
        return NULL;
    }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), mapped = (len + ps - 1) & ~(ps - 1);
    if (a > r) munmap(r, (size_t)(a - r));
    if (r + len + HUGE_PAGE > a + mapped) munmap(a + mapped, (size_t)(r + len + HUGE_PAGE - (a + mapped)));
#ifdef MADV_HUGEPAGE
    madvise(a, len, MADV_HUGEPAGE); /* where the file system gives large folios */
#endif
    return a;
}

int r1_layout_cache_dir(char *out, size_t cap, const char *opt) {
    if (!opt || !*opt || !strcmp(opt, "off")) return -1;
    if (strcmp(opt, "auto")) return snprintf(out, cap, "%s", opt) < (int)cap ? 0 : -1;
    const char *xdg = r1_env("XDG_CACHE_HOME"), *home = r1_env("HOME");
    int n;
    if (xdg && *xdg) n = snprintf(out, cap, "%s/r1infer/layouts", xdg);
    else if (home && *home) n = snprintf(out, cap, "%s/.cache/r1infer/layouts", home);
    else return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* mkdir -p dir (mode 0755); 0 when it exists after. */
static int make_dirs(const char *dir) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* One line on stderr about the cache: what happened and why. */
static void say(const struct r1_layout_cache *c, const char *fmt, const char *why) {
    fprintf(stderr, "r1infer: layout cache %s: ", c->path ? c->path : "");
    fprintf(stderr, fmt, why);
    fputc('\n', stderr);
}

/* Why the cache file fd (st: its status) cannot be used, or NULL. */
static const char *reject(const struct r1_layout_cache *c, int fd, const struct stat *st) {
    struct lc_header h;
    if ((size_t)st->st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return "too short to hold a header";
    if (memcmp(h.magic, LC_MAGIC, 8)) return "not a layout cache file";
    if (h.check != header_check(&h)) return "its header is damaged";
    if (h.version != LC_VERSION || h.header_bytes != sizeof h) return "written by another version of r1infer";
    if (h.data_off != LC_DATA_OFF || h.data_bytes != c->size) return "its layout differs from this model's";
    if ((uint64_t)st->st_size != h.data_off + h.data_bytes) return "truncated (or grown) since it was written";
    if (h.file_key != c->file_key) return "made from another version of the model file";
    if (h.plan_hash != c->plan_hash) return "its layout differs from this model's";
    return NULL;
}

/* Start writing a new cache file: a temporary file of the full size, its
 * arena mapped writable (at `at` when given). NULL when it cannot. */
static void *start_write(struct r1_layout_cache *c, void *at) {
    size_t n = strlen(c->path) + 32;
    c->tmp = malloc(n);
    if (!c->tmp) return NULL;
    /* with the lock held, a temporary file is one a killed process left */
    glob_t g;
    snprintf(c->tmp, n, "%s.tmp.*", c->path);
    if (glob(c->tmp, GLOB_NOSORT | GLOB_NOESCAPE, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
    globfree(&g);
    snprintf(c->tmp, n, "%s.tmp.%ld", c->path, (long)getpid());
    c->fd = open(c->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c->fd < 0) {
        say(c, "cannot be written (%s); converting in memory", strerror(errno));
        free(c->tmp), c->tmp = NULL;
        return NULL;
    }
    /* blocks reserved now: a full disk is an error here, not a SIGBUS later */
    int e = posix_fallocate(c->fd, (off_t)LC_DATA_OFF, (off_t)c->size);
    void *p = e ? NULL : map_at(c->fd, LC_DATA_OFF, c->size, 1, at);
    if (!p) {
        say(c, "cannot be written (%s); converting in memory", strerror(e ? e : errno));
        r1_layout_cache_close(c);
        return NULL;
    }
    c->state = R1_LC_WRITING;
    return p;
}

void *r1_layout_cache_open(struct r1_layout_cache *c, const char *dir, const char *model, uint64_t file_key,
                           uint64_t plan_hash, size_t size) {
    memset(c, 0, sizeof *c);
    c->fd = c->lock_fd = -1;
    c->file_key = file_key, c->plan_hash = plan_hash, c->size = size;
    char real[PATH_MAX], name[PATH_MAX];
    if (!realpath(model, real)) snprintf(real, sizeof real, "%s", model);
    const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    /* one file per model path and layout: a new version of the file replaces
     * the old cache, another kernel set's layout lives beside it */
    uint64_t id = r1_hash64(r1_hash64(0xcbf29ce484222325ull, real, strlen(real)), &plan_hash, 8);
    int n = snprintf(name, sizeof name, "%s/%.64s-%016llx.r1layout", dir, base, (unsigned long long)id);
    if (n < 0 || (size_t)n >= sizeof name || !(c->path = strdup(name))) return NULL;
    size_t len = strlen(real) < sizeof c->model ? strlen(real) : sizeof c->model - 1;
    memcpy(c->model, real, len);
    c->model[len] = 0;
    if (make_dirs(dir)) {
        say(c, "cannot be made (%s); converting in memory", strerror(errno));
        return NULL;
    }
    /* one process at a time checks or writes it: the next waits and maps */
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s.lock", c->path);
    c->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c->lock_fd >= 0) flock(c->lock_fd, LOCK_EX);
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return start_write(c, NULL);
    struct stat st;
    const char *why = fstat(fd, &st) ? strerror(errno) : reject(c, fd, &st);
    void *p = why ? NULL : map_at(fd, LC_DATA_OFF, size, 0, NULL);
    if (!why && !p) why = strerror(errno);
    if (why) {
        close(fd);
        say(c, "%s: rebuilding it", why);
        return start_write(c, NULL);
    }
    c->fd = fd;
    c->state = R1_LC_HIT;
    return p;
}

void *r1_layout_cache_rebuild(struct r1_layout_cache *c, void *at, const char *why) {
    say(c, "%s: rebuilding it", why);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = R1_LC_OFF;
    void *p = start_write(c, at);
    if (p) return p;
    p = mmap(at, c->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int r1_layout_cache_commit(struct r1_layout_cache *c, void *arena, int verbose) {
    if (c->state == R1_LC_HIT && verbose)
        fprintf(stderr, "r1infer: layout cache: mapped %s (%.2f GB, nothing converted)\n", c->path, c->size / 1e9);
    if (c->state != R1_LC_WRITING) return 0;
    struct lc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, LC_MAGIC, 8);
    h.version = LC_VERSION, h.header_bytes = sizeof h;
    h.file_key = c->file_key, h.plan_hash = c->plan_hash;
    h.data_off = LC_DATA_OFF, h.data_bytes = c->size;
    snprintf(h.model, sizeof h.model, "%s", c->model);
    h.check = header_check(&h);
    /* the arena is final: read-only from here, as a mapped cache is */
    mprotect(arena, c->size, PROT_READ);
    if (pwrite(c->fd, &h, sizeof h, 0) != (ssize_t)sizeof h || rename(c->tmp, c->path)) {
        say(c, "cannot be written (%s); this run uses it, the next converts again", strerror(errno));
        r1_layout_cache_close(c);
        return 0;
    }
    free(c->tmp), c->tmp = NULL;
    c->state = R1_LC_WRITTEN;
    if (verbose)
        fprintf(stderr, "r1infer: layout cache: wrote %s (%.2f GB); later loads map it\n", c->path, c->size / 1e9);
    return 0;
}

void r1_layout_cache_close(struct r1_layout_cache *c) {
    if (c->tmp) unlink(c->tmp); /* not committed: the mapping stays valid until unmapped */
    free(c->tmp), c->tmp = NULL;
    if (c->fd >= 0) close(c->fd);
    if (c->lock_fd >= 0) close(c->lock_fd); /* releases the lock */
    c->fd = c->lock_fd = -1;
    free(c->path), c->path = NULL;
    if (c->state == R1_LC_WRITING) c->state = R1_LC_OFF;
}
