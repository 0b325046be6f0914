// Codec encoder (Qwen3-TTS-Tokenizer-12Hz encoder, transformers' MimiModel encode path) on ggml.
//
// Layout: every activation is a ggml [channels, time] tensor (channel fastest), as in codec.cpp.
// A conv (any stride, dilation, zero or replicate padding) is kz::conv_gemm_op, the GEMM the
// codec decoder uses (conv_gemm.h), on F32 weights packed at load: it reads the taps straight
// from the input (no im2col matrix) and adds the bias, at 3-4x the speed of ggml's F32 mul_mat
// on these shapes. ELU is a custom op too: ggml's calls libm's expm1f per element, which took a
// quarter of the encoder's time.
//
// MimiConv1d is causal: (k-1)*dil - (stride-1) zeros on the left and, on the right, what rounds
// the length up to a multiple of the stride (zeros; the downsample replicates the edge frames
// instead), so a conv of stride s maps L steps to ceil(L/s). The SEANet runs at the sample rate
// and is the memory-hungry part, so it runs in chunks of kChunkSteps output steps: each chunk
// after the first also reads `context` earlier samples (at least the SEANet's receptive field,
// a multiple of its hop) and drops the steps they produce, which makes the chunked output the
// whole-signal output. The transformer (full causal attention, as create_causal_mask gives it
// under eager and sdpa: no sliding window), the downsample and the RVQ search run as one graph
// over the whole 25 Hz sequence.
//
// RVQ encode: the semantic codebook is searched with input_proj_sem(x); the acoustic codebooks
// 1..n-1 residually with input_proj_ac(x) of the same x. Nearest neighbour = argmax over the
// codebook of 2 r.e - |e|^2 (argmin of |r - e|^2; torch.cdist takes the same matmul form), in F32.
#include "kazetts/codec_encoder.h"

#include "core/common_internal.h"
#include "core/gguf_reader.h"
#include "core/graph_runner.h"
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
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace {

using kz::Error;

constexpr int kGraphSize = 8192;
constexpr int64_t kChunkSteps = 50;  // SEANet output steps (25 Hz) per chunk: 2 s of audio
constexpr int64_t kRowAlign = 16;    // F32 values per AVX-512 vector, the widest sgemm tile's K step

struct Conv : kz::ConvShape {  // w packed (kz::pack_rows of the tap-major [cout, cin*k] rows); b [cout] or null
    ggml_tensor *w = nullptr, *b = nullptr;
};

int64_t aligned(int64_t n) { return (n + kRowAlign - 1) / kRowAlign * kRowAlign; }
struct ResBlock {
    Conv conv1, conv2;  // ELU -> conv1 (k, dilation) -> ELU -> conv2 (k1), + identity
};
struct Stage {
    std::vector<ResBlock> res;
    Conv down;  // after an ELU: kernel 2r, stride r
};
struct Layer {  // the linears are 1-tap convs without bias
    ggml_tensor *ln1_w, *ln1_b, *ls1, *ln2_w, *ln2_b, *ls2;
    Conv q, k, v, o, up, down;
};

struct Hparams {
    int hidden = 0, n_layer = 0, n_head = 0, head_dim = 0;
    int n_codebooks = 16, cb_size = 0, cb_dim = 0;
    int hop = 1;          // samples per SEANet step (960)
    int down_stride = 2;  // SEANet steps per frame
    int samples_per_frame = 0, sample_rate = 24000;
    int64_t context = 0;  // samples of left context a SEANet chunk reads (multiple of hop)
    float eps = 1e-5f, rope_theta = 10000.0f;
};

struct Model {
    Hparams hp;
    Conv first, last, downsample;
    std::vector<Stage> stages;
    std::vector<Layer> layers;
    ggml_tensor *sem_proj = nullptr, *ac_proj = nullptr;  // [hidden, cb_dim]
    ggml_tensor *sem_cb = nullptr, *ac_cb = nullptr;      // [cb_dim, size], [cb_dim, size*(n-1)]
    ggml_tensor *sem_norm = nullptr, *ac_norm = nullptr;  // |e|^2: [size], [size*(n-1)]
    ggml_context *ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
};

// ---------------------------------------------------------------------------------------------
// loading
// ---------------------------------------------------------------------------------------------

using Source = kz::GgufReader;

// A weight to create, and how to read its values (in its final layout) once the buffer exists.
struct Pending {
    ggml_tensor *dst;
    std::function<std::vector<float>()> read;
};

struct Builder {
    Model &m;
    const Source &S;
    std::vector<Pending> pending;

    ggml_tensor *make(const std::string &name, std::vector<int64_t> ne, std::function<std::vector<float>()> read) {
        ggml_tensor *t = ne.size() == 1 ? ggml_new_tensor_1d(m.ctx, GGML_TYPE_F32, ne[0])
                                        : ggml_new_tensor_2d(m.ctx, GGML_TYPE_F32, ne[0], ne[1]);
        ggml_set_name(t, name.c_str());
        pending.push_back({t, std::move(read)});
        return t;
    }
    const ggml_tensor *shaped(const std::string &name, std::vector<int64_t> ne) const {
        const ggml_tensor *s = S.src(name);
        for (size_t i = 0; i < 4; i++)
            if (s->ne[i] != (i < ne.size() ? ne[i] : 1))
                throw Error(KZ_ERR_FORMAT, "tensor " + name + " has an unexpected shape");
        return s;
    }
    // a tensor as stored (numpy [out, in] = ggml [in, out] for linears)
    ggml_tensor *plain(const std::string &name, std::vector<int64_t> ne) {
        const ggml_tensor *s = shaped(name, ne);
        return make(name, ne, [this, s] { return S.read(s); });
    }
    // a linear without bias (ggml [in, out]: numpy's rows of `in` values), as the 1-tap conv
    Conv linear(const std::string &name, int64_t in, int64_t out) {
        const ggml_tensor *s = shaped(name, {in, out});
        Conv c;
        c.cin = (int)in;
        c.cout = (int)out;
        c.w = make(name, kz::packed_shape(c), [this, s, c] { return kz::pack_rows(S.read(s), c); });
        return c;
    }
    // torch Conv1d weight [cout, cin, k] (ggml ne [k, cin, cout]) -> rows j*cin + c, packed
    Conv conv(const std::string &name, int stride, int dil, bool bias, bool replicate) {
        const ggml_tensor *s = S.src(name + ".weight");
        Conv c;
        c.k = (int)s->ne[0];
        c.cin = (int)s->ne[1];
        c.cout = (int)s->ne[2];
        c.stride = stride;
        c.dil = dil;
        c.pad_left = (int64_t)(c.k - 1) * dil + 1 - stride;
        c.edge = replicate ? kz::ConvShape::kReplicate : kz::ConvShape::kZeros;
        if (stride < 1 || c.pad_left < 0) throw Error(KZ_ERR_FORMAT, name + ": stride larger than the kernel");
        c.w = make(name + ".weight", kz::packed_shape(c),
                   [this, s, c] { return kz::pack_rows(kz::conv_taps(S.read(s), c.cout, c.cin, c.k), c); });
        if (bias) c.b = plain(name + ".bias", {c.cout});
        return c;
    }
    // codebook rows and their squared norms (double sums, rounded once)
    std::pair<ggml_tensor *, ggml_tensor *> codebook(const std::string &name, int64_t dim, int64_t rows) {
        const ggml_tensor *s = S.src(name);
        if (ggml_nelements(s) != dim * rows || s->ne[0] != dim)
            throw Error(KZ_ERR_FORMAT, "tensor " + name + " has an unexpected shape");
        ggml_tensor *cb = make(name, {dim, rows}, [this, s] { return S.read(s); });
        ggml_tensor *norm = make(name + ".norm", {rows}, [this, s, dim, rows] {
            const std::vector<float> e = S.read(s);
            std::vector<float> n(rows);
            for (int64_t r = 0; r < rows; r++) {
                double acc = 0;
                for (int64_t d = 0; d < dim; d++) acc += (double)e[r * dim + d] * e[r * dim + d];
                n[r] = (float)acc;
            }
            return n;
        });
        return {cb, norm};
    }
};

void load_model(Model &m, const char *path) {
    const Source S(path);
    if (!S.src("kazetts.enc.down.weight", false))
        throw Error(KZ_ERR_FORMAT, std::string(path) +
                                       " has no codec encoder (kazetts.enc.*): convert the Base "
                                       "checkpoint with `kazetts convert` (llama.cpp's converter does not write it)");

    const std::string E = "kazetts.enc.";
    Hparams &hp = m.hp;
    if (S.num(E + "use_causal_conv") != 1 || S.str(E + "pad_mode") != "constant")
        throw Error(KZ_ERR_FORMAT, "codec encoder: only causal convs with constant padding are supported");
    if (S.num(E + "audio_channels") != 1) throw Error(KZ_ERR_FORMAT, "codec encoder: mono input only");
    if (S.src(E + "seanet.0.shortcut.weight", false))
        throw Error(KZ_ERR_FORMAT, "codec encoder: conv shortcuts are not supported");
    hp.hidden = (int)S.num(E + "hidden_size");
    hp.n_layer = (int)S.num(E + "num_hidden_layers");
    hp.n_head = (int)S.num(E + "num_attention_heads");
    hp.head_dim = (int)S.num(E + "head_dim");
    if (S.num(E + "num_key_value_heads") != hp.n_head)
        throw Error(KZ_ERR_FORMAT, "codec encoder: grouped KV heads are not supported");
    hp.eps = (float)S.num(E + "norm_eps");
    hp.rope_theta = (float)S.num(E + "rope_theta");
    hp.n_codebooks = (int)S.num(E + "n_codebooks");
    hp.samples_per_frame = (int)S.num(E + "downsample_rate");
    hp.sample_rate = (int)S.num(E + "input_sample_rate");
    const int n_res = (int)S.num(E + "num_residual_layers"), growth = (int)S.num(E + "dilation_growth_rate");
    std::vector<int> ratios = S.ints(E + "upsampling_ratios");
    std::reverse(ratios.begin(), ratios.end());  // the encoder runs the decoder's ratios backwards

    ggml_init_params ip = {ggml_tensor_overhead() * 512, nullptr, true};
    m.ctx = ggml_init(ip);
    if (!m.ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    Builder B{m, S, {}};

    // SEANet, in HF's layer numbering: conv, then per ratio [res blocks, ELU, strided conv], ELU, conv
    auto layer = [&](int i) { return E + "seanet." + std::to_string(i); };
    m.first = B.conv(layer(0), 1, 1, true, false);
    int idx = 1, ch = m.first.cout;
    int64_t reach = (int64_t)(m.first.k - 1), step = 1;  // receptive field (samples), samples per step
    for (int r : ratios) {
        Stage st;
        for (int j = 0, dil = 1; j < n_res; j++, dil *= growth, idx++) {
            ResBlock rb{B.conv(layer(idx) + ".block.1", 1, dil, true, false),
                        B.conv(layer(idx) + ".block.3", 1, 1, true, false)};
            if (rb.conv1.cin != ch || rb.conv2.cout != ch)
                throw Error(KZ_ERR_FORMAT, layer(idx) + ": channel mismatch");
            reach += (int64_t)(rb.conv1.k - 1) * dil * step;
            st.res.push_back(rb);
        }
        st.down = B.conv(layer(idx + 1), r, 1, true, false);
        if (st.down.cin != ch || st.down.k != 2 * r)
            throw Error(KZ_ERR_FORMAT, layer(idx + 1) + ": unexpected downsampling conv");
        reach += (int64_t)(st.down.k - 1) * step;
        step *= r;
        ch = st.down.cout;
        idx += 2;
        m.stages.push_back(st);
    }
    m.last = B.conv(layer(idx + 1), 1, 1, true, false);
    if (m.last.cin != ch || m.last.cout != hp.hidden)
        throw Error(KZ_ERR_FORMAT, "codec encoder: last SEANet conv width mismatch");
    reach += (int64_t)(m.last.k - 1) * step;
    hp.hop = (int)step;
    hp.context = (reach + step - 1) / step * step;

    hp.down_stride = (int)S.src(E + "down.weight")->ne[0] / 2;  // kernel 2s, stride s (MimiModel.downsample)
    m.downsample = B.conv(E + "down", hp.down_stride, 1, false, true);
    if (m.downsample.cin != hp.hidden || m.downsample.cout != hp.hidden ||
        hp.hop * hp.down_stride != hp.samples_per_frame)
        throw Error(KZ_ERR_FORMAT, "codec encoder: downsample does not give downsample_rate samples a frame");

    const int64_t H = hp.hidden, qd = (int64_t)hp.n_head * hp.head_dim;
    for (int i = 0; i < hp.n_layer; i++) {
        const std::string p = E + "tfm.blk." + std::to_string(i) + ".";
        Layer l;
        l.ln1_w = B.plain(p + "ln1.weight", {H});
        l.ln1_b = B.plain(p + "ln1.bias", {H});
        l.q = B.linear(p + "attn_q.weight", H, qd);
        l.k = B.linear(p + "attn_k.weight", H, qd);
        l.v = B.linear(p + "attn_v.weight", H, qd);
        l.o = B.linear(p + "attn_out.weight", qd, H);
        l.ls1 = B.plain(p + "ls1.weight", {H});
        l.ln2_w = B.plain(p + "ln2.weight", {H});
        l.ln2_b = B.plain(p + "ln2.bias", {H});
        const int64_t ff = S.src(p + "ffn_up.weight")->ne[1];
        l.up = B.linear(p + "ffn_up.weight", H, ff);
        l.down = B.linear(p + "ffn_down.weight", ff, H);
        l.ls2 = B.plain(p + "ls2.weight", {H});
        m.layers.push_back(l);
    }
    const ggml_tensor *sem = S.src(E + "quant.semantic.codebook.weight");
    hp.cb_dim = (int)sem->ne[0];
    hp.cb_size = (int)sem->ne[1];
    m.sem_proj = B.plain(E + "quant.semantic.in_proj.weight", {H, hp.cb_dim});
    m.ac_proj = B.plain(E + "quant.acoustic.in_proj.weight", {H, hp.cb_dim});
    std::tie(m.sem_cb, m.sem_norm) = B.codebook(E + "quant.semantic.codebook.weight", hp.cb_dim, hp.cb_size);
    std::tie(m.ac_cb, m.ac_norm) =
        B.codebook(E + "quant.acoustic.codebook.weight", hp.cb_dim, (int64_t)hp.cb_size * (hp.n_codebooks - 1));

    m.buf = ggml_backend_alloc_ctx_tensors_from_buft(m.ctx, ggml_backend_cpu_buffer_type());
    if (!m.buf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec encoder weights");
    for (Pending &p : B.pending) {
        const std::vector<float> data = p.read();
        if ((int64_t)data.size() != ggml_nelements(p.dst))
            throw Error(KZ_ERR_FORMAT, std::string("size mismatch for ") + p.dst->name);
        ggml_backend_tensor_set(p.dst, data.data(), 0, ggml_nbytes(p.dst));
    }
}

// ---------------------------------------------------------------------------------------------
// ops
// ---------------------------------------------------------------------------------------------

struct Graph {
    const Model &m;
    ggml_context *ctx;

    ggml_tensor *input(ggml_type t, int64_t ne0, int64_t ne1 = 1) {
        ggml_tensor *x = ggml_new_tensor_2d(ctx, t, ne0, ne1);
        ggml_set_input(x);
        return x;
    }
    ggml_tensor *conv(ggml_tensor *x, const Conv &c) {
        // conv_gemm_op reads cin values of every step of x
        if (x->ne[0] != c.cin)
            throw Error(KZ_ERR_FORMAT, "codec encoder: a conv gets " + std::to_string(x->ne[0]) + " channels, takes " +
                                           std::to_string(c.cin));
        const int64_t n = (x->ne[1] + c.stride - 1) / c.stride;
        return ggml_set_name(kz::conv_gemm(ctx, c, c.w, c.b, x, n), "conv_gemm");
    }
    ggml_tensor *elu(ggml_tensor *x) { return ggml_set_name(kz::unary<kz::elu>(ctx, x), "elu"); }
    ggml_tensor *gelu(ggml_tensor *x) { return ggml_set_name(kz::unary<kz::gelu_erf>(ctx, x), "gelu"); }
    // pcm [1, L] -> [hidden, ceil(L / hop)]
    ggml_tensor *seanet(ggml_tensor *x) {
        x = conv(x, m.first);
        for (const Stage &st : m.stages) {
            for (const ResBlock &r : st.res) {
                ggml_tensor *h = conv(elu(x), r.conv1);
                x = ggml_add(ctx, x, conv(elu(h), r.conv2));
            }
            x = conv(elu(x), st.down);
        }
        return conv(elu(x), m.last);
    }
    ggml_tensor *layer_norm(ggml_tensor *x, ggml_tensor *w, ggml_tensor *b) {
        return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, m.hp.eps), w), b);
    }
    // [hidden, T] -> [hidden, T]: pre-LN layers, full causal attention, NeoX RoPE, LayerScale
    ggml_tensor *transformer(ggml_tensor *h, ggml_tensor *pos) {
        const Hparams &hp = m.hp;
        const int64_t T = h->ne[1], hd = hp.head_dim;
        const float scale = 1.0f / std::sqrt((float)hd);
        for (const Layer &l : m.layers) {
            ggml_tensor *t = layer_norm(h, l.ln1_w, l.ln1_b);
            ggml_tensor *q = ggml_reshape_3d(ctx, conv(t, l.q), hd, hp.n_head, T);
            ggml_tensor *k = ggml_reshape_3d(ctx, conv(t, l.k), hd, hp.n_head, T);
            ggml_tensor *v = ggml_reshape_3d(ctx, conv(t, l.v), hd, hp.n_head, T);
            q = ggml_rope_ext(ctx, q, pos, nullptr, (int)hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_theta, 1.0f, 0.0f, 1.0f,
                              0.0f, 0.0f);
            k = ggml_rope_ext(ctx, k, pos, nullptr, (int)hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_theta, 1.0f, 0.0f, 1.0f,
                              0.0f, 0.0f);
            ggml_tensor *qh =
                ggml_cont(ctx, ggml_permute(ctx, q, 0, 2, 1, 3));  // sgemm takes a contiguous right side only
            ggml_tensor *kq = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), qh);  // [T, T, h]
            kq = ggml_soft_max_ext(ctx, ggml_diag_mask_inf(ctx, kq, 0), nullptr, scale, 0.0f);
            ggml_tensor *vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));  // [T, hd, h]
            ggml_tensor *o = ggml_mul_mat(ctx, vt, kq);                          // [hd, T, h]
            o = ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)), hd * hp.n_head, T);
            h = ggml_add(ctx, h, ggml_mul(ctx, conv(o, l.o), l.ls1));
            t = layer_norm(h, l.ln2_w, l.ln2_b);
            ggml_tensor *f = conv(gelu(conv(t, l.up)), l.down);
            h = ggml_add(ctx, h, ggml_mul(ctx, f, l.ls2));
        }
        return h;
    }
    // nearest codebook row of every column of r [cb_dim, T]: argmax_i 2 r.e_i - |e_i|^2 -> [T] I32
    ggml_tensor *nearest(ggml_tensor *r, ggml_tensor *cb, ggml_tensor *norm) {
        ggml_tensor *score = ggml_sub(ctx, ggml_scale(ctx, ggml_mul_mat(ctx, cb, r), 2.0f), norm);
        return ggml_argmax(ctx, score);
    }
    // x [hidden, n] -> codes, one [n] I32 tensor per codebook
    std::vector<ggml_tensor *> quantize(ggml_tensor *x) {
        const Hparams &hp = m.hp;
        std::vector<ggml_tensor *> codes{nearest(ggml_mul_mat(ctx, m.sem_proj, x), m.sem_cb, m.sem_norm)};
        ggml_tensor *r = ggml_mul_mat(ctx, m.ac_proj, x);
        for (int q = 0; q + 1 < hp.n_codebooks; q++) {
            ggml_tensor *cb = ggml_view_2d(ctx, m.ac_cb, hp.cb_dim, hp.cb_size, m.ac_cb->nb[1],
                                           (size_t)q * hp.cb_size * m.ac_cb->nb[1]);
            ggml_tensor *norm = ggml_view_1d(ctx, m.ac_norm, hp.cb_size, (size_t)q * hp.cb_size * sizeof(float));
            ggml_tensor *idx = nearest(r, cb, norm);
            codes.push_back(idx);
            if (q + 2 < hp.n_codebooks) r = ggml_sub(ctx, r, ggml_get_rows(ctx, cb, idx));
        }
        return codes;
    }
};

ggml_context *graph_context(std::vector<uint8_t> &mem) {
    ggml_init_params gp = {mem.size(), mem.data(), true};
    ggml_context *ctx = ggml_init(gp);
    if (!ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    return ctx;
}

}  // namespace

struct kz_codec_encoder : kz::GraphRunner {
    Model model;
    int n_threads = 1;
    std::string last_error;

    ~kz_codec_encoder() {
        if (model.buf) ggml_backend_buffer_free(model.buf);
        if (model.ctx) ggml_free(model.ctx);
    }

    // SEANet over the whole signal, chunk by chunk: [n_steps][hidden]
    std::vector<float> seanet(const float *pcm, int64_t n) {
        const Hparams &hp = model.hp;
        const int64_t steps = (n + hp.hop - 1) / hp.hop, ctx_steps = hp.context / hp.hop;
        std::vector<float> out((size_t)(steps * hp.hidden));
        for (int64_t s0 = 0; s0 < steps; s0 += kChunkSteps) {
            const int64_t from = std::max<int64_t>(0, s0 - ctx_steps), a = from * hp.hop;
            const int64_t b = std::min<int64_t>(n, (s0 + kChunkSteps) * hp.hop);
            std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(graph_context(graph_mem), ggml_free);
            Graph g{model, ctx.get()};
            ggml_tensor *x = g.input(GGML_TYPE_F32, 1, b - a);
            ggml_tensor *y = g.seanet(x);
            ggml_set_output(y);
            ggml_cgraph *gf = ggml_new_graph_custom(ctx.get(), kGraphSize, false);
            ggml_build_forward_expand(gf, y);
            if (!ggml_gallocr_alloc_graph(galloc, gf))
                throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec encoder graph");
            ggml_backend_tensor_set(x, pcm + a, 0, ggml_nbytes(x));
            GraphRunner::compute(gf, n_threads, "codec encoder");
            const int64_t skip = s0 - from, keep = y->ne[1] - skip;
            ggml_backend_tensor_get(y, out.data() + (size_t)(s0 * hp.hidden),
                                    (size_t)(skip * hp.hidden) * sizeof(float),
                                    (size_t)(keep * hp.hidden) * sizeof(float));
        }
        return out;
    }

    void encode(const float *pcm, int64_t n, int32_t *codes, float *seanet_out, float *tfm_out, float *down_out) {
        const Hparams &hp = model.hp;
        const std::vector<float> s = seanet(pcm, n);
        const int64_t steps = (int64_t)s.size() / hp.hidden, frames = (steps + hp.down_stride - 1) / hp.down_stride;
        if (seanet_out) std::memcpy(seanet_out, s.data(), s.size() * sizeof(float));

        std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(graph_context(graph_mem), ggml_free);
        Graph g{model, ctx.get()};
        // the transformer runs on `padded` steps (a multiple of kRowAlign, so that attention's
        // mul_mats over keys take the GEMM path); causal attention keeps the trailing zero steps
        // out of the real ones, which are all the downsample reads
        const int64_t padded = aligned(steps);
        ggml_tensor *x = g.input(GGML_TYPE_F32, hp.hidden, padded);
        ggml_tensor *pos = g.input(GGML_TYPE_I32, padded);
        ggml_tensor *h = g.transformer(x, pos);
        ggml_tensor *d = g.conv(ggml_view_2d(ctx.get(), h, hp.hidden, steps, h->nb[1], 0), model.downsample);
        std::vector<ggml_tensor *> idx = g.quantize(d);
        ggml_cgraph *gf = ggml_new_graph_custom(ctx.get(), kGraphSize, false);
        for (ggml_tensor *t : idx) {
            ggml_set_output(t);
            ggml_build_forward_expand(gf, t);
        }
        ggml_set_output(h);
        ggml_set_output(d);
        if (!ggml_gallocr_alloc_graph(galloc, gf))
            throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the codec encoder graph");
        ggml_backend_tensor_set(x, s.data(), 0, s.size() * sizeof(float));
        ggml_backend_tensor_memset(x, 0, s.size() * sizeof(float), ggml_nbytes(x) - s.size() * sizeof(float));
        std::vector<int32_t> p(padded);
        for (int64_t t = 0; t < padded; t++) p[t] = (int32_t)t;
        ggml_backend_tensor_set(pos, p.data(), 0, ggml_nbytes(pos));
        GraphRunner::compute(gf, n_threads, "codec encoder");
        if (d->ne[1] != frames) throw Error(KZ_ERR_COMPUTE, "codec encoder: unexpected frame count");
        if (tfm_out) ggml_backend_tensor_get(h, tfm_out, 0, s.size() * sizeof(float));
        if (down_out) ggml_backend_tensor_get(d, down_out, 0, ggml_nbytes(d));
        std::vector<int32_t> c(frames);
        for (int q = 0; q < hp.n_codebooks; q++) {
            ggml_backend_tensor_get(idx[q], c.data(), 0, ggml_nbytes(idx[q]));
            for (int64_t t = 0; t < frames; t++) codes[(size_t)t * hp.n_codebooks + q] = c[t];
        }
    }
};

extern "C" {

int kz_codec_encoder_load(const char *mmproj_path, int n_threads, kz_codec_encoder **out, char *err, size_t err_len) {
    return kz::load_handle(mmproj_path, out, err, err_len, [&] {
        if (n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
        std::unique_ptr<kz_codec_encoder> e(new kz_codec_encoder());
        e->n_threads = n_threads;
        load_model(e->model, mmproj_path);
        e->init(kGraphSize);
        return e;
    });
}

void kz_codec_encoder_free(kz_codec_encoder *enc) { delete enc; }

const char *kz_codec_encoder_last_error(const kz_codec_encoder *enc) {
    return enc ? enc->last_error.c_str() : "null handle";
}

int kz_codec_encoder_n_codebooks(const kz_codec_encoder *e) { return e ? e->model.hp.n_codebooks : 0; }
int kz_codec_encoder_samples_per_frame(const kz_codec_encoder *e) { return e ? e->model.hp.samples_per_frame : 0; }
int kz_codec_encoder_sample_rate(const kz_codec_encoder *e) { return e ? e->model.hp.sample_rate : 0; }
int kz_codec_encoder_hidden(const kz_codec_encoder *e) { return e ? e->model.hp.hidden : 0; }
int kz_codec_encoder_downsample(const kz_codec_encoder *e) { return e ? e->model.hp.down_stride : 0; }

int kz_codec_encoder_set_threads(kz_codec_encoder *e, int n_threads) {
    return kz::call_handle(e, [&] {
        if (n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
        e->n_threads = n_threads;
    });
}

int64_t kz_codec_encoder_n_frames(const kz_codec_encoder *e, int64_t n_samples) {
    if (!e || n_samples < 0) return -1;
    return (n_samples + e->model.hp.samples_per_frame - 1) / e->model.hp.samples_per_frame;
}

int kz_codec_encoder_encode_debug(kz_codec_encoder *e, const float *pcm, int64_t n_samples, int32_t *codes,
                                  size_t capacity, float *seanet, float *transformer, float *downsampled) {
    return kz::call_handle(e, [&] {
        if (!pcm || !codes) throw Error(KZ_ERR_INVALID_ARGUMENT, "null samples or codes buffer");
        if (n_samples < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "no samples to encode");
        const int64_t frames = kz_codec_encoder_n_frames(e, n_samples);
        if (capacity < (size_t)frames * e->model.hp.n_codebooks)
            throw Error(
                KZ_ERR_INVALID_ARGUMENT,
                "codes buffer too small: need " + std::to_string((size_t)frames * e->model.hp.n_codebooks) + " values");
        for (int64_t i = 0; i < n_samples; i++)
            if (!std::isfinite(pcm[i]))
                throw Error(KZ_ERR_INVALID_ARGUMENT, "sample " + std::to_string(i) + " is not finite");
        e->encode(pcm, n_samples, codes, seanet, transformer, downsampled);
    });
}

int kz_codec_encoder_encode(kz_codec_encoder *e, const float *pcm, int64_t n_samples, int32_t *codes, size_t capacity) {
    return kz_codec_encoder_encode_debug(e, pcm, n_samples, codes, capacity, nullptr, nullptr, nullptr);
}

}  // extern "C"
