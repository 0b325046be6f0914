// kz::conv_gemm_op (native/src/kernels/conv_gemm.h, compiled into golden_check with the library's flags)
// against a scalar reference that forms every sum the way conv_gemm.cpp does: the bias (or 0),
// then acc += w * x over the rows i = tap * cin + channel in order, the F16 weights widened
// exactly, then + residual. The comparison is bitwise: the header promises that order whatever
// T, the chunking or the threads, and its kernel's `acc += w * x` is one fused multiply-add
// where its clone is compiled for FMA (x86 AVX2 / AVX-512, aarch64), a multiply then an add in
// x86's baseline clone. With ConvShape::half_sums, on a CPU with FP16 arithmetic, each piece's
// rows in float16 runs of kHalfRun (fused multiply-adds in float16, the inputs rounded to F16),
// each run widened and added to the float sum, an output block whose piece overflows summed in
// float: the reference does the same with the CPU's scalar float16 FMA; elsewhere half_sums
// changes nothing (the float reference).
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "check.h"
#include "ggml-cpu.h"
#include "kernels/conv_gemm.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace {

using kz::ConvShape;

struct Case {
    const char *name;
    int cin, cout, k, dil, stride;
    int64_t pad_left;
    ConvShape::Edge edge;
    int64_t steps, T;   // input steps, output steps
    int64_t x_pad = 0;  // > 0: x is a view of rows cin + x_pad wide (not dense)
};

// Odd channel counts (not multiples of 16 nor of a vector), every tile height (4, 2, 1 blocks, a
// partial one), depths past one piece (256 rows; 128 in the 4-block kernel) flat and tap by tap,
// T past one span (252 steps) and 1, edges read on both sides.
const Case kCases[] = {
    {"linear, 1 step", 37, 5, 1, 1, 1, 0, ConvShape::kZeros, 1, 1},
    {"1 channel in, k 7, T 300", 1, 33, 7, 1, 1, 6, ConvShape::kContext, 300, 300},
    {"k 3 dilation 3", 19, 117, 3, 3, 1, 6, ConvShape::kContext, 13, 13},
    {"k 7, 259 rows flat, T 262 past the input", 37, 150, 7, 1, 1, 6, ConvShape::kZeros, 260, 262},
    {"linear, 300 channels in", 300, 21, 1, 1, 1, 0, ConvShape::kZeros, 7, 7},
    {"k 2 stride 2, replicate on the right", 24, 40, 2, 1, 2, 0, ConvShape::kReplicate, 17, 9},
    {"k 7 dilation 9, context longer than x", 13, 7, 7, 9, 1, 54, ConvShape::kContext, 5, 5},
    {"k 3 stride 3, replicate on both sides", 20, 64, 3, 1, 3, 1, ConvShape::kReplicate, 30, 11},
    {"k 3, x a strided view", 33, 50, 3, 1, 1, 2, ConvShape::kContext, 40, 40, 5},
    {"k 2 dilation 2, 130 channels in, zeros", 130, 17, 2, 2, 1, 1, ConvShape::kZeros, 8, 8},
    {"k 7, 3 steps", 16, 16, 7, 1, 1, 6, ConvShape::kContext, 3, 3},
    {"k 3, 4 steps, 1 channel out", 48, 1, 3, 1, 1, 2, ConvShape::kReplicate, 4, 4},
};

ConvShape shape_of(const Case &k, bool half_sums = false) {
    ConvShape c;
    c.half_sums = half_sums;
    c.cin = k.cin, c.cout = k.cout, c.k = k.k, c.dil = k.dil, c.stride = k.stride, c.pad_left = k.pad_left,
    c.edge = k.edge;
    return c;
}

// Input step `col` (of x's coordinates) as ConvShape defines the steps outside x; `ctx` holds the
// pad_left steps before x (step -pad_left first), x and ctx rows of `row` floats.
float input(const Case &k, const std::vector<float> &stream, int64_t row, int64_t col, int ch) {
    if (col < 0 || col >= k.steps) {
        if (k.edge == ConvShape::kZeros || (k.edge == ConvShape::kContext && col >= 0)) return 0.0f;
        if (k.edge == ConvShape::kReplicate) col = col < 0 ? 0 : k.steps - 1;
    }
    return stream[(size_t)((k.pad_left + col) * row + ch)];
}

#if defined(__aarch64__)
// acc + w * x rounded once to float16 (called only where the CPU has FP16 arithmetic)
__attribute__((target("arch=armv8.2-a+fp16"))) __fp16 fma16(__fp16 acc, __fp16 w, __fp16 x) {
    return vfmah_f16(acc, w, x);
}
#endif

// out[t * cout + co]: bias, acc += w * x in row order, + residual; `half`: in the float16 runs of
// kz::conv_gemm_op's FP16 arithmetic (each block of kPackRows outputs summed in float for a piece
// where one of its sums is not finite)
std::vector<float> reference(const Case &k, const std::vector<float> &w, const float *bias,
                             const std::vector<float> &stream, int64_t row, const float *res, bool fused,
                             bool half = false) {
    (void)half;  // (read on aarch64 only: FP16 arithmetic is ARM's here)
    const int64_t K = (int64_t)k.cin * k.k;
    const kz::DepthPieces pieces{K, k.cin, kz::kGemmDepth, kz::flat_taps(shape_of(k), (size_t)row * sizeof(float))};
    auto x_at = [&](int64_t t, int64_t i) {
        return input(k, stream, row, t * k.stride + i / k.cin * k.dil - k.pad_left, (int)(i % k.cin));
    };
    auto float_sum = [&](float acc, int64_t t, int co, int64_t i0, int64_t n) {
        for (int64_t i = i0; i < i0 + n; i++) {
            const float wv = w[(size_t)(co * K + i)], xv = x_at(t, i);
            if (fused) {
                acc = std::fma(wv, xv, acc);
            } else {
                volatile float product = wv * xv;  // (not contracted into a fused multiply-add)
                acc = acc + product;
            }
        }
        return acc;
    };
    std::vector<float> out((size_t)(k.T * k.cout));
    for (int64_t t = 0; t < k.T; t++)
        for (int b0 = 0; b0 < k.cout; b0 += kz::kPackRows) {
            const int b1 = std::min(k.cout, b0 + kz::kPackRows);
            float acc[kz::kPackRows];
            for (int co = b0; co < b1; co++) acc[co - b0] = bias ? bias[co] : 0.0f;
            for (int64_t p = 0; p < pieces.count(); p++) {
                int64_t i0, n;
                pieces.piece(p, i0, n);
                float sums[kz::kPackRows];
                bool finite = true;
                for (int co = b0; co < b1; co++) {
                    float a = acc[co - b0];
#if defined(__aarch64__)
                    if (half) {
                        for (int64_t r0 = i0; r0 < i0 + n; r0 += kz::kHalfRun) {
                            __fp16 h = 0;
                            for (int64_t i = r0; i < std::min(r0 + kz::kHalfRun, i0 + n); i++)
                                h = fma16(h, (__fp16)w[(size_t)(co * K + i)], (__fp16)x_at(t, i));
                            a += (float)h;
                        }
                        finite = finite && std::isfinite(a);
                    } else
#endif
                        a = float_sum(a, t, co, i0, n);
                    sums[co - b0] = a;
                }
                for (int co = b0; co < b1; co++)
                    acc[co - b0] = finite ? sums[co - b0] : float_sum(acc[co - b0], t, co, i0, n);
            }
            for (int co = b0; co < b1; co++) {
                if (res) acc[co - b0] += res[t * k.cout + co];
                out[(size_t)(t * k.cout + co)] = acc[co - b0];
            }
        }
    return out;
}

// One conv_gemm node over all of it: the weights, bias, residual and the stream of pad_left + steps
// input steps (the context, then x) in one graph of its own. first: the output step the node
// starts at (a later chunk of a streamed conv: its x begins first*stride steps into x, its context
// the pad_left steps before that); T: its output steps.
struct Run {
    const Case &k;
    ggml_type wtype;
    const std::vector<float> &packed, &stream;
    const float *bias, *res;
    bool half_sums;

    std::vector<float> operator()(int64_t first, int64_t T, int threads) const {
        const ConvShape c = shape_of(k, half_sums);
        const int64_t row = k.cin + k.x_pad, total = k.pad_left + k.steps, a = first * k.stride;
        const size_t bytes = (packed.size() + stream.size() + (size_t)(2 * k.T * k.cout + k.cout)) * sizeof(float);
        ggml_init_params ip = {bytes + 16 * ggml_tensor_overhead() + ggml_graph_overhead() + 65536, nullptr, false};
        ggml_context *ctx = ggml_init(ip);
        if (!ctx) throw std::runtime_error("ggml_init failed");
        const std::vector<int64_t> ws = kz::packed_shape(c);
        ggml_tensor *w = ggml_new_tensor_2d(ctx, wtype, ws[0], ws[1]);
        if (wtype == GGML_TYPE_F16)
            ggml_fp32_to_fp16_row(packed.data(), (ggml_fp16_t *)w->data, (int64_t)packed.size());
        else
            std::memcpy(w->data, packed.data(), packed.size() * sizeof(float));
        ggml_tensor *buf = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, row, total);
        std::memcpy(buf->data, stream.data(), stream.size() * sizeof(float));
        ggml_tensor *x = ggml_view_2d(ctx, buf, k.cin, k.steps - a, buf->nb[1], (size_t)(k.pad_left + a) * buf->nb[1]);
        ggml_tensor *prev = k.edge == ConvShape::kContext && k.pad_left > 0
                                ? ggml_view_2d(ctx, buf, k.cin, k.pad_left, buf->nb[1], (size_t)a * buf->nb[1])
                                : nullptr;
        ggml_tensor *b = nullptr, *r = nullptr;
        if (bias) {
            b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, k.cout);
            std::memcpy(b->data, bias, (size_t)k.cout * sizeof(float));
        }
        if (res) {
            r = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k.cout, T);
            std::memcpy(r->data, res + first * k.cout, (size_t)(T * k.cout) * sizeof(float));
        }
        ggml_tensor *y = kz::conv_gemm(ctx, c, w, b, x, T, prev, r);
        ggml_cgraph *gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, y);
        std::vector<float> out;
        if (ggml_graph_compute_with_ctx(ctx, gf, threads) == GGML_STATUS_SUCCESS)
            out.assign((const float *)y->data, (const float *)y->data + T * k.cout);
        ggml_free(ctx);
        if (out.empty()) throw std::runtime_error("graph compute failed");
        return out;
    }
};

// values that differ in their bits (from offset `from` of want), and the first of them
struct Diff {
    int64_t count = 0, first = -1;
    double worst = 0;
    void add(const std::vector<float> &got, const std::vector<float> &want, int64_t from = 0) {
        for (size_t i = 0; i < got.size(); i++) {
            const float g = got[i], e = want[i + (size_t)from];
            if (std::memcmp(&g, &e, sizeof g) == 0) continue;
            if (first < 0) first = (int64_t)i + from;
            count++;
            const double d = std::fabs((double)g - e);
            worst = std::isnan(d) ? INFINITY : std::max(worst, d);
        }
    }
};

// One case's gate: its outputs (with and without bias and residual) against the reference, 2
// threads against 1, a part of the steps and a streamed conv's later chunks against the whole.
// Float sums: F32 and F16 weights; half sums: F16 weights, inputs times `scale` (large: float16 overflows).
void check_case(const Case &k, bool half, float scale, Report &report) {
    static std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    const bool fused = kz::conv_gemm_fuses(), half_arithmetic = half && kz::conv_gemm_half_arithmetic();
    const int64_t K = (int64_t)k.cin * k.k, row = k.cin + k.x_pad;
    std::vector<float> w((size_t)(k.cout * K)), bias((size_t)k.cout), stream((size_t)((k.pad_left + k.steps) * row)),
        res((size_t)(k.T * k.cout));
    for (float &v : w) v = uniform(rng);
    for (float &v : bias) v = uniform(rng);
    for (float &v : stream) v = scale * uniform(rng);
    for (float &v : res) v = uniform(rng);
    Diff ref, threads, chunks;
    int64_t outputs = 0, finite = 0;
    for (ggml_type wtype : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        if (half && wtype == GGML_TYPE_F32) continue;
        std::vector<float> wt = w;  // the weights the op sees (F16: rounded, widened exactly)
        if (wtype == GGML_TYPE_F16)
            for (float &v : wt) v = ggml_fp16_to_fp32(ggml_fp32_to_fp16(v));
        const std::vector<float> packed = kz::pack_rows(wt, shape_of(k));
        for (bool with_bias : {false, true})
            for (bool with_res : {false, true}) {
                const float *b = with_bias ? bias.data() : nullptr, *r = with_res ? res.data() : nullptr;
                const Run run{k, wtype, packed, stream, b, r, half};
                const std::vector<float> want = reference(k, wt, b, stream, row, r, fused, half_arithmetic);
                const std::vector<float> one = run(0, k.T, 1);
                ref.add(one, want);
                threads.add(run(0, k.T, 2), one);
                outputs += (int64_t)one.size();
                for (float v : one) finite += std::isfinite(v);
                // the first steps alone (other span and tile boundaries), and a streamed conv's
                // later chunk (its context the steps before it)
                if (k.T > 1) chunks.add(run(0, k.T / 2 + 1, 2), one);
                if (k.edge == ConvShape::kContext && k.T > 1)
                    for (int64_t first : {(int64_t)1, k.T / 3 + 1})
                        chunks.add(run(first, k.T - first, 2), one, first * k.cout);
            }
    }
    auto says = [&](const Diff &d) {
        return d.count == 0 ? std::string("equal")
                            : fmt("%lld differ (max %.3g; first at step %lld, channel %lld)", (long long)d.count,
                                  d.worst, (long long)(d.first / k.cout), (long long)(d.first % k.cout));
    };
    const std::string how = !half              ? "F32, F16"
                            : !half_arithmetic ? "F16, half sums asked: float sums on this CPU"
                            : scale == 1.0f    ? "F16 in float16 runs"
                                               : fmt("F16 in float16 runs, inputs x%g: float16 overflows", scale);
    report.gate(std::string("conv gemm ") + (half ? "half sums " : "") + k.name,
                ref.count == 0 && threads.count == 0 && chunks.count == 0 && finite == outputs,
                fmt("%d -> %d channels, %lld outputs (%s; bias, residual or not): vs the scalar reference %s; "
                    "2 threads vs 1 %s; chunks vs whole %s%s",
                    k.cin, k.cout, (long long)outputs, how.c_str(), says(ref).c_str(), says(threads).c_str(),
                    says(chunks).c_str(), finite == outputs ? "" : "; not all finite"));
}

}  // namespace

void check_conv_gemm(Report &report) {
    report.info(
        "conv gemm reference",
        std::string(kz::conv_gemm_fuses() ? "fused multiply-adds" : "a multiply then an add") +
            "; half sums: " + (kz::conv_gemm_half_arithmetic() ? "FP16 arithmetic" : "float (no FP16 arithmetic)"));
    for (const Case &k : kCases) check_case(k, false, 1.0f, report);
    for (const Case &k : kCases) check_case(k, true, 1.0f, report);
    // float16 sums past 65504: some blocks' pieces (inputs up to 1.2e4), nearly all (2e4) summed in float
    check_case(kCases[3], true, 1.2e4f, report);
    check_case(kCases[4], true, 2e4f, report);
}
