// Element-wise float kernels written for the compiler to vectorize (no libm calls, no branches),
// for the activations ggml computes with a scalar libm call per element. Internal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

// GCC if-converts a loop's selects only when FP ops may not trap; on x86-64, whose build targets
// the baseline (SSE2), a kernel also gets AVX2 and AVX-512 clones, the loader picking the one
// the CPU runs (ifunc). The clones are ISA levels (x86-64-v3: AVX2 + FMA, v4: AVX-512), which
// the loader picks by the CPU's features: a named CPU model (arch=skylake-avx512, haswell) is
// picked only on that very model, so any other CPU, or a VM reporting a generic one, ran the
// scalar default. Clang vectorizes these loops as they are.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define KZ_VECTOR_KERNEL \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("no-trapping-math")))
#elif defined(__GNUC__) && !defined(__clang__)
#define KZ_VECTOR_KERNEL __attribute__((optimize("no-trapping-math")))
#else
#define KZ_VECTOR_KERNEL
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define KZ_INLINE_KERNEL inline __attribute__((always_inline, optimize("no-trapping-math")))
#else
#define KZ_INLINE_KERNEL inline __attribute__((always_inline))
#endif

namespace kz {

// expm1(r) of e^c = 2^m e^r for c in [-20, 0], c = m ln2 + r with |r| <= ln2/2; sets `scale` to
// 2^m. expm1(r) by its Taylor series to r^7/7! (the rest is below 2e-8 relative). Inlined into
// every clone of its callers (a call would cost more than the kernel).
KZ_INLINE_KERNEL float expm1_split(float c, float &scale) {
    const float m = (c * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(c / ln2): the 1.5 * 2^23 trick
    const float r = (c - m * 0.693359375f) + m * 2.12194440e-4f;    // Cephes' two-part ln2
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    const int32_t bits = ((int32_t)m + 127) << 23;
    std::memcpy(&scale, &bits, sizeof scale);
    return r + r * r * p;
}

// y[i] = ELU(x[i]) (alpha 1) for i in [0, n). expm1(x) for x <= 0 within 1 ulp (0.85 measured
// over [-8, 0] and down to -1e-30): expm1(x) = 2^m expm1(r) + (2^m - 1); below -20 it rounds to
// -1 anyway.
KZ_VECTOR_KERNEL inline void elu(const float *__restrict x, float *__restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        float scale;
        const float t = expm1_split(v < -20.0f ? -20.0f : v, scale);
        const float e = scale * t + (scale - 1.0f);
        y[i] = v > 0.0f ? v : e;
    }
}

// y[i] = GELU(x[i]) = x/2 (1 + erf(x / sqrt 2)) for i in [0, n), the exact (erf) form, within 2 ulp
// of libm's erff in erf (measured on 2e7 random and 1e6 evenly spaced values in [-6, 6]): |z| < 1:
// erf z = z P(z^2), P of degree 7; 1 <= |z| < 4: erf z = 1 - e^-z^2 Q(|z| - 2.5), Q of degree 14
// (both least-squares fits on Chebyshev nodes in double, relative error 4e-11 and 2e-10), e^-z^2
// by expm1_split; |z| >= 4: 1 (erff rounds to 1 from 3.92).
KZ_VECTOR_KERNEL inline void gelu_erf(const float *__restrict x, float *__restrict y, int64_t n) {
    constexpr float A[8] = {-9.728331024e-06f, 1.128815068e-04f, -8.487264855e-04f, 5.221261332e-03f,
                            -2.686551740e-02f, 1.128378411e-01f, -3.761263859e-01f, 1.128379167e+00f};
    constexpr float B[15] = {6.210548242e-09f, -2.599051409e-08f, 5.760049694e-08f, -2.368783116e-07f,
                             1.104178339e-06f, -4.278963518e-06f, 1.594133882e-05f, -5.880791200e-05f,
                             2.110317783e-04f, -7.336202797e-04f, 2.467033412e-03f, -8.001563194e-03f,
                             2.493799745e-02f, -7.434734717e-02f, 2.108063641e-01f};
    for (int64_t i = 0; i < n; i++) {
        const float z = x[i] * 0.70710678118654752f, a = z < 0.0f ? -z : z, s = a * a;
        float p = A[0];
        for (int k = 1; k < 7; k++) p = p * s + A[k];
        const float small = a * A[7] + a * s * p;
        const float u = (a < 4.0f ? a : 4.0f) - 2.5f;
        float q = B[0];
        for (int k = 1; k < 15; k++) q = q * u + B[k];
        float scale;
        const float t = expm1_split(-(s < 16.0f ? s : 16.0f), scale), e = scale * t + scale;  // e^-s
        const float large = 1.0f - e * q;
        const float erf_a = a < 1.0f ? small : a < 4.0f ? large : 1.0f;
        y[i] = 0.5f * x[i] * (1.0f + (z < 0.0f ? -erf_a : erf_a));
    }
}

}  // namespace kz
