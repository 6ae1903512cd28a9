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
#define ARM_FN(name) name##_neon

#include "kernels/cpu/arm/idot.h" /* first: the templates below use it */

#include "kernels/cpu/arm/kq_body.h"
#include "kernels/cpu/arm/q32_body.h"

#endif
