// kz::conv_gemm_op (native/src/kernels/conv_gemm.h, compiled into golden_check with the library's flags)
// against a scalar reference that forms every sum the way conv_gemm.cpp does: the bias (or 0),
// then acc += w * x over the rows i = tap * cin + channel in order, the F16 weights widened
// exactly, then + residual. The comparison is bitwise: the header promises that order whatever
// T, the chunking or the threads, and its kernel's `acc += w * x` is one fused multiply-add
// where its clone is compiled for FMA (x86 AVX2 / AVX-512, aarch64), a multiply then an add in
// x86's baseline clone.
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "check.h"
#include "ggml-cpu.h"
#include "kernels/conv_gemm.h"

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

ConvShape shape_of(const Case &k) {
    ConvShape c;
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

// out[t * cout + co]: bias, acc += w * x in row order, + residual
std::vector<float> reference(const Case &k, const std::vector<float> &w, const float *bias,
                             const std::vector<float> &stream, int64_t row, const float *res, bool fused) {
    const int64_t K = (int64_t)k.cin * k.k;
    std::vector<float> out((size_t)(k.T * k.cout));
    for (int64_t t = 0; t < k.T; t++)
        for (int co = 0; co < k.cout; co++) {
            float acc = bias ? bias[co] : 0.0f;
            for (int j = 0; j < k.k; j++)
                for (int c = 0; c < k.cin; c++) {
                    const float wv = w[(size_t)(co * K + j * k.cin + c)];
                    const float xv = input(k, stream, row, t * k.stride + (int64_t)j * k.dil - k.pad_left, c);
                    if (fused) {
                        acc = std::fma(wv, xv, acc);
                    } else {
                        volatile float product = wv * xv;  // (not contracted into a fused multiply-add)
                        acc = acc + product;
                    }
                }
            if (res) acc += res[t * k.cout + co];
            out[(size_t)(t * k.cout + co)] = acc;
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

    std::vector<float> operator()(int64_t first, int64_t T, int threads) const {
        const ConvShape c = shape_of(k);
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

}  // namespace

void check_conv_gemm(Report &report) {
    const bool fused = kz::conv_gemm_fuses();
    report.info("conv gemm reference", fused ? "fused multiply-adds" : "a multiply then an add");
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const Case &k : kCases) {
        const int64_t K = (int64_t)k.cin * k.k, row = k.cin + k.x_pad;
        std::vector<float> w((size_t)(k.cout * K)), bias((size_t)k.cout),
            stream((size_t)((k.pad_left + k.steps) * row)), res((size_t)(k.T * k.cout));
        for (float &v : w) v = uniform(rng);
        for (float &v : bias) v = uniform(rng);
        for (float &v : stream) v = uniform(rng);
        for (float &v : res) v = uniform(rng);
        Diff ref, threads, chunks;
        int64_t outputs = 0;
        for (ggml_type wtype : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            std::vector<float> wt = w;  // the weights the op sees (F16: rounded, widened exactly)
            if (wtype == GGML_TYPE_F16)
                for (float &v : wt) v = ggml_fp16_to_fp32(ggml_fp32_to_fp16(v));
            const std::vector<float> packed = kz::pack_rows(wt, shape_of(k));
            for (bool with_bias : {false, true})
                for (bool with_res : {false, true}) {
                    const float *b = with_bias ? bias.data() : nullptr, *r = with_res ? res.data() : nullptr;
                    const Run run{k, wtype, packed, stream, b, r};
                    const std::vector<float> want = reference(k, wt, b, stream, row, r, fused);
                    const std::vector<float> one = run(0, k.T, 1);
                    ref.add(one, want);
                    threads.add(run(0, k.T, 2), one);
                    outputs += (int64_t)one.size();
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
        report.gate(
            std::string("conv gemm ") + k.name, ref.count == 0 && threads.count == 0 && chunks.count == 0,
            fmt("%d -> %d channels, %lld outputs (F32, F16; bias, residual or not): vs the scalar reference %s; "
                "2 threads vs 1 %s; chunks vs whole %s",
                k.cin, k.cout, (long long)outputs, says(ref).c_str(), says(threads).c_str(), says(chunks).c_str()));
    }
}
