// Q8_0 matrix x few-columns product on AVX-512 VNNI or AVX2 (see q8_matvec.h for why).
//
// Packed weights, per group of 4 rows (k = cols / 32 blocks, padded to kp, a multiple of 16;
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
#include "kernels/q8_matvec.h"

#include "core/common_internal.h"
#include "kernels/q8_common.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstring>
#include <vector>

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

#if defined(__x86_64__)
int64_t column_bytes(int64_t cols) { return padded_blocks(cols) * (QK + QK + 4); }

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

// Packs each column of x (F32 [cols, n]), RMS-normed with `norm_w` first when given, into
// `packed` (column_bytes(cols) per column); the offsets only for the kernel that reads them.
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
        uint8_t *col = packed.data() + c * bytes;
        int8_t *y = (int8_t *)col;
        int32_t *offset = (int32_t *)(col + kp * QK);
        float *dy = (float *)(col + 2 * kp * QK);
        for (int64_t b = 0; b < k; b++) {
            BlockQ8 blk;
            quantize(in + b * QK, &blk, QK);
            std::memcpy(y + b * QK, blk.qs, QK);
            dy[b] = ggml_fp16_to_fp32(blk.d);
            for (int lane = 0; offsets && lane < QK / 4; lane++) {
                const int8_t *q = blk.qs + 4 * lane;
                offset[b * (QK / 4) + lane] = lane_offset(q);
            }
        }
    }
}

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

// Custom op: dst[rows, n] = src[2] (F32 [rows, n], when set) + W (src[0], packed) x, x = src[1]
// (F32 [cols, n]) RMS-normed with the weight src[3] first when set; groups split by thread;
// userdata: a Fused by value (op_data). Every thread normalizes and quantizes the (few, short)
// columns itself: graph nodes of their own would cost a thread barrier each, more than the
// repeated work.
void matvec_op(ggml_tensor *dst, int ith, int nth, void *data) {
#if defined(__x86_64__)
    const Fused f = op_fused(data);
    const auto group_dot = f.isa == Isa::avx512_vnni ? group_dot_avx512_vnni : group_dot_avx2;
    const ggml_tensor *w = dst->src[0], *x = dst->src[1], *residual = dst->src[2];
    thread_local std::vector<uint8_t> cols;
    pack_columns(x, dst->src[3], f, cols);
    const int64_t kp = w->ne[0] / GROUP_BYTES_PER_BLOCK, col_bytes = column_bytes(x->ne[0]);
    const int64_t groups = w->ne[1];
    const int64_t g0 = groups * ith / nth, g1 = groups * (ith + 1) / nth;
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *group = (const uint8_t *)w->data + g * w->nb[1];
        for (int64_t c = 0; c < x->ne[1]; c++) {
            float *out = (float *)((char *)dst->data + c * dst->nb[1]) + g * ROWS;
            group_dot(group, kp, cols.data() + c * col_bytes, out);
            if (!residual) continue;
            const float *add = (const float *)((const char *)residual->data + c * residual->nb[1]) + g * ROWS;
            for (int r = 0; r < ROWS; r++) out[r] = add[r] + out[r];  // as ggml_add(residual, product)
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
#else
    (void)isa;
    return false;
#endif
}

Isa best_isa() {
    for (Isa isa : {Isa::avx512_vnni, Isa::avx2})
        if (supports(isa)) return isa;
    return Isa::none;
}

const char *isa_name(Isa isa) {
    switch (isa) {
        case Isa::avx512_vnni: return "avx512-vnni";
        case Isa::avx2: return "avx2";
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
        std::memset(quants, 0x80, (size_t)(gb - ROWS * kp * (int64_t)sizeof(ggml_fp16_t)));
        for (int64_t r = 0; r < ROWS; r++) {
            const BlockQ8 *row = src + (g * ROWS + r) * k;
            for (int64_t b = 0; b < k; b++) {
                scales[r * kp + b] = row[b].d;
                uint8_t *q = quants + ((b / 2) * ROWS + r) * 64 + (b % 2) * QK;
                for (int64_t i = 0; i < QK; i++) q[i] = (uint8_t)(row[b].qs[i] + 128);
            }
        }
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
    return ggml_custom_4d(ctx, GGML_TYPE_F32, rows, x->ne[1], 1, 1, args,
                          norm  ? 4
                          : res ? 3
                                : 2,
                          matvec_op, GGML_N_TASKS_MAX, op_data(Fused{isa, extras.eps}));
}

}  // namespace kz::q8
