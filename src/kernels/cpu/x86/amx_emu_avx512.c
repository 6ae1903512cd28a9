/*
 * amx_emu_avx512.c - the "avx512-amx-emu" kernel set: amx_blocks.h, the same
 * source as "avx512-amx", on amx_emu.c's software model of the tile
 * instructions, so the AMX blocks run and are tested on any CPU with
 * AVX-512 and AVX512_BF16. Slow; never the default (cpu.h emulated).
 */
#define R1_AMX_EMU 1
#include "kernels/cpu/x86/amx_blocks.h"
