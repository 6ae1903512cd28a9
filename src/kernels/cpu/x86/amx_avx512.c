/*
 * amx_avx512.c - the "avx512-amx" kernel set: amx_blocks.h on the hardware's
 * tile instructions (Sapphire Rapids and later, where Linux grants the tile
 * state).
 */
#include "kernels/cpu/x86/amx_blocks.h"
