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
#define ARM_FN(name) name##_dot

#include "kernels/cpu/arm/idot.h" /* first: the templates below use it */

#include "kernels/cpu/arm/kq_body.h"
#include "kernels/cpu/arm/q32_body.h"

#endif
