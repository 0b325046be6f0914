// The talker's Q8_0 matrix products as a ggml ACCEL backend (see talker_backend.h; the x86-64
// many-column kernel, the prefill's, in talker_gemm.cpp; the ARM kernels below rows_avx512_vnni).
//
// x86-64. ggml's CPU product for one column (ggml_vec_dot_q8_0_q8_0, AVX2 path, per weight row):
//   acc[8] = 0; for each block b: acc = fma(fp32(x[b].d) * fp32(y[b].d), lanes(x[b] . y[b]), acc)
//   where lane i is the exact integer sum of the products of bytes 4i..4i+3; then
//   out = ((acc4 + acc0) + (acc6 + acc2)) + ((acc5 + acc1) + (acc7 + acc3)).
// The kernels below do exactly that, per row, for four rows at once (independent accumulator
// chains and memory streams instead of one): the same operations on the same values in the same
// order give the same bits. The kernel keeps two rows' 8 lanes in one register, takes the integer
// sums with VNNI on the quants offset by +128 (x ^ 0x80), removing 128 * sum(y) exactly in the
// integer accumulator, and prefetches each row 4 KB ahead (from DRAM, ~1.5x what the same loop
// reads without it on this Xeon; ggml's loop has no prefetch).
#include "kazetts/talker_backend.h"

#include "core/common_internal.h"
#include "kernels/q8_common.h"
#include "kernels/q8_matvec.h"
#include "kernels/talker_gemm.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// ---- ggml's backend structures (ggml-backend-impl.h, not installed by the wheel) -----------------
// Declared here with the layout of ggml 0.25.3 (llama-cpp-python 0.3.36); registration refuses any
// other ggml at run time (MIRRORED_GGML), and kazetts' loader refuses a ggml other than the one
// this library was built against.
extern "C" {
struct ggml_backend_reg_i {
    const char *(*get_name)(ggml_backend_reg_t);
    size_t (*get_device_count)(ggml_backend_reg_t);
    ggml_backend_dev_t (*get_device)(ggml_backend_reg_t, size_t);
    void *(*get_proc_address)(ggml_backend_reg_t, const char *);
};
struct ggml_backend_reg {
    int api_version;
    ggml_backend_reg_i iface;
    void *context;
};
struct ggml_backend_device_i {
    const char *(*get_name)(ggml_backend_dev_t);
    const char *(*get_description)(ggml_backend_dev_t);
    void (*get_memory)(ggml_backend_dev_t, size_t *, size_t *);
    enum ggml_backend_dev_type (*get_type)(ggml_backend_dev_t);
    void (*get_props)(ggml_backend_dev_t, ggml_backend_dev_props *);
    ggml_backend_t (*init_backend)(ggml_backend_dev_t, const char *);
    ggml_backend_buffer_type_t (*get_buffer_type)(ggml_backend_dev_t);
    ggml_backend_buffer_type_t (*get_host_buffer_type)(ggml_backend_dev_t);
    ggml_backend_buffer_t (*buffer_from_host_ptr)(ggml_backend_dev_t, void *, size_t, size_t);
    bool (*supports_op)(ggml_backend_dev_t, const ggml_tensor *);
    bool (*supports_buft)(ggml_backend_dev_t, ggml_backend_buffer_type_t);
    bool (*offload_op)(ggml_backend_dev_t, const ggml_tensor *);
    ggml_backend_event_t (*event_new)(ggml_backend_dev_t);
    void (*event_free)(ggml_backend_dev_t, ggml_backend_event_t);
    void (*event_synchronize)(ggml_backend_dev_t, ggml_backend_event_t);
};
struct ggml_backend_device {
    ggml_backend_device_i iface;
    ggml_backend_reg_t reg;
    void *context;
};
struct ggml_backend_i {
    const char *(*get_name)(ggml_backend_t);
    void (*free)(ggml_backend_t);
    void *set_tensor_async, *get_tensor_async, *set_tensor_2d_async, *get_tensor_2d_async, *cpy_tensor_async;
    void (*synchronize)(ggml_backend_t);
    void *graph_plan_create, *graph_plan_free, *graph_plan_update, *graph_plan_compute;
    enum ggml_status (*graph_compute)(ggml_backend_t, ggml_cgraph *);
    void *event_record, *event_wait, *graph_optimize;
};
struct ggml_backend {
    ggml_guid_t guid;
    ggml_backend_i iface;
    ggml_backend_dev_t device;
    void *context;
};
}

namespace kz::talker_backend {

namespace {

constexpr const char *MIRRORED_GGML = "0.25.3";
constexpr int BACKEND_API_VERSION = 2;
using q8::BlockQ8;
using q8::QK;
constexpr int PREFETCH = 4096;  // bytes ahead of each row's reads
#if defined(__aarch64__) && defined(_OPENMP)
constexpr bool ARM_KERNELS = true;
#else
constexpr bool ARM_KERNELS = false;
#endif

// The column, quantized as ggml's mul_mat quantizes it, with what the kernels need per block.
struct Column {
    std::vector<BlockQ8> y;
    std::vector<float> dy;     // fp32(y[b].d)
    std::vector<int32_t> off;  // x86: 8 lanes per block: -128 * (sum of the lane's 4 quants)
    std::vector<int8_t> yz;    // ARM: 32 per block, y's quants as the dotprod kernel reads them (zip_halves)
};

using RowsKernel = void (*)(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out,
                            int64_t rows);

#if defined(__x86_64__) && defined(_OPENMP)
using q8::hsum8;

// One row at a time (rows the 4-row kernel leaves, or rows not of whole 16-block groups), with
// ggml's own AVX2 sign trick.
KZ_Q8_AVX2 void rows_avx2_1(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out,
                            int64_t rows) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t r = 0; r < rows; r++) {
        const BlockQ8 *x = (const BlockQ8 *)(w + r * row_bytes);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < blocks; b++) {
            const __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
            const __m256i qy = _mm256_loadu_si256((const __m256i *)c.y[b].qs);
            const __m256i dot =
                _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx)), ones);
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d) * c.dy[b]);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot), acc);
        }
        out[r] = hsum8(acc);
    }
}

// Rows (2i, 2i+1) share a 512-bit accumulator: lanes 0-7 the first, 8-15 the second. The block
// scales of 16 blocks of a row are gathered and converted at once (fp32(x.d) * fp32(y.d) as
// ggml multiplies them), then moved under each block's lanes by one permute.
KZ_Q8_AVX512_VNNI void rows_avx512_vnni(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out,
                                        int64_t rows) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)sizeof(BlockQ8)));
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
    const int64_t whole = blocks / 16 * 16;
    int64_t r = 0;
    for (; whole == blocks && r + 4 <= rows; r += 4) {
        const BlockQ8 *x[4];
        for (int i = 0; i < 4; i++) x[i] = (const BlockQ8 *)(w + (r + i) * row_bytes);
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
            const __m512 dy = _mm512_loadu_ps(c.dy.data() + b0);
            __m512 d[4];
            for (int i = 0; i < 4; i++) {
                const __m512i raw = _mm512_i32gather_epi32(at, (const void *)(x[i] + b0), 1);
                d[i] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)), dy);
            }
#pragma GCC unroll 4
            for (int j = 0; j < 16; j++) {
                const int64_t b = b0 + j;
                const __m512i qy = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)c.y[b].qs));
                const __m512i off = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(c.off.data() + 8 * b)));
                const __m512i pick = _mm512_add_epi32(halves, _mm512_set1_epi32(j));
                for (int p = 0; p < 2; p++) {
                    if (j % 2 == 0) {
                        _mm_prefetch((const char *)(x[2 * p] + b) + PREFETCH, _MM_HINT_T0);
                        _mm_prefetch((const char *)(x[2 * p + 1] + b) + PREFETCH, _MM_HINT_T0);
                    }
                    const __m512i qx = _mm512_xor_si512(
                        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * p][b].qs)),
                                           _mm256_loadu_si256((const __m256i *)x[2 * p + 1][b].qs), 1),
                        flip);
                    const __m512i dot = _mm512_dpbusd_epi32(off, qx, qy);
                    const __m512 scale = _mm512_permutex2var_ps(d[2 * p], pick, d[2 * p + 1]);
                    acc[p] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dot), acc[p]);
                }
            }
        }
        for (int p = 0; p < 2; p++) {
            out[r + 2 * p] = hsum8(_mm512_castps512_ps256(acc[p]));
            out[r + 2 * p + 1] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p]), 1)));
        }
    }
    rows_avx2_1(w + r * row_bytes, row_bytes, blocks, c, out + r, rows - r);
}
#endif

#if defined(__aarch64__) && defined(_OPENMP)
// ---- ARM: ggml built for ARMv8.0 (no __ARM_FEATURE_DOTPROD) -------------------------------------
// Its product for one column (ggml_vec_dot_q8_0_q8_0, NEON path, ggml-cpu/arch/arm/quants.c, per
// weight row; GCC 12 -O3 -std=gnu11, read in the disassembly of libggml-cpu.so):
//   per block: 4 lanes of exact integer sums, ggml_vdotq_s32's no-dotprod fallback (vmull_s8 of
//     each 8-byte half, pairwise sums): over the block's 16 pairs of quants Q_k = x[2k]y[2k] +
//     x[2k+1]y[2k+1], lane l = Q_l + Q_{l+4} + Q_{l+8} + Q_{l+12} (not SDOT's grouping: SDOT's lane
//     l is bytes 4l..4l+3);
//   acc[b % 2] = vmlaq_n_f32(acc[b % 2], float(lanes), fp32(x.d) * fp32(y.d)): a multiply, then
//     an add (GCC 12's vmlaq_n_f32 is not fused: fmul, fadd), blocks taken two at a time;
//   sum = vaddvq_f32(acc[0]) + vaddvq_f32(acc[1]) (each ((l0 + l1) + (l2 + l3)), faddp twice);
//   an odd last block in scalar code: sum = fma(float(its integer sum), fp32(x.d) * fp32(y.d), sum)
//     (-ffp-contract=fast contracts it: fmadd).
// The kernels do exactly that, four rows at a time. The NEON one (ARMv8.0) takes the lanes as ggml
// does; the dotprod one with SDOT on the quants rearranged so that its lanes hold ggml's grouping:
// zip1/zip2 of the block's two 16-byte halves by 16-bit pairs give lanes (Q_l, Q_{l+8}) and
// (Q_{l+4}, Q_{l+12}), the column's quants zipped alike once per product (Column::yz). The
// integer sums are exact either way: both kernels give ggml's bits, on every ARM core.

inline float fp16_to_fp32(ggml_fp16_t h) {
    __fp16 f;
    std::memcpy(&f, &h, sizeof f);
    return (float)f;  // exact (fcvt)
}

// zip1 (zip2) of a block's halves by 16-bit pairs: the layout of Column::yz and the dotprod lanes
inline int8x16_t zip_low(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s16(vzip1q_s16(vreinterpretq_s16_s8(a), vreinterpretq_s16_s8(b)));
}
inline int8x16_t zip_high(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s16(vzip2q_s16(vreinterpretq_s16_s8(a), vreinterpretq_s16_s8(b)));
}

void zip_halves(const int8_t *q, int8_t *out) {
    const int8x16_t lo = vld1q_s8(q), hi = vld1q_s8(q + 16);
    vst1q_s8(out, zip_low(lo, hi));
    vst1q_s8(out + 16, zip_high(lo, hi));
}

// A block's 4 lanes, ggml's grouping: x the weight's quants, y the column's (raw)
struct NeonLanes {
    static const int8_t *column(const Column &c, int64_t b) { return c.y[b].qs; }
    static inline int32x4_t lanes(const int8_t *x, const int8_t *y) {
        const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16), y0 = vld1q_s8(y), y1 = vld1q_s8(y + 16);
        int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)));  // Q_0..Q_3
        s = vpadalq_s16(s, vmull_high_s8(x0, y0));                              // + Q_4..Q_7
        s = vpadalq_s16(s, vmull_s8(vget_low_s8(x1), vget_low_s8(y1)));         // + Q_8..Q_11
        return vpadalq_s16(s, vmull_high_s8(x1, y1));                           // + Q_12..Q_15
    }
};

// The same lanes with SDOT: y the column's quants zipped (Column::yz)
struct DotprodLanes {
    static const int8_t *column(const Column &c, int64_t b) { return c.yz.data() + b * QK; }
    KZ_Q8_DOTPROD static inline int32x4_t lanes(const int8_t *x, const int8_t *yz) {
        const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
        const int32x4_t s = vdotq_s32(vdupq_n_s32(0), zip_low(x0, x1), vld1q_s8(yz));  // Q_l + Q_{l+8}
        return vdotq_s32(s, zip_high(x0, x1), vld1q_s8(yz + 16));                      // + Q_{l+4} + Q_{l+12}
    }
};

// out[i] = row i . the column, i < R, the rows row_bytes apart: ggml's arithmetic per row
template <class Lanes, int R, bool Fused = false>
__attribute__((always_inline)) inline void rows_arm(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c,
                                                    float *out) {
    const BlockQ8 *x[R];
    for (int i = 0; i < R; i++) x[i] = (const BlockQ8 *)(w + i * row_bytes);
    float32x4_t acc[R][2];
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
    int64_t b = 0;
    for (; b + 1 < blocks; b += 2)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int8_t *y = Lanes::column(c, b + h);
            const float dy = c.dy[b + h];
            for (int i = 0; i < R; i++) {
                const BlockQ8 &blk = x[i][b + h];
                const float32x4_t lanes = vcvtq_f32_s32(Lanes::lanes(blk.qs, y));
                const float d = fp16_to_fp32(blk.d) * dy;
                acc[i][h] = Fused ? vfmaq_n_f32(acc[i][h], lanes, d) : vmlaq_n_f32(acc[i][h], lanes, d);
            }
        }
    for (int i = 0; i < R; i++) {
        float sum = vaddvq_f32(acc[i][0]) + vaddvq_f32(acc[i][1]);
        if (b < blocks) {  // the odd last block, as ggml's scalar tail
            int32_t sumi = 0;
            for (int j = 0; j < QK; j++) sumi += x[i][b].qs[j] * c.y[b].qs[j];
            sum = std::fma((float)sumi, fp16_to_fp32(x[i][b].d) * c.dy[b], sum);
        }
        out[i] = sum;
    }
}

void rows_neon(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out, int64_t rows) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) rows_arm<NeonLanes, 4>(w + r * row_bytes, row_bytes, blocks, c, out + r);
    for (; r < rows; r++) rows_arm<NeonLanes, 1>(w + r * row_bytes, row_bytes, blocks, c, out + r);
}

// Tests only: the NEON kernel with ggml's multiply-then-add fused, all else equal (a kernel off by
// a rounding, for the check to catch)
void rows_neon_fused(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) rows_arm<NeonLanes, 1, true>(w + r * row_bytes, row_bytes, blocks, c, out + r);
}

KZ_Q8_DOTPROD void rows_dotprod(const uint8_t *w, size_t row_bytes, int64_t blocks, const Column &c, float *out,
                                int64_t rows) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) rows_arm<DotprodLanes, 4>(w + r * row_bytes, row_bytes, blocks, c, out + r);
    for (; r < rows; r++) rows_arm<DotprodLanes, 1>(w + r * row_bytes, row_bytes, blocks, c, out + r);
}
#endif

// The kernel that runs for the best instruction set of this CPU (q8::best_isa): on x86-64 AVX-512
// VNNI only (an AVX2 version of the 4-row kernel was no faster than ggml's there: the sign trick
// costs what the extra rows save); on ARM the dotprod kernel where the CPU has dotprod (i8mm
// CPUs too: SMMLA multiplies two columns, a step has one), else the NEON one. Without OpenMP it
// would run on one thread: ggml's.
q8::Isa kernel_isa(q8::Isa isa) {
#if defined(__x86_64__) && defined(_OPENMP)
    if (isa == q8::Isa::avx512_vnni) return isa;
#elif defined(__aarch64__) && defined(_OPENMP)
    if (isa == q8::Isa::neon_i8mm || isa == q8::Isa::neon_dotprod) return q8::Isa::neon_dotprod;
    if (isa == q8::Isa::neon) return isa;
#endif
    (void)isa;
    return q8::Isa::none;
}

RowsKernel kernel_of(q8::Isa isa) {
    switch (kernel_isa(isa)) {
#if defined(__x86_64__) && defined(_OPENMP)
        case q8::Isa::avx512_vnni: return rows_avx512_vnni;
#elif defined(__aarch64__) && defined(_OPENMP)
        case q8::Isa::neon_dotprod: return rows_dotprod;
        case q8::Isa::neon: return rows_neon;
#endif
        default: return nullptr;
    }
}

void quantize(const float *x, int64_t cols, Column &c) {
    const int64_t blocks = cols / QK;
    c.y.resize(blocks), c.dy.resize(blocks);
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(x, c.y.data(), cols);
#if defined(__aarch64__) && defined(_OPENMP)
    c.yz.resize(QK * blocks);
#else
    c.off.resize(8 * blocks);
#endif
    for (int64_t b = 0; b < blocks; b++) {
        c.dy[b] = ggml_fp16_to_fp32(c.y[b].d);
        const int8_t *q = c.y[b].qs;
#if defined(__aarch64__) && defined(_OPENMP)
        zip_halves(q, c.yz.data() + b * QK);
#else
        for (int lane = 0; lane < 8; lane++) c.off[8 * b + lane] = q8::lane_offset(q + 4 * lane);
#endif
    }
}

// Thread ith of nth computes its share of out[rows] = W x, in whole groups of 4 rows.
void rows_split(RowsKernel kernel, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t blocks, const Column &c,
                float *out, int ith, int nth) {
    const int64_t groups = (rows + 3) / 4;
    const int64_t r0 = std::min(rows, groups * ith / nth * 4), r1 = std::min(rows, groups * (ith + 1) / nth * 4);
    if (r1 > r0) kernel(w + r0 * row_bytes, row_bytes, blocks, c, out + r0, r1 - r0);
}

// out[rows] = W x on `threads` OpenMP threads (one without OpenMP): the backend and its check
// run this same path.
void rows_parallel(RowsKernel kernel, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t blocks, const Column &c,
                   float *out, int threads) {
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    rows_split(kernel, w, row_bytes, rows, blocks, c, out, omp_get_thread_num(), omp_get_num_threads());
#else
    (void)threads;
    rows_split(kernel, w, row_bytes, rows, blocks, c, out, 0, 1);
#endif
}

#if defined(__aarch64__) && defined(_OPENMP)
// The many-column products on ARM. ggml built without dotprod computes each (row, column) of a
// Q8_0 product by the one-column vec_dot (llamafile's tinyBLAS has an ARM Q8_0 kernel only with
// dotprod), so the one-column kernel column by column gives its bits; each group of 4 rows is
// read once for all the columns. Thread ith of nth: its share of the columns' quantization,
// then (after all threads') its share of the row groups.
void columns_split(RowsKernel kernel, const ggml_tensor *node, std::vector<Column> &cs, int ith, int nth) {
    const ggml_tensor *w = node->src[0], *x = node->src[1];
    const int64_t n = x->ne[1], rows = w->ne[1], cols = w->ne[0];
    for (int64_t j = n * ith / nth; j < n * (ith + 1) / nth; j++)
        quantize((const float *)((const char *)x->data + j * x->nb[1]), cols, cs[j]);
#pragma omp barrier
    const int64_t groups = (rows + 3) / 4;
    const int64_t r0 = std::min(rows, groups * ith / nth * 4), r1 = std::min(rows, groups * (ith + 1) / nth * 4);
    const uint8_t *wd = (const uint8_t *)w->data;
    for (int64_t r = r0; r < r1; r += 4)
        for (int64_t j = 0; j < n; j++)
            kernel(wd + r * w->nb[1], w->nb[1], cols / QK, cs[j], (float *)((char *)node->data + j * node->nb[1]) + r,
                   std::min<int64_t>(4, r1 - r));
}

void columns_arm(RowsKernel kernel, const ggml_tensor *node, std::vector<Column> &cs, int threads) {
    cs.resize((size_t)node->src[1]->ne[1]);
#pragma omp parallel num_threads(threads)
    columns_split(kernel, node, cs, omp_get_thread_num(), omp_get_num_threads());
}
#endif

// Whether the ggml in this process computes the Q8_0 products the kernels repeat. On ARM its
// ARMv8.0 build does; a ggml built with dotprod (GGML_NATIVE on an ARMv8.2+ device, as Termux's
// llama-cpp-python) groups SDOT's lanes in its plain product and repacks the talker's Q8_0
// matrices into its CPU_REPACK buffer, multiplied there with SDOT / SMMLA: its kernels keep them.
bool ggml_product_repeated() {
#if defined(__aarch64__)
    return !ggml_cpu_has_dotprod();
#else
    return true;
#endif
}

// Whether this CPU (and build, and ggml) has a many-column kernel: x86-64's talker_gemm (AVX-512
// VNNI), or the ARM kernels column by column.
bool columns_available() {
#if defined(__aarch64__) && defined(_OPENMP)
    return kernel_of(q8::best_isa()) != nullptr && ggml_product_repeated();
#else
    return talker_gemm::available();
#endif
}

// ---- the backend --------------------------------------------------------------------------------

std::atomic<int64_t> calls{0};
std::atomic<bool> enabled{false};
std::atomic<bool> columns_on{false};  // the many-column kernel passed its probe
std::atomic<bool> steps_on{false};    // one-column products are claimed (steps_wanted())
RowsKernel active_kernel = nullptr;
std::string isa_name;  // active_kernel's
std::string status = "not set up";
std::mutex setup_mutex;

struct Backend {
    int threads = 1;
    Column column;
    talker_gemm::Columns columns;     // the many-column products' (talker_gemm.h)
    std::vector<Column> arm_columns;  // ARM's (columns_arm)
};

// Whether the weight's bytes are ggml's Q8_0 rows: in a host buffer (CPU, CPU_Mapped) or in none
// (the check's context). ggml's extra buffer types, where its CPU backend keeps weights it
// rearranged for its own kernels (CPU_REPACK: Q8_0 interleaved 4x4 / 4x8 on ARM with dotprod /
// i8mm; AMX; KleidiAI), are not host buffers: the scheduler never hands this backend a product
// of such a weight (dev_supports_buft refuses them), and supports() and graph_compute() refuse it too.
bool plain_rows(const ggml_tensor *w) {
    const ggml_tensor *t = w->view_src ? w->view_src : w;
    return !t->buffer || ggml_backend_buffer_is_host(t->buffer);
}

// MUL_MAT of a contiguous 2-D Q8_0 weight by a 2-D F32 matrix of contiguous columns (to F32): what
// both kernels take, told apart by the column count. Whether the backend is on is asked only when
// the scheduler assigns nodes (supported()): a split it was already given runs by shape alone, so
// setup() switching the backend off between the two cannot send a node to the wrong kernel.
bool q8_0_product(const ggml_tensor *op) {
    const ggml_tensor *w = op->src[0], *x = op->src[1];
    return op->op == GGML_OP_MUL_MAT && w && x && w->type == GGML_TYPE_Q8_0 && x->type == GGML_TYPE_F32 &&
           op->type == GGML_TYPE_F32 && w->ne[2] == 1 && w->ne[3] == 1 && ggml_is_contiguous(w) && x->ne[2] == 1 &&
           x->ne[3] == 1 && x->nb[0] == sizeof(float) && w->ne[0] % QK == 0 && plain_rows(w);
}

// one column: the one-column kernel's
bool one_column(const ggml_tensor *op) { return q8_0_product(op) && op->src[1]->ne[1] == 1; }

// What supported() claims: one-column products only while steps_on (graph_compute runs a split it
// was given by shape alone, as for enabled)
bool claimed_column(const ggml_tensor *op) { return steps_on.load(std::memory_order_relaxed) && one_column(op); }

// ---- the many-column products (the prefill): talker_gemm.h -----------------------------------------
// 2+ columns (any column stride, in floats), when that kernel passed its probe
bool many_columns(const ggml_tensor *op) {
    return columns_on.load(std::memory_order_relaxed) && q8_0_product(op) && op->src[1]->ne[1] > 1 &&
           op->src[1]->nb[1] % sizeof(float) == 0 && op->nb[0] == sizeof(float);
}

// node = W x on the one-column kernel (the backend and its check run this)
void column_product(RowsKernel kernel, Column &c, ggml_tensor *node, int threads) {
    const ggml_tensor *w = node->src[0];
    quantize((const float *)node->src[1]->data, w->ne[0], c);
    rows_parallel(kernel, (const uint8_t *)w->data, w->nb[1], w->ne[1], w->ne[0] / QK, c, (float *)node->data, threads);
}

// node = W X on the many-column kernel, X's columns x->nb[1] apart (the backend and its check run
// this); on ARM the one-column `kernel` column by column
void columns_product(RowsKernel kernel, Backend *b, ggml_tensor *node) {
#if defined(__aarch64__) && defined(_OPENMP)
    columns_arm(kernel, node, b->arm_columns, b->threads);
#else
    (void)kernel;
    const ggml_tensor *w = node->src[0], *x = node->src[1];
    talker_gemm::product((const uint8_t *)w->data, w->nb[1], w->ne[1], w->ne[0], (const float *)x->data,
                         x->nb[1] / sizeof(float), x->ne[1], (float *)node->data, node->nb[1] / sizeof(float),
                         b->columns, b->threads);
#endif
}
// ------------------------------------------------------------------------------------------------

bool supported(const ggml_tensor *op) {
    return enabled.load(std::memory_order_relaxed) && (claimed_column(op) || many_columns(op));
}

bool no_op(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_RESHAPE || op == GGML_OP_VIEW || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

// Runs a split the scheduler gave this backend: the products it claimed (and views, if any).
enum ggml_status graph_compute(ggml_backend_t backend, ggml_cgraph *graph) {
    Backend *b = (Backend *)backend->context;
    const int n = ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; i++) {
        const ggml_tensor *node = ggml_graph_node(graph, i);
        if (node->op == GGML_OP_MUL_MAT ? !(one_column(node) || many_columns(node)) : !no_op(node->op))
            return GGML_STATUS_FAILED;
    }
    for (int i = 0; i < n; i++) {
        ggml_tensor *node = ggml_graph_node(graph, i);
        if (node->op != GGML_OP_MUL_MAT) continue;
        if (many_columns(node)) {
            columns_product(active_kernel, b, node);
            calls.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        column_product(active_kernel, b->column, node, b->threads);
        calls.fetch_add(1, std::memory_order_relaxed);
    }
    return GGML_STATUS_SUCCESS;
}

const char *backend_name(ggml_backend_t) { return "KZQ8"; }
void backend_free(ggml_backend_t backend) {
    delete (Backend *)backend->context;
    delete backend;
}

ggml_guid_t guid() {
    static ggml_guid g = {0x6b, 0x61, 0x7a, 0x65, 0x74, 0x74, 0x73, 0x2d,
                          0x71, 0x38, 0x2d, 0x74, 0x61, 0x6c, 0x6b, 0x31};
    return &g;
}

void set_n_threads(ggml_backend_t backend, int n) {
    if (n > 0) ((Backend *)backend->context)->threads = n;
}

ggml_backend_t init_backend(ggml_backend_dev_t dev, const char *) {
    ggml_backend_i iface{};
    iface.get_name = backend_name;
    iface.free = backend_free;
    iface.graph_compute = graph_compute;
    return new ggml_backend{guid(), iface, dev, new Backend};
}

const char *dev_name(ggml_backend_dev_t) { return "KZQ8"; }
const char *dev_description(ggml_backend_dev_t) { return "kazetts Q8_0 matrix products"; }
void dev_memory(ggml_backend_dev_t, size_t *free, size_t *total) { *free = *total = 0; }
enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_ACCEL; }
void dev_props(ggml_backend_dev_t dev, ggml_backend_dev_props *p) {
    p->name = dev_name(dev);
    p->description = dev_description(dev);
    p->type = GGML_BACKEND_DEVICE_TYPE_ACCEL;
}
ggml_backend_buffer_type_t dev_buffer_type(ggml_backend_dev_t) { return ggml_backend_cpu_buffer_type(); }
bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor *op) { return supported(op); }
bool dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t buft) { return ggml_backend_buft_is_host(buft); }

ggml_backend_device &device() {
    static ggml_backend_device dev = [] {
        ggml_backend_device_i iface{};
        iface.get_name = dev_name;
        iface.get_description = dev_description;
        iface.get_memory = dev_memory;
        iface.get_type = dev_type;
        iface.get_props = dev_props;
        iface.init_backend = init_backend;
        iface.get_buffer_type = dev_buffer_type;
        iface.supports_op = dev_supports_op;
        iface.supports_buft = dev_supports_buft;
        return ggml_backend_device{iface, nullptr, nullptr};
    }();
    return dev;
}

const char *reg_name(ggml_backend_reg_t) { return "KAZETTS"; }
size_t reg_device_count(ggml_backend_reg_t) { return 1; }
ggml_backend_dev_t reg_device(ggml_backend_reg_t, size_t) { return &device(); }
void *reg_proc_address(ggml_backend_reg_t, const char *name) {
    return std::strcmp(name, "ggml_backend_set_n_threads") == 0 ? (void *)set_n_threads : nullptr;
}

// Our product into node->data: node a MUL_MAT of the random Q8_0 matrix by the random columns,
// which ggml does not compute.
using Ours = std::function<void(ggml_tensor *node)>;

// ggml's product (its CPU mul_mat) and ours on the same random operands: largest difference.
// x_stride > cols: the columns are a view of a wider matrix (x->nb[1] is not cols floats), its
// other values random too.
double compare(int64_t rows, int64_t cols, int64_t n, int64_t x_stride, uint64_t seed, int threads, const Ours &ours) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> wf((size_t)(rows * cols)), x((size_t)(x_stride * n));
    for (float &v : wf) v = normal(rng);
    for (float &v : x) v = normal(rng) * 3.0f;
    const size_t row_bytes = ggml_row_size(GGML_TYPE_Q8_0, cols);
    // the operands, both results and ggml's work buffer (the columns quantized, per-thread scratch)
    ggml_init_params ip = {rows * row_bytes + (x_stride + 2 * rows) * n * sizeof(float) + n * row_bytes +
                               6 * ggml_tensor_overhead() + ggml_graph_overhead() + 4096 * (threads + 1),
                           nullptr, false};
    ggml_context *ctx = ggml_init(ip);
    if (!ctx) return -1;
    ggml_tensor *w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, cols, rows);
    ggml_tensor *wide = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, x_stride, n);
    ggml_tensor *xt = x_stride == cols ? wide : ggml_view_2d(ctx, wide, cols, n, wide->nb[1], 0);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, wf.data(), w->data, 0, rows, cols, nullptr);
    std::memcpy(wide->data, x.data(), x.size() * sizeof(float));
    ggml_tensor *y = ggml_mul_mat(ctx, w, xt), *mine = ggml_mul_mat(ctx, w, xt);
    ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    double worst = -1;
    if (ggml_graph_compute_with_ctx(ctx, gf, threads) == GGML_STATUS_SUCCESS) {
        ours(mine);
        worst = 0;
        for (int64_t i = 0; i < rows * n;
             i++) {  // a NaN on either side is the worst difference (std::max would drop it)
            const double d = std::fabs((double)((float *)mine->data)[i] - ((float *)y->data)[i]);
            worst = std::isnan(d) ? INFINITY : std::max(worst, d);
        }
    }
    ggml_free(ctx);
    return worst;
}

// The one-column kernel against ggml.
double check(RowsKernel kernel, int64_t rows, int64_t cols, uint64_t seed, int threads) {
    return compare(rows, cols, 1, cols, seed, threads, [&](ggml_tensor *node) {
        Column c;
        column_product(kernel, c, node, threads);
    });
}

// The many-column kernel (mutant: the tests' one, off by a rounding) against ggml, columns x_stride
// floats apart; on ARM the one-column `kernel` column by column.
double check_columns(RowsKernel kernel, int64_t rows, int64_t cols, int64_t n, int64_t x_stride, uint64_t seed,
                     int threads, bool mutant) {
    return compare(rows, cols, n, x_stride, seed, threads, [&](ggml_tensor *node) {
        Backend b;
        b.threads = threads;
#if defined(__aarch64__) && defined(_OPENMP)
        return columns_product(mutant ? rows_neon_fused : kernel, &b, node);
#else
        if (!mutant) return columns_product(kernel, &b, node);
        const ggml_tensor *w = node->src[0], *x = node->src[1];
        talker_gemm::product_unfused((const uint8_t *)w->data, w->nb[1], rows, cols, (const float *)x->data,
                                     x->nb[1] / sizeof(float), n, (float *)node->data, node->nb[1] / sizeof(float),
                                     b.columns);
#endif
    });
}

const char *setting() {
    const char *env = std::getenv("KAZETTS_TALKER_BACKEND");
    return env ? env : "";
}

bool wanted() { return !(std::strcmp(setting(), "0") == 0 || std::strcmp(setting(), "off") == 0); }

// Whether the one-column kernel takes the steps. On AMD (Zen 5, measured 2026-12-02) ggml's loop,
// one row after another, already streams at the memory bus's speed (~35 GB/s on 2 cores), and the
// four interleaved row streams of the kernel defeat the hardware prefetcher there: it reads at
// ~0.85x ggml's, and the splits cost ~1 ms a step on top. On the Xeon it read at 1.5x ggml's.
// KAZETTS_TALKER_BACKEND=all / =prefill override the choice (A/B measurements, tests).
bool steps_wanted() {
    if (std::strcmp(setting(), "all") == 0) return true;
    if (std::strcmp(setting(), "prefill") == 0) return false;
#if defined(__x86_64__)
    return !__builtin_cpu_is("amd");
#else
    return true;
#endif
}

}  // namespace

int setup() {
    std::lock_guard<std::mutex> lock(setup_mutex);
    if (!wanted()) {
        enabled = false;
        status = "off (KAZETTS_TALKER_BACKEND)";
        return 0;
    }
    if (!active_kernel) {
        const q8::Isa isa = kernel_isa(q8::best_isa());
        RowsKernel kernel = kernel_of(isa);
        if (!kernel) {
            status = "off (no kernel for this CPU: ggml's own product)";
            return 0;
        }
        if (std::strcmp(ggml_version(), MIRRORED_GGML) != 0) {
            status = std::string("off (ggml ") + ggml_version() + ", the backend structures are those of ggml " +
                     MIRRORED_GGML + ")";
            return 0;
        }
        if (!ggml_product_repeated()) {
            status = "off (this ggml was built with dotprod: its own Q8_0 kernels, repacked)";
            return 0;
        }
        // the probe: rows not a multiple of 4 and 2 threads cover every kernel path (on ARM an odd
        // block count too: ggml's scalar tail)
        if (check(kernel, 70, 1024, 1, 2) != 0.0 || (ARM_KERNELS && check(kernel, 70, 1056, 1, 2) != 0.0)) {
            status = "off (the kernel does not reproduce this ggml's Q8_0 product bit for bit)";
            return 0;
        }
        // the many-column kernel's probe: 6 rows past the 8-row groups, tiles of 6 and 5 columns
        columns_on = columns_available() && check_columns(kernel, 70, 1024, 11, 1024, 1, 2, false) == 0.0;
        static ggml_backend_reg reg = {
            BACKEND_API_VERSION, {reg_name, reg_device_count, reg_device, reg_proc_address}, nullptr};
        device().reg = &reg;
        active_kernel = kernel;
        isa_name = q8::isa_name(isa);
        ggml_backend_register(&reg);
    }
    steps_on = steps_wanted();
    enabled = steps_on || columns_on;
    status = !enabled      ? "off (KAZETTS_TALKER_BACKEND=prefill, and the many-column kernel failed its probe)"
             : !columns_on ? isa_name + " (one column only)"
             : steps_on    ? isa_name
             : std::strcmp(setting(), "prefill") == 0
                 ? isa_name + " (prefill only: KAZETTS_TALKER_BACKEND)"
                 : isa_name + " (prefill only: ggml's own loop is faster on this CPU)";
    return enabled ? 1 : 0;
}

}  // namespace kz::talker_backend

extern "C" {

KZ_API int kz_talker_backend_setup(void) {
    try {
        return kz::talker_backend::setup();
    } catch (...) {
        return 0;
    }
}

KZ_API const char *kz_talker_backend_status(void) { return kz::talker_backend::status.c_str(); }

KZ_API int64_t kz_talker_backend_calls(void) { return kz::talker_backend::calls.load(); }

KZ_API double kz_talker_backend_check(int64_t rows, int64_t cols, uint64_t seed, int threads) {
    using namespace kz::talker_backend;
    RowsKernel kernel = kernel_of(kz::q8::best_isa());
    if (!kernel || !ggml_product_repeated() || rows < 1 || cols < 1 || cols % QK != 0 || threads < 1 ||
        rows > (1 << 16) || cols > (1 << 16))
        return -1;
    try {
        return check(kernel, rows, cols, seed, threads);
    } catch (...) {
        return -1;
    }
}

KZ_API double kz_talker_backend_check_columns(int64_t rows, int64_t cols, int64_t n, int64_t x_stride, uint64_t seed,
                                              int threads, int mutant) {
    using namespace kz::talker_backend;
    if (!columns_available() || rows < 1 || cols < 1 || cols % QK != 0 || n < 2 || threads < 1 || rows > (1 << 16) ||
        cols > (1 << 16) || n > 512 || x_stride < cols || x_stride > cols + 4096)
        return -1;
    try {
        return check_columns(kernel_of(kz::q8::best_isa()), rows, cols, n, x_stride, seed, threads, mutant != 0);
    } catch (...) {
        return -1;
    }
}
}
