/*
 * arm.h - what the AArch64 files of the cpu backend share: the q8-activation
 * tiles (r1_cpu_tile_fn, cpu.h) that the "neon" and "neon-dot" tables of
 * neon.c point at, and the target attribute of the dotprod code. AArch64
 * only; a *_dot function may run only after neon.c's HWCAP check.
 *
 *   arm/tiles_neon.c  the tiles for ARMv8.0 (smull/smlal, int16 sums)
 *   arm/tiles_dot.c   the tiles for ARMv8.2 dotprod (sdot)
 * Both compile the same two templates, arm/q32_body.h (the 32-weight block
 * formats q8_0, q4_0, q4_1, q5_0, q5_1, and q4_0x8) and arm/kq_body.h
 * (q4_K, q5_K, q6_K), on top of arm/idot.h (the integer dot products of
 * one step).
 *
 * Every tile takes any nr <= 4, nt <= 4 and the column ranges of kquants.h:
 * k0 % 64 == 0, k1 % 64 == 0 or k1 == K (K % 32 == 0 for the 32-weight
 * formats, whose last range may end half-way through a 64-column chunk).
 */
#ifndef R1_CPU_ARM_H
#define R1_CPU_ARM_H

#include "kernels/cpu/kquants.h"

#if defined(__aarch64__)

/* The attribute of every function that may execute sdot (clang spells the
 * feature alone; clang before 16 also lacks vdotq_s32 there: arm/idot.h). */
#if defined(__clang__)
#define R1_ARM_DOT_TGT __attribute__((target("dotprod")))
#else
#define R1_ARM_DOT_TGT __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

/* The tiles of the "neon" table (arm/tiles_neon.c) */
void r1_arm_tile_q8_0_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_0_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_1_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_0_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_1_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_K_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_K_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q6_K_neon(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_0x8_neon(R1_KQ_TILE_ARGS); /* q8x8 activations, k0, k1 % 256 == 0 */
/* The tiles of the "neon-dot" table (arm/tiles_dot.c) */
void r1_arm_tile_q8_0_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_0_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_1_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_0_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_1_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_K_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q5_K_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q6_K_dot(R1_KQ_TILE_ARGS);
void r1_arm_tile_q4_0x8_dot(R1_KQ_TILE_ARGS); /* q8x8 activations, k0, k1 % 256 == 0 */

#endif /* __aarch64__ */

#endif
