// conv_gemm_op (see conv_gemm.h): register tiles of RB blocks of kPackRows output channels by
// kGemmCols output steps, over spans of steps that keep their inputs and sums in L2.
#include "kernels/conv_gemm.h"

#include "ggml-cpu.h"

#include <cstring>
#include <vector>

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
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
constexpr int kGemmCols = 6;  // output columns a kernel call keeps in registers
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

#define KZ_FP16 __attribute__((target("arch=armv8.2-a+fp16")))

// Rows K..7 of a block (16 F16 weights each) into the float16 sums of NC columns, row k by lane k
// of the columns' 8 inputs.
template <int K, int NC>
KZ_FP16 inline __attribute__((always_inline)) void half_rows(const __fp16 *w, const float16x8_t (&xv)[NC],
                                                             float16x8_t (&h)[2][NC]) {
    const float16x8_t w0 = vld1q_f16(w + K * kPackRows), w1 = vld1q_f16(w + K * kPackRows + 8);
    // (in asm: GCC turns vfmaq_laneq_f16 into a DUP and a vector FMLA when two share a lane)
    for (int n = 0; n < NC; n++) {
        float16x8_t a = h[0][n], b = h[1][n], x = xv[n];  // (array elements as asm operands stay in memory)
        asm("fmla %0.8h, %1.8h, %2.h[%c3]" : "+w"(a) : "w"(w0), "x"(x), "i"(K));
        asm("fmla %0.8h, %1.8h, %2.h[%c3]" : "+w"(b) : "w"(w1), "x"(x), "i"(K));
        h[0][n] = a, h[1][n] = b;
    }
    if constexpr (K < 7) half_rows<K + 1, NC>(w, xv, h);
}

// One block of F16 weights by NC columns of F16 inputs in FP16 arithmetic: each output sums its
// rows kHalfRun at a time in a float16 lane (fused multiply-adds, in order), each partial sum then
// widened and added to the float sum in out (bias or out first). The same bits whatever NC. The
// float sums live in out (the registers hold the float16 ones: 2 NC, and NC inputs, which FMLA by
// element takes from v0-v15). Returns the columns (bit n) whose sums are not finite (a float16
// overflow): those are left as they were.
template <int NC>
KZ_FP16 unsigned gemm_tile_fp16(const __fp16 *w, const __fp16 *const *cols, int64_t depth, float *const *out,
                                bool first, const float *bias) {
    float saved[NC][kPackRows];
    if (!first)
        for (int n = 0; n < NC; n++) std::memcpy(saved[n], out[n], sizeof saved[n]);
    const __fp16 *col[NC];
    for (int n = 0; n < NC; n++) col[n] = cols[n];
    for (int64_t i = 0; i < depth;) {
        const int64_t end = std::min<int64_t>(depth, i + kHalfRun);
        float16x8_t h[2][NC];
        for (int n = 0; n < NC; n++) h[0][n] = h[1][n] = vdupq_n_f16(0);
        for (; i + 8 <= end; i += 8) {
            float16x8_t xv[NC];
            for (int n = 0; n < NC; n++) xv[n] = vld1q_f16(col[n] + i);
            half_rows<0, NC>(w + i * kPackRows, xv, h);
        }
        for (; i < end; i++) {
            const float16x8_t w0 = vld1q_f16(w + i * kPackRows), w1 = vld1q_f16(w + i * kPackRows + 8);
            for (int n = 0; n < NC; n++) {
                const float16x8_t x = vdupq_n_f16(col[n][i]);
                h[0][n] = vfmaq_f16(h[0][n], w0, x);
                h[1][n] = vfmaq_f16(h[1][n], w1, x);
            }
        }
        const bool from_bias = first && end <= kHalfRun;
        for (int n = 0; n < NC; n++) {
            const float *in = from_bias ? bias : out[n];
            const float32x4_t widened[4] = {vcvt_f32_f16(vget_low_f16(h[0][n])), vcvt_high_f32_f16(h[0][n]),
                                            vcvt_f32_f16(vget_low_f16(h[1][n])), vcvt_high_f32_f16(h[1][n])};
            for (int s = 0; s < 4; s++) vst1q_f32(out[n] + 4 * s, vaddq_f32(vld1q_f32(in + 4 * s), widened[s]));
        }
    }
    unsigned bad = 0;
    for (int n = 0; n < NC; n++) {
        float32x4_t m = vabsq_f32(vld1q_f32(out[n]));
        for (int s = 1; s < 4; s++) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(out[n] + 4 * s)));
        if (vmaxvq_f32(m) <= 3.4028235e38f) continue;  // (false for a NaN)
        bad |= 1u << n;
        if (!first) std::memcpy(out[n], saved[n], sizeof saved[n]);
    }
    return bad;
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
// 0..cin*k-1 in order (the accumulators pass through memory exactly), so both ways give the same bits
// in float; half sums restart their float16 runs at each piece, so there the layout (flat_taps: x's
// row stride, never the chunking) decides the bits.
struct Taps {
    const ConvShape &c;
    const ggml_tensor *x, *prev;
    int64_t K, steps, left = 0, right = 0;  // flat: output steps [0, left) and [right, T) are read from `edge`
    bool flat;
    DepthPieces pieces;
    std::vector<float> edge;

    Taps(const ConvShape &c_, const ggml_tensor *x_, const ggml_tensor *prev_, int64_t T, int64_t max_piece_)
        : c(c_),
          x(x_),
          prev(prev_),
          K((int64_t)c_.cin * c_.k),
          steps(x_->ne[1]),
          flat(flat_taps(c_, x_->nb[1])),
          pieces{K, c_.cin, max_piece_, flat} {
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
    // rows i0..i0+depth of output step t's column
    const float *at(int64_t t, int64_t i0) const {
        if (!flat) return column(c, x, prev, t, (int)(i0 / c.cin), i0 % c.cin);
        if (t < left) return edge.data() + t * K + i0;
        if (t >= right) return edge.data() + (left + t - right) * K + i0;
        return (const float *)x->data + (t * c.stride - c.pad_left) * c.cin + i0;
    }
};

#if defined(__aarch64__)
// The inputs of a span of output steps over one piece of the depth, rounded to F16 once for all
// the blocks the FP16 tiles multiply them by.
struct HalfColumns {
    std::vector<__fp16> data;
    int64_t s0 = 0, depth = 0;
    void fill(const Taps &taps, int64_t s0_, int64_t s1, int64_t i0, int64_t depth_) {
        s0 = s0_, depth = depth_;
        data.resize((size_t)((s1 - s0) * depth));
        for (int64_t t = s0; t < s1; t++) {
            const float *src = taps.at(t, i0);
            __fp16 *dst = data.data() + (t - s0) * depth;
            int64_t r = 0;
            for (; r + 4 <= depth; r += 4) vst1_f16(dst + r, vcvt_f16_f32(vld1q_f32(src + r)));
            for (; r < depth; r++) dst[r] = (__fp16)src[r];
        }
    }
    const __fp16 *at(int64_t t) const { return data.data() + (t - s0) * depth; }
};
inline HalfColumns &half_columns() {  // each thread's (only the FP16 instantiation asks)
    thread_local HalfColumns columns;
    return columns;
}
constexpr int kHalfCols = 6;  // output columns an FP16 tile holds (12 sums, 6 input and 2 weight vectors)
static_assert(kHalfCols <= kGemmCols, "a tile's columns and outputs are arrays of kGemmCols");

inline unsigned half_tile(int nc, const __fp16 *w, const __fp16 *const *cols, int64_t depth, float *const *out,
                          bool first, const float *bias) {
    switch (nc) {
        case 1: return gemm_tile_fp16<1>(w, cols, depth, out, first, bias);
        case 2: return gemm_tile_fp16<2>(w, cols, depth, out, first, bias);
        case 3: return gemm_tile_fp16<3>(w, cols, depth, out, first, bias);
        case 4: return gemm_tile_fp16<4>(w, cols, depth, out, first, bias);
        case 5: return gemm_tile_fp16<5>(w, cols, depth, out, first, bias);
        default: return gemm_tile_fp16<6>(w, cols, depth, out, first, bias);
    }
}
#endif

// RB blocks of rows at a time where the registers allow (the rest two or one at a time), in vectors
// of L floats; Half (ARM, F16 weights): in FP16 arithmetic (gemm_tile_fp16)
template <int L, int RB, bool Half = false>
inline __attribute__((always_inline)) void conv_gemm(ggml_tensor *dst, int ith, int nth, void *userdata) {
    static_assert(!Half || (L == 4 && RB == 1), "the FP16 tiles take one block");
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
#if defined(__aarch64__)
    HalfColumns *half = nullptr;
    if constexpr (Half) half = &half_columns();
    constexpr int kTileCols = Half ? kHalfCols : tile_cols<L, RB>();
#else
    constexpr int kTileCols = tile_cols<L, RB>();
#endif
    for (int64_t s0 = 0; s0 < T; s0 += kGemmSpan) {
        const int64_t s1 = std::min(T, s0 + kGemmSpan);
        for (int64_t p = 0; p < taps.pieces.count(); p++) {
            int64_t i0, depth;
            taps.pieces.piece(p, i0, depth);
            const bool first = i0 == 0;
#if defined(__aarch64__)
            if constexpr (Half) half->fill(taps, s0, s1, i0, depth);
#endif
            for (int64_t b = b0; b < b1;) {
                const int rb = b + RB <= end ? RB : b + 2 <= end ? std::min(RB, 2) : 1;
                const bool partial = b >= full;
                const float *wp = w32 + (b * K + i0) * kPackRows;
                int64_t wstride = K * kPackRows;
                bool widened = false;  // (the FP16 tiles read the F16 weights; widened for a column they cannot take)
                auto widen = [&] {
                    for (int r = 0; r < rb; r++)
                        ggml_cpu_fp16_to_fp32(wh + ((b + r) * K + i0) * kPackRows, wf + r * depth * kPackRows,
                                              depth * kPackRows);
                    wp = wf;
                    wstride = depth * kPackRows;
                    widened = true;
                };
                if (w->type == GGML_TYPE_F16 && !Half) widen();
                const int64_t r0 = b * kPackRows, valid = std::min<int64_t>(kPackRows, c.cout - r0);
                const float *bv[RB];
                for (int r = 0; r < rb; r++) bv[r] = bias ? bias + r0 + r * kPackRows : kZeros;
                if (partial) {
                    std::fill(bias_pad, bias_pad + kPackRows, 0.0f);
                    std::memcpy(bias_pad, bv[0], (size_t)valid * sizeof(float));
                    bv[0] = bias_pad;
                }
                for (int64_t t0 = s0; t0 < s1; t0 += kTileCols) {
                    const int nc = (int)std::min<int64_t>(kTileCols, s1 - t0);
                    const float *cols[kGemmCols];
                    float *out[RB][kGemmCols];
                    for (int n = 0; n < nc; n++) {
                        cols[n] = taps.at(t0 + n, i0);
                        for (int r = 0; r < rb; r++) out[r][n] = dd + (t0 + n) * ds + r0 + r * kPackRows;
                        if (partial) {  // (padded rows from 0: the FP16 tiles' overflow check reads them)
                            if (!first) std::memcpy(spill + n * kPackRows, out[0][n], (size_t)valid * sizeof(float));
                            std::fill(spill + n * kPackRows + valid, spill + (n + 1) * kPackRows, 0.0f);
                            out[0][n] = spill + n * kPackRows;
                        }
                    }
#if defined(__aarch64__)
                    if constexpr (Half) {
                        const __fp16 *hc[kHalfCols];
                        for (int n = 0; n < nc; n++) hc[n] = half->at(t0 + n);
                        const unsigned bad = half_tile(nc, (const __fp16 *)wh + (b * K + i0) * kPackRows, hc, depth,
                                                       out[0], first, bv[0]);
                        for (int n = 0; n < nc; n++) {  // a float16 sum overflowed: the column in F32
                            if (!(bad >> n & 1)) continue;
                            if (!widened) widen();
                            float *const one[1][kGemmCols] = {{out[0][n]}};
                            gemm_cols<L, 1>(1, wp, wstride, cols + n, depth, one, first, bv);
                        }
                    } else
#endif
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
#elif defined(__aarch64__)
bool conv_gemm_half_arithmetic() {
    static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDHP) != 0;
    return has;
}
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) {  // 128-bit vectors (NEON)
    if (static_cast<const ConvShape *>(u)->half_sums && d->src[1]->type == GGML_TYPE_F16 &&
        conv_gemm_half_arithmetic()) {
        conv_gemm<4, 1, true>(d, i, n, u);
    } else {
        conv_gemm<4, 1>(d, i, n, u);
    }
}
bool conv_gemm_fuses() { return true; }
#else
void conv_gemm_op(ggml_tensor *d, int i, int n, void *u) { conv_gemm<4, 1>(d, i, n, u); }
bool conv_gemm_fuses() {
#if defined(__FP_FAST_FMAF)
    return true;
#else
    return false;
#endif
}
#endif
#if !defined(__aarch64__)
bool conv_gemm_half_arithmetic() { return false; }
#endif

}  // namespace kz
