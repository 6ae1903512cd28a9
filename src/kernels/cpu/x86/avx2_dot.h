/*
 * avx2_dot.h - the 4-byte integer dot product every AVX2 quantized tile is
 * built on, in three encodings chosen by a compile-time V:
 *   V = 0  AVX2:        vpmaddubsw + vpmaddwd (the pairs' int16 sums never
 *                        saturate here: |u| <= 63, |s| <= 127)
 *   V = 1  AVX-VNNI:    {vex} vpdpbusd (Alder Lake and later, Zen 5)
 *   V = 2  AVX512-VNNI: {evex} vpdpbusd on ymm registers (Ice Lake, Zen 4)
 * One tile body thus serves the avx2 and avx2-vnni tables. The VNNI forms are
 * inline asm: an intrinsic needs its ISA in the target of the function it is
 * inlined into, so a shared always_inline body could not use it, and the
 * tiles stay plain AVX2 code for the compiler (16 ymm registers, no EVEX).
 * Callers check the CPU before running V = 1 or 2. Also the helpers more
 * than one tile file shares (the q4_K scales, q6_Kx8's quants, the q8x8
 * lane sums, a horizontal sum). x86-64 only.
 */
#ifndef R1_CPU_X86_AVX2_DOT_H
#define R1_CPU_X86_AVX2_DOT_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define R1_AVX2_TGT "avx2,fma,f16c"
#define R1_AVX2_INL static inline __attribute__((always_inline, target(R1_AVX2_TGT)))

/* acc + (per 32-bit lane) the sum of the 4 products u (unsigned bytes) x s (signed bytes) */
R1_AVX2_INL __m256i r1_avx2_dot4(const int V, __m256i acc, __m256i u, __m256i s) {
    if (V == 1) {
        __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
        return acc;
    }
    if (V == 2) {
        __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
        return acc;
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
/* the same from zero */
R1_AVX2_INL __m256i r1_avx2_dotz(const int V, __m256i u, __m256i s) {
    if (V == 0) return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    return r1_avx2_dot4(V, _mm256_setzero_si256(), u, s);
}
/* u1 x s1 + u2 x s2 from zero, where each pair sum of both fits int16
 * (|u| <= 63: 2 x 2 x 63 x 127 < 32768): one vpmaddwd for both on AVX2 */
R1_AVX2_INL __m256i r1_avx2_dotz2(const int V, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    if (V == 0)
        return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),
                                 _mm256_set1_epi16(1));
    return r1_avx2_dot4(V, r1_avx2_dotz(V, u1, s1), u2, s2);
}

/* Two-part activations folded in int32 (cpu.h r1_cpu_set_act_parts: the lo
 * part's scale is the hi part's / 256): per 32-bit lane (u1 x s1 << 8) +
 * u2 x s2, from zero; u1 x s1 is the hi part's dot, u2 x s2 the lo part's
 * (the same weights u1 == u2, but for q8_0's sign trick). Bounds: u <= 127
 * (4- to 6-bit quants, q8_0's |x|), so a lane's 4 products are below 2^16,
 * << 8 below 2^24 (exact as float too); on AVX2 the int16 pair sums fit
 * (2 x 127 x 127 < 2^15) and vpmaddwd by 256 instead of 1 does the shift. */
R1_AVX2_INL __m256i r1_avx2_dotz_pair(const int V, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    if (V == 0)
        return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_set1_epi16(256)),
                                _mm256_madd_epi16(_mm256_maddubs_epi16(u2, s2), _mm256_set1_epi16(1)));
    return r1_avx2_dot4(V, _mm256_slli_epi32(r1_avx2_dotz(V, u1, s1), 8), u2, s2);
}

/* q4_K/q5_K super-block scales (also the first 16 bytes of q4_Kx8's,
 * dtype.h): lanes s < 8 of *sc d sc[s], of *mn dmin m[s]. The 12 bytes at
 * blk + 4 hold dwords a, b, c: sc[0..3] = a & 63, m[0..3] = b & 63, sc[4..7]
 * = (c & 15) | (a >> 6) << 4, m[4..7] = (c >> 4) | (b >> 6) << 4 (per byte). */
R1_AVX2_INL void r1_avx2_kq_scales(const uint8_t *blk, __m256 *sc, __m256 *mn) {
    __m128i v = _mm_loadu_si128((const __m128i *)(blk + 4));
    __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3f));
    __m128i t = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));
    __m128i u = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa), _mm_setr_epi32(0, 4, 0, 0));
    __m128i hi = _mm_or_si128(t, _mm_and_si128(u, _mm_set1_epi8(0x0f)));
    __m128i sm = _mm_unpacklo_epi32(lo, hi); /* sc[0..7], m[0..7] */
    int32_t dm;
    memcpy(&dm, blk, 4);
    __m256 dd = _mm256_cvtph_ps(_mm_set1_epi32(dm)); /* d, dmin, d, dmin, ... */
    *sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)), _mm256_permute_ps(dd, 0x00));
    *mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm))),
                        _mm256_permute_ps(dd, 0x55));
}

/* q6_Kx8 (dtype.h): vector m (0..7) of a super-block's quants at bp, as
 * bytes 0..63 in the q8x8 activations' order (cpu.h: lane b holds quants 4m
 * .. 4m + 3 of group b): the nibble of qs[32 (m % 4)] (high for m >= 4) and
 * the bits 2 (m / 2), 2 (m / 2) + 1 of h6[32 (m % 2)] above it. */
R1_AVX2_INL __m256i r1_avx2_q6x8_quants(const uint8_t *bp, const int m) {
    const int sh = 2 * (m / 2);
    __m256i q = _mm256_loadu_si256((const __m256i *)(bp + 32 * (m % 4)));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(bp + 128 + 32 * (m % 2)));
    q = m >= 4 ? _mm256_srli_epi16(q, 4) : q;
    hb = sh < 4 ? _mm256_slli_epi16(hb, 4 - sh) : sh > 4 ? _mm256_srli_epi16(hb, sh - 4) : hb;
    return _mm256_or_si256(_mm256_and_si256(q, _mm256_set1_epi8(0x0f)), _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
}

/* The q8x8 activations' lane sums (cpu.h: nx, -8 x the sum of a lane's
 * bytes) of a super-block at xp, one int32 per 32-column block */
R1_AVX2_INL __m256i r1_avx2_q8x8_nx(const uint8_t *xp) {
    return _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(xp + 256)),
                            _mm256_loadu_si256((const __m256i *)(xp + 288)));
}

R1_AVX2_INL float r1_avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
