// Speaker encoder (the ECAPA-TDNN of Qwen3-TTS Base, `Qwen3TTSSpeakerEncoder` in qwen-tts 0.1.1)
// on ggml: log-mel [n_mels, T] -> x-vector [dim].
//
//   stem      TDNN k5: conv + ReLU (128 -> C)
//   blocks    SE-Res2Net x3 (dilations 2, 3, 4): 1x1 TDNN, Res2Net (C split in `scale` parts: part
//             0 as is, part 1 -> TDNN, part i -> TDNN(part i + output i-1)), 1x1 TDNN,
//             squeeze-excitation (time mean -> 1x1 + ReLU -> 1x1 + sigmoid -> gate), + input
//   mfa       concat of the blocks' outputs -> TDNN
//   asp       attentive statistics pooling: time mean and std of x, TDNN([x; mean; std]) ->
//             tanh -> 1x1 -> softmax over time -> weighted mean ++ weighted std
//   fc        1x1 -> dim (the talker width)
//
// Layout: activations are ggml [channels, time] (channel fastest). A k-tap conv is one mul_mat of
// the weight [k*cin, cout] (the file's [k, cin, cout] as is) by an im2col matrix written in one
// pass, the reflect "same" padding folded into its indices (no padded copy), and the Res2Net's
// "part i + output i-1" folded into it too. The first TDNN of the pooling is split by input rows
// into x and (mean, std) parts, so the constant mean and std columns are multiplied once
// instead of once per frame.
//
// Besides the mul_mats, the graph is a few custom ops that each do in one pass what took ggml
// several nodes (the encoder is ~250 small ops otherwise, and every node is a barrier for the
// threads): bias + ReLU, the Res2Net's concatenation, and the reductions over time (SE mean,
// the pooling's statistics, its softmax-weighted statistics), which read [channels, time] as
// it is instead of a transposed copy, and sum in double.
#include "kazetts/speaker_encoder.h"

#include "core/common_internal.h"
#include "core/gguf_reader.h"
#include "core/graph_runner.h"
#include "core/sha256.h"
#include "kernels/custom_op.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using kz::Error;

constexpr int kGraphSize = 4096;
constexpr float kStdFloor = 1e-12f;                   // the reference clamps the variance at 1e-12 before the sqrt
const std::vector<int> kDilations = {1, 2, 3, 4, 1};  // enc_dilations of every published config

struct Conv {  // Conv1d, padding "same" by reflection: w [k*cin, cout] (tap fastest), b [cout] or null
    ggml_tensor *w = nullptr, *b = nullptr;
    int cin = 0, cout = 0, k = 1, dil = 1, left = 0, right = 0;
};

struct Block {  // SE-Res2Net
    Conv tdnn1, tdnn2, se1, se2;
    std::vector<Conv> res2;  // scale - 1 convs
};

struct Model {
    int n_mels = 0, dim = 0, channels = 0, min_frames = 1;
    Conv stem, mfa, asp_x, asp_stats, asp_attn, fc;
    std::vector<Block> blocks;
    ggml_context *ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
};

// ---------------------------------------------------------------------------------------------
// loading
// ---------------------------------------------------------------------------------------------

struct Builder {
    Model &m;
    const kz::GgufReader &L;
    std::vector<std::pair<ggml_tensor *, std::function<std::vector<float>()>>> pending;

    ggml_tensor *make(const std::string &name, int64_t ne0, int64_t ne1, std::function<std::vector<float>()> read) {
        ggml_tensor *t = ggml_new_tensor_2d(m.ctx, GGML_TYPE_F32, ne0, ne1);
        ggml_set_name(t, name.c_str());
        pending.push_back({t, std::move(read)});
        return t;
    }

    // input rows [part * n, (part + take) * n) of `name`, whose input rows are `parts` parts of n
    // (parts 1: the whole conv); the bias goes with part 0 only
    Conv conv(const std::string &name, int dil, int part = 0, int parts = 1, int take = 1) {
        const ggml_tensor *w = L.src(name + ".weight");
        const ggml_tensor *b = L.src(name + ".bias");
        Conv c;
        c.k = (int)w->ne[0];
        const int cin_all = (int)w->ne[1];
        c.cout = (int)w->ne[2];
        if (w->ne[3] != 1 || b->ne[0] != c.cout || ggml_nelements(b) != c.cout || cin_all % parts)
            throw Error(KZ_ERR_FORMAT, name + " has an unexpected shape in " + L.path);
        if (parts > 1 && c.k != 1) throw Error(KZ_ERR_FORMAT, name + " must be a 1x1 conv");
        c.cin = cin_all / parts * take;
        c.dil = dil;
        const int total = dil * (c.k - 1);  // torch padding="same": the extra one goes right
        c.left = total / 2;
        c.right = total - c.left;
        const int64_t rows = (int64_t)c.k * c.cin;
        const size_t first = (size_t)part * (cin_all / parts);  // first input row taken
        c.w = make(name + ".weight", rows, c.cout, [this, w, c, cin_all, first] {
            std::vector<float> all = L.read(w);
            if (cin_all == c.cin) return all;
            std::vector<float> p((size_t)c.k * c.cin * c.cout);
            for (int o = 0; o < c.cout; o++)
                std::memcpy(&p[(size_t)o * c.k * c.cin], &all[((size_t)o * cin_all + first) * c.k],
                            sizeof(float) * c.k * c.cin);
            return p;
        });
        if (part == 0) c.b = make(name + ".bias", c.cout, 1, [this, b] { return L.read(b); });
        m.min_frames = std::max(m.min_frames, std::max(c.left, c.right) + 1);  // reflect needs pad < length
        return c;
    }
};

int count(const kz::GgufReader &L, const std::string &prefix, int first, const std::string &suffix) {
    int n = 0;
    while (L.src(prefix + std::to_string(first + n) + suffix, false)) n++;
    return n;
}

void expect_in(const Conv &c, int cin, const std::string &what) {
    if (c.cin != cin)
        throw Error(KZ_ERR_FORMAT,
                    what + " takes " + std::to_string(c.cin) + " channels, expected " + std::to_string(cin));
}

void load_model(Model &m, const char *path) {
    const kz::GgufReader L(path);
    if (!L.src("a.conv1d.0.weight", false))
        throw Error(KZ_ERR_FORMAT,
                    std::string(path) + " has no speaker encoder (a.conv1d.0.weight): only Base models have one");
    const int n_blocks = count(L, "a.blk.", 1, ".conv_pw1.weight");
    const std::vector<int> dil = L.ints("kazetts.spk.enc_dilations", kDilations);
    if (n_blocks < 1 || n_blocks > GGML_MAX_SRC || (int)dil.size() != n_blocks + 2)
        throw Error(KZ_ERR_FORMAT, std::string(path) + ": " + std::to_string(n_blocks) + " SE-Res2Net blocks and " +
                                       std::to_string(dil.size()) + " dilations do not match");

    ggml_init_params ip = {ggml_tensor_overhead() * 512, nullptr, true};
    m.ctx = ggml_init(ip);
    if (!m.ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    Builder B{m, L, {}};
    m.stem = B.conv("a.conv1d.0", dil[0]);
    m.n_mels = m.stem.cin;
    int ch = m.stem.cout, cat = 0;
    for (int i = 1; i <= n_blocks; i++) {
        const std::string p = "a.blk." + std::to_string(i) + ".";
        Block blk;
        blk.tdnn1 = B.conv(p + "conv_pw1", 1);
        expect_in(blk.tdnn1, ch, p + "conv_pw1");
        ch = blk.tdnn1.cout;
        const int scale = count(L, p + "res2.", 0, ".weight") + 1;
        const int want_scale = (int)L.num("kazetts.spk.enc_res2net_scale", scale);
        if (scale < 2 || scale > GGML_MAX_SRC || scale != want_scale ||
            ch % scale)  // concat takes <= GGML_MAX_SRC parts
            throw Error(KZ_ERR_FORMAT,
                        p + "res2: " + std::to_string(scale - 1) + " convs for " + std::to_string(ch) + " channels");
        for (int x = 0; x + 1 < scale; x++) {
            blk.res2.push_back(B.conv(p + "res2." + std::to_string(x), dil[i]));
            expect_in(blk.res2.back(), ch / scale, p + "res2");
            if (blk.res2.back().cout != ch / scale) throw Error(KZ_ERR_FORMAT, p + "res2 must keep its width");
        }
        blk.tdnn2 = B.conv(p + "conv_pw2", 1);
        expect_in(blk.tdnn2, ch, p + "conv_pw2");
        blk.se1 = B.conv(p + "se_conv1", 1);
        expect_in(blk.se1, blk.tdnn2.cout, p + "se_conv1");
        blk.se2 = B.conv(p + "se_conv2", 1);
        expect_in(blk.se2, blk.se1.cout, p + "se_conv2");
        if (blk.se2.cout != blk.tdnn2.cout || blk.tdnn2.cout != blk.tdnn1.cin)
            throw Error(KZ_ERR_FORMAT, p + ": the residual and the gate must keep the block's width");
        ch = blk.tdnn2.cout;
        cat += ch;
        m.blocks.push_back(std::move(blk));
    }
    m.mfa = B.conv("a.conv_out", dil[n_blocks + 1]);
    expect_in(m.mfa, cat, "a.conv_out");
    m.channels = m.mfa.cout;
    m.asp_x = B.conv("a.asp_tdnn", 1, 0, 3);
    m.asp_stats = B.conv("a.asp_tdnn", 1, 1, 3, 2);
    expect_in(m.asp_x, m.channels, "a.asp_tdnn");
    m.asp_attn = B.conv("a.asp_attn", 1);
    expect_in(m.asp_attn, m.asp_x.cout, "a.asp_attn");
    if (m.asp_attn.cout != m.channels || m.asp_attn.k != 1)
        throw Error(KZ_ERR_FORMAT, "a.asp_attn has an unexpected shape");
    m.fc = B.conv("mm.a.fc", 1);
    expect_in(m.fc, 2 * m.channels, "mm.a.fc");
    m.dim = m.fc.cout;

    m.buf = ggml_backend_alloc_ctx_tensors_from_buft(m.ctx, ggml_backend_cpu_buffer_type());
    if (!m.buf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the speaker encoder weights");
    for (auto &p : B.pending) {
        const std::vector<float> data = p.second();
        if ((int64_t)data.size() != ggml_nelements(p.first))
            throw Error(KZ_ERR_FORMAT, std::string("size mismatch for ") + p.first->name);
        ggml_backend_tensor_set(p.first, data.data(), 0, ggml_nbytes(p.first));
    }
}

// ---------------------------------------------------------------------------------------------
// graph
// ---------------------------------------------------------------------------------------------

// dst [k*cin, T] = the taps of src[0] ([cin, T], any row stride; plus src[1], same shape, when
// given) around every frame, reflected at the edges: column t, row j + k*c = x[c, reflect(t - left + j*dil)]
void im2col_reflect(ggml_tensor *dst, int ith, int nth, void *userdata) {
    const Conv &c = *static_cast<const Conv *>(userdata);
    const ggml_tensor *x = dst->src[0], *plus = dst->src[1];
    const int64_t T = x->ne[1];
    const auto [t0, t1] = kz::thread_rows(T, ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        float *out = (float *)((char *)dst->data + t * dst->nb[1]);
        for (int j = 0; j < c.k; j++) {
            int64_t i = t - c.left + (int64_t)j * c.dil;
            i = i < 0 ? -i : i >= T ? 2 * (T - 1) - i : i;
            const char *col = (const char *)x->data + i * x->nb[1];
            if (plus) {
                const char *add = (const char *)plus->data + i * plus->nb[1];
                for (int ci = 0; ci < c.cin; ci++)
                    out[j + (int64_t)c.k * ci] =
                        *(const float *)(col + ci * x->nb[0]) + *(const float *)(add + ci * plus->nb[0]);
            } else {
                for (int ci = 0; ci < c.cin; ci++) out[j + (int64_t)c.k * ci] = *(const float *)(col + ci * x->nb[0]);
            }
        }
    }
}

// dst [C, T] = max(src[0] [C, T] + src[1] [C], 0)
void bias_relu_op(ggml_tensor *dst, int ith, int nth, void *) {
    const ggml_tensor *y = dst->src[0];
    const float *b = (const float *)dst->src[1]->data;
    const int64_t C = dst->ne[0];
    const auto [t0, t1] = kz::thread_rows(dst->ne[1], ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        const float *in = (const float *)((const char *)y->data + t * y->nb[1]);
        float *out = (float *)((char *)dst->data + t * dst->nb[1]);
        for (int64_t c = 0; c < C; c++) {
            const float v = in[c] + b[c];
            out[c] = v > 0.0f ? v : 0.0f;
        }
    }
}

// dst [sum of C_i, T] = the srcs [C_i, T] (any row stride) stacked along channels
void concat_op(ggml_tensor *dst, int ith, int nth, void *) {
    const auto [t0, t1] = kz::thread_rows(dst->ne[1], ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        char *out = (char *)dst->data + t * dst->nb[1];
        for (int i = 0; i < GGML_MAX_SRC && dst->src[i]; i++) {
            const ggml_tensor *x = dst->src[i];
            std::memcpy(out, (const char *)x->data + t * x->nb[1], (size_t)x->ne[0] * sizeof(float));
            out += (size_t)x->ne[0] * sizeof(float);
        }
    }
}

// Per channel of x = src[0] [C, T]: its mean over time (dst [C]), and `with_std` its standard
// deviation too (dst [2C]: means, then stds; the variance clamped at kStdFloor). When src[1]
// (logits [C, T]) and src[2] (their bias [C]) are given, the statistics are weighted by the
// softmax over time of the biased logits instead (attentive statistics pooling). Channels are
// split among the threads; time runs in the outer loop so that every read is sequential.
void time_stats(ggml_tensor *dst, int ith, int nth, bool with_std) {
    const ggml_tensor *x = dst->src[0], *logits = dst->src[1];
    const int64_t C = x->ne[0], T = x->ne[1];
    const auto [c0, c1] = kz::thread_rows(C, ith, nth);
    const int64_t n = c1 - c0;
    if (n <= 0) return;
    auto at = [](const ggml_tensor *a, int64_t c, int64_t t) {
        return *(const float *)((const char *)a->data + c * a->nb[0] + t * a->nb[1]);
    };
    std::vector<float> w;  // softmax weights, [T][n]
    if (logits) {
        const float *b = (const float *)dst->src[2]->data;
        std::vector<float> top(n, -INFINITY);
        std::vector<double> sum(n, 0.0);
        w.resize((size_t)(T * n));
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < n; c++) top[c] = std::max(top[c], at(logits, c0 + c, t) + b[c0 + c]);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < n; c++)
                sum[c] += w[t * n + c] = std::exp(at(logits, c0 + c, t) + b[c0 + c] - top[c]);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < n; c++) w[t * n + c] = (float)(w[t * n + c] / sum[c]);
    }
    std::vector<double> acc(n, 0.0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < n; c++) acc[c] += logits ? (double)w[t * n + c] * at(x, c0 + c, t) : at(x, c0 + c, t);
    float *out = (float *)dst->data;
    for (int64_t c = 0; c < n; c++) out[c0 + c] = (float)(logits ? acc[c] : acc[c] / T);
    if (!with_std) return;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < n; c++) {
            const float d = at(x, c0 + c, t) - out[c0 + c];
            acc[c] += logits ? (double)w[t * n + c] * d * d : (double)d * d;
        }
    for (int64_t c = 0; c < n; c++)
        out[C + c0 + c] = std::sqrt(std::max((float)(logits ? acc[c] : acc[c] / T), kStdFloor));
}
void time_mean_op(ggml_tensor *dst, int ith, int nth, void *) { time_stats(dst, ith, nth, false); }
void time_mean_std_op(ggml_tensor *dst, int ith, int nth, void *) { time_stats(dst, ith, nth, true); }

struct Graph {
    const Model &m;
    ggml_context *ctx;
    ggml_tensor *mel = nullptr, *xvec = nullptr;

    ggml_tensor *custom(const char *name, int64_t ne0, int64_t ne1, std::vector<ggml_tensor *> args,
                        ggml_custom_op_t op, void *userdata = nullptr) {
        ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, 1, 1, args.data(), (int)args.size(), op,
                                        GGML_N_TASKS_MAX, userdata);
        return ggml_set_name(t, name);
    }
    // the conv without its bias; `plus` (same shape as x) is added to x first
    ggml_tensor *linear(ggml_tensor *x, const Conv &c, ggml_tensor *plus = nullptr) {
        if (c.k == 1 && !plus) return ggml_mul_mat(ctx, c.w, x);
        std::vector<ggml_tensor *> args{x};
        if (plus) args.push_back(plus);
        return ggml_mul_mat(
            ctx, c.w, custom("im2col", (int64_t)c.k * c.cin, x->ne[1], args, im2col_reflect, const_cast<Conv *>(&c)));
    }
    ggml_tensor *conv(ggml_tensor *x, const Conv &c) { return ggml_add(ctx, linear(x, c), c.b); }
    ggml_tensor *tdnn(ggml_tensor *x, const Conv &c, ggml_tensor *plus = nullptr) {
        ggml_tensor *y = linear(x, c, plus);
        return custom("bias_relu", y->ne[0], y->ne[1], {y, c.b}, bias_relu_op);
    }
    ggml_tensor *concat(const std::vector<ggml_tensor *> &parts) {  // at most GGML_MAX_SRC (load_model checks)
        int64_t C = 0;
        for (ggml_tensor *p : parts) C += p->ne[0];
        return custom("concat", C, parts[0]->ne[1], parts, concat_op);
    }
    ggml_tensor *time_stats(ggml_tensor *x, bool with_std, ggml_tensor *logits = nullptr, ggml_tensor *bias = nullptr) {
        std::vector<ggml_tensor *> args{x};
        if (logits) args.insert(args.end(), {logits, bias});
        return custom("time_stats", x->ne[0] * (with_std ? 2 : 1), 1, args, with_std ? time_mean_std_op : time_mean_op);
    }

    ggml_tensor *block(ggml_tensor *x, const Block &b) {
        ggml_tensor *h = tdnn(x, b.tdnn1);
        const int64_t T = h->ne[1], part = h->ne[0] / (int64_t)(b.res2.size() + 1);
        std::vector<ggml_tensor *> outs;
        for (size_t i = 0; i <= b.res2.size(); i++) {
            ggml_tensor *p = ggml_view_2d(ctx, h, part, T, h->nb[1], i * part * sizeof(float));
            outs.push_back(i == 0 ? p : tdnn(p, b.res2[i - 1], i == 1 ? nullptr : outs.back()));
        }
        h = tdnn(concat(outs), b.tdnn2);
        ggml_tensor *gate = ggml_sigmoid(ctx, conv(tdnn(time_stats(h, false), b.se1), b.se2));
        return ggml_add(ctx, ggml_mul(ctx, h, gate), x);
    }

    ggml_tensor *pool(ggml_tensor *x) {  // [C, T] -> [2C, 1]
        ggml_tensor *stats = ggml_add(ctx, linear(time_stats(x, true), m.asp_stats), m.asp_x.b);
        ggml_tensor *a =
            ggml_tanh(ctx, custom("bias_relu", m.asp_x.cout, x->ne[1], {linear(x, m.asp_x), stats}, bias_relu_op));
        return time_stats(x, true, linear(a, m.asp_attn), m.asp_attn.b);
    }

    ggml_cgraph *build(int T) {
        mel = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, m.n_mels, T);
        ggml_set_input(mel);
        ggml_tensor *x = tdnn(mel, m.stem);
        std::vector<ggml_tensor *> outs;
        for (const Block &b : m.blocks) outs.push_back(x = block(x, b));
        xvec = conv(pool(tdnn(concat(outs), m.mfa)), m.fc);
        ggml_set_output(xvec);
        ggml_cgraph *gf = ggml_new_graph_custom(ctx, kGraphSize, false);
        ggml_build_forward_expand(gf, xvec);
        return gf;
    }
};

}  // namespace

struct kz_speaker_encoder : kz::GraphRunner {
    Model model;
    int n_threads = 1;
    std::string last_error;

    ~kz_speaker_encoder() {
        if (model.buf) ggml_backend_buffer_free(model.buf);
        if (model.ctx) ggml_free(model.ctx);
    }

    void encode(const float *mel, int n_frames, int n_mels, float *out, size_t capacity) {
        if (!mel || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "null mel or output buffer");
        if (n_mels != model.n_mels)
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "expected " + std::to_string(model.n_mels) + " mel bands, got " + std::to_string(n_mels));
        if (n_frames < model.min_frames)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "need at least " + std::to_string(model.min_frames) +
                                                     " mel frames, got " + std::to_string(n_frames));
        if (capacity < (size_t)model.dim)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "output buffer too small: need " + std::to_string(model.dim));
        ggml_init_params gp = {graph_mem.size(), graph_mem.data(), true};
        ggml_context *ctx = ggml_init(gp);
        if (!ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
        std::unique_ptr<ggml_context, void (*)(ggml_context *)> guard(ctx, ggml_free);
        Graph g{model, ctx};
        ggml_cgraph *gf = g.build(n_frames);
        if (!ggml_gallocr_alloc_graph(galloc, gf))
            throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the speaker encoder graph");
        ggml_backend_tensor_set(g.mel, mel, 0, ggml_nbytes(g.mel));
        GraphRunner::compute(gf, n_threads, "speaker encoder");
        ggml_backend_tensor_get(g.xvec, out, 0, ggml_nbytes(g.xvec));
    }
};

namespace {

// The speaker encoder's tensors of an mmproj: llama.cpp's a.* and mm.a.* (a.gen.* is the generator).
bool is_speaker_tensor(const std::string &name) {
    return (name.rfind("a.", 0) == 0 || name.rfind("mm.a.", 0) == 0) && name.rfind("a.gen.", 0) != 0;
}

std::string fingerprint(const char *path) {
    const kz::GgufReader R(path);
    gguf_context *g = R.file.gguf();
    std::vector<std::string> names;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        if (is_speaker_tensor(gguf_get_tensor_name(g, i))) names.push_back(gguf_get_tensor_name(g, i));
    }
    R.need(!names.empty(), "no speaker encoder: only Base models clone voices");
    std::sort(names.begin(), names.end());
    kz::Sha256 digest;
    for (const std::string &name : names) {
        const ggml_tensor *t = R.src(name);
        std::string shape = name + ":[";
        for (int d = 0; d < ggml_n_dims(t); ++d) shape += (d ? ", " : "") + std::to_string(t->ne[d]);
        digest.update(shape + "];");
        const std::vector<float> values = R.read(t);
        std::vector<ggml_fp16_t> half(values.size());
        ggml_fp32_to_fp16_row(values.data(), half.data(), int64_t(values.size()));
        digest.update(half.data(), half.size() * sizeof(ggml_fp16_t));
    }
    return digest.hex();
}

}  // namespace

extern "C" {

int kz_speaker_encoder_fingerprint(const char *mmproj_path, char *out, size_t out_len, char *err, size_t err_len) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(
        [&] {
            if (!mmproj_path || !out || out_len < 65) throw Error(KZ_ERR_INVALID_ARGUMENT, "null path or short output");
            const std::string hex = fingerprint(mmproj_path);
            std::memcpy(out, hex.c_str(), hex.size() + 1);
        },
        [&](const char *m) { kz::write_error(err, err_len, kz::about_file(mmproj_path, m)); }, KZ_ERR_FORMAT);
}

int kz_speaker_encoder_load(const char *mmproj_path, int n_threads, kz_speaker_encoder **out, char *err,
                            size_t err_len) {
    return kz::load_handle(mmproj_path, out, err, err_len, [&] {
        if (n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
        std::unique_ptr<kz_speaker_encoder> e(new kz_speaker_encoder());
        e->n_threads = n_threads;
        load_model(e->model, mmproj_path);
        e->init(kGraphSize);
        return e;
    });
}

void kz_speaker_encoder_free(kz_speaker_encoder *enc) { delete enc; }

const char *kz_speaker_encoder_last_error(const kz_speaker_encoder *enc) {
    return enc ? enc->last_error.c_str() : "null handle";
}

int kz_speaker_encoder_n_mels(const kz_speaker_encoder *enc) { return enc ? enc->model.n_mels : 0; }
int kz_speaker_encoder_dim(const kz_speaker_encoder *enc) { return enc ? enc->model.dim : 0; }
int kz_speaker_encoder_min_frames(const kz_speaker_encoder *enc) { return enc ? enc->model.min_frames : 0; }

int kz_speaker_encoder_set_threads(kz_speaker_encoder *enc, int n_threads) {
    return kz::call_handle(enc, [&] {
        if (n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
        enc->n_threads = n_threads;
    });
}

int kz_speaker_encoder_encode(kz_speaker_encoder *enc, const float *mel, int n_frames, int n_mels, float *out,
                              size_t capacity) {
    return kz::call_handle(enc, [&] { enc->encode(mel, n_frames, n_mels, out, capacity); });
}

}  // extern "C"
