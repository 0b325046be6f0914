// conv_gemm_op (see conv_gemm.h): register tiles of RB blocks of kPackRows output channels by
// kGemmCols output steps, over spans of steps that keep their inputs and sums in L2.
#include "conv_gemm.h"

#include "ggml-cpu.h"

#include <cstring>

namespace kz {
namespace {

typedef float vrow __attribute__((vector_size(kPackRows * sizeof(float))));
constexpr int kGemmCols = 6;                   // output columns a kernel call keeps in registers
constexpr int kGemmDepth = 256;                // input channels of one tap done (and F16 widened, reused over T) at once
constexpr int64_t kGemmSpan = 42 * kGemmCols;  // columns done over all taps before the next (inputs and sums stay in L2)
alignas(64) const float kZeros[kGemmDepth] = {};

// out[r][n] (RB blocks of rows, NC columns) = (first ? bias : out) + sum over i < depth of w[r][i] * cols[n][i],
// w[r] at w + r * wstride. Every row sums in the same order whatever RB and NC.
template <int NC, int RB>
inline __attribute__((always_inline)) void gemm_tile(const float *w, int64_t wstride, const float *const *cols, int64_t depth,
                                                     float *const (*out)[kGemmCols], bool first, const float *const *bias) {
    vrow acc[RB][NC];
    for (int r = 0; r < RB; r++)
        for (int n = 0; n < NC; n++) __builtin_memcpy(&acc[r][n], first ? bias[r] : out[r][n], sizeof(vrow));
    for (int64_t i = 0; i < depth; i++) {
        vrow wv[RB];
        for (int r = 0; r < RB; r++) __builtin_memcpy(&wv[r], w + r * wstride + i * kPackRows, sizeof(vrow));
        for (int n = 0; n < NC; n++) {
            const float xv = cols[n][i];
            for (int r = 0; r < RB; r++) acc[r][n] += wv[r] * xv;
        }
    }
    for (int r = 0; r < RB; r++)
        for (int n = 0; n < NC; n++) __builtin_memcpy(out[r][n], &acc[r][n], sizeof(vrow));
}

template <int RB>
inline __attribute__((always_inline)) void gemm_cols(int nc, const float *w, int64_t wstride, const float *const *cols, int64_t depth,
                                                     float *const (*out)[kGemmCols], bool first, const float *const *bias) {
    switch (nc) {
        case 1: gemm_tile<1, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 2: gemm_tile<2, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 3: gemm_tile<3, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 4: gemm_tile<4, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 5: gemm_tile<5, RB>(w, wstride, cols, depth, out, first, bias); break;
        default: gemm_tile<kGemmCols, RB>(w, wstride, cols, depth, out, first, bias); break;
    }
}

// Input channels c0.. of the step that output step t's tap j reads (see ConvShape), or zeros.
inline const float *column(const ConvShape &c, const ggml_tensor *x, const ggml_tensor *prev, int64_t t, int j, int64_t c0) {
    const int64_t steps = x->ne[1];
    int64_t col = t * c.stride + (int64_t)j * c.dil - c.pad_left;
    if (col < 0 || col >= steps) {
        if (c.edge == ConvShape::kZeros) return kZeros;
        if (c.edge == ConvShape::kContext) {
            if (col >= 0) return kZeros;
            return (const float *)((const char *)prev->data + (c.pad_left + col) * prev->nb[1]) + c0;
        }
        col = std::min<int64_t>(std::max<int64_t>(col, 0), steps - 1);
    }
    return (const float *)((const char *)x->data + col * x->nb[1]) + c0;
}

// RB blocks of rows at a time where the registers allow (the rest one by one)
template <int RB>
inline __attribute__((always_inline)) void conv_gemm(ggml_tensor *dst, int ith, int nth, void *userdata) {
    const ConvShape &c = *static_cast<const ConvShape *>(userdata);
    const ggml_tensor *x = dst->src[0], *w = dst->src[1];
    const float *bias = dst->src[2] ? (const float *)dst->src[2]->data : nullptr;
    const ggml_tensor *prev = dst->src[3];
    const int64_t T = dst->ne[1], K = (int64_t)c.cin * c.k, ds = dst->nb[1] / sizeof(float);
    const int64_t blocks = w->ne[1], full = c.cout / kPackRows;  // blocks, and those without padded rows
    int64_t b0, b1;
    thread_rows(blocks, ith, nth, b0, b1);
    if (b0 >= b1) return;
    // F16 weights: RB blocks widened to F32 (kept in L1 over all columns); a partial block's columns, its bias
    alignas(64) float wf[RB * kGemmDepth * kPackRows], spill[kGemmCols * kPackRows], bias_pad[kPackRows];
    const ggml_fp16_t *wh = (const ggml_fp16_t *)w->data;
    const float *w32 = (const float *)w->data;
    float *const dd = (float *)dst->data;
    for (int64_t s0 = 0; s0 < T; s0 += kGemmSpan) {
        const int64_t s1 = std::min(T, s0 + kGemmSpan);
        for (int j = 0; j < c.k; j++) {
            for (int64_t c0 = 0; c0 < c.cin; c0 += kGemmDepth) {
                const int64_t depth = std::min<int64_t>(kGemmDepth, c.cin - c0), i0 = (int64_t)j * c.cin + c0;
                const bool first = i0 == 0;
                for (int64_t b = b0; b < b1;) {
                    const int rb = b + RB <= std::min(b1, full) ? RB : 1;
                    const bool partial = b >= full;
                    const float *wp = w32 + (b * K + i0) * kPackRows;
                    int64_t wstride = K * kPackRows;
                    if (w->type == GGML_TYPE_F16) {
                        for (int r = 0; r < rb; r++)
                            ggml_cpu_fp16_to_fp32(wh + ((b + r) * K + i0) * kPackRows, wf + r * depth * kPackRows, depth * kPackRows);
                        wp = wf;
                        wstride = depth * kPackRows;
                    }
                    const int64_t r0 = b * kPackRows, valid = std::min<int64_t>(kPackRows, c.cout - r0);
                    const float *bv[RB];
                    for (int r = 0; r < rb; r++) bv[r] = bias ? bias + r0 + r * kPackRows : kZeros;
                    if (partial) {
                        std::fill(bias_pad, bias_pad + kPackRows, 0.0f);
                        std::memcpy(bias_pad, bv[0], (size_t)valid * sizeof(float));
                        bv[0] = bias_pad;
                    }
                    for (int64_t t0 = s0; t0 < s1; t0 += kGemmCols) {
                        const int nc = (int)std::min<int64_t>(kGemmCols, s1 - t0);
                        const float *cols[kGemmCols];
                        float *out[RB][kGemmCols];
                        for (int n = 0; n < nc; n++) {
                            cols[n] = column(c, x, prev, t0 + n, j, c0);
                            for (int r = 0; r < rb; r++) out[r][n] = dd + (t0 + n) * ds + r0 + r * kPackRows;
                            if (partial) {
                                if (!first) std::memcpy(spill + n * kPackRows, out[0][n], (size_t)valid * sizeof(float));
                                out[0][n] = spill + n * kPackRows;
                            }
                        }
                        if (rb == RB) gemm_cols<RB>(nc, wp, wstride, cols, depth, out, first, bv);
                        else gemm_cols<1>(nc, wp, wstride, cols, depth, out, first, bv);
                        if (partial)
                            for (int n = 0; n < nc; n++) std::memcpy(dd + (t0 + n) * ds + r0, spill + n * kPackRows, (size_t)valid * sizeof(float));
                    }
                    b += rb;
                }
            }
        }
    }
}

}  // namespace

// conv_gemm compiled for the CPU's vector width (target_clones' arch= picks by CPU model, not by
// features, so the choice is made here)
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,fma"))) static void conv_gemm_avx512(ggml_tensor *d, int i, int n, void *u) { conv_gemm<2>(d, i, n, u); }
__attribute__((target("avx2,fma"))) static void conv_gemm_avx2(ggml_tensor *d, int i, int n, void *u) { conv_gemm<1>(d, i, n, u); }
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) {
    static const auto impl = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")  ? conv_gemm_avx512
                             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? conv_gemm_avx2
                                                                                                : conv_gemm<1>;
    impl(d, i, n, u);
}
#else
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) { conv_gemm<1>(d, i, n, u); }
#endif

}  // namespace kz
