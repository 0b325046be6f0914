// Q8_0 matrix x few-columns product on AVX-512 VNNI or AVX2, and on ARM NEON / dotprod / i8mm
// (see q8_matvec.h for why).
//
// x86-64. Packed weights, per group of 4 rows (k = cols / 32 blocks, padded to kp, a multiple of 16;
// padding blocks have scale 0 and quants 0, stored as 128):
//   scales  [4][kp] fp16                   row r's block scales, contiguous
//   quants  [kp / 2][4][64] u8             per pair of blocks, the 4 rows' 64 quants + 128
// Packed activation column (one per input column, built by each thread of the product):
//   y       [kp * 32] s8                   ggml's Q8_0 quants of the column
//   offset  [kp / 2][16] i32               -128 * (sum of the 4 quants under each VNNI lane)
//   dy      [kp] f32                       ggml's Q8_0 block scales of the column
// One VNNI lane then sums exactly the 4 products x*y ggml's own kernel sums in that lane:
// (x + 128) * y summed, plus -128 * sum(y), in integers. The AVX2 kernel does not use offset
// (left zero for it).
//
// aarch64. Packed weights, per group of 4 rows (same size):
//   scales  [kp][4] fp16                   the 4 rows' scales of block b, contiguous
//   quants  [kp][4][2][16] s8              per block, chunk c (its bytes 8c..8c+7) and pair p of
//                                          rows: row 2p's 8 quants then row 2p+1's
// Packed activation column:
//   y       [kp][4][16] s8                 per block and chunk, the chunk's 8 quants twice
//   dy      [kp] f32
// Per block, rows in lanes: the integer sums [r0, r1, r2, r3] (exact), then
// acc[b % 2] = fma(float(sums), fp32(scales) * dy[b], acc[b % 2]); out = acc[0] + acc[1].
#include "kernels/q8_matvec.h"

#include "core/common_internal.h"
#include "kernels/q8_common.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

#if defined(__x86_64__)
// GCC 12 flags the intrinsics' own _mm512_undefined_* placeholders when they are inlined
// into a target-attribute function (a known false positive of the headers)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kz::q8 {

namespace {

constexpr int64_t ROWS = 4;                                 // rows per packed group
constexpr int64_t BLOCK_GROUP = 16;                         // block scales per 512-bit vector
constexpr int64_t GROUP_BYTES_PER_BLOCK = ROWS * (2 + QK);  // fp16 scale + quants, 4 rows

constexpr int N_ISAS = (int)Isa::neon_i8mm + 1;
std::atomic<int64_t> g_runs[N_ISAS];      // runs(): nodes computed per kernel
constexpr char NODE_PREFIX[] = "kz.q8 ";  // the name of a mul_mat node: the prefix, then its isa_name

int64_t padded_blocks(int64_t cols) { return (cols / QK + BLOCK_GROUP - 1) / BLOCK_GROUP * BLOCK_GROUP; }

// What a product node computes besides W x (src[2], src[3] of the node when set).
struct Fused {
    Isa isa;
    float eps;  // of the RMS norm
};

// The node's userdata holds its Fused by value: the kernel in the low 32 bits, eps's bits in the high.
static_assert(sizeof(void *) >= 8, "a Fused is passed in a pointer's 64 bits");
void *op_data(Fused f) {
    uint32_t eps_bits;
    std::memcpy(&eps_bits, &f.eps, sizeof eps_bits);
    return (void *)(uintptr_t)((uint64_t)eps_bits << 32 | (uint32_t)f.isa);
}

Fused op_fused(void *data) {
    const uint64_t v = (uint64_t)(uintptr_t)data;
    const uint32_t eps_bits = (uint32_t)(v >> 32);
    Fused f{(Isa)(uint32_t)v, 0.0f};
    std::memcpy(&f.eps, &eps_bits, sizeof eps_bits);
    return f;
}

// y = x / sqrt(mean(x^2) + eps) * w, with ggml's arithmetic (its fused rms_norm + mul: float
// squares summed in double in order, then float), so the product's input is bit for bit ggml's.
void rms_norm_mul(const float *x, const float *w, int64_t n, float eps, float *y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = sum / n;
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

#if defined(__x86_64__)
int64_t column_bytes(int64_t cols) { return padded_blocks(cols) * (QK + QK + 4); }

// Stores block b of a column (its quants and fp32 scale) where the x86 kernels read it.
void store_block(uint8_t *col, int64_t kp, int64_t b, const BlockQ8 &blk, bool offsets) {
    std::memcpy(col + b * QK, blk.qs, QK);
    ((float *)(col + 2 * kp * QK))[b] = ggml_fp16_to_fp32(blk.d);
    int32_t *offset = (int32_t *)(col + kp * QK);
    for (int lane = 0; offsets && lane < QK / 4; lane++) offset[b * (QK / 4) + lane] = lane_offset(blk.qs + 4 * lane);
}
#elif defined(__aarch64__)
constexpr int64_t CHUNK = 8;  // quants of a row per chunk (one i8mm operand row)
int64_t column_bytes(int64_t cols) { return padded_blocks(cols) * (2 * QK + 4); }

// The same for the ARM kernels: each chunk of 8 quants twice.
void store_block(uint8_t *col, int64_t kp, int64_t b, const BlockQ8 &blk, bool) {
    for (int64_t c = 0; c < QK / CHUNK; c++) {
        std::memcpy(col + b * 2 * QK + c * 2 * CHUNK, blk.qs + c * CHUNK, CHUNK);
        std::memcpy(col + b * 2 * QK + c * 2 * CHUNK + CHUNK, blk.qs + c * CHUNK, CHUNK);
    }
    ((float *)(col + 2 * kp * QK))[b] = ggml_fp16_to_fp32(blk.d);
}
#endif

#if defined(__x86_64__) || defined(__aarch64__)
void pack_columns(const ggml_tensor *x, const ggml_tensor *norm_w, Fused f, std::vector<uint8_t> &packed) {
    const bool offsets = f.isa == Isa::avx512_vnni;
    const int64_t cols = x->ne[0], k = cols / QK, kp = padded_blocks(cols), bytes = column_bytes(cols);
    const ggml_from_float_t quantize = ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float;
    thread_local std::vector<float> normed;
    packed.assign((size_t)(bytes * x->ne[1]), 0);
    for (int64_t c = 0; c < x->ne[1]; c++) {
        const float *in = (const float *)((const char *)x->data + c * x->nb[1]);
        if (norm_w) {
            normed.resize((size_t)cols);
            rms_norm_mul(in, (const float *)norm_w->data, cols, f.eps, normed.data());
            in = normed.data();
        }
        for (int64_t b = 0; b < k; b++) {
            BlockQ8 blk;
            quantize(in + b * QK, &blk, QK);
            store_block(packed.data() + c * bytes, kp, b, blk, offsets);
        }
    }
}
#endif

#if defined(__x86_64__)
// Each thread's groups are one stream of memory. Prefetching it 16 KB ahead, at the pace it is
// read (the share of the group that far ahead for each chunk of blocks), took the 0.6b code
// predictor from 38-40 to 24-26 ms/frame on the Zen 5 when its memory bus was quiet (an 84 MB
// step in a microbenchmark: 62 -> 95 GB/s); with the bus busy (~42 GB/s) it changed nothing.
constexpr int64_t PREFETCH_AHEAD = 16384;

// Prefetches what corresponds to blocks [b0, b0 + n) of the group, PREFETCH_AHEAD bytes on.
KZ_Q8_AVX2 inline void prefetch_ahead(const uint8_t *group, int64_t b0, int64_t n) {
    const int64_t share = GROUP_BYTES_PER_BLOCK * n;
    const char *p = (const char *)group + PREFETCH_AHEAD + share * (b0 / n);
    for (int64_t o = 0; o < share; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

// out[r] = row r of the group . the packed column, r = 0..3: a pair of blocks per VNNI product
KZ_Q8_AVX512_VNNI void group_dot_avx512_vnni(const uint8_t *group, int64_t kp, const uint8_t *col, float *out) {
    const ggml_fp16_t *scales = (const ggml_fp16_t *)group;
    const uint8_t *quants = group + ROWS * kp * sizeof(ggml_fp16_t);
    const uint8_t *y = col;
    const uint8_t *offset = col + kp * QK;
    const float *dy = (const float *)(col + 2 * kp * QK);
    const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[ROWS];
    for (auto &a : acc) a = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < kp; b0 += BLOCK_GROUP) {
        const __m512 d = _mm512_loadu_ps(dy + b0);
        __m512 s[ROWS];
        for (int r = 0; r < ROWS; r++) {
            s[r] = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + r * kp + b0))), d);
        }
        prefetch_ahead(group, b0, BLOCK_GROUP);
#pragma GCC unroll 8
        for (int j = 0; j < BLOCK_GROUP / 2; j++) {
            const int64_t pair = b0 / 2 + j;
            const __m512i yv = _mm512_loadu_si512(y + pair * 64);
            const __m512i off = _mm512_loadu_si512(offset + pair * 64);
            const __m512i idx = _mm512_add_epi32(halves, _mm512_set1_epi32(2 * j));
            const uint8_t *w = quants + pair * ROWS * 64;
            for (int r = 0; r < ROWS; r++) {
                const __m512i sum = _mm512_dpbusd_epi32(off, _mm512_loadu_si512(w + r * 64), yv);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(idx, s[r]), acc[r]);
            }
        }
    }
    for (int r = 0; r < ROWS; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// The same on AVX2: one block per product, the quants' sign moved onto y so that the unsigned x
// signed byte product cannot saturate (as ggml's AVX2 kernel does); the offset is not needed.
KZ_Q8_AVX2 void group_dot_avx2(const uint8_t *group, int64_t kp, const uint8_t *col, float *out) {
    const ggml_fp16_t *scales = (const ggml_fp16_t *)group;
    const uint8_t *quants = group + ROWS * kp * sizeof(ggml_fp16_t);
    const uint8_t *y = col;
    const float *dy = (const float *)(col + 2 * kp * QK);
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 acc[ROWS];
    for (auto &a : acc) a = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < kp; b0 += 8) {
        const __m256 d = _mm256_loadu_ps(dy + b0);
        __m256 s[ROWS];
        for (int r = 0; r < ROWS; r++) {
            s[r] = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + r * kp + b0))), d);
        }
        prefetch_ahead(group, b0, 8);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const int64_t b = b0 + j;
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y + b * QK));
            const __m256i idx = _mm256_set1_epi32(j);
            const uint8_t *w = quants + (b / 2) * ROWS * 64 + (b % 2) * QK;
            for (int r = 0; r < ROWS; r++) {
                const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + r * 64)), flip);
                const __m256i prod = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(yv, x));
                const __m256i sum = _mm256_madd_epi16(prod, ones);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_permutevar8x32_ps(s[r], idx), acc[r]);
            }
        }
    }
    for (int r = 0; r < ROWS; r++) out[r] = hsum8(acc[r]);
}
#endif

#if defined(__aarch64__)
// The operands of group g's block b: the 4 rows' scales and the 4 chunks' pairs of rows
inline const float16_t *arm_scales(const uint8_t *group, int64_t b) { return (const float16_t *)group + 4 * b; }
inline const int8_t *arm_quants(const uint8_t *group, int64_t kp, int64_t b) {
    return (const int8_t *)(group + kp * 4 * sizeof(float16_t)) + b * ROWS * QK;
}

// The float step every ARM kernel takes per block: the same operations in the same order (the
// kernels walk the blocks two at a time, b + h, h = 0, 1 unrolled, so that acc[h] stays in a register)
inline void accumulate(float32x4_t &acc, int32x4_t sums, const float16_t *scales, float dy) {
    acc = vfmaq_f32(acc, vcvtq_f32_s32(sums), vmulq_n_f32(vcvt_f32_f16(vld1_f16(scales)), dy));
}

inline void finish(const float32x4_t acc[2], float *out) { vst1q_f32(out, vaddq_f32(acc[0], acc[1])); }

// out[r] = row r of the group . the packed column, r = 0..3: NEON widening multiplies (ARMv8.0)
void group_dot_neon(const uint8_t *group, int64_t kp, const uint8_t *col, float *out) {
    const float *dy = (const float *)(col + 2 * kp * QK);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b2 = 0; b2 < kp; b2 += 2)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t b = b2 + h;
            const int8_t *w = arm_quants(group, kp, b), *y = (const int8_t *)col + b * 2 * QK;
            int32x4_t r[ROWS] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int c = 0; c < QK / CHUNK; c++) {  // (loads of 4 vectors spill here: one at a time)
                const int8x16_t yv = vld1q_s8(y + c * 16), w01 = vld1q_s8(w + c * 32), w23 = vld1q_s8(w + c * 32 + 16);
                r[0] = vpadalq_s16(r[0], vmull_s8(vget_low_s8(w01), vget_low_s8(yv)));
                r[1] = vpadalq_s16(r[1], vmull_high_s8(w01, yv));
                r[2] = vpadalq_s16(r[2], vmull_s8(vget_low_s8(w23), vget_low_s8(yv)));
                r[3] = vpadalq_s16(r[3], vmull_high_s8(w23, yv));
            }
            accumulate(acc[h], vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3])), arm_scales(group, b), dy[b]);
        }
    finish(acc, out);
}

// The same with SDOT: a pair of rows' chunk times the column's chunk (twice) in one instruction.
// This kernel and the SMMLA one read a block's 128 weight bytes and 64 column bytes (side by side)
// in three loads of 4 vectors: lo.val[2c + p] (hi.val for chunks 2, 3) is chunk c's pair p of rows,
// y.val[c] chunk c. One load instruction per 4 vectors instead of one per vector (SDOT: 49
// instructions for 2 blocks instead of 60): on one ARM core the code predictor is bound by the
// instructions it issues. (Locals: GCC 12 keeps a struct of them in memory.)
KZ_Q8_DOTPROD void group_dot_dotprod(const uint8_t *group, int64_t kp, const uint8_t *col, float *out) {
    const float *dy = (const float *)(col + 2 * kp * QK);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b2 = 0; b2 < kp; b2 += 2)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t b = b2 + h;
            const int8_t *w = arm_quants(group, kp, b), *col_b = (const int8_t *)col + b * 2 * QK;
            const int8x16x4_t lo = vld1q_s8_x4(w), hi = vld1q_s8_x4(w + 64), y = vld1q_s8_x4(col_b);
            int32x4_t r01 = vdupq_n_s32(0), r23 = vdupq_n_s32(0);  // lanes: row 2p's two halves, row 2p+1's
            r01 = vdotq_s32(r01, lo.val[0], y.val[0]), r23 = vdotq_s32(r23, lo.val[1], y.val[0]);
            r01 = vdotq_s32(r01, lo.val[2], y.val[1]), r23 = vdotq_s32(r23, lo.val[3], y.val[1]);
            r01 = vdotq_s32(r01, hi.val[0], y.val[2]), r23 = vdotq_s32(r23, hi.val[1], y.val[2]);
            r01 = vdotq_s32(r01, hi.val[2], y.val[3]), r23 = vdotq_s32(r23, hi.val[3], y.val[3]);
            accumulate(acc[h], vpaddq_s32(r01, r23), arm_scales(group, b), dy[b]);
        }
    finish(acc, out);
}

// Two columns at once with SMMLA: a pair of rows' chunk times the two columns' chunks, the 2x2
// integer sums in one instruction. `pair` holds, per block and chunk, column 0's 8 quants then
// column 1's (pair_columns).
KZ_Q8_I8MM void group_dot_i8mm(const uint8_t *group, int64_t kp, const int8_t *pair, const float *dy0, const float *dy1,
                               float *out0, float *out1) {
    float32x4_t acc0[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, acc1[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b2 = 0; b2 < kp; b2 += 2)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t b = b2 + h;
            const int8_t *w = arm_quants(group, kp, b), *col_b = pair + b * 2 * QK;
            const int8x16x4_t lo = vld1q_s8_x4(w), hi = vld1q_s8_x4(w + 64), y = vld1q_s8_x4(col_b);
            int32x4_t r01 = vdupq_n_s32(0),
                      r23 = vdupq_n_s32(0);  // lanes: (2p, col 0), (2p, col 1), (2p+1, 0), (2p+1, 1)
            r01 = vmmlaq_s32(r01, lo.val[0], y.val[0]), r23 = vmmlaq_s32(r23, lo.val[1], y.val[0]);
            r01 = vmmlaq_s32(r01, lo.val[2], y.val[1]), r23 = vmmlaq_s32(r23, lo.val[3], y.val[1]);
            r01 = vmmlaq_s32(r01, hi.val[0], y.val[2]), r23 = vmmlaq_s32(r23, hi.val[1], y.val[2]);
            r01 = vmmlaq_s32(r01, hi.val[2], y.val[3]), r23 = vmmlaq_s32(r23, hi.val[3], y.val[3]);
            accumulate(acc0[h], vuzp1q_s32(r01, r23), arm_scales(group, b), dy0[b]);
            accumulate(acc1[h], vuzp2q_s32(r01, r23), arm_scales(group, b), dy1[b]);
        }
    finish(acc0, out0);
    finish(acc1, out1);
}

// Columns c and c + 1 of the packed columns as group_dot_i8mm reads them
void pair_columns(const uint8_t *c0, const uint8_t *c1, int64_t kp, std::vector<int8_t> &pair) {
    pair.resize((size_t)(kp * 2 * QK));
    for (int64_t i = 0; i < kp * QK / CHUNK; i++) {
        std::memcpy(pair.data() + 2 * CHUNK * i, c0 + 2 * CHUNK * i, CHUNK);
        std::memcpy(pair.data() + 2 * CHUNK * i + CHUNK, c1 + 2 * CHUNK * i, CHUNK);
    }
}
#endif

// Custom op: dst[rows, n] = src[2] (F32 [rows, n], when set) + W (src[0], packed) x, x = src[1]
// (F32 [cols, n]) RMS-normed with the weight src[3] first when set; groups split by thread;
// userdata: a Fused by value (op_data). Every thread normalizes and quantizes the (few, short)
// columns itself: graph nodes of their own would cost a thread barrier each, more than the
// repeated work.
// out[r] = residual[r] + out[r], r = 0..3, as ggml_add(residual, product)
void add_residual(const ggml_tensor *residual, int64_t c, int64_t g, float *out) {
    if (!residual) return;
    const float *add = (const float *)((const char *)residual->data + c * residual->nb[1]) + g * ROWS;
    for (int r = 0; r < ROWS; r++) out[r] = add[r] + out[r];
}

void matvec_op(ggml_tensor *dst, int ith, int nth, void *data) {
#if defined(__x86_64__) || defined(__aarch64__)
    const Fused f = op_fused(data);
    if (ith == 0) g_runs[(int)f.isa].fetch_add(1, std::memory_order_relaxed);
    const ggml_tensor *w = dst->src[0], *x = dst->src[1], *residual = dst->src[2];
    thread_local std::vector<uint8_t> cols;
    pack_columns(x, dst->src[3], f, cols);
    const int64_t kp = w->ne[0] / GROUP_BYTES_PER_BLOCK, col_bytes = column_bytes(x->ne[0]), n = x->ne[1];
    const int64_t groups = w->ne[1];
    const int64_t g0 = groups * ith / nth, g1 = groups * (ith + 1) / nth;
    auto out_of = [&](int64_t c, int64_t g) { return (float *)((char *)dst->data + c * dst->nb[1]) + g * ROWS; };
#if defined(__x86_64__)
    const auto group_dot = f.isa == Isa::avx512_vnni ? group_dot_avx512_vnni : group_dot_avx2;
    const int64_t paired = 0;
#else
    const auto group_dot = f.isa == Isa::neon ? group_dot_neon : group_dot_dotprod;
    const int64_t paired = f.isa == Isa::neon_i8mm ? n / 2 * 2 : 0;  // columns the i8mm kernel takes by two
    thread_local std::vector<std::vector<int8_t> > pairs;
    pairs.resize((size_t)(paired / 2));
    for (int64_t c = 0; c < paired; c += 2)
        pair_columns(cols.data() + c * col_bytes, cols.data() + (c + 1) * col_bytes, kp, pairs[c / 2]);
#endif
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *group = (const uint8_t *)w->data + g * w->nb[1];
#if defined(__aarch64__)
        for (int64_t c = 0; c < paired; c += 2) {
            const float *dy0 = (const float *)(cols.data() + c * col_bytes + 2 * kp * QK);
            const float *dy1 = (const float *)(cols.data() + (c + 1) * col_bytes + 2 * kp * QK);
            group_dot_i8mm(group, kp, pairs[c / 2].data(), dy0, dy1, out_of(c, g), out_of(c + 1, g));
            add_residual(residual, c, g, out_of(c, g));
            add_residual(residual, c + 1, g, out_of(c + 1, g));
        }
#endif
        for (int64_t c = paired; c < n; c++) {
            group_dot(group, kp, cols.data() + c * col_bytes, out_of(c, g));
            add_residual(residual, c, g, out_of(c, g));
        }
    }
#else
    (void)dst, (void)ith, (void)nth, (void)data;
#endif
}

}  // namespace

bool supports(Isa isa) {
#if defined(__x86_64__)
    switch (isa) {
        case Isa::avx512_vnni:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vnni") &&
                   supports(Isa::avx2);  // KZ_Q8_AVX512_VNNI's target (q8_common.h)
        case Isa::avx2:                  // KZ_Q8_AVX2's
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        default: return false;
    }
#elif defined(__aarch64__)
    switch (isa) {
        case Isa::neon: return true;  // AArch64's Advanced SIMD is architectural
        case Isa::neon_dotprod: return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
        case Isa::neon_i8mm:  // the kernel takes a lone column with SDOT
            return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0 && supports(Isa::neon_dotprod);
        default: return false;
    }
#else
    (void)isa;
    return false;
#endif
}

Isa best_isa() {
    for (Isa isa : {Isa::avx512_vnni, Isa::avx2, Isa::neon_i8mm, Isa::neon_dotprod, Isa::neon})
        if (supports(isa)) return isa;
    return Isa::none;
}

const char *isa_name(Isa isa) {
    switch (isa) {
        case Isa::avx512_vnni: return "avx512-vnni";
        case Isa::avx2: return "avx2";
        case Isa::neon: return "neon";
        case Isa::neon_dotprod: return "neon-dotprod";
        case Isa::neon_i8mm: return "neon-i8mm";
        default: return "none";
    }
}

bool fits(int64_t cols, int64_t rows) { return cols > 0 && cols % QK == 0 && rows > 0 && rows % ROWS == 0; }

int64_t group_bytes(int64_t cols) { return padded_blocks(cols) * GROUP_BYTES_PER_BLOCK; }

void pack(const void *q8_0_rows, int64_t cols, int64_t rows, uint8_t *dst) {
    const int64_t k = cols / QK, kp = padded_blocks(cols), gb = group_bytes(cols);
    const BlockQ8 *src = (const BlockQ8 *)q8_0_rows;
    for (int64_t g = 0; g < rows / ROWS; g++) {
        uint8_t *group = dst + g * gb;
        ggml_fp16_t *scales = (ggml_fp16_t *)group;
        uint8_t *quants = group + ROWS * kp * sizeof(ggml_fp16_t);
        std::memset(group, 0, (size_t)(ROWS * kp) * sizeof(ggml_fp16_t));
#if defined(__aarch64__)
        std::memset(quants, 0, (size_t)(gb - ROWS * kp * (int64_t)sizeof(ggml_fp16_t)));
        for (int64_t r = 0; r < ROWS; r++) {
            const BlockQ8 *row = src + (g * ROWS + r) * k;
            for (int64_t b = 0; b < k; b++) {
                scales[b * ROWS + r] = row[b].d;
                for (int64_t c = 0; c < QK / CHUNK; c++)
                    std::memcpy(quants + b * ROWS * QK + c * ROWS * CHUNK + r * CHUNK, row[b].qs + c * CHUNK, CHUNK);
            }
        }
#else
        std::memset(quants, 0x80, (size_t)(gb - ROWS * kp * (int64_t)sizeof(ggml_fp16_t)));
        for (int64_t r = 0; r < ROWS; r++) {
            const BlockQ8 *row = src + (g * ROWS + r) * k;
            for (int64_t b = 0; b < k; b++) {
                scales[r * kp + b] = row[b].d;
                uint8_t *q = quants + ((b / 2) * ROWS + r) * 64 + (b % 2) * QK;
                for (int64_t i = 0; i < QK; i++) q[i] = (uint8_t)(row[b].qs[i] + 128);
            }
        }
#endif
    }
}

ggml_tensor *mul_mat(ggml_context *ctx, ggml_tensor *w_packed, ggml_tensor *x, Isa isa, const Extras &extras) {
    const int64_t cols = x->ne[0], rows = w_packed->ne[1] * ROWS;
    const ggml_tensor *res = extras.residual, *norm = extras.rms_norm_weight;
    if (w_packed->type != GGML_TYPE_I8 || w_packed->ne[0] != group_bytes(cols) || x->type != GGML_TYPE_F32 ||
        x->nb[0] != sizeof(float) || !supports(isa) ||
        (res &&
         (res->type != GGML_TYPE_F32 || res->nb[0] != sizeof(float) || res->ne[0] != rows || res->ne[1] != x->ne[1])) ||
        (norm && (norm->type != GGML_TYPE_F32 || !ggml_is_contiguous(norm) || ggml_nelements(norm) != cols))) {
        throw Error(KZ_ERR_STATE, "q8::mul_mat: operands do not match");
    }
    ggml_tensor *args[4] = {w_packed, x, extras.residual, extras.rms_norm_weight};
    ggml_tensor *node = ggml_custom_4d(ctx, GGML_TYPE_F32, rows, x->ne[1], 1, 1, args,
                                       norm  ? 4
                                       : res ? 3
                                             : 2,
                                       matvec_op, GGML_N_TASKS_MAX, op_data(Fused{isa, extras.eps}));
    return ggml_format_name(node, "%s%s", NODE_PREFIX, isa_name(isa));
}

Isa product_isa(const ggml_tensor *node) {
    if (node->op != GGML_OP_CUSTOM || std::strncmp(node->name, NODE_PREFIX, sizeof NODE_PREFIX - 1) != 0)
        return Isa::none;
    for (int i = 0; i < N_ISAS; i++)
        if (std::strcmp(node->name + sizeof NODE_PREFIX - 1, isa_name((Isa)i)) == 0) return (Isa)i;
    return Isa::none;
}

int64_t runs(Isa isa) {
    const int i = (int)isa;
    return i >= 0 && i < N_ISAS ? g_runs[i].load(std::memory_order_relaxed) : 0;
}

}  // namespace kz::q8
