/*
 * tiles_dot.c - the q8-activation tiles of the "neon-dot" table (ARMv8.2
 * dotprod: sdot, arm/idot.h): the templates arm/q32_body.h and
 * arm/kq_body.h with every function under the dotprod target attribute,
 * never a global -march. AArch64 only; reached only after neon.c's HWCAP check.
 */
#include "kernels/cpu/arm/arm.h"

#if defined(__aarch64__)
#include <string.h>

#include "kernels/dtype.h"

#define ARM_DOT 1
#define ARM_TGT R1_ARM_DOT_TGT

#include "kernels/cpu/arm/idot.h" /* first: the templates below use it */

#include "kernels/cpu/arm/kq_body.h"
#include "kernels/cpu/arm/q32_body.h"

KQ_TILE(r1_arm_tile_q4_K_dot, F_Q4_K)
KQ_TILE(r1_arm_tile_q5_K_dot, F_Q5_K)
KQ_TILE(r1_arm_tile_q6_K_dot, F_Q6_K)
Q32_TILE(r1_arm_tile_q8_0_dot, F_Q8_0)
Q32_TILE(r1_arm_tile_q4_0_dot, F_Q4_0)
Q32_TILE(r1_arm_tile_q4_1_dot, F_Q4_1)
Q32_TILE(r1_arm_tile_q5_0_dot, F_Q5_0)
Q32_TILE(r1_arm_tile_q5_1_dot, F_Q5_1)
X8_TILE(r1_arm_tile_q4_0x8_dot)

#endif
