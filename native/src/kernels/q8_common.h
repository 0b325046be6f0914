// What libkazetts' Q8_0 kernels share (q8_matvec: the code predictor's; talker_backend and
// talker_gemm: the talker's): ggml's block layout, the offset that VNNI's unsigned x signed
// product needs, ggml's horizontal sum of 8 lanes, and the instruction sets their x86 and ARM code is
// compiled for (q8::supports checks the same ones).
#pragma once

#include "ggml.h"

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#define KZ_Q8_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c")))
#define KZ_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#elif defined(__aarch64__)
#include <arm_neon.h>
// compiled for these extensions, run only where the CPU has them (q8::supports); GCC 12 inlines
// the extensions' intrinsics only into functions of an arch= target
#define KZ_Q8_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define KZ_Q8_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

namespace kz::q8 {

constexpr int QK = 32;  // values per Q8_0 block

struct BlockQ8 {  // ggml's block_q8_0
    ggml_fp16_t d;
    int8_t qs[QK];
};
static_assert(sizeof(BlockQ8) == 34, "block_q8_0 layout");

// The kernels multiply weights offset by +128 (unsigned) by the column's quants (signed): one
// VNNI lane sums 4 such products, and starting it from -128 * (those 4 quants' sum) leaves
// exactly the sum ggml's kernel takes.
inline int32_t lane_offset(const int8_t *q) { return -128 * (q[0] + q[1] + q[2] + q[3]); }

// ggml's hsum_float_8 of the lanes l[0], l[step], .., l[7 * step]:
// ((l4 + l0) + (l6 + l2)) + ((l5 + l1) + (l7 + l3))
inline float hsum8(const float *l, int step = 1) {
    const float r0 = l[4 * step] + l[0], r1 = l[5 * step] + l[step], r2 = l[6 * step] + l[2 * step],
                r3 = l[7 * step] + l[3 * step];
    return (r0 + r2) + (r1 + r3);
}

#if defined(__x86_64__)
// the same sum of a register's 8 lanes
KZ_Q8_AVX2 inline float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}
#endif

}  // namespace kz::q8
