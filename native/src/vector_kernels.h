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
#define KZ_VECTOR_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("no-trapping-math")))
#elif defined(__GNUC__) && !defined(__clang__)
#define KZ_VECTOR_KERNEL __attribute__((optimize("no-trapping-math")))
#else
#define KZ_VECTOR_KERNEL
#endif

namespace kz {

// y[i] = ELU(x[i]) (alpha 1) for i in [0, n). expm1(x) for x <= 0 within 1 ulp (0.85 measured
// over [-8, 0] and down to -1e-30): x = m ln2 + r with |r| <= ln2/2, expm1(r) by its Taylor series
// to r^7/7! (the rest is below 2e-8 relative), expm1(x) = 2^m expm1(r) + (2^m - 1); below -20 it
// rounds to -1 anyway. (Written out in the loop: a helper call would not be inlined into the
// clones, whose options differ.)
KZ_VECTOR_KERNEL inline void elu(const float *__restrict x, float *__restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i], c = v < -20.0f ? -20.0f : v;
        const float m = (c * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(c / ln2): the 1.5 * 2^23 trick
        const float r = (c - m * 0.693359375f) + m * 2.12194440e-4f;     // Cephes' two-part ln2
        float p = 1.0f / 5040;
        p = p * r + 1.0f / 720;
        p = p * r + 1.0f / 120;
        p = p * r + 1.0f / 24;
        p = p * r + 1.0f / 6;
        p = p * r + 0.5f;
        const int32_t bits = ((int32_t)m + 127) << 23;
        float scale;
        std::memcpy(&scale, &bits, sizeof scale);
        const float e = scale * (r + r * r * p) + (scale - 1.0f);
        y[i] = v > 0.0f ? v : e;
    }
}

}  // namespace kz
