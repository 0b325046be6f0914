// Our own GEMM for convolutions and linears (the codec decoder's and the codec encoder's), as a
// ggml custom op: dst[cout, T] = bias + W * columns of the F32 input, read straight from the
// input (no im2col matrix). Weights are packed (see ConvShape) in F16 (widened a block at a time)
// or F32; inputs and sums are F32. Every output value is the bias plus its taps in one fixed
// order (tap-major, then input channel) whatever T, the chunking or the threads. Internal.
#pragma once

#include "ggml.h"
#include "kernels/custom_op.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kz {

// Rows a packed weight interleaves (the output channels one vector of the GEMM kernel holds).
constexpr int kPackRows = 16;

// What conv_gemm_op computes. Output step t, tap j reads input step t*stride + j*dil - pad_left
// of x (src[0], F32 [cin, steps]); steps outside x are, by `edge`: the left context (src[3], F32
// [cin, pad_left]: the pad_left steps before x), zeros, or x's nearest edge step. A linear is
// the 1-tap conv. The weight (src[1]) is [kPackRows * cin*k, ceil(cout / kPackRows)]: block b
// holds output channels b*kPackRows.. interleaved, value (channel, row i = j*cin + c) at
// i*kPackRows + channel % kPackRows, zero-padded (pack_rows); the bias (src[2]) is [cout] or none;
// a residual (src[4], F32 [cout, T], or none) is added to the finished outputs (dst + residual).
struct ConvShape {
    enum Edge { kContext, kZeros, kReplicate };
    int cin = 0, cout = 0, k = 1, dil = 1, stride = 1;
    int64_t pad_left = 0;
    Edge edge = kContext;
    bool half_sums = false;  // F16 weights on an ARM core with FP16 arithmetic: float16 partial sums (below)
};

// The depth (rows i = tap * cin + channel) in the pieces the kernel takes at a time, each summed
// into the outputs before the next: `flat` (all taps of an output step one run of x: more than
// one tap, dilation 1, x dense) in max_piece-row pieces of all the rows, else tap by tap in
// max_piece-row pieces of cin. (One definition for the kernel and for the checks' references.)
struct DepthPieces {
    int64_t K, cin, max_piece;
    bool flat;
    int64_t count() const {
        return flat ? (K + max_piece - 1) / max_piece : K / cin * ((cin + max_piece - 1) / max_piece);
    }
    // piece p: its first row and its length
    void piece(int64_t p, int64_t &i0, int64_t &n) const {
        if (flat) {
            i0 = p * max_piece;
            n = std::min<int64_t>(max_piece, K - i0);
        } else {
            const int64_t per = (cin + max_piece - 1) / max_piece, c0 = p % per * max_piece;
            i0 = p / per * cin + c0;
            n = std::min<int64_t>(max_piece, cin - c0);
        }
    }
};
inline bool flat_taps(const ConvShape &c, size_t x_row_bytes) {
    return c.k > 1 && c.dil == 1 && x_row_bytes == (size_t)c.cin * sizeof(float);
}
constexpr int64_t kGemmDepth = 256;  // the one-block kernels' pieces (the 4-block AVX-512 kernel's: half)

// FP16 arithmetic (ARM cores with asimdhp; ConvShape::half_sums, F16 weights): the inputs are
// rounded to F16 and every output sums each piece's rows kHalfRun at a time from 0 in a float16
// lane, one fused multiply-add a row in order, each partial sum then widened and added to the
// float sum (the bias first). ~1.8x fewer vector instructions than the float sums, about 1e-4 of
// the waveform's power off (a float16 sum keeps 11 bits). A block of kPackRows outputs of one step
// whose sums are not finite after a piece has that piece summed in float instead.
constexpr int64_t kHalfRun = 32;
bool conv_gemm_half_arithmetic();  // whether this CPU sums in FP16 where half_sums asks for it

// shape of a packed weight
inline std::vector<int64_t> packed_shape(const ConvShape &c) {
    return {(int64_t)c.cin * c.k * kPackRows, (c.cout + kPackRows - 1) / kPackRows};
}

// w [cout rows of cin*k] -> the packed layout
inline std::vector<float> pack_rows(const std::vector<float> &w, const ConvShape &c) {
    const int64_t K = (int64_t)c.cin * c.k, shape1 = packed_shape(c)[1];
    std::vector<float> p((size_t)(K * kPackRows * shape1), 0.0f);
    for (int64_t co = 0; co < c.cout; co++)
        for (int64_t i = 0; i < K; i++)
            p[(size_t)((co / kPackRows * K + i) * kPackRows + co % kPackRows)] = w[(size_t)(co * K + i)];
    return p;
}

// The ggml custom op (userdata: the const ConvShape); dst is F32 [cout, T], T output steps.
void conv_gemm_op(ggml_tensor *dst, int ith, int nth, void *userdata);

// whether conv_gemm_op, as it runs on this CPU, forms each acc += w * x as one fused multiply-add
// (its FMA clones, aarch64) or as a multiply then an add (x86-64's baseline clone): the order of
// rounding an exact reference has to follow
bool conv_gemm_fuses();

// conv_gemm_op as a graph node of `steps` output steps (c outlives the graph); b, prev (the left
// context) and res may be null
inline ggml_tensor *conv_gemm(ggml_context *ctx, const ConvShape &c, ggml_tensor *w, ggml_tensor *b, ggml_tensor *x,
                              int64_t steps, ggml_tensor *prev = nullptr, ggml_tensor *res = nullptr) {
    ggml_tensor *args[5] = {x, w, b, prev, res};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, c.cout, steps, 1, 1, args, 5, conv_gemm_op, GGML_N_TASKS_MAX,
                          const_cast<ConvShape *>(&c));
}

}  // namespace kz
