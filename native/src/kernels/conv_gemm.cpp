// conv_gemm_op (see conv_gemm.h): register tiles of RB blocks of kPackRows output channels by
// kGemmCols output steps, over spans of steps that keep their inputs and sums in L2.
#include "kernels/conv_gemm.h"

#include "ggml-cpu.h"

#include <cstring>
#include <vector>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace kz {
namespace {

// A block's kPackRows rows are held as kPackRows / L vectors of L floats, L the CPU's vector width:
// a vector type wider than the target's registers is lowered by GCC through the stack, element
// group by element group (the 0.6b codec on AVX2: 848 ms/frame with 16-float vectors, 96 with 8-float ones, 1 thread).
// (a struct: GCC drops the attribute from an alias template)
template <int L>
struct Lanes {
    typedef float type __attribute__((vector_size(L * sizeof(float))));
};
constexpr int kGemmCols = 6;     // output columns a kernel call keeps in registers
constexpr int kGemmDepth = 256;  // input channels of one tap done (and F16 widened, reused over T) at once
                                 // (half as many by a kernel of 4 blocks: its widened weights stay in L1)
constexpr int64_t kGemmSpan =
    42 * kGemmCols;  // columns done over all taps before the next (inputs and sums stay in L2)
alignas(64) const float kZeros[kGemmDepth] = {};

// out[r][n] (RB blocks of rows, NC columns) = (first ? bias : out) + sum over i < depth of w[r][i] * cols[n][i],
// w[r] at w + r * wstride, in vectors of L rows. Every row sums in the same order whatever RB, NC and L.
template <int L, int NC, int RB>
inline __attribute__((always_inline)) void gemm_tile(const float *w, int64_t wstride, const float *const *cols,
                                                     int64_t depth, float *const (*out)[kGemmCols], bool first,
                                                     const float *const *bias) {
    using V = typename Lanes<L>::type;
    constexpr int S = kPackRows / L;  // vectors per block
    V acc[RB * S][NC];
    for (int r = 0; r < RB; r++)
        for (int s = 0; s < S; s++)
            for (int n = 0; n < NC; n++)
                __builtin_memcpy(&acc[r * S + s][n], (first ? bias[r] : out[r][n]) + s * L, sizeof(V));
    for (int64_t i = 0; i < depth; i++) {
        V wv[RB * S];
        for (int r = 0; r < RB; r++)
            for (int s = 0; s < S; s++)
                __builtin_memcpy(&wv[r * S + s], w + r * wstride + i * kPackRows + s * L, sizeof(V));
        for (int n = 0; n < NC; n++) {
            const float xv = cols[n][i];
            for (int q = 0; q < RB * S; q++) acc[q][n] += wv[q] * xv;
        }
    }
    for (int r = 0; r < RB; r++)
        for (int s = 0; s < S; s++)
            for (int n = 0; n < NC; n++) __builtin_memcpy(out[r][n] + s * L, &acc[r * S + s][n], sizeof(V));
}

#if defined(__aarch64__)
// gemm_tile for one block in NEON's 32 registers: the inputs read 4 rows at a time, one vector a
// column, each multiplied in by lane (one load for 4 rows instead of 4), so that 5 columns (20
// sums, 4 weight vectors, 5 input vectors) fit without spilling (6 columns of scalar inputs, the
// generic tile, spilled 2 sums and took 40 instructions a row for 24 FMAs; this one ~24 for 20).
// Each sum still takes its rows one after another as fused multiply-adds: the same bits.
template <int K, int NC>
inline __attribute__((always_inline)) void neon_rows(const float *w, const float32x4_t (&xv)[NC],
                                                     float32x4_t (&acc)[4][NC]) {
    float32x4_t wv[4];
    for (int s = 0; s < 4; s++) wv[s] = vld1q_f32(w + K * kPackRows + 4 * s);
    for (int n = 0; n < NC; n++)
        for (int s = 0; s < 4; s++) acc[s][n] = vfmaq_laneq_f32(acc[s][n], wv[s], xv[n], K);
    // (no load moves across: GCC's scheduler would hoist the next rows' weights and spill sums)
    asm volatile("" ::: "memory");
}

template <int NC>
inline __attribute__((always_inline)) void gemm_tile_neon(const float *w, const float *const *cols, int64_t depth,
                                                          float *const *out, bool first, const float *bias) {
    static_assert(kPackRows == 16, "a block is 4 vectors");
    float32x4_t acc[4][NC];
    for (int s = 0; s < 4; s++)
        for (int n = 0; n < NC; n++) acc[s][n] = vld1q_f32((first ? bias : out[n]) + 4 * s);
    const float *col[NC];  // in registers (the barrier in neon_rows would reload them from `cols`)
    for (int n = 0; n < NC; n++) col[n] = cols[n];
    int64_t i = 0;
    for (; i + 4 <= depth; i += 4) {
        float32x4_t xv[NC];
        for (int n = 0; n < NC; n++) xv[n] = vld1q_f32(col[n] + i);
        const float *wi = w + i * kPackRows;
        neon_rows<0, NC>(wi, xv, acc);
        neon_rows<1, NC>(wi, xv, acc);
        neon_rows<2, NC>(wi, xv, acc);
        neon_rows<3, NC>(wi, xv, acc);
    }
    for (; i < depth; i++)
        for (int s = 0; s < 4; s++) {
            const float32x4_t wv = vld1q_f32(w + i * kPackRows + 4 * s);
            for (int n = 0; n < NC; n++) acc[s][n] = vfmaq_n_f32(acc[s][n], wv, cols[n][i]);
        }
    for (int s = 0; s < 4; s++)
        for (int n = 0; n < NC; n++) vst1q_f32(out[n] + 4 * s, acc[s][n]);
}
#endif

// Output columns a tile holds: NEON's one-block tile 5 (gemm_tile_neon), the others kGemmCols
template <int L, int RB>
constexpr int tile_cols() {
#if defined(__aarch64__)
    if (L == 4 && RB == 1) return 5;
#endif
    return kGemmCols;
}

template <int L, int RB>
inline __attribute__((always_inline)) void gemm_cols(int nc, const float *w, int64_t wstride, const float *const *cols,
                                                     int64_t depth, float *const (*out)[kGemmCols], bool first,
                                                     const float *const *bias) {
#if defined(__aarch64__)
    if constexpr (L == 4 && RB == 1) {
        switch (nc) {
            case 1: gemm_tile_neon<1>(w, cols, depth, out[0], first, bias[0]); break;
            case 2: gemm_tile_neon<2>(w, cols, depth, out[0], first, bias[0]); break;
            case 3: gemm_tile_neon<3>(w, cols, depth, out[0], first, bias[0]); break;
            case 4: gemm_tile_neon<4>(w, cols, depth, out[0], first, bias[0]); break;
            default: gemm_tile_neon<5>(w, cols, depth, out[0], first, bias[0]); break;
        }
        return;
    }
#endif
    switch (nc) {
        case 1: gemm_tile<L, 1, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 2: gemm_tile<L, 2, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 3: gemm_tile<L, 3, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 4: gemm_tile<L, 4, RB>(w, wstride, cols, depth, out, first, bias); break;
        case 5: gemm_tile<L, 5, RB>(w, wstride, cols, depth, out, first, bias); break;
        default: gemm_tile<L, kGemmCols, RB>(w, wstride, cols, depth, out, first, bias); break;
    }
}

// Input channels c0.. of the step that output step t's tap j reads (see ConvShape), or zeros.
inline const float *column(const ConvShape &c, const ggml_tensor *x, const ggml_tensor *prev, int64_t t, int j,
                           int64_t c0) {
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

// Where the taps of output steps are read from. When the taps of a step lie side by side in x
// (one tap, or dilation 1 over a dense x), all cin*k values of a step are one run, from x or, for
// the few steps whose taps reach outside x, from a copy of them (`edge`); the GEMM then walks
// that run in kGemmDepth pieces instead of tap by tap, which the small-cin convs (the 1-channel
// first conv, the 32..128-channel ones at the sample rate) need: a tap there is too short a
// depth to pay for loading and storing the accumulators. Each output still sums rows
// 0..cin*k-1 in order (the accumulators pass through memory exactly), so both ways give the same bits.
struct Taps {
    const ConvShape &c;
    const ggml_tensor *x, *prev;
    int64_t K, steps, max_piece, left = 0,
                                 right = 0;  // flat: output steps [0, left) and [right, T) are read from `edge`
    bool flat;
    std::vector<float> edge;

    Taps(const ConvShape &c_, const ggml_tensor *x_, const ggml_tensor *prev_, int64_t T, int64_t max_piece_)
        : c(c_),
          x(x_),
          prev(prev_),
          K((int64_t)c_.cin * c_.k),
          steps(x_->ne[1]),
          max_piece(max_piece_),
          flat(c_.k > 1 && c_.dil == 1 && x_->nb[1] == (size_t)c_.cin * sizeof(float)) {
        if (!flat) return;
        left = std::min<int64_t>(T, (c.pad_left + c.stride - 1) / c.stride);
        right = T;
        while (right > left && (right - 1) * c.stride - c.pad_left + c.k > steps) right--;
        edge.resize((size_t)((left + T - right) * K));  // zeros
        for (int64_t t = 0; t < T; t++) {
            if (t == left) t = right;
            if (t == T) break;
            float *e = (float *)at(t, 0);
            for (int j = 0; j < c.k; j++) {
                const float *src = column(c, x, prev, t, j, 0);
                if (src != kZeros) std::copy(src, src + c.cin, e + (int64_t)j * c.cin);
            }
        }
    }
    // the pieces of the depth (of at most max_piece rows): count, then piece p's first row and length
    int64_t pieces() const {
        return flat ? (K + max_piece - 1) / max_piece : c.k * ((c.cin + max_piece - 1) / max_piece);
    }
    void piece(int64_t p, int64_t &i0, int64_t &n) const {
        if (flat) {
            i0 = p * max_piece;
            n = std::min<int64_t>(max_piece, K - i0);
        } else {
            const int64_t per = (c.cin + max_piece - 1) / max_piece, c0 = p % per * max_piece;
            i0 = p / per * c.cin + c0;
            n = std::min<int64_t>(max_piece, c.cin - c0);
        }
    }
    // rows i0..i0+depth of output step t's column
    const float *at(int64_t t, int64_t i0) const {
        if (!flat) return column(c, x, prev, t, (int)(i0 / c.cin), i0 % c.cin);
        if (t < left) return edge.data() + t * K + i0;
        if (t >= right) return edge.data() + (left + t - right) * K + i0;
        return (const float *)x->data + (t * c.stride - c.pad_left) * c.cin + i0;
    }
};

// RB blocks of rows at a time where the registers allow (the rest two or one at a time), in vectors of L floats
template <int L, int RB>
inline __attribute__((always_inline)) void conv_gemm(ggml_tensor *dst, int ith, int nth, void *userdata) {
    const ConvShape &c = *static_cast<const ConvShape *>(userdata);
    const ggml_tensor *x = dst->src[0], *w = dst->src[1];
    const float *bias = dst->src[2] ? (const float *)dst->src[2]->data : nullptr;
    const ggml_tensor *res = dst->src[4];
    const int64_t T = dst->ne[1], K = (int64_t)c.cin * c.k, ds = dst->nb[1] / sizeof(float);
    const int64_t blocks = w->ne[1], full = c.cout / kPackRows;  // blocks, and those without padded rows
    const auto [b0, b1] = thread_rows(blocks, ith, nth);
    if (b0 >= b1) return;
    const int64_t end = std::min(b1, full);  // this thread's blocks in tiles of RB, 2 or 1: [b0, end)
    constexpr int64_t kDepth = RB > 2 ? kGemmDepth / 2 : kGemmDepth;
    const Taps taps(c, x, dst->src[3], T, kDepth);
    // F16 weights: RB blocks widened to F32 (kept in L1 over all columns); a partial block's columns, its bias
    alignas(64) float wf[RB * kDepth * kPackRows], spill[kGemmCols * kPackRows], bias_pad[kPackRows];
    const ggml_fp16_t *wh = (const ggml_fp16_t *)w->data;
    const float *w32 = (const float *)w->data;
    float *const dd = (float *)dst->data;
    for (int64_t s0 = 0; s0 < T; s0 += kGemmSpan) {
        const int64_t s1 = std::min(T, s0 + kGemmSpan);
        for (int64_t p = 0; p < taps.pieces(); p++) {
            int64_t i0, depth;
            taps.piece(p, i0, depth);
            const bool first = i0 == 0;
            for (int64_t b = b0; b < b1;) {
                const int rb = b + RB <= end ? RB : b + 2 <= end ? std::min(RB, 2) : 1;
                const bool partial = b >= full;
                const float *wp = w32 + (b * K + i0) * kPackRows;
                int64_t wstride = K * kPackRows;
                if (w->type == GGML_TYPE_F16) {
                    for (int r = 0; r < rb; r++)
                        ggml_cpu_fp16_to_fp32(wh + ((b + r) * K + i0) * kPackRows, wf + r * depth * kPackRows,
                                              depth * kPackRows);
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
                for (int64_t t0 = s0; t0 < s1; t0 += tile_cols<L, RB>()) {
                    const int nc = (int)std::min<int64_t>(tile_cols<L, RB>(), s1 - t0);
                    const float *cols[kGemmCols];
                    float *out[RB][kGemmCols];
                    for (int n = 0; n < nc; n++) {
                        cols[n] = taps.at(t0 + n, i0);
                        for (int r = 0; r < rb; r++) out[r][n] = dd + (t0 + n) * ds + r0 + r * kPackRows;
                        if (partial) {
                            if (!first) std::memcpy(spill + n * kPackRows, out[0][n], (size_t)valid * sizeof(float));
                            out[0][n] = spill + n * kPackRows;
                        }
                    }
                    if (RB == 1 || rb == RB)
                        gemm_cols<L, RB>(nc, wp, wstride, cols, depth, out, first, bv);
                    else if constexpr (RB > 2) {  // (below 3 blocks the rest is one block at a time)
                        if (rb == 2)
                            gemm_cols<L, 2>(nc, wp, wstride, cols, depth, out, first, bv);
                        else
                            gemm_cols<L, 1>(nc, wp, wstride, cols, depth, out, first, bv);
                    } else
                        gemm_cols<L, 1>(nc, wp, wstride, cols, depth, out, first, bv);
                    if (partial)
                        for (int n = 0; n < nc; n++)
                            std::memcpy(dd + (t0 + n) * ds + r0, spill + n * kPackRows, (size_t)valid * sizeof(float));
                }
                b += rb;
            }
        }
        if (res) {  // dst + res, as an add after the conv would give
            const int64_t r1 = std::min<int64_t>(b1 * kPackRows, c.cout);
            for (int64_t t = s0; t < s1; t++) {
                float *o = dd + t * ds;
                const float *a = (const float *)((const char *)res->data + t * res->nb[1]);
                for (int64_t r = b0 * kPackRows; r < r1; r++) o[r] += a[r];
            }
        }
    }
}

}  // namespace

// conv_gemm compiled for the CPU's vector width (target_clones' arch= picks by CPU model, not by
// features, so the choice is made here)
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,fma"))) static void conv_gemm_avx512(ggml_tensor *d, int i, int n, void *u) {
    conv_gemm<16, 4>(d, i, n, u);
}
__attribute__((target("avx2,fma"))) static void conv_gemm_avx2(ggml_tensor *d, int i, int n, void *u) {
    conv_gemm<8, 1>(d, i, n, u);
}
using Kernel = void (*)(ggml_tensor *, int, int, void *);
static Kernel kernel() {
    static const Kernel k = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? conv_gemm_avx512
                            : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")  ? conv_gemm_avx2
                                                                                               : conv_gemm<4, 1>;
    return k;
}
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) { kernel()(d, i, n, u); }
bool conv_gemm_fuses() { return kernel() != (Kernel)conv_gemm<4, 1>; }  // (the baseline clone has no FMA)
#else
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) { conv_gemm<4, 1>(d, i, n, u); }  // 128-bit vectors (NEON)
bool conv_gemm_fuses() {
#if defined(__FP_FAST_FMAF) || defined(__aarch64__)
    return true;
#else
    return false;
#endif
}
#endif

}  // namespace kz
