/*
 * tiles_neon.c - the q8-activation tiles of the "neon" table (ARMv8.0:
 * smull/smlal, products summed in int16 lanes, arm/idot.h): the templates
 * arm/q32_body.h and arm/kq_body.h compiled without dotprod. AArch64 only.
 */
#include "kernels/cpu/arm/arm.h"

#if defined(__aarch64__)
#include <string.h>

#include "kernels/dtype.h"

#define ARM_DOT 0
#define ARM_TGT

#include "kernels/cpu/arm/idot.h" /* first: the templates below use it */

#include "kernels/cpu/arm/kq_body.h"
#include "kernels/cpu/arm/q32_body.h"

KQ_TILE(r1_arm_tile_q4_K_neon, F_Q4_K)
KQ_TILE(r1_arm_tile_q5_K_neon, F_Q5_K)
KQ_TILE(r1_arm_tile_q6_K_neon, F_Q6_K)
Q32_TILE(r1_arm_tile_q8_0_neon, F_Q8_0)
Q32_TILE(r1_arm_tile_q4_0_neon, F_Q4_0)
Q32_TILE(r1_arm_tile_q4_1_neon, F_Q4_1)
Q32_TILE(r1_arm_tile_q5_0_neon, F_Q5_0)
Q32_TILE(r1_arm_tile_q5_1_neon, F_Q5_1)
X8_TILE(r1_arm_tile_q4_0x8_neon)

#endif
