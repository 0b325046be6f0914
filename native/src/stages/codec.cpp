// Codec decoder (Qwen3-TTS-Tokenizer-12Hz decoder) on ggml, with exact streaming.
//
// Layout: every activation is a ggml [channels, time] tensor (channel fastest), so 1x1 convs and
// linears are plain products, per-channel parameters broadcast as [C] rows, and the left context of
// a causal conv is a column block. With F16 weights a k-tap conv, a ConvTranspose's product and
// every linear (the transformer's, the ConvNeXt's) is kz::conv_gemm_op (conv_gemm.cpp): our own GEMM
// reading the taps straight from [left context ; input] in F32 (ggml's F16 GEMM rounds the input
// to F16 and spends half its time widening both operands). With F32 weights it is one
// mul_mat over an im2col matrix written in one pass from the left context and the input (no
// concatenated copy). The last conv (to one channel) is its own dot-product op (conv_to_one_op), the
// ConvNeXt's GELU kz::gelu_erf. Snake writes the type its consumer multiplies in, so no matmul converts. A
// ConvTranspose (kernel K = stride s or 2s) is one product giving K*Cout values per input step plus an
// overlap-add of the second half with the previous step's (the "tail").
//
// Every chunk of frames is decoded by one graph whose extra inputs are the stream state (conv
// left contexts, ConvTranspose tails, the last window-1 K/V of every transformer layer, the
// absolute position); the graph also outputs the next state. A full decode runs the same chunks
// from a zero state, so it is the exact model for any length.
#include "kazetts/codec.h"

#include "core/common_internal.h"
#include "core/gguf_reader.h"
#include "kernels/conv_gemm.h"
#include "kernels/custom_op.h"
#include "kernels/vector_kernels.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

using kz::Error;
using Loader = kz::GgufReader;

// Bounds on what a file may ask for (Qwen3-TTS: window 72, 1920 samples a frame).
constexpr int kMaxWindow = 8192;
constexpr int kMaxSamplesPerFrame = 1 << 16;
constexpr int kMaxChunk = 4096;  // frames per graph (kz_codec_set_max_chunk)
// The KV window starts at a multiple of kKvAlign positions and the key count is padded to a
// multiple of kKvAlign (masked zero keys), so every key sits at the same SIMD lane and block
// offset whatever the chunking: streaming output then matches a full decode bit for bit.
constexpr int kKvAlign = 64;
constexpr int64_t kMinCols = 4;
constexpr int kPostLanes = 16;  // lanes of the last conv's sums (conv_to_one_op)

// first position kept in the KV window once `pos` frames are done
int64_t kv_base(int64_t pos, int window) {
    int64_t b = pos - (window - 1);
    return b <= 0 ? 0 : b / kKvAlign * kKvAlign;
}

// the most K/V positions the stream state keeps (kv_base's alignment adds up to kKvAlign - 1)
int max_kept(int window) { return window - 1 + kKvAlign - 1; }

using kz::kPackRows;

// causal conv, stride 1 (pad_left = (k-1)*dil of left context): w [cin*k, cout] (tap-major rows), b [cout]
struct Conv : kz::ConvShape {
    ggml_tensor *w = nullptr, *b = nullptr;
    bool packed = false;  // F16 weights are packed for kz::conv_gemm_op (see kz::ConvShape)
};
struct TConv {  // ConvTranspose1d, kernel k, stride s, right trim k - s: b [cout]
    ggml_tensor *b = nullptr;
    int cin = 0, cout = 0, k = 1, s = 1;
    Conv gemm;  // its product: the 1-tap conv cin -> k*cout without bias (gemm.w: [cin, k*cout], F16 packed)
};
struct Snake {
    ggml_tensor *alpha = nullptr, *inv_beta = nullptr;
};
struct TfmLayer {
    ggml_tensor *ln1, *ls1, *ln2, *ls2;
    Conv q, k, v, o, gate, up, down;  // linears: 1-tap convs without bias
};
struct UpBlock {
    TConv conv;
    ggml_tensor *dw_w, *dw_b, *norm_w, *norm_b, *gamma;  // dw_w [C, 7]
    Conv pw1, pw2;
    int dw_k;
};
struct ResUnit {
    Snake act1, act2;
    Conv conv1, conv2;
};
struct DacBlock {
    Snake snake;
    TConv conv;
    std::vector<ResUnit> res;
};

struct Hparams {
    int n_codebooks = 16, cb_dim = 0, cb_size_first = 0, cb_size_rest = 0;
    int codebook_dim = 0, latent = 0, hidden = 0, n_layer = 0, head_dim = 64, n_head = 0, n_head_kv = 0;
    int window = 72, samples_per_frame = 0, up_factor = 1, sample_rate = 24000;
    float eps = 1e-5f, rope_theta = 10000.0f;
};

struct Model {
    Hparams hp;
    ggml_tensor *cb_first = nullptr, *cb_rest = nullptr, *out_first = nullptr, *out_rest = nullptr;
    Conv pre_conv, in_proj, out_proj;
    ggml_tensor *out_norm;
    std::vector<TfmLayer> layers;
    std::vector<UpBlock> up;
    Conv entry;
    std::vector<DacBlock> dac;
    Snake post_snake;
    Conv post_conv;
    ggml_context *ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    int graph_size = 0;  // nodes (and tensors) of a chunk's graph
};

// A generous count of a chunk graph's nodes: per transformer layer, upsampling block, DAC block
// (3 residual units) and codebook (sums), besides the fixed part.
int graph_size(const Hparams &hp, int n_up, int n_dac) {
    return 4096 + 128 * hp.n_layer + 256 * n_up + 512 * n_dac + 8 * hp.n_codebooks;
}

struct State {
    int64_t pos = 0;                        // frames decoded
    std::vector<std::vector<float>> slots;  // conv contexts and ConvTranspose tails, graph order
    std::vector<std::vector<float>> k, v;   // per layer: [kv_dim, n_kv]
    int n_kv = 0;
};

// ---------------------------------------------------------------------------------------------
// loading
// ---------------------------------------------------------------------------------------------

// A weight to create: its final shape/type, and how to read its values (in its final layout)
// once the buffer exists: one tensor is staged in F32 at a time, never the whole model; or,
// for a tensor kept as stored, its bytes as they are in the file.
struct Pending {
    ggml_tensor *dst;
    std::function<std::vector<float>()> read;
    std::function<std::vector<uint8_t>()> bytes;
};

struct Builder {
    Model &m;
    const Loader &L;
    ggml_type fast;  // type of the conv / linear weights (F32 on the reference path)
    bool half_sums;  // F16 weights summed in FP16 where the CPU can (KZ_CODEC_WEIGHTS_F16_SUMS)
    std::vector<Pending> pending;

    ggml_tensor *make(const std::string &name, ggml_type type, std::vector<int64_t> ne,
                      std::function<std::vector<float>()> read) {
        ggml_tensor *t = nullptr;
        switch (ne.size()) {
            case 1: t = ggml_new_tensor_1d(m.ctx, type, ne[0]); break;
            case 2: t = ggml_new_tensor_2d(m.ctx, type, ne[0], ne[1]); break;
            default: t = ggml_new_tensor_3d(m.ctx, type, ne[0], ne[1], ne[2]); break;
        }
        ggml_set_name(t, name.c_str());
        pending.push_back({t, std::move(read), nullptr});
        return t;
    }
    // a row table kept in the file's type, read with ggml_get_rows: its rows dequantize with the
    // same to_float the F32 staging would apply, so the values are those of an F32 copy, in a
    // fraction of the memory (Q8_0 codebooks: 8.5 MB instead of 32)
    ggml_tensor *stored(const std::string &name, std::vector<int64_t> ne) {
        ggml_tensor *s = L.src(name);
        L.need(ggml_nelements(s) == ne[0] * ne[1] && s->ne[0] == ne[0],
               "tensor " + name + " has shape " + kz::shape_str(s->ne, GGML_MAX_DIMS));
        ggml_tensor *t = ggml_new_tensor_2d(m.ctx, s->type, ne[0], ne[1]);
        ggml_set_name(t, name.c_str());
        pending.push_back({t, nullptr, [this, s] { return L.file.read(gguf_find_tensor(L.file.gguf(), s->name)); }});
        return t;
    }
    void expect(const ggml_tensor *t, std::vector<int64_t> ne) const {
        for (size_t i = 0; i < 4; i++) {
            int64_t want = i < ne.size() ? ne[i] : 1;
            L.need(t->ne[i] == want, std::string("tensor ") + t->name + " has shape " +
                                         kz::shape_str(t->ne, GGML_MAX_DIMS) + ", expected " +
                                         kz::shape_str(ne.data(), (int)ne.size()));
        }
    }
    // a tensor copied as is (F32 unless told)
    ggml_tensor *plain(const std::string &name, std::vector<int64_t> ne, ggml_type type = GGML_TYPE_F32) {
        ggml_tensor *s = L.src(name);
        expect(s, ne);
        return make(name, type, ne, [this, s] { return L.read(s); });
    }
    // c.w in `type` from `rows` (row o: the cin*k weights of output o, tap-major): F16 packed for
    // kz::conv_gemm_op (c.packed), else the [cin*k, cout] matrix ggml's mul_mat takes
    void weight(Conv &c, const std::string &name, ggml_type type, std::function<std::vector<float>()> rows) {
        c.packed = type == GGML_TYPE_F16;
        c.half_sums = c.packed && half_sums;
        if (!c.packed) {
            c.w = make(name, type, {(int64_t)c.cin * c.k, c.cout}, rows);
        } else {
            c.w = make(name, type, kz::packed_shape(c),
                       [rows, shape = (kz::ConvShape)c] { return kz::pack_rows(rows(), shape); });
        }
    }
    // a linear [in] -> [out] (the 1-tap conv), in the fast type, with the bias `bias` if named
    Conv linear(const std::string &name, int64_t in, int64_t out, const std::string &bias = "") {
        ggml_tensor *s = L.src(name);
        expect(s, {in, out});
        Conv c;
        c.cin = (int)in;
        c.cout = (int)out;
        weight(c, name, fast, [this, s] { return L.read(s); });
        if (!bias.empty()) c.b = vec(bias, out);
        return c;
    }
    ggml_tensor *vec(const std::string &name, int64_t n) { return plain(name, {n}); }
    Snake snake(const std::string &name, int64_t c) { return {vec(name + ".alpha", c), vec(name + ".beta", c)}; }
    // torch Conv1d weight [cout, cin, k] (ggml ne [k, cin, cout]) -> [cin*k, cout], row j*cin + c
    Conv conv(const std::string &name, int dil, ggml_type type) {
        ggml_tensor *s = L.src(name + ".weight");
        L.need(s->ne[3] == 1, name + ".weight must be [k, cin, cout]");
        Conv c;
        c.k = (int)s->ne[0];
        c.cin = (int)s->ne[1];
        c.cout = (int)s->ne[2];
        c.dil = dil;
        c.pad_left = (int64_t)(c.k - 1) * dil;
        weight(c, name + ".weight", type, [this, s, c] { return kz::conv_taps(L.read(s), c.cout, c.cin, c.k); });
        c.b = vec(name + ".bias", c.cout);
        return c;
    }
    // torch ConvTranspose1d weight [cin, cout, k] (ggml ne [k, cout, cin]) -> [cin, k*cout], row j*cout + c
    TConv tconv(const std::string &name, int stride) {
        ggml_tensor *s = L.src(name + ".weight");
        L.need(s->ne[3] == 1, name + ".weight must be [k, cout, cin]");
        TConv c;
        c.k = (int)s->ne[0];
        c.cout = (int)s->ne[1];
        c.cin = (int)s->ne[2];
        c.s = stride;
        if (c.k != c.s && c.k != 2 * c.s)
            throw Error(KZ_ERR_FORMAT, name + ": ConvTranspose kernel must be stride or 2*stride");
        // row j*cout + co of the [cin, k*cout] matrix: tap j of output channel co
        auto rows = [this, s, c] {
            std::vector<float> w = L.read(s), p(w.size());
            for (int ci = 0; ci < c.cin; ci++)
                for (int co = 0; co < c.cout; co++)
                    for (int j = 0; j < c.k; j++)
                        p[ci + (size_t)c.cin * (co + (size_t)c.cout * j)] =
                            w[j + (size_t)c.k * (co + (size_t)c.cout * ci)];
            return p;
        };
        c.gemm.cin = c.cin;
        c.gemm.cout = c.k * c.cout;
        weight(c.gemm, name + ".weight", fast, rows);
        c.b = vec(name + ".bias", c.cout);
        return c;
    }
};

int count_blocks(const Loader &L, const char *fmt) {
    int n = 0;
    char name[256];
    for (;; n++) {
        std::snprintf(name, sizeof name, fmt, n);
        if (!L.src(name, false)) return n;
    }
}

void load_model(Model &m, const char *path, ggml_type fast, bool half_sums) {
    Loader L(path);
    const std::string W = "a.gen.wav.";
    for (ggml_tensor *t = ggml_get_first_tensor(L.file.meta()); t; t = ggml_get_next_tensor(L.file.meta(), t)) {
        L.need(std::strncmp(t->name, W.c_str(), W.size()) != 0 || kz::can_dequantize(t->type),
               std::string("tensor ") + t->name + " has unsupported type " + ggml_type_name(t->type));
    }
    Hparams &hp = m.hp;
    ggml_tensor *cbf = L.src(W + "quant.first.codebook.weight");
    ggml_tensor *cbr = L.src(W + "quant.rest.codebook.weight");
    hp.cb_dim = (int)cbf->ne[0];
    hp.cb_size_first = (int)cbf->ne[1];
    hp.cb_size_rest = (int)cbr->ne[1];
    L.need(cbr->ne[0] == hp.cb_dim && cbr->ne[2] < KZ_MAX_CODEBOOKS && cbr->ne[3] == 1,
           "codebooks: quant.rest.codebook.weight has shape " + kz::shape_str(cbr->ne, GGML_MAX_DIMS));
    hp.n_codebooks = 1 + (int)cbr->ne[2];
    ggml_tensor *of = L.src(W + "quant.first.out_proj.weight");
    hp.codebook_dim = (int)of->ne[1];
    ggml_tensor *pc = L.src(W + "pre_conv.weight");
    hp.latent = (int)pc->ne[2];
    ggml_tensor *ip = L.src(W + "tfm.in_proj.weight");
    hp.hidden = (int)ip->ne[1];
    hp.n_layer = count_blocks(L, "a.gen.wav.tfm.blk.%d.attn_q.weight");
    // The reference's rule when a config has no head_dim: hidden_size / num_attention_heads, with
    // Qwen3TTSTokenizerV2DecoderConfig's defaults (1024, 16) for keys the file lacks.
    double heads = L.num("kazetts.wav.num_attention_heads", 16);
    hp.head_dim = (int)L.num("kazetts.wav.head_dim", heads > 0 ? L.num("kazetts.wav.hidden_size", 1024) / heads : 0);
    ggml_tensor *q0 = L.src(W + "tfm.blk.0.attn_q.weight");
    ggml_tensor *k0 = L.src(W + "tfm.blk.0.attn_k.weight");
    if (hp.head_dim <= 0 || q0->ne[1] % hp.head_dim || k0->ne[1] % hp.head_dim)
        throw Error(KZ_ERR_FORMAT, "attention width is not a multiple of head_dim");
    hp.n_head = (int)(q0->ne[1] / hp.head_dim);
    hp.n_head_kv = (int)(k0->ne[1] / hp.head_dim);
    L.need(hp.n_head_kv >= 1 && hp.n_head % hp.n_head_kv == 0, "n_head is not a multiple of n_head_kv");
    L.need(hp.head_dim % 2 == 0, "head_dim " + std::to_string(hp.head_dim) + " is odd (rotary pairs)");
    L.need((int)L.num("kazetts.wav.num_hidden_layers", hp.n_layer) == hp.n_layer,
           std::to_string(hp.n_layer) +
               " codec transformer layers in the file, kazetts.wav.num_hidden_layers says otherwise");
    hp.eps = (float)L.num("kazetts.wav.rms_norm_eps", 1e-5);
    hp.rope_theta = (float)L.num("kazetts.wav.rope_theta", 10000.0);
    hp.window = (int)L.num("kazetts.wav.sliding_window", 72);
    hp.sample_rate = (int)L.num("kazetts.wav.output_sample_rate", 24000);
    L.need(hp.window >= 1 && hp.window <= kMaxWindow, "sliding_window must be in 1.." + std::to_string(kMaxWindow));
    L.need(hp.eps > 0.0f && hp.rope_theta > 0.0f && hp.sample_rate > 0,
           "rms_norm_eps, rope_theta and output_sample_rate must be positive");

    // every weight made below stands for one tensor of the file
    ggml_init_params ip_ = {ggml_tensor_overhead() * (size_t)(gguf_get_n_tensors(L.file.gguf()) + 1), nullptr, true};
    m.ctx = ggml_init(ip_);
    if (!m.ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    Builder B{m, L, fast, half_sums, {}};

    m.cb_first = B.stored(W + "quant.first.codebook.weight", {hp.cb_dim, hp.cb_size_first});
    m.cb_rest =
        B.stored(W + "quant.rest.codebook.weight", {hp.cb_dim, (int64_t)hp.cb_size_rest * (hp.n_codebooks - 1)});
    m.out_first = B.plain(W + "quant.first.out_proj.weight", {hp.cb_dim, hp.codebook_dim});
    m.out_rest = B.plain(W + "quant.rest.out_proj.weight", {hp.cb_dim, hp.codebook_dim});
    m.pre_conv = B.conv(W + "pre_conv", 1, fast);
    if (m.pre_conv.cin != hp.codebook_dim) throw Error(KZ_ERR_FORMAT, "pre_conv input width mismatch");
    m.in_proj = B.linear(W + "tfm.in_proj.weight", hp.latent, hp.hidden, W + "tfm.in_proj.bias");
    m.out_proj = B.linear(W + "tfm.out_proj.weight", hp.hidden, hp.latent, W + "tfm.out_proj.bias");
    m.out_norm = B.vec(W + "tfm.output_norm.weight", hp.hidden);
    const int64_t qd = (int64_t)hp.n_head * hp.head_dim, kvd = (int64_t)hp.n_head_kv * hp.head_dim;
    for (int i = 0; i < hp.n_layer; i++) {
        std::string p = W + "tfm.blk." + std::to_string(i) + ".";
        TfmLayer l;
        l.ln1 = B.vec(p + "ln1.weight", hp.hidden);
        l.q = B.linear(p + "attn_q.weight", hp.hidden, qd);
        l.k = B.linear(p + "attn_k.weight", hp.hidden, kvd);
        l.v = B.linear(p + "attn_v.weight", hp.hidden, kvd);
        l.o = B.linear(p + "attn_out.weight", qd, hp.hidden);
        l.ls1 = B.vec(p + "ls1.weight", hp.hidden);
        l.ln2 = B.vec(p + "ln2.weight", hp.hidden);
        ggml_tensor *g = L.src(p + "ffn_gate.weight");
        int64_t ff = g->ne[1];
        l.gate = B.linear(p + "ffn_gate.weight", hp.hidden, ff);
        l.up = B.linear(p + "ffn_up.weight", hp.hidden, ff);
        l.down = B.linear(p + "ffn_down.weight", ff, hp.hidden);
        l.ls2 = B.vec(p + "ls2.weight", hp.hidden);
        m.layers.push_back(l);
    }
    int n_up = count_blocks(L, "a.gen.wav.up.blk.%d.conv.weight");
    hp.up_factor = 1;
    int ch = hp.latent;  // channels flowing into the next block: every block checks it takes them
    for (int i = 0; i < n_up; i++) {
        std::string p = W + "up.blk." + std::to_string(i) + ".";
        UpBlock u;
        int stride = (int)L.src(p + "conv.weight")->ne[0];  // kernel == stride
        u.conv = B.tconv(p + "conv", stride);
        L.need(u.conv.cin == ch,
               p + "conv takes " + std::to_string(u.conv.cin) + " channels, gets " + std::to_string(ch));
        L.need(hp.up_factor <= kMaxSamplesPerFrame / stride,
               "upsampling factors multiply past " + std::to_string(kMaxSamplesPerFrame));
        hp.up_factor *= stride;
        const int64_t C = u.conv.cout;
        ch = u.conv.cout;
        ggml_tensor *dw = L.src(p + "dwconv.weight");
        u.dw_k = (int)dw->ne[0];
        L.need(u.dw_k >= 2, p + "dwconv kernel must be >= 2");
        B.expect(dw, {u.dw_k, 1, C});
        const int dw_k = u.dw_k;
        u.dw_w = B.make(p + "dwconv.weight", GGML_TYPE_F32, {C, dw_k}, [&L, dw, C, dw_k] {
            std::vector<float> w = L.read(dw), t(w.size());
            for (int64_t c = 0; c < C; c++)
                for (int j = 0; j < dw_k; j++) t[c + C * j] = w[j + (size_t)dw_k * c];
            return t;
        });
        u.dw_b = B.vec(p + "dwconv.bias", C);
        u.norm_w = B.vec(p + "norm.weight", C);
        u.norm_b = B.vec(p + "norm.bias", C);
        const int64_t ff = L.src(p + "pw1.weight")->ne[1];
        u.pw1 = B.linear(p + "pw1.weight", C, ff, p + "pw1.bias");
        u.pw2 = B.linear(p + "pw2.weight", ff, C, p + "pw2.bias");
        u.gamma = B.vec(p + "gamma", C);
        m.up.push_back(u);
    }
    // a conv taking `ch` channels; `same`: giving as many (a residual branch)
    auto chained = [&](const Conv &c, const std::string &name, bool same) {
        L.need(c.cin == ch && (!same || c.cout == ch), name + " maps " + std::to_string(c.cin) + " -> " +
                                                           std::to_string(c.cout) + " channels, gets " +
                                                           std::to_string(ch));
        return c;
    };
    m.entry = chained(B.conv(W + "dac.entry", 1, fast), "dac.entry", false);
    int n_dac = count_blocks(L, "a.gen.wav.dac.blk.%d.conv.weight");
    int total = hp.up_factor;
    ch = m.entry.cout;
    for (int i = 0; i < n_dac; i++) {
        std::string p = W + "dac.blk." + std::to_string(i) + ".";
        DacBlock d;
        d.snake = B.snake(p + "snake", ch);
        int k = (int)L.src(p + "conv.weight")->ne[0];
        if (k % 2) throw Error(KZ_ERR_FORMAT, p + "conv: odd ConvTranspose kernel");
        d.conv = B.tconv(p + "conv", k / 2);
        L.need(d.conv.cin == ch,
               p + "conv takes " + std::to_string(d.conv.cin) + " channels, gets " + std::to_string(ch));
        L.need(total <= kMaxSamplesPerFrame / d.conv.s,
               "upsampling factors multiply past " + std::to_string(kMaxSamplesPerFrame));
        total *= d.conv.s;
        ch = d.conv.cout;
        const int dil[3] = {1, 3, 9};
        for (int r = 0; r < 3; r++) {
            std::string q = p + "res." + std::to_string(r) + ".";
            ResUnit u;
            u.act1 = B.snake(q + "act1", ch);
            u.conv1 = chained(B.conv(q + "conv1", dil[r], fast), q + "conv1", true);
            u.act2 = B.snake(q + "act2", ch);
            u.conv2 = chained(B.conv(q + "conv2", 1, fast), q + "conv2", true);
            d.res.push_back(u);
        }
        m.dac.push_back(d);
    }
    m.post_snake = B.snake(W + "dac.post_snake", ch);
    m.post_conv = chained(B.conv(W + "dac.post_conv", 1, GGML_TYPE_F32), "dac.post_conv", false);
    if (m.post_conv.cout != 1) throw Error(KZ_ERR_FORMAT, "post_conv must have one output channel");
    hp.samples_per_frame = total;
    m.graph_size = graph_size(hp, n_up, n_dac);

    m.buf = ggml_backend_alloc_ctx_tensors_from_buft(m.ctx, ggml_backend_cpu_buffer_type());
    if (!m.buf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec weights");
    kz::advise_huge_pages(ggml_backend_buffer_get_base(m.buf), ggml_backend_buffer_get_size(m.buf));
    if (!ggml_backend_buffer_is_host(m.buf)) throw Error(KZ_ERR_NO_MEMORY, "the codec weights are not in host memory");
    // The largest first: a tensor's staging (up to twice its F32 size, 151 MB for the first
    // ConvTranspose) then comes before the other weights are resident, so the load's peak stays
    // near the loaded size instead of the size plus the largest staging (~100 MB more).
    std::stable_sort(B.pending.begin(), B.pending.end(),
                     [](const Pending &a, const Pending &b) { return ggml_nelements(a.dst) > ggml_nelements(b.dst); });
    for (Pending &p : B.pending) {
        if (p.bytes) {
            const std::vector<uint8_t> raw = p.bytes();
            if (raw.size() != ggml_nbytes(p.dst))
                throw Error(KZ_ERR_FORMAT, std::string("size mismatch for ") + p.dst->name);
            ggml_backend_tensor_set(p.dst, raw.data(), 0, raw.size());
            continue;
        }
        const std::vector<float> data = p.read();
        if ((int64_t)data.size() != ggml_nelements(p.dst))
            throw Error(KZ_ERR_FORMAT, std::string("size mismatch for ") + p.dst->name);
        if (p.dst->type == GGML_TYPE_F32) {
            ggml_backend_tensor_set(p.dst, data.data(), 0, ggml_nbytes(p.dst));
        } else {  // converted straight into the (host) weight buffer
            ggml_quantize_chunk(p.dst->type, data.data(), p.dst->data, 0, ggml_nrows(p.dst), p.dst->ne[0], nullptr);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// fused SnakeBeta: y = x + inv_beta[c] * sin(alpha[c] * x)^2, one pass, branch-free (vectorizes)
// ---------------------------------------------------------------------------------------------

// sin(x)^2 = sin(r)^2 with r = x - k*pi (the sign of sin drops out), |r| <= pi/2; Cody-Waite
// reduction in three parts of pi, odd Taylor polynomial to r^15 (truncation < 1e-9).
static inline float sin_sq(float x) {
    // round to nearest without a libm call (|x / pi| < 2^22): add and remove 1.5 * 2^23
    const float k = (x * 0.318309886183790671f + 12582912.0f) - 12582912.0f;
    float r = x - k * 3.140625f;
    r = r - k * 9.67502593994140625e-4f;
    r = r - k * 1.509957990978376432e-7f;
    const float r2 = r * r;
    float p = -7.6471637318198164759e-13f;    // -1/15!
    p = p * r2 + 1.6059043836821614599e-10f;  //  1/13!
    p = p * r2 - 2.5052108385441718775e-8f;   // -1/11!
    p = p * r2 + 2.7557319223985890653e-6f;   //  1/9!
    p = p * r2 - 1.9841269841269841270e-4f;   // -1/7!
    p = p * r2 + 8.3333333333333333333e-3f;   //  1/5!
    p = p * r2 - 1.6666666666666666667e-1f;   // -1/3!
    const float sn = r + r * r2 * p;
    return sn * sn;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void snake_row(float *y, const float *x, const float *alpha, const float *inv_beta, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] + inv_beta[i] * sin_sq(alpha[i] * x[i]);
}

using kz::thread_rows;

// writes n floats as a row of dst's type (F32 or F16: the type the next matmul consumes)
static void store_row(void *dst, ggml_type type, const float *src, int64_t n) {
    if (type == GGML_TYPE_F16) {
        ggml_cpu_fp32_to_fp16(src, (ggml_fp16_t *)dst, n);
    } else {
        std::memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

// dst = snake(src[0]; alpha src[1], inv_beta src[2]), written in dst's type
static void snake_op(ggml_tensor *dst, int ith, int nth, void *) {
    const ggml_tensor *x = dst->src[0], *alpha = dst->src[1], *inv_beta = dst->src[2];
    const int64_t C = x->ne[0];
    const auto [t0, t1] = thread_rows(ggml_nrows(x), ith, nth);
    std::vector<float> row(dst->type == GGML_TYPE_F32 ? 0 : C);
    for (int64_t t = t0; t < t1; t++) {
        float *y = row.empty() ? (float *)((char *)dst->data + t * dst->nb[1]) : row.data();
        snake_row(y, (const float *)((const char *)x->data + t * x->nb[1]), (const float *)alpha->data,
                  (const float *)inv_beta->data, C);
        if (!row.empty()) store_row((char *)dst->data + t * dst->nb[1], dst->type, y, C);
    }
}

// The input matrix of a causal k-tap conv: column t holds taps j = 0..k-1 of the input
// [prev (src[0], F32 left context) ; x (src[1], F32 or dst's type)] at t + j*dil, each a row of
// cin values, written in dst's type. One pass, no concatenated copy of the input.
static void im2col_op(ggml_tensor *dst, int ith, int nth, void *userdata) {
    const Conv &c = *static_cast<const Conv *>(userdata);
    const ggml_tensor *prev = dst->src[0], *x = dst->src[1];
    const int64_t Lc = prev->ne[1], es = (int64_t)ggml_type_size(dst->type);
    const auto [t0, t1] = thread_rows(dst->ne[1], ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        char *out = (char *)dst->data + t * dst->nb[1];
        for (int j = 0; j < c.k; j++, out += c.cin * es) {
            const int64_t col = t + (int64_t)j * c.dil - Lc;  // < 0: in the left context
            if (col < 0) {
                store_row(out, dst->type, (const float *)((const char *)prev->data + (Lc + col) * prev->nb[1]), c.cin);
            } else if (x->type == dst->type) {
                std::memcpy(out, (const char *)x->data + col * x->nb[1], (size_t)(c.cin * es));
            } else {
                store_row(out, dst->type, (const float *)((const char *)x->data + col * x->nb[1]), c.cin);
            }
        }
    }
}

// A ConvTranspose of kernel 2s from its product y (src[0], F32 [2s*cout, T]: taps j*cout + c per
// input step): out[c, t*s + j] = (y[j*cout + c, t] + tail[j*cout + c]) + bias[c] (src[2]), the tail
// being the second half of step t-1's taps, or the previous chunk's (src[1], F32 [s*cout]) at t = 0
// (the sums and their order of concat + add + add over ggml views).
static void overlap_add_op(ggml_tensor *dst, int ith, int nth, void *userdata) {
    const TConv &c = *static_cast<const TConv *>(userdata);
    const ggml_tensor *y = dst->src[0];
    const float *prev = (const float *)dst->src[1]->data, *bias = (const float *)dst->src[2]->data;
    const int64_t half = (int64_t)c.cout * c.s;
    const auto [t0, t1] = thread_rows(y->ne[1], ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        const float *cur = (const float *)((const char *)y->data + t * y->nb[1]);
        const float *tail = t > 0 ? (const float *)((const char *)y->data + (t - 1) * y->nb[1]) + half : prev;
        float *out = (float *)dst->data + t * half;
        for (int j = 0; j < c.s; j++)
            for (int co = 0; co < c.cout; co++) {
                const int64_t i = (int64_t)j * c.cout + co;
                out[i] = (cur[i] + tail[i]) + bias[co];
            }
    }
}

// The last conv (cin -> 1 channel, k taps): y[t] = bias + sum over taps j and channels c of
// w[j*cin + c] * [prev ; x] at step t + j*dil, each step's sum in kPostLanes lanes (the lane of
// channel c is c % kPostLanes) added in one fixed order, whatever T and the threads. A GEMM
// would spend all but one of its kPackRows output rows on padding; im2col wrote k*cin values a sample.
static void conv_to_one_op(ggml_tensor *dst, int ith, int nth, void *userdata) {
    typedef float lanes __attribute__((vector_size(kPostLanes * sizeof(float))));
    const Conv &c = *static_cast<const Conv *>(userdata);
    const ggml_tensor *x = dst->src[0], *prev = dst->src[3];
    const float *w = (const float *)dst->src[1]->data, bias = *(const float *)dst->src[2]->data;
    const auto [t0, t1] = thread_rows(dst->ne[1], ith, nth);
    for (int64_t t = t0; t < t1; t++) {
        lanes acc = {};
        for (int j = 0; j < c.k; j++) {
            const int64_t col = t + (int64_t)j * c.dil - c.pad_left;  // < 0: in the left context
            const float *in = col < 0 ? (const float *)((const char *)prev->data + (c.pad_left + col) * prev->nb[1])
                                      : (const float *)((const char *)x->data + col * x->nb[1]);
            const float *wj = w + (int64_t)j * c.cin;
            int i = 0;
            for (; i + kPostLanes <= c.cin; i += kPostLanes) {
                lanes a, b;
                std::memcpy(&a, wj + i, sizeof a);
                std::memcpy(&b, in + i, sizeof b);
                acc += a * b;
            }
            for (; i < c.cin; i++) acc[i % kPostLanes] += wj[i] * in[i];
        }
        float y = bias;
        for (int l = 0; l < kPostLanes; l++) y += acc[l];
        ((float *)dst->data)[t] = y;
    }
}

// ---------------------------------------------------------------------------------------------
// graph
// ---------------------------------------------------------------------------------------------

struct Graph {
    const Model &m;
    ggml_context *ctx;
    const State &st;
    int n;              // frames in this chunk
    int next_n_kv = 0;  // K/V positions the state keeps after this chunk
    std::vector<std::pair<ggml_tensor *, const std::vector<float> *>> state_in;
    struct Out {
        ggml_tensor *t;
        int kind;
        size_t index;
    };  // kind 0 slot, 1 k, 2 v
    std::vector<Out> state_out;
    std::deque<std::vector<float>> zeros;  // zero states, kept alive until inputs are set
    size_t slot = 0;
    ggml_tensor *codes_first = nullptr, *codes_rest = nullptr, *pos = nullptr, *mask = nullptr;
    ggml_tensor *quantized = nullptr, *pre_conv = nullptr, *transformer = nullptr, *upsample = nullptr, *wav = nullptr;

    Graph(const Model &m_, ggml_context *c, const State &s, int n_) : m(m_), ctx(c), st(s), n(n_) {}

    ggml_tensor *input(ggml_type t, int64_t ne0, int64_t ne1 = 1) {
        ggml_tensor *x = ggml_new_tensor_2d(ctx, t, ne0, ne1);
        ggml_set_input(x);
        return x;
    }
    // the previous state of the next slot, [ne0, ne1]
    ggml_tensor *state(int64_t ne0, int64_t ne1) {
        ggml_tensor *x = input(GGML_TYPE_F32, ne0, ne1);
        const size_t want = (size_t)(ne0 * ne1);
        if (slot < st.slots.size()) {
            if (st.slots[slot].size() != want) throw Error(KZ_ERR_STATE, "stream state does not match the model");
            state_in.push_back({x, &st.slots[slot]});
        } else {
            zeros.emplace_back(want, 0.0f);
            state_in.push_back({x, &zeros.back()});
        }
        return x;
    }
    // the new state of the current slot (kept in F32)
    void save(ggml_tensor *view) {
        ggml_tensor *t = view->type == GGML_TYPE_F32 ? ggml_cont(ctx, view) : ggml_cast(ctx, view, GGML_TYPE_F32);
        ggml_set_output(t);
        state_out.push_back({t, 0, slot});
        slot++;
    }

    // w x with at least kMinCols columns: ggml picks its GEMM kernel (and so the rounding) by the
    // column count (on ARM its F32 tinyBLAS takes 4 or more), fewer columns are padded with zeros
    // so a 1-frame push rounds like a big chunk
    ggml_tensor *mm(ggml_tensor *w, ggml_tensor *x) {
        const int64_t T = x->ne[1];
        if (T >= kMinCols) return ggml_mul_mat(ctx, w, x);
        if (x->type != GGML_TYPE_F32) x = ggml_cast(ctx, x, GGML_TYPE_F32);  // ggml_pad is F32 only
        ggml_tensor *y = ggml_mul_mat(ctx, w, ggml_pad(ctx, x, 0, (int)(kMinCols - T), 0, 0));
        return ggml_cont(ctx, ggml_view_2d(ctx, y, y->ne[0], T, y->nb[1], 0));
    }

    ggml_tensor *conv(ggml_tensor *x, const Conv &c) {
        // im2col_op and conv_gemm_op read cin values from every row of x and of the context (the loader's chain checks)
        if (x->ne[0] != c.cin)
            throw Error(KZ_ERR_STATE,
                        "codec conv gets " + std::to_string(x->ne[0]) + " channels, takes " + std::to_string(c.cin));
        const int64_t T = x->ne[1];
        const int64_t Lc = (int64_t)(c.k - 1) * c.dil;
        if (c.packed) return packed_conv(x, c, Lc);
        if (Lc == 0) return ggml_add(ctx, mm(c.w, x), c.b);
        ggml_tensor *prev = context(x, Lc);
        ggml_tensor *args[2] = {prev, x};
        ggml_tensor *cols = ggml_custom_4d(ctx, c.w->type, (int64_t)c.cin * c.k, T, 1, 1, args, 2, im2col_op,
                                           GGML_N_TASKS_MAX, const_cast<Conv *>(&c));
        return ggml_add(ctx, mm(c.w, cols), c.b);
    }

    // a linear (Builder::linear) of the columns of x: F16 packed, conv_gemm_op; F32, ggml's mul_mat
    // through mm (a ConvNeXt after a 1-frame push has 2 columns)
    ggml_tensor *linear(ggml_tensor *x, const Conv &c) {
        if (c.packed) return packed_conv(x, c, 0);
        ggml_tensor *y = mm(c.w, x);
        return c.b ? ggml_add(ctx, y, c.b) : y;
    }

    // the last conv, to one channel (conv_to_one_op); x: F32 [cin, T]
    ggml_tensor *conv_to_one(ggml_tensor *x, const Conv &c) {
        if (x->ne[0] != c.cin)
            throw Error(KZ_ERR_STATE, "codec post_conv gets " + std::to_string(x->ne[0]) + " channels, takes " +
                                          std::to_string(c.cin));
        if (x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x))
            throw Error(KZ_ERR_STATE, "codec post_conv takes contiguous F32 input");
        ggml_tensor *args[4] = {x, c.w, c.b, c.pad_left > 0 ? context(x, c.pad_left) : nullptr};
        return ggml_custom_4d(ctx, GGML_TYPE_F32, 1, x->ne[1], 1, 1, args, c.pad_left > 0 ? 4 : 3, conv_to_one_op,
                              GGML_N_TASKS_MAX, const_cast<Conv *>(&c));
    }

    ggml_tensor *gelu(ggml_tensor *x) { return kz::unary<kz::gelu_erf>(ctx, x); }

    // the previous Lc columns before x (a state), saving the next ones: the last Lc of [prev ; x]
    ggml_tensor *context(ggml_tensor *x, int64_t Lc) {
        const int64_t C = x->ne[0], T = x->ne[1];
        ggml_tensor *prev = state(C, Lc);
        if (T >= Lc) {
            save(ggml_view_2d(ctx, x, C, Lc, x->nb[1], (size_t)(T - Lc) * x->nb[1]));
        } else {
            ggml_tensor *xf = x->type == GGML_TYPE_F32 ? x : ggml_cast(ctx, x, GGML_TYPE_F32);
            ggml_tensor *kept = ggml_view_2d(ctx, prev, C, Lc - T, prev->nb[1], (size_t)T * prev->nb[1]);
            save(ggml_concat(ctx, kept, xf, 1));
        }
        return prev;
    }

    // the F16 path: conv_gemm_op on x (in F32) after its left context (none when Lc is 0), plus `res` if given
    ggml_tensor *packed_conv(ggml_tensor *x, const Conv &c, int64_t Lc, ggml_tensor *res = nullptr) {
        if (x->type != GGML_TYPE_F32) x = ggml_cast(ctx, x, GGML_TYPE_F32);
        return kz::conv_gemm(ctx, c, c.w, c.b, x, x->ne[1], Lc > 0 ? context(x, Lc) : nullptr, res);
    }
    // x + conv(t): a residual branch's last conv, the add fused into the F16 GEMM
    ggml_tensor *conv_add(ggml_tensor *t, const Conv &c, ggml_tensor *x) {
        if (!c.packed || x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) || x->ne[0] != c.cout ||
            x->ne[1] != t->ne[1])
            return ggml_add(ctx, conv(t, c), x);
        if (t->ne[0] != c.cin)
            throw Error(KZ_ERR_STATE,
                        "codec conv gets " + std::to_string(t->ne[0]) + " channels, takes " + std::to_string(c.cin));
        return packed_conv(t, c, (int64_t)(c.k - 1) * c.dil, x);
    }

    ggml_tensor *tconv(ggml_tensor *x, const TConv &c) {
        const int64_t T = x->ne[1];
        ggml_tensor *y = c.gemm.packed ? packed_conv(x, c.gemm, 0) : mm(c.gemm.w, x);  // [k*cout, T]
        if (c.k == c.s) return ggml_add(ctx, ggml_reshape_2d(ctx, y, c.cout, (int64_t)c.s * T), c.b);
        const int64_t half = (int64_t)c.cout * c.s;
        ggml_tensor *args[3] = {y, state(half, 1), c.b};
        save(ggml_view_1d(ctx, y, half, (size_t)(T - 1) * y->nb[1] + (size_t)half * sizeof(float)));  // the last tail
        return ggml_custom_4d(ctx, GGML_TYPE_F32, c.cout, (int64_t)c.s * T, 1, 1, args, 3, overlap_add_op,
                              GGML_N_TASKS_MAX, const_cast<TConv *>(&c));
    }

    // the type a conv reads its input in (a packed conv reads F32)
    static ggml_type in_type(const Conv &c) { return c.packed ? GGML_TYPE_F32 : c.w->type; }
    static ggml_type in_type(const TConv &c) { return in_type(c.gemm); }

    // snake(x) in the type of the weights it feeds (`type`), so the matmul converts nothing
    ggml_tensor *snake(ggml_tensor *x, const Snake &s, ggml_type type) {
        if (!ggml_is_contiguous(x)) x = ggml_cont(ctx, x);
        ggml_tensor *args[3] = {x, s.alpha, s.inv_beta};
        return ggml_custom_4d(ctx, type, x->ne[0], x->ne[1], 1, 1, args, 3, snake_op, GGML_N_TASKS_MAX, nullptr);
    }

    ggml_tensor *convnext(ggml_tensor *x, const UpBlock &u) {
        const int64_t C = x->ne[0], T = x->ne[1];
        const int64_t Lc = u.dw_k - 1;
        ggml_tensor *prev = state(C, Lc);
        ggml_tensor *xp = ggml_concat(ctx, prev, x, 1);
        save(ggml_view_2d(ctx, xp, C, Lc, xp->nb[1], (size_t)T * xp->nb[1]));
        ggml_tensor *y = nullptr;
        for (int j = 0; j < u.dw_k; j++) {
            ggml_tensor *v = ggml_view_2d(ctx, xp, C, T, xp->nb[1], (size_t)j * xp->nb[1]);
            ggml_tensor *w = ggml_view_1d(ctx, u.dw_w, C, (size_t)j * u.dw_w->nb[1]);
            ggml_tensor *t = ggml_mul(ctx, v, w);
            y = y ? ggml_add(ctx, y, t) : t;
        }
        y = ggml_add(ctx, y, u.dw_b);
        y = ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, y, 1e-6f), u.norm_w), u.norm_b);
        y = linear(gelu(linear(y, u.pw1)), u.pw2);
        return ggml_add(ctx, x, ggml_mul(ctx, y, u.gamma));
    }

    ggml_tensor *build_transformer(ggml_tensor *x) {
        const Hparams &hp = m.hp;
        const int P = st.n_kv;
        const int nq = (int)x->ne[1];  // n real frames, then dummies
        const int N0 = P + n;
        const int N = (P + nq + kKvAlign - 1) / kKvAlign * kKvAlign;
        const int hd = hp.head_dim, kvd = hp.head_dim * hp.n_head_kv;
        const int keep = (int)(st.pos + n - kv_base(st.pos + n, hp.window));
        next_n_kv = keep;
        pos = input(GGML_TYPE_I32, nq);
        mask = input(GGML_TYPE_F32, N, nq);
        ggml_tensor *h = linear(x, m.in_proj);
        const float scale = 1.0f / std::sqrt((float)hd);
        for (int il = 0; il < hp.n_layer; il++) {
            const TfmLayer &l = m.layers[il];
            ggml_tensor *t = ggml_mul(ctx, ggml_rms_norm(ctx, h, hp.eps), l.ln1);
            ggml_tensor *q = ggml_reshape_3d(ctx, linear(t, l.q), hd, hp.n_head, nq);
            ggml_tensor *k = ggml_reshape_3d(ctx, linear(t, l.k), hd, hp.n_head_kv, nq);
            ggml_tensor *v = linear(t, l.v);  // [kvd, n]
            q = ggml_rope_ext(ctx, q, pos, nullptr, hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_theta, 1.0f, 0.0f, 1.0f, 0.0f,
                              0.0f);
            k = ggml_rope_ext(ctx, k, pos, nullptr, hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_theta, 1.0f, 0.0f, 1.0f, 0.0f,
                              0.0f);
            ggml_tensor *K = ggml_reshape_2d(ctx, k, kvd, nq);
            ggml_tensor *V = v;
            if (P > 0) {
                ggml_tensor *kp = input(GGML_TYPE_F32, kvd, P);
                ggml_tensor *vp = input(GGML_TYPE_F32, kvd, P);
                state_in.push_back({kp, &st.k[il]});
                state_in.push_back({vp, &st.v[il]});
                K = ggml_concat(ctx, kp, K, 1);
                V = ggml_concat(ctx, vp, V, 1);
            }
            ggml_tensor *ks = ggml_cont(ctx, ggml_view_2d(ctx, K, kvd, keep, K->nb[1], (size_t)(N0 - keep) * K->nb[1]));
            ggml_tensor *vs = ggml_cont(ctx, ggml_view_2d(ctx, V, kvd, keep, V->nb[1], (size_t)(N0 - keep) * V->nb[1]));
            if (N > P + nq) {
                K = ggml_pad(ctx, K, 0, N - P - nq, 0, 0);
                V = ggml_pad(ctx, V, 0, N - P - nq, 0, 0);
            }
            ggml_set_output(ks);
            ggml_set_output(vs);
            state_out.push_back({ks, 1, (size_t)il});
            state_out.push_back({vs, 2, (size_t)il});
            ggml_tensor *K3 =
                ggml_permute(ctx, ggml_reshape_3d(ctx, K, hd, hp.n_head_kv, N), 0, 2, 1, 3);  // [hd, N, kv]
            ggml_tensor *Q3 = ggml_permute(ctx, q, 0, 2, 1, 3);                               // [hd, n, h]
            ggml_tensor *kq = ggml_mul_mat(ctx, K3, Q3);                                      // [N, n, h]
            kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
            ggml_tensor *V3 = ggml_cont(
                ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, V, hd, hp.n_head_kv, N), 1, 2, 0, 3));  // [N, hd, kv]
            ggml_tensor *o = ggml_mul_mat(ctx, V3, kq);                                             // [hd, n, h]
            o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), (int64_t)hd * hp.n_head, nq);
            o = linear(o, l.o);
            h = ggml_add(ctx, h, ggml_mul(ctx, o, l.ls1));
            t = ggml_mul(ctx, ggml_rms_norm(ctx, h, hp.eps), l.ln2);
            ggml_tensor *g = ggml_silu(ctx, linear(t, l.gate));
            ggml_tensor *f = linear(ggml_mul(ctx, g, linear(t, l.up)), l.down);
            h = ggml_add(ctx, h, ggml_mul(ctx, f, l.ls2));
        }
        h = ggml_mul(ctx, ggml_rms_norm(ctx, h, hp.eps), m.out_norm);
        return linear(h, m.out_proj);
    }

    ggml_cgraph *build() {
        const Hparams &hp = m.hp;
        codes_first = input(GGML_TYPE_I32, n);
        codes_rest = input(GGML_TYPE_I32, (int64_t)n * (hp.n_codebooks - 1));
        ggml_tensor *e0 = ggml_get_rows(ctx, m.cb_first, codes_first);  // [cb_dim, n]
        ggml_tensor *er = ggml_get_rows(ctx, m.cb_rest, codes_rest);    // [cb_dim, 15n], codebook-major
        ggml_tensor *sum = nullptr;
        for (int q = 0; q < hp.n_codebooks - 1; q++) {
            ggml_tensor *v = ggml_view_2d(ctx, er, hp.cb_dim, n, er->nb[1], (size_t)q * n * er->nb[1]);
            sum = sum ? ggml_add(ctx, sum, v) : ggml_cont(ctx, v);
        }
        quantized = mm(m.out_first, e0);
        if (sum) quantized = ggml_add(ctx, quantized, mm(m.out_rest, sum));
        ggml_set_output(quantized);
        pre_conv = conv(quantized, m.pre_conv);
        ggml_set_output(pre_conv);
        if (n < kMinCols) {  // dummy frames after the real ones (causal: they change nothing)
            transformer = build_transformer(ggml_pad(ctx, pre_conv, 0, (int)(kMinCols - n), 0, 0));
            transformer = ggml_cont(ctx, ggml_view_2d(ctx, transformer, transformer->ne[0], n, transformer->nb[1], 0));
        } else {
            transformer = build_transformer(pre_conv);
        }
        ggml_set_output(transformer);
        ggml_tensor *x = transformer;
        for (const UpBlock &u : m.up) {
            x = tconv(x, u.conv);
            x = convnext(x, u);
        }
        upsample = x;
        ggml_set_output(upsample);
        x = conv(x, m.entry);
        for (const DacBlock &d : m.dac) {
            x = tconv(snake(x, d.snake, in_type(d.conv)), d.conv);
            for (const ResUnit &r : d.res) {
                ggml_tensor *t = conv(snake(x, r.act1, in_type(r.conv1)), r.conv1);
                x = conv_add(snake(t, r.act2, in_type(r.conv2)), r.conv2, x);
            }
        }
        x = conv_to_one(snake(x, m.post_snake, GGML_TYPE_F32), m.post_conv);
        wav = ggml_clamp(ctx, x, -1.0f, 1.0f);
        ggml_set_output(wav);
        ggml_cgraph *gf = ggml_new_graph_custom(ctx, m.graph_size, false);
        ggml_build_forward_expand(gf, wav);
        ggml_build_forward_expand(gf, quantized);
        ggml_build_forward_expand(gf, upsample);
        for (auto &so : state_out) ggml_build_forward_expand(gf, so.t);
        return gf;
    }
};

}  // namespace

struct kz_codec {
    Model model;
    State stream;
    int n_threads = 1;
    int max_chunk = 16;
    ggml_backend_t backend = nullptr;
    ggml_gallocr_t galloc = nullptr;
    std::vector<uint8_t> graph_mem;
    int reserved_chunk = 0;  // max_chunk the allocator was reserved for
    std::mutex compute;      // held by run()
    std::string last_error;

    ~kz_codec() {
        if (galloc) ggml_gallocr_free(galloc);
        if (backend) ggml_backend_free(backend);
        if (model.buf) ggml_backend_buffer_free(model.buf);
        if (model.ctx) ggml_free(model.ctx);
    }

    struct Outputs {
        float *wav = nullptr, *quantized = nullptr, *pre_conv = nullptr, *transformer = nullptr, *upsample = nullptr;
    };

    // decodes n frames (codes already validated) from st, advancing st; out pointers advanced by caller
    // sizes the compute buffer once for the largest graph (max_chunk frames, fullest KV window),
    // so streams of varying shapes never reallocate it
    void reserve() {
        if (reserved_chunk == max_chunk) return;
        ggml_init_params gp = {graph_mem.size(), graph_mem.data(), true};
        ggml_context *ctx = ggml_init(gp);
        if (!ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
        std::unique_ptr<ggml_context, void (*)(ggml_context *)> guard(ctx, ggml_free);
        State worst;
        worst.n_kv = max_kept(model.hp.window);
        worst.k.resize(model.hp.n_layer);
        worst.v.resize(model.hp.n_layer);
        Graph g(model, ctx, worst, max_chunk);
        if (!ggml_gallocr_reserve(galloc, g.build())) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec graph");
        reserved_chunk = max_chunk;
    }

    void run_chunk(State &st, const int32_t *codes, int n, const Outputs &o) {
        const Hparams &hp = model.hp;
        reserve();
        ggml_init_params gp = {graph_mem.size(), graph_mem.data(), true};
        ggml_context *ctx = ggml_init(gp);
        if (!ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
        std::unique_ptr<ggml_context, void (*)(ggml_context *)> guard(ctx, ggml_free);
        Graph g(model, ctx, st, n);
        ggml_cgraph *gf = g.build();
        if (!ggml_gallocr_alloc_graph(galloc, gf)) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec graph");

        const int nq = std::max<int>(n, (int)kMinCols);
        std::vector<int32_t> c0(n), cr((size_t)n * (hp.n_codebooks - 1)), pos(nq);
        for (int t = 0; t < nq; t++) pos[t] = (int32_t)(st.pos + t);
        for (int t = 0; t < n; t++) {
            c0[t] = codes[(size_t)t * hp.n_codebooks];
            for (int q = 1; q < hp.n_codebooks; q++)
                cr[(size_t)(q - 1) * n + t] = codes[(size_t)t * hp.n_codebooks + q] + (q - 1) * hp.cb_size_rest;
        }
        ggml_backend_tensor_set(g.codes_first, c0.data(), 0, ggml_nbytes(g.codes_first));
        ggml_backend_tensor_set(g.codes_rest, cr.data(), 0, ggml_nbytes(g.codes_rest));
        ggml_backend_tensor_set(g.pos, pos.data(), 0, ggml_nbytes(g.pos));
        const int P = st.n_kv, N = (P + nq + kKvAlign - 1) / kKvAlign * kKvAlign;
        std::vector<float> mask((size_t)N * nq);
        for (int i = 0; i < nq; i++) {
            const int64_t qp = st.pos + i;
            for (int j = 0; j < N; j++) {
                const int64_t kp = st.pos - P + j;
                mask[(size_t)i * N + j] = (j < P + nq && kp <= qp && kp > qp - hp.window) ? 0.0f : -INFINITY;
            }
        }
        ggml_backend_tensor_set(g.mask, mask.data(), 0, ggml_nbytes(g.mask));
        for (auto &si : g.state_in) ggml_backend_tensor_set(si.first, si.second->data(), 0, ggml_nbytes(si.first));

        ggml_backend_cpu_set_n_threads(backend, n_threads);
        if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS)
            throw Error(KZ_ERR_COMPUTE, "codec graph failed");

        auto get = [](ggml_tensor *t, float *dst) {
            if (dst) ggml_backend_tensor_get(t, dst, 0, ggml_nbytes(t));
        };
        get(g.wav, o.wav);
        get(g.quantized, o.quantized);
        get(g.pre_conv, o.pre_conv);
        get(g.transformer, o.transformer);
        get(g.upsample, o.upsample);
        commit(st, g);
    }

    // The chunk's new state overwrites st in place: the graph holds copies of its inputs by now.
    // Each vector keeps its capacity (K/V reserved for the fullest window at first use), so a
    // push allocates nothing once the stream has started. Should an allocation fail, the stream
    // is reset rather than left half old, half new.
    void commit(State &st, const Graph &g) {
        const Hparams &hp = model.hp;
        try {
            st.slots.resize(g.slot);
            st.k.resize(hp.n_layer);
            st.v.resize(hp.n_layer);
            const size_t kv_max = (size_t)hp.head_dim * hp.n_head_kv * max_kept(hp.window);
            for (auto &so : g.state_out) {
                std::vector<float> &dst = so.kind == 0   ? st.slots[so.index]
                                          : so.kind == 1 ? st.k[so.index]
                                                         : st.v[so.index];
                if (so.kind != 0) dst.reserve(kv_max);
                dst.resize(ggml_nelements(so.t));
                ggml_backend_tensor_get(so.t, dst.data(), 0, ggml_nbytes(so.t));
            }
        } catch (const std::bad_alloc &) {
            st = State();
            throw Error(KZ_ERR_NO_MEMORY, "out of memory saving the codec's stream state (the stream was reset)");
        }
        st.n_kv = g.next_n_kv;
        st.pos += g.n;
    }

    void check_codes(const int32_t *codes, int n, int n_cb, const float *out, size_t capacity) const {
        const Hparams &hp = model.hp;
        if (n < 0) throw Error(KZ_ERR_INVALID_ARGUMENT, "negative frame count");
        if (n_cb != hp.n_codebooks)
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "expected " + std::to_string(hp.n_codebooks) + " codebooks, got " + std::to_string(n_cb));
        if (n == 0) return;
        if (!codes || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "null codes or output buffer");
        if (capacity < (size_t)n * hp.samples_per_frame)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "output buffer too small: need " +
                                                     std::to_string((size_t)n * hp.samples_per_frame) + " samples");
        for (int t = 0; t < n; t++)
            for (int q = 0; q < n_cb; q++) {
                int32_t c = codes[(size_t)t * n_cb + q];
                int size = q == 0 ? hp.cb_size_first : hp.cb_size_rest;
                if (c < 0 || c >= size)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "code " + std::to_string(c) + " out of range [0, " +
                                                             std::to_string(size) + ") at frame " + std::to_string(t) +
                                                             ", codebook " + std::to_string(q));
            }
    }

    // Streams n frames of `st` (kz_codec_stream_push, kz_codec_stream_decode): on error `st` is left
    // as it was.
    void push(State &st, const int32_t *codes, int n, int n_cb, float *out, size_t capacity, size_t *written) {
        check_codes(codes, n, n_cb, out, capacity);
        const Outputs o = {out, nullptr, nullptr, nullptr, nullptr};
        if (n <= max_chunk) {
            run(st, codes, n, o);  // one chunk: commits only once it has succeeded
        } else {                   // several: on a copy, so that a failure in a later chunk leaves the stream as it was
            State copy = st;
            run(copy, codes, n, o);
            st = std::move(copy);
        }
        if (written) *written = (size_t)n * model.hp.samples_per_frame;
    }

    // (one computation at a time: the graph memory and allocator are the handle's, its streams' pushes
    // may come from several threads)
    void run(State &st, const int32_t *codes, int n, Outputs o) {
        std::lock_guard<std::mutex> lock(compute);
        const Hparams &hp = model.hp;
        for (int done = 0; done < n;) {
            const int c = std::min(max_chunk, n - done);
            run_chunk(st, codes + (size_t)done * hp.n_codebooks, c, o);
            done += c;
            auto adv = [c](float *&p, size_t per) {
                if (p) p += (size_t)c * per;
            };
            adv(o.wav, hp.samples_per_frame);
            adv(o.quantized, hp.codebook_dim);
            adv(o.pre_conv, hp.latent);
            adv(o.transformer, hp.latent);
            adv(o.upsample, (size_t)hp.latent * hp.up_factor);
        }
    }
};

// A stream of its own on a codec: its state, the codec's weights and compute memory.
struct kz_codec_stream {
    kz_codec *codec;
    State state;
    std::string last_error;
};

extern "C" {

int kz_codec_load(const char *mmproj_path, int n_threads, int weights, kz_codec **out, char *err, size_t err_len) {
    return kz::load_handle(mmproj_path, out, err, err_len, [&] {
        if (n_threads < 1 || n_threads > GGML_MAX_N_THREADS)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be in 1.." + std::to_string(GGML_MAX_N_THREADS));
        if (weights != KZ_CODEC_WEIGHTS_F32 && weights != KZ_CODEC_WEIGHTS_F16 && weights != KZ_CODEC_WEIGHTS_F16_SUMS)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "unknown weight type " + std::to_string(weights));
        const ggml_type fast = weights == KZ_CODEC_WEIGHTS_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
        std::unique_ptr<kz_codec> c(new kz_codec());
        c->n_threads = n_threads;
        load_model(c->model, mmproj_path, fast, weights == KZ_CODEC_WEIGHTS_F16_SUMS);
        c->backend = ggml_backend_cpu_init();
        if (!c->backend) throw Error(KZ_ERR_NO_MEMORY, "cannot create the CPU backend");
        c->galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        if (!c->galloc) throw Error(KZ_ERR_NO_MEMORY, "cannot create the graph allocator");
        const int n = c->model.graph_size;
        c->graph_mem.resize(ggml_tensor_overhead() * (size_t)n + ggml_graph_overhead_custom(n, false));
        kz::release_free_heap();  // the load's staging
        return c;
    });
}

void kz_codec_free(kz_codec *codec) { delete codec; }

const char *kz_codec_last_error(const kz_codec *codec) { return codec ? codec->last_error.c_str() : "null handle"; }

int kz_codec_n_codebooks(const kz_codec *c) { return c ? c->model.hp.n_codebooks : 0; }
int kz_codec_codebook_size(const kz_codec *c, int q) {
    if (!c || q < 0 || q >= c->model.hp.n_codebooks) return 0;
    return q == 0 ? c->model.hp.cb_size_first : c->model.hp.cb_size_rest;
}
int kz_codec_samples_per_frame(const kz_codec *c) { return c ? c->model.hp.samples_per_frame : 0; }
int kz_codec_sample_rate(const kz_codec *c) { return c ? c->model.hp.sample_rate : 0; }
int kz_codec_dim(const kz_codec *c, int which) {
    if (!c) return 0;
    switch (which) {
        case 0: return c->model.hp.codebook_dim;
        case 1: return c->model.hp.latent;
        case 2: return c->model.hp.up_factor;
        default: return 0;
    }
}

int kz_codec_set_threads(kz_codec *c, int n_threads) {
    return kz::call_handle(c, [&] {
        if (n_threads < 1 || n_threads > GGML_MAX_N_THREADS)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be in 1.." + std::to_string(GGML_MAX_N_THREADS));
        std::lock_guard<std::mutex> lock(c->compute);  // (not while a stream computes)
        c->n_threads = n_threads;
    });
}

int kz_codec_set_max_chunk(kz_codec *c, int n_frames) {
    return kz::call_handle(c, [&] {
        if (n_frames < 1 || n_frames > kMaxChunk)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "max chunk must be in 1.." + std::to_string(kMaxChunk));
        std::lock_guard<std::mutex> lock(c->compute);
        c->max_chunk = n_frames;
    });
}

int kz_codec_decode_debug(kz_codec *c, const int32_t *codes, int n_frames, int n_codebooks, float *out, size_t capacity,
                          float *quantized, float *pre_conv, float *transformer, float *upsample) {
    return kz::call_handle(c, [&] {
        c->check_codes(codes, n_frames, n_codebooks, out, capacity);
        State st;
        c->run(st, codes, n_frames, {out, quantized, pre_conv, transformer, upsample});
    });
}

int kz_codec_decode(kz_codec *c, const int32_t *codes, int n_frames, int n_codebooks, float *out, size_t capacity) {
    return kz_codec_decode_debug(c, codes, n_frames, n_codebooks, out, capacity, nullptr, nullptr, nullptr, nullptr);
}

int kz_codec_stream_push(kz_codec *c, const int32_t *codes, int n_frames, int n_codebooks, float *out, size_t capacity,
                         size_t *written) {
    if (written) *written = 0;
    return kz::call_handle(c, [&] { c->push(c->stream, codes, n_frames, n_codebooks, out, capacity, written); });
}

int64_t kz_codec_stream_position(const kz_codec *c) { return c ? c->stream.pos : -1; }

int kz_codec_reset(kz_codec *c) {
    return kz::call_handle(c, [&] { c->stream = State(); });
}

int kz_codec_stream_new(kz_codec *codec, kz_codec_stream **out) {
    if (out) *out = nullptr;
    if (!codec || !out) return KZ_ERR_INVALID_ARGUMENT;
    return kz::call_handle(codec, [&] { *out = new kz_codec_stream{codec, State(), ""}; });
}

void kz_codec_stream_free(kz_codec_stream *stream) { delete stream; }

int kz_codec_stream_decode(kz_codec_stream *stream, const int32_t *codes, int n_frames, int n_codebooks, float *out,
                           size_t capacity, size_t *written) {
    if (written) *written = 0;
    return kz::call_handle(
        stream, [&] { stream->codec->push(stream->state, codes, n_frames, n_codebooks, out, capacity, written); });
}

int kz_codec_stream_restart(kz_codec_stream *stream) {
    return kz::call_handle(stream, [&] { stream->state = State(); });
}

const char *kz_codec_stream_last_error(const kz_codec_stream *stream) {
    return stream ? stream->last_error.c_str() : "null stream";
}

}  // extern "C"
