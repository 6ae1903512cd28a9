/*
 * amx_tile.h - the AMX tile instructions the prefill blocks use
 * (amx_blocks.h): the tile configuration, loads, stores, zeroing and
 * TDPBF16PS. Compiled as it is they are the hardware's intrinsics; with
 * R1_AMX_EMU defined they are calls into a software model of the same
 * instructions (amx_emu.c), so that one kernel source runs, and is tested,
 * on every x86-64 CPU with AVX-512, AMX or not (the "avx512-amx-emu" kernel
 * set). The model keeps the tile registers per thread, checks every shape
 * rule the hardware faults on, and rounds as the SDM's pseudocode does.
 * Tile numbers must be constants (the intrinsics need them).
 */
#ifndef R1_CPU_X86_AMX_TILE_H
#define R1_CPU_X86_AMX_TILE_H

#include <stdint.h>

/* The 64-byte operand of LDTILECFG (palette 1: up to 8 tiles of at most
 * 16 rows of 64 bytes). */
struct r1_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* The software model (amx_emu.c), per thread. Each function is the
 * instruction of the same name; a configuration or shape the hardware
 * would refuse (#GP / #UD) stops the process with a message. */
void r1_amx_emu_loadconfig(const struct r1_amx_cfg *cfg);
void r1_amx_emu_zero(int t);
void r1_amx_emu_loadd(int t, const void *base, long stride);
void r1_amx_emu_stored(int t, void *base, long stride);
void r1_amx_emu_dpbf16ps(int dst, int a, int b);

#if defined(R1_AMX_EMU)
#define AMX_LOADCONFIG(cfg) r1_amx_emu_loadconfig(cfg)
#define AMX_ZERO(t) r1_amx_emu_zero(t)
#define AMX_LOADD(t, base, stride) r1_amx_emu_loadd(t, base, stride)
#define AMX_STORED(t, base, stride) r1_amx_emu_stored(t, base, stride)
#define AMX_DPBF16PS(dst, a, b) r1_amx_emu_dpbf16ps(dst, a, b)
#else
#define AMX_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOADD(t, base, stride) _tile_loadd(t, base, stride)
#define AMX_STORED(t, base, stride) _tile_stored(t, base, stride)
#define AMX_DPBF16PS(dst, a, b) _tile_dpbf16ps(dst, a, b)
#endif

#endif
