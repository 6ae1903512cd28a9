/*
 * util.h - small shared helpers: errors, half-precision conversion, timing,
 * checked arithmetic and file mapping. No model or kernel knowledge here.
 */
#ifndef R1_UTIL_H
#define R1_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Set the thread-local error message (printf-style); always returns -1 so
 * callers can write `return r1_err("...")`. */
int r1_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefix the current error with more context: "ctx: old message". */
int r1_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* items[0..n) as "a, b<last>c" into out (cap bytes, cut to fit), last " and "
 * or " or ": lists of choices in messages. */
void r1_join_words(char *out, size_t cap, const char *const *items, int n, const char *last);

/* Fatal internal error (a bug, not bad input): prints file:line and aborts.
 * Stays on in release builds. */
#define R1_ASSERT(x)                                                                                                   \
    do {                                                                                                               \
        if (!(x)) r1_fatal(__FILE__, __LINE__, #x);                                                                    \
    } while (0)
_Noreturn void r1_fatal(const char *file, int line, const char *what);

/* ---- half precision (IEEE f16 and bfloat16), round to nearest even ---- */
static inline float r1_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t r1_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float r1_f16_to_f32(uint16_t h);
uint16_t r1_f32_to_f16(float f);

/* ---- checked arithmetic: return 0 on overflow ---- */
static inline int r1_mul_ok(size_t a, size_t b, size_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int r1_add_ok(size_t a, size_t b, size_t *r) { return !__builtin_add_overflow(a, b, r); }

/* ---- test and benchmark data ---- */
/* Roughly N(0, 1): the sum of 4 uniforms of the xorshift64 generator *state
 * (any nonzero seed), scaled to unit variance. Same seed, same stream. */
float r1_frand_normal(uint64_t *state);

/* ---- logits ---- */
/* The index of the largest of x[0..n) (n >= 1), the lowest on ties; NaNs
 * are passed over (and x[0] NaN gives 0). For the greedy picks on the host:
 * 16 running maxima then one scan for the first equal, ~20x faster than a
 * loop whose every compare waits on the last (a 152k vocab: ~0.25 ms). */
int r1_argmax(const float *x, int n);

/* ---- time ---- */
double r1_now(void); /* seconds, monotonic */

/* ---- memory ---- */
/* 64-byte aligned, zeroed allocation; on failure sets an error that says how
 * many bytes were needed and returns NULL. Free with free(). */
void *r1_alloc(size_t bytes, const char *what);
/* As r1_alloc, but the memory is not written: its contents are undefined
 * and, for a big buffer, its pages are committed only as they are first
 * written (a KV cache sized for the model's whole context costs memory as
 * the conversation grows). Free with free(). */
void *r1_alloc_untouched(size_t bytes, const char *what);

/* ---- files ---- */
struct r1_file {
    const uint8_t *data;
    size_t size;
    int fd;
    int anon; /* read into private pages (r1_file_read_private), not mapped */
};
/* mmap a whole file read-only; returns -1 with an error naming the path. */
int r1_file_map(struct r1_file *f, const char *path);
void r1_file_unmap(struct r1_file *f);
/* Read a whole (small) file into a NUL-terminated malloc'ed buffer. */
char *r1_file_read(const char *path, size_t *len);
int r1_path_is_dir(const char *path);
/* dir + "/" + name, malloc'ed. */
char *r1_path_join(const char *dir, const char *name);

/* ---- the memory a model lives in (mem.c) ---- */
/* Zeroed anonymous pages, huge pages asked for when large; untouched pages
 * take no memory. NULL with an error naming `what` and the size. Free with
 * r1_pages_free(p, bytes). */
void *r1_pages_alloc(size_t bytes, const char *what);
void r1_pages_free(void *p, size_t bytes);
/* Read a whole file into private pages (no mapping of the file stays):
 * f->anon = 1; release with r1_file_unmap. -1 with an error naming path. */
int r1_file_read_private(struct r1_file *f, const char *path);
/* Give back the whole pages inside [p, p + bytes) of a read-only file
 * mapping or of private pages no longer needed (MADV_DONTNEED): a file
 * mapping reads them again from the file if touched, private pages read
 * as zeros. Drops them from this process's resident memory. */
void r1_mem_release(const void *p, size_t bytes);
/* Lock [p, p + bytes) in memory (mlock, faulting it in); -1 with an error
 * that names the size and the locked-memory limit. */
int r1_mem_lock(const void *p, size_t bytes);
/* Bytes this process can still be given: MemAvailable + SwapFree, bounded by
 * the cgroup's memory.max and by RLIMIT_AS; UINT64_MAX when unknown. */
uint64_t r1_mem_available(void);

/* Number of physical cores (at least 1). */
int r1_physical_cores(void);

#endif
