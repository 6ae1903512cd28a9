/*
 * qemu_insn_count.c - a qemu-user TCG plugin that counts the guest
 * instructions a program executes and prints "insns N" to stderr at exit.
 * Used by scripts/arm-count.sh: under qemu, time means nothing, but the
 * instructions a tile executes per weight are a fair proxy for its cost on
 * an in-order or narrow core. Written against the plugin ABI of qemu 7.2
 * (version 1); the few declarations it needs are repeated here, so no qemu
 * headers are required. Built with the host compiler: cc -shared -fPIC.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct {
        int min, cur;
    } version;
    int system_emulation;
} qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, enum qemu_plugin_op, void *, uint64_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;
EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);

static uint64_t count; /* one vcpu: the programs counted are single-threaded */

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count, qemu_plugin_tb_n_insns(tb));
}
static void on_done(qemu_plugin_id_t id, void *p) {
    (void)id, (void)p;
    fprintf(stderr, "insns %" PRIu64 "\n", count);
}

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info, (void)argc, (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_done, NULL);
    return 0;
}
