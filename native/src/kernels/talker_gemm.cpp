// The talker's Q8_0 matrix x many-column products (see talker_gemm.h).
//
// One 512-bit accumulator holds the 8 lanes of two rows (2r, 2r+1) for one column, interleaved:
// float 2l is row 2r's lane l, float 2l+1 row 2r+1's. So the two rows' quants are interleaved by
// dword once per block (one permute, shared by the tile's 6 columns), each column's quants are
// stored with every dword twice, and the pair of block scales (fp32(w.d) * fp32(y.d) for both
// rows, products taken once per tile) is one 64-bit broadcast load. The integer lane sums are taken
// with VNNI on the weights offset by +128 (x ^ 0x80), 128 * (the column's lane sum) removed
// exactly by starting from it; each lane then gets ggml's fma in ggml's block order, and the
// horizontal sum is ggml's, lane by lane. Rows past the last whole group of 8 take the same
// arithmetic in scalar code.
#include "kernels/talker_gemm.h"

#include "kernels/q8_common.h"
#include "kernels/q8_matvec.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kz::talker_gemm {

namespace {

using q8::BlockQ8;
using q8::hsum8;
using q8::QK;
constexpr int ROWS = 8;         // rows of a tile (4 interleaved pairs)
constexpr int COLS = 6;         // columns of a tile
constexpr size_t PACKED = 128;  // bytes per (column, block): 64 quant bytes, 16 int32 offsets

// Rows [r0, r1) of all columns, one (row, column) at a time: the same arithmetic as the tiles
// (Fused false: the tests' mutant).
template <bool Fused = true>
void rows_scalar(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const Columns &c, float *out, size_t ldc) {
    for (int64_t r = r0; r < r1; r++) {
        const BlockQ8 *x = (const BlockQ8 *)(w + r * row_bytes);
        for (int64_t j = 0; j < c.n; j++) {
            float acc[8] = {};
            for (int64_t b = 0; b < c.blocks; b++) {
                const uint8_t *p = c.packed.data() + (j * c.blocks + b) * PACKED;
                const float d = ggml_fp16_to_fp32(x[b].d) * c.scale[j * c.blocks + b];
                for (int lane = 0; lane < 8; lane++) {
                    int32_t sum = 0;
                    for (int t = 0; t < 4; t++) sum += x[b].qs[4 * lane + t] * (int8_t)p[8 * lane + t];
                    if (Fused) {
                        acc[lane] = std::fma(d, (float)sum, acc[lane]);
                    } else {
                        volatile float product = d * (float)sum;  // no contraction into an fma
                        acc[lane] += product;
                    }
                }
            }
            out[j * ldc + r] = hsum8(acc, 1);
        }
    }
}

#if defined(__x86_64__)
// Columns [j0, j0 + n) (n <= COLS) of the 8 rows at w; da[b * 8 + i] = fp32(row i's block b scale).
template <int N>
KZ_Q8_AVX512_VNNI void tile(const uint8_t *w, size_t row_bytes, const Columns &c, int64_t j0, const float *da, float *s,
                            float *out, size_t ldc) {
    const int64_t blocks = c.blocks;
    // s[(b * N + j) * 8 + i] = fp32(row i's d) * fp32(column j's d) for block b
    for (int64_t b = 0; b < blocks; b++) {
        const __m256 rows = _mm256_loadu_ps(da + b * 8);
        for (int j = 0; j < N; j++)
            _mm256_storeu_ps(s + (b * N + j) * 8,
                             _mm256_mul_ps(rows, _mm256_set1_ps(c.scale[(j0 + j) * c.blocks + b])));
    }
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i interleave = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const BlockQ8 *x[ROWS];
    for (int i = 0; i < ROWS; i++) x[i] = (const BlockQ8 *)(w + i * row_bytes);
    const uint8_t *y[N];
    for (int j = 0; j < N; j++) y[j] = c.packed.data() + (j0 + j) * blocks * PACKED;
    __m512 acc[ROWS / 2][N];
    for (int p = 0; p < ROWS / 2; p++)
        for (int j = 0; j < N; j++) acc[p][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        __m512i a[ROWS / 2];
        for (int p = 0; p < ROWS / 2; p++) {
            const __m512i lo = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * p][b].qs));
            const __m512i hi = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * p + 1][b].qs));
            a[p] = _mm512_xor_si512(_mm512_permutex2var_epi32(lo, interleave, hi), flip);
        }
        for (int j = 0; j < N; j++) {
            const uint8_t *pk = y[j] + b * PACKED;
            const __m512i q = _mm512_loadu_si512((const void *)pk);
            const __m512i off = _mm512_loadu_si512((const void *)(pk + 64));
            for (int p = 0; p < ROWS / 2; p++) {
                double pair;
                std::memcpy(&pair, s + (b * N + j) * 8 + 2 * p, sizeof pair);
                const __m512 scale = _mm512_castpd_ps(_mm512_set1_pd(pair));
                acc[p][j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, a[p], q)), acc[p][j]);
            }
        }
    }
    for (int p = 0; p < ROWS / 2; p++)
        for (int j = 0; j < N; j++) {
            alignas(64) float l[16];
            _mm512_store_ps(l, acc[p][j]);
            out[(j0 + j) * ldc + 2 * p] = hsum8(l, 2);
            out[(j0 + j) * ldc + 2 * p + 1] = hsum8(l + 1, 2);
        }
}

using Tile = void (*)(const uint8_t *, size_t, const Columns &, int64_t, const float *, float *, float *, size_t);
constexpr Tile TILES[COLS + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

KZ_Q8_AVX512_VNNI void groups(const uint8_t *w, size_t row_bytes, int64_t g0, int64_t g1, const Columns &c, float *out,
                              size_t ldc) {
    std::vector<float> da((size_t)(c.blocks * ROWS)), s((size_t)(c.blocks * COLS * ROWS));
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *rows = w + g * ROWS * row_bytes;
        for (int i = 0; i < ROWS; i++) {
            const BlockQ8 *x = (const BlockQ8 *)(rows + i * row_bytes);
            for (int64_t b = 0; b < c.blocks; b++) da[b * ROWS + i] = _cvtsh_ss(x[b].d);
        }
        for (int64_t j0 = 0; j0 < c.n; j0 += COLS)
            TILES[std::min<int64_t>(COLS, c.n - j0)](rows, row_bytes, c, j0, da.data(), s.data(), out + g * ROWS, ldc);
    }
}
#endif

}  // namespace

bool available() {
#if defined(__x86_64__)
    return q8::supports(q8::Isa::avx512_vnni);
#else
    return false;
#endif
}

namespace {

void reserve(Columns &c, int64_t cols, int64_t n) {
    c.n = n, c.blocks = cols / QK;
    c.packed.resize((size_t)(n * c.blocks) * PACKED);
    c.scale.resize((size_t)(n * c.blocks));
}

// Columns [j0, j1) of y, quantized by ggml's Q8_0 routine (as ggml's mul_mat quantizes them) and
// packed: each lane's 4 quants twice, -128 * their sum twice, the block's fp32 scale.
void quantize(const float *y, size_t stride, int64_t j0, int64_t j1, Columns &c) {
    std::vector<BlockQ8> q8((size_t)c.blocks);
    const auto from_float = ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float;
    for (int64_t j = j0; j < j1; j++) {
        from_float(y + j * stride, q8.data(), c.blocks * QK);
        for (int64_t b = 0; b < c.blocks; b++) {
            uint8_t *pk = c.packed.data() + (j * c.blocks + b) * PACKED;
            int32_t off[16];
            for (int lane = 0; lane < 8; lane++) {
                const int8_t *q = q8[b].qs + 4 * lane;
                std::memcpy(pk + 8 * lane, q, 4);
                std::memcpy(pk + 8 * lane + 4, q, 4);
                off[2 * lane] = off[2 * lane + 1] = q8::lane_offset(q);
            }
            std::memcpy(pk + 64, off, sizeof off);
            c.scale[j * c.blocks + b] = ggml_fp16_to_fp32(q8[b].d);
        }
    }
}

// Thread ith of nth: its columns' quantization, then (after all threads') its share of whole
// 8-row groups; the last thread also takes the rows past them.
void product_split(const uint8_t *w, size_t row_bytes, int64_t rows, const float *y, size_t y_stride, float *out,
                   size_t ldc, Columns &c, int ith, int nth) {
    quantize(y, y_stride, c.n * ith / nth, c.n * (ith + 1) / nth, c);
#ifdef _OPENMP
#pragma omp barrier
#endif
    const int64_t whole = available() ? rows / ROWS : 0;
#if defined(__x86_64__)
    const int64_t g0 = whole * ith / nth, g1 = whole * (ith + 1) / nth;
    if (g1 > g0) groups(w, row_bytes, g0, g1, c, out, ldc);
#endif
    if (ith == nth - 1) rows_scalar(w, row_bytes, whole * ROWS, rows, c, out, ldc);
}

}  // namespace

void product(const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols, const float *y, size_t y_stride, int64_t n,
             float *out, size_t ldc, Columns &c, int threads) {
    reserve(c, cols, n);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    product_split(w, row_bytes, rows, y, y_stride, out, ldc, c, omp_get_thread_num(), omp_get_num_threads());
#else
    (void)threads;
    product_split(w, row_bytes, rows, y, y_stride, out, ldc, c, 0, 1);
#endif
}

void product_unfused(const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols, const float *y, size_t y_stride,
                     int64_t n, float *out, size_t ldc, Columns &c) {
    reserve(c, cols, n);
    quantize(y, y_stride, 0, n, c);
    rows_scalar<false>(w, row_bytes, 0, rows, c, out, ldc);
}

}  // namespace kz::talker_gemm
