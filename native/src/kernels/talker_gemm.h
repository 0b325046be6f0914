// The talker's Q8_0 matrix x many-column products (the prefill) for the talker backend
// (kazetts/talker_backend.h), bit for bit those of ggml's CPU backend.
//
// Why: for 2+ columns ggml hands a Q8_0 product to llamafile's tinyBLAS (tinyBLAS_Q0_AVX,
// gemm4xN<4> on 4x4 tiles), 256-bit wide with the sign trick: on an AVX-512 VNNI CPU it runs at
// about half of what the same arithmetic allows 512 bits wide. Its arithmetic per (row, column) is
// ggml's vec_dot_q8_0_q8_0's: the column quantized to Q8_0 by ggml's routine, per block 8 lanes of
// exact integer sums of 4 byte products, acc[lane] = fma(fp32(w.d) * fp32(y.d), lane, acc[lane])
// block after block, then ggml's 8-lane horizontal sum. The kernel repeats exactly that on tiles
// of 8 rows x 6 columns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kz::talker_gemm {

// The columns quantized as ggml's mul_mat quantizes them, laid out for the kernel.
struct Columns {
    int64_t n = 0, blocks = 0;
    std::vector<uint8_t> packed;  // per (column, block): 64 quant bytes, 16 int32 offsets
    std::vector<float> scale;     // per (column, block): fp32(y.d)
};

// Whether this CPU (and build) has the kernel: x86-64 with AVX-512 VNNI.
bool available();

// out = W Y on `threads` OpenMP threads (one without OpenMP): W `rows` Q8_0 rows of `cols`
// values, row_bytes apart; Y n >= 1 columns of cols floats, column j at y + j * y_stride;
// out[j * ldc + r]. c: the quantized columns' storage, reused from call to call.
void product(const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols, const float *y, size_t y_stride, int64_t n,
             float *out, size_t ldc, Columns &c, int threads);

// Tests only: the same product with the fused multiply-adds split in two (a multiply, then an
// add), all else equal: a kernel that differs from ggml in the last bit, for the check to catch.
void product_unfused(const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols, const float *y, size_t y_stride,
                     int64_t n, float *out, size_t ldc, Columns &c);

}  // namespace kz::talker_gemm
