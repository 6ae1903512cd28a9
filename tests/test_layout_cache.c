/*
 * test_layout_cache.c - the layout cache (r1_load_opts.layout_cache): the
 * first load writes the converted arena to a file, a second load maps it
 * (nothing converted) and both give the logits and arena bytes of a load
 * without the cache, byte for byte; two processes mapping it share its
 * pages (/proc/self/smaps); a cache with a damaged header, a truncated one,
 * one made from another file of the same name and one whose contents were
 * changed are each reported in one line and rebuilt. The model is a small
 * q4_K GGUF written here by the synthetic writer.
 */
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "model/model.h"
#include "synth/synth.h"
#include "r1infer.h"
#include "test.h"

static struct r1_config cfg;

static int write_model(const char *path, uint64_t seed) {
    if (r1_synth_config("tiny", &cfg)) return -1;
    cfg.dim = 256, cfg.ffn = 512, cfg.vocab = 1024, cfg.n_layer = 2;
    cfg.n_head = 4, cfg.n_kv_head = 2, cfg.head_dim = 64, cfg.tied = 0;
    return r1_synth_write_gguf(path, &cfg, R1_DTYPE_Q4_K, seed, NULL, 0);
}

/* The last token's logits after a short prompt (malloc'ed), NULL on error. */
static float *logits(struct r1_model *m) {
    struct r1_session_opts so = {.n_ctx = 16, .backend = "cpu", .n_threads = 1, .kv_dtype = R1_DTYPE_F32};
    r1_session_t *s = m ? r1_session_new(m, &so) : NULL;
    const int32_t ids[4] = {1, 7, 300, 42};
    const float *l = s ? r1_session_forward(s, ids, 4, NULL) : NULL;
    float *out = l ? malloc((size_t)cfg.vocab * sizeof *out) : NULL;
    if (out) memcpy(out, l, (size_t)cfg.vocab * sizeof *out);
    r1_session_free(s);
    return out;
}

/* Load path with the cache under dir, stderr into errfile. */
static struct r1_model *load(const char *path, const char *dir, const char *errfile) {
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO, .layout_cache = dir};
    fflush(stderr);
    int saved = dup(2), fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    struct r1_model *m = r1_model_load(path, &lo);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return m;
}

/* Whether the text of file contains s. */
static int says(const char *file, const char *s) {
    size_t n = 0;
    char *t = r1_file_read(file, &n);
    int r = t && strstr(t, s);
    free(t);
    return r;
}

/* The path of the mapping holding p, or "" (out). */
static const char *mapping_of(const void *p, char *out, size_t cap) {
    FILE *fp = fopen("/proc/self/maps", "r");
    char line[4096];
    out[0] = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) < 2) continue;
        if ((uintptr_t)p < lo || (uintptr_t)p >= hi) continue;
        snprintf(out, cap, "%s", line + off);
        out[strcspn(out, "\n")] = 0;
    }
    if (fp) fclose(fp);
    return out;
}

/* Rss, Pss and the shared part of Rss (kB) of the mapping holding p, from
 * /proc/self/smaps: Shared_Clean + Shared_Dirty (pages not yet written back
 * are dirty in the page cache, and shared all the same). */
static void smaps_of(const void *p, long *rss, long *pss, long *shared) {
    FILE *fp = fopen("/proc/self/smaps", "r");
    char line[4096];
    int in = 0;
    long clean = 0, dirty = 0;
    *rss = *pss = -1;
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in) {
            sscanf(line, "Rss: %ld", rss), sscanf(line, "Pss: %ld", pss);
            sscanf(line, "Shared_Clean: %ld", &clean), sscanf(line, "Shared_Dirty: %ld", &dirty);
        }
    }
    *shared = clean + dirty;
    if (fp) fclose(fp);
}

/* Read every page of the arena (a checksum, so the reads stay). */
static unsigned touch(const struct r1_model *m) {
    unsigned s = 0;
    for (size_t i = 0; i < m->arena_size; i += 512) s += ((const uint8_t *)m->arena)[i];
    return s;
}

/* The cache file in dir (out), "" when none. */
static const char *cache_file(const char *dir, char *out, size_t cap) {
    char pat[512];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*.r1layout", dir);
    out[0] = 0;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1) snprintf(out, cap, "%s", g.gl_pathv[0]);
    globfree(&g);
    return out;
}

#define SHARED_MIN 0.90 /* of the arena's resident pages, shared with the other process */

/* Load through a cache damaged by `damage`; it must be reported (saying
 * `why`) and rebuilt, giving the logits `want`. */
static void rebuilt(const char *what, const char *model, const char *dir, const char *err, const char *why,
                    const float *want) {
    struct r1_model *m = load(model, dir, err);
    CHECK(m && m->layout_cache == R1_LC_WRITTEN, "%s: the cache is not rebuilt (state %d): %s", what,
          m ? m->layout_cache : -1, m ? "" : r1_last_error());
    CHECK(says(err, why) && says(err, "rebuilding"), "%s: stderr does not say '%s ... rebuilding'", what, why);
    float *l = logits(m);
    CHECK(l && want && !memcmp(l, want, (size_t)cfg.vocab * sizeof *l), "%s: logits differ after the rebuild", what);
    free(l);
    r1_model_free(m);
}

int main(void) {
    char dir[] = "/tmp/r1_test_layout_cache_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char model[128], cache[128], err[128], file[512], mapped[4096];
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    CHECK(write_model(model, 1) == 0, "writing %s: %s", model, r1_last_error());

    /* the reference: no cache */
    struct r1_model *plain = load(model, NULL, err);
    CHECK(plain && plain->layout_cache == R1_LC_OFF, "load without a cache: %s", r1_last_error());
    float *want = logits(plain);
    CHECK(want != NULL, "logits: %s", r1_last_error());
    CHECK(plain && plain->arena_size > 0 && plain->lm_head.dtype == r1_cpu_layout(R1_DTYPE_Q4_K, cfg.dim),
          "the lm_head is not in the cpu kernels' layout");

    /* first load writes the cache, the second maps it; same bytes */
    for (int round = 0; round < 2; round++) {
        const int state = round ? R1_LC_HIT : R1_LC_WRITTEN;
        struct r1_model *m = load(model, cache, err);
        CHECK(m && m->layout_cache == state, "load %d: state %d, expected %d", round + 1, m ? m->layout_cache : -1,
              state);
        cache_file(cache, file, sizeof file);
        CHECK(*file && m && !strcmp(mapping_of(m->arena, mapped, sizeof mapped), file),
              "load %d: the arena is not mapped from the cache file '%s' (it is in '%s')", round + 1, file, mapped);
        CHECK(m && plain && m->arena_size == plain->arena_size && !memcmp(m->arena, plain->arena, m->arena_size),
              "load %d: the arena's bytes differ from a load without the cache", round + 1);
        float *l = logits(m);
        CHECK(l && want && !memcmp(l, want, (size_t)cfg.vocab * sizeof *l), "load %d: logits differ", round + 1);
        free(l);
        r1_model_free(m);
    }
    CHECK(!says(err, "rebuilding"), "a hit reports a rebuild");

    /* two processes share the mapped cache's pages */
    int up[2], down[2];
    if (pipe(up) || pipe(down)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        struct r1_model *m = load(model, cache, "/dev/null");
        char c = m && m->layout_cache == R1_LC_HIT ? (char)('0' + touch(m) % 2) : 'x';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1) _exit(1);
        _exit(0);
    }
    struct r1_model *m = load(model, cache, err);
    unsigned sum = m ? touch(m) : 0;
    char c = 0, go = 'g';
    CHECK(read(up[0], &c, 1) == 1 && c != 'x', "the second process could not map the cache");
    long rss = 0, pss = 0, shared = 0;
    if (m) smaps_of(m->arena, &rss, &pss, &shared);
    CHECK(m && rss > 0 && (double)rss * 1024 >= 0.9 * (double)m->arena_size,
          "the arena is not resident after reading it: Rss %ld kB of %zu kB", rss, m ? m->arena_size / 1024 : 0);
    CHECK(shared >= SHARED_MIN * (double)rss, "shared %ld kB of Rss %ld kB (want >= %.0f%%)", shared, rss,
          SHARED_MIN * 100);
    CHECK(pss <= 0.55 * (double)rss, "Pss %ld kB of Rss %ld kB: the pages are not split between two processes", pss,
          rss);
    printf("two processes: the arena's mapping Rss %ld kB, shared %ld kB (%.1f%%), Pss %ld kB (checksum %u)\n", rss,
           shared, rss > 0 ? 100.0 * (double)shared / (double)rss : 0, pss, sum % 2);
    if (write(down[1], &go, 1) != 1) return 1;
    int status = 1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the second process failed");
    r1_model_free(m);

    /* a damaged header */
    int fd = open(file, O_RDWR);
    uint8_t b = 0;
    if (fd >= 0 && pread(fd, &b, 1, 24) == 1) b ^= 0x10, (void)!pwrite(fd, &b, 1, 24);
    close(fd);
    rebuilt("a flipped header byte", model, cache, err, "damaged", want);
    /* a truncated file */
    struct stat st;
    if (stat(file, &st) || truncate(file, st.st_size - 4096)) return 1;
    rebuilt("a truncated file", model, cache, err, "truncated", want);
    /* the arena's first bytes changed, the header intact */
    fd = open(file, O_RDWR);
    if (fd >= 0 && pread(fd, &b, 1, 2 << 20) == 1) b ^= 0x01, (void)!pwrite(fd, &b, 1, 2 << 20);
    close(fd);
    rebuilt("a changed arena", model, cache, err, "differs from the model", want);
    /* another model file under the same name */
    r1_model_free(plain);
    CHECK(write_model(model, 2) == 0, "writing %s again: %s", model, r1_last_error());
    plain = load(model, NULL, err);
    float *want2 = logits(plain);
    CHECK(want2 && want && memcmp(want2, want, (size_t)cfg.vocab * sizeof *want), "the two models' logits are equal");
    rebuilt("another file of the same name", model, cache, err, "another version of the model file", want2);
    /* --no-mmap leaves the cache alone */
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO, .layout_cache = cache, .no_mmap = 1};
    m = r1_model_load(model, &lo);
    CHECK(m && m->layout_cache == R1_LC_OFF, "--no-mmap used the layout cache");
    r1_model_free(m);
    r1_model_free(plain);
    free(want);
    free(want2);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return TEST_DONE("test_layout_cache");
}
