// Code predictor (stage 2): a small Qwen3 decoder that turns (talker hidden, CB0) into CB1..CB15.
//
// Per frame: position 0 = talker hidden, position 1 = codec_embedding[CB0] (a 2-token prefill),
// then 14 single-token steps; step s (0-based) predicts CB_{s+1} with head s, and step s >= 1
// takes CP table s-1 row CB_s as input. Every input goes through proj_in when the file has it.
// The KV cache holds at most n_codebooks + 1 positions and is overwritten every frame.
//
// One ggml graph per step shape (15 of them) is built at load time, each with its own small
// activation buffer (ggml_gallocr), and replayed every frame; the host only copies one input
// row in and reads 2048 logits out between steps (sampling needs the host anyway). Weights and
// the KV cache live in CPU backend buffers owned by the handle; the decoder layers' quantized
// matrices go to ggml's CPU_REPACK buffer where its kernels take them (Q4_0 on AVX2, Q4_0 on
// ARM in a ggml built with dotprod): rows interleaved so one pass of the matrix-vector product
// reads several rows at once, which is what this bandwidth-bound stage needs. Q8_0 matrices
// (layers and heads) are packed for kazetts' own kernels instead (q8_matvec.h: x86-64 AVX-512
// VNNI or AVX2, ARM i8mm, dotprod or NEON, chosen at run time). q/k/v and gate/up are stacked into one
// matrix each. ggml's threads meet at a barrier after every graph node, so a product on kazetts'
// kernel also does the work of its neighbours, bit for bit as their ggml nodes: the RMS norm of
// its input (q/k/v, gate/up, head), the residual sum (attn_out, ffn_down), the input's
// quantization (81 nodes per one-token step at 0.6b instead of 123).
#include "kazetts/code_predictor.h"

#include "core/common_internal.h"
#include "kernels/q8_matvec.h"
#include "stages/cp_sampling.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

using kz::Error;

constexpr const char *P = "a.gen.code.";

// Matrices that multiply the same input (q/k/v; gate/up), stacked row-wise into one tensor when
// they are kept in one type: one matrix-vector product per step instead of several, so fewer
// graph nodes, thread barriers and input quantizations. Kept apart when their types differ.
struct Fused {
    std::vector<ggml_tensor *> w;  // one stacked tensor, or one per part
    std::vector<int64_t> rows;     // rows of each part
};

struct Layer {
    ggml_tensor *ln1 = nullptr, *q_norm = nullptr, *k_norm = nullptr, *wo = nullptr, *ln2 = nullptr, *down = nullptr;
    Fused qkv, gate_up;
    ggml_tensor *k_cache = nullptr, *v_cache = nullptr;  // [head_dim, n_head_kv, n_ctx, batch capacity] F32
};

// One step's graph for a batch of `batch` requests (frames): their n_tok inputs each, request-major.
struct Step {
    ggml_context *ctx = nullptr;
    ggml_cgraph *graph = nullptr;
    ggml_gallocr_t galloc = nullptr;
    ggml_tensor *inp = nullptr;     // [n_embd_in, n_tok * batch] F32
    ggml_tensor *pos = nullptr;     // [n_tok] I32 (the same positions for every request)
    ggml_tensor *logits = nullptr;  // [vocab, batch] F32
    ggml_cplan plan{};
    int n_tok = 0;
    int pos0 = 0;
    int batch = 0;

    Step() = default;
    Step(const Step &) = delete;
    Step &operator=(const Step &) = delete;
    ~Step() {
        if (galloc) ggml_gallocr_free(galloc);
        if (ctx) ggml_free(ctx);
    }
};

// A row table read from the file a row at a time, when a row is needed (embedding tables are
// only read that way, 16 rows a frame): no copy of it stays in memory.
struct FileTable {
    const kz::GgufFile *file = nullptr;
    int64_t id = -1;
    ggml_type type = GGML_TYPE_F32;
    int64_t ne0 = 0, rows = 0;  // rows over all stacked tables
    size_t row_size = 0;
    mutable std::vector<uint8_t> raw;

    void row(int64_t r, float *out) const {
        raw.resize(row_size);
        file->read_part(id, (uint64_t)r * row_size, row_size, raw.data());
        if (type == GGML_TYPE_F32) {
            std::memcpy(out, raw.data(), (size_t)ne0 * sizeof(float));
        } else {
            ggml_get_type_traits(type)->to_float(raw.data(), out, ne0);
        }
    }
};

}  // namespace

struct kz_code_predictor {
    // hparams
    int n_embd_in = 0, n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
    int vocab = 0, n_cb = 0, cb0_vocab = 0, n_ctx = 0;
    float rope_theta = 1e6f, eps = 1e-6f;
    bool has_proj = false;
    kz::q8::Isa q8_isa = kz::q8::Isa::none;  // kazetts' Q8_0 kernel asked for (none: ggml's)
    std::string kernel_name = "ggml";        // the kernel the quantized products run on
    kz_cp_products frame_products{};         // one frame's products by kernel (kz_cp_frame_products)

    ggml_context *wctx = nullptr, *rctx = nullptr;  // plain weights; repacked matrices
    ggml_backend_buffer_t wbuf = nullptr, rbuf = nullptr;
    ggml_context *kvctx = nullptr;  // the KV caches, one per request of a batch (grown on demand)
    ggml_backend_buffer_t kvbuf = nullptr;
    int batch_capacity = 0;
    std::vector<Layer> layers;
    ggml_tensor *head = nullptr, *output_norm = nullptr, *proj_w = nullptr, *proj_b = nullptr;
    std::unique_ptr<kz::GgufFile> file;  // the mmproj, open for the embedding tables' rows
    FileTable embd, out_embd;

    // graphs[b - 1]: the n_cb steps' graphs for a batch of b frames (built when first needed)
    std::vector<std::vector<std::unique_ptr<Step>>> graphs;
    ggml_threadpool *pool = nullptr;
    int n_threads = 1;
    std::vector<uint8_t> work;

    std::vector<float> row_buf, sum_buf;
    std::string last_error;

    ~kz_code_predictor() {
        graphs.clear();
        if (pool) ggml_threadpool_free(pool);
        if (wbuf) ggml_backend_buffer_free(wbuf);
        if (rbuf) ggml_backend_buffer_free(rbuf);
        if (kvbuf) ggml_backend_buffer_free(kvbuf);
        if (wctx) ggml_free(wctx);
        if (rctx) ggml_free(rctx);
        if (kvctx) ggml_free(kvctx);
    }
};

namespace {

// ------------------------------------------------------------------------------------------
// GGUF reading
// ------------------------------------------------------------------------------------------

using kz::GgufFile;

int64_t find(const GgufFile &gf, const std::string &name, bool required = true) {
    return gf.find(name, required, " (not a code predictor mmproj?)");
}

const int64_t *ne_of(const GgufFile &gf, int64_t id) { return gguf_get_tensor_ne(gf.gguf(), id); }

void expect_shape(const GgufFile &gf, const std::string &name, std::vector<int64_t> want) {
    int64_t id = find(gf, name);
    const int64_t *ne = ne_of(gf, id);
    bool ok = true;
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        int64_t w = i < (int)want.size() ? want[i] : 1;
        if (ne[i] != w) ok = false;
    }
    if (!ok) {
        throw Error(KZ_ERR_FORMAT, gf.path() + ": tensor " + name + " has shape " + kz::shape_str(ne, GGML_MAX_DIMS) +
                                       ", expected " + kz::shape_str(want.data(), (int)want.size()));
    }
}

// an hparam: a non-negative int, or a finite float
uint32_t get_u32(const GgufFile &gf, const std::string &key, uint32_t fallback) {
    return (uint32_t)gf.integer(key, fallback, 0, INT32_MAX);
}

float get_f32(const GgufFile &gf, const std::string &key, float fallback) { return (float)gf.real(key, fallback); }

ggml_type override_type(int wt) {
    switch (wt) {
        case KZ_CP_WEIGHTS_F32: return GGML_TYPE_F32;
        case KZ_CP_WEIGHTS_F16: return GGML_TYPE_F16;
        case KZ_CP_WEIGHTS_Q8_0: return GGML_TYPE_Q8_0;
        case KZ_CP_WEIGHTS_Q4_0: return GGML_TYPE_Q4_0;
        default: return GGML_TYPE_COUNT;
    }
}

// ------------------------------------------------------------------------------------------
// loading
// ------------------------------------------------------------------------------------------

struct PendingTensor {
    ggml_tensor *t;
    std::vector<int64_t> ids;   // file tensors stacked row-wise into t
    ggml_type type;             // kept type (Q8_0 when t holds it packed for kz::q8)
    int64_t ne[GGML_MAX_DIMS];  // logical shape
    bool packed;
};

// ggml's CPU_REPACK buffer type, when this ggml has one
ggml_backend_buffer_type_t repack_buffer_type() {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    auto get =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!get) return nullptr;
    for (ggml_backend_buffer_type_t *b = get(ggml_backend_reg_dev_get(reg, 0)); b && *b; ++b)
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
    return nullptr;
}

// Whether the CPU backend computes w x (x: one F32 column) with w in `buft`: asked the way
// llama.cpp asks it, with a probe op whose weight sits in an empty buffer of that type.
bool takes_weight(ggml_backend_buffer_type_t buft, ggml_type type, int64_t ne0, int64_t ne1) {
    ggml_init_params ip{ggml_tensor_overhead() * 4, nullptr, true};
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)> buf(ggml_backend_buft_alloc_buffer(buft, 0),
                                                                              ggml_backend_buffer_free);
    if (!ctx || !buf) return false;
    ggml_tensor *w = ggml_new_tensor_2d(ctx.get(), type, ne0, ne1);
    w->buffer = buf.get();
    ggml_tensor *op = ggml_mul_mat(ctx.get(), w, ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, ne0));
    return ggml_backend_dev_supports_op(ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0), op);
}

class Loader {
  public:
    Loader(kz_code_predictor &m, GgufFile &gf, int wt) : m_(m), gf_(gf), wt_(wt), repack_(repack_buffer_type()) {}

    void run() {
        hparams();
        validate();
        create();
        fill();
        host_tables();
    }

  private:
    kz_code_predictor &m_;
    GgufFile &gf_;
    int wt_;
    ggml_backend_buffer_type_t repack_;     // null: no repacking
    ggml_type layer_type_ = GGML_TYPE_F32;  // AUTO: the type an F32 ffn_down takes (see the header)
    std::vector<PendingTensor> pending_;

    void hparams() {
        const int64_t *e = ne_of(gf_, find(gf_, std::string(P) + "embd.weight"));
        const int64_t *h = ne_of(gf_, find(gf_, std::string(P) + "head.weight"));
        const int64_t *o = ne_of(gf_, find(gf_, std::string(P) + "out_embd.weight"));
        m_.n_embd_in = (int)e[0];
        m_.vocab = (int)e[1];
        m_.n_cb = (int)e[2];
        m_.n_embd = (int)h[0];
        m_.cb0_vocab = (int)o[1];
        int n_layer = 0;
        while (find(gf_, std::string(P) + "blk." + std::to_string(n_layer) + ".attn_q.weight", false) >= 0) n_layer++;
        const std::string K = "kazetts.code.";
        m_.n_layer = (int)get_u32(gf_, K + "num_hidden_layers", (uint32_t)n_layer);
        if (m_.n_layer < 1 || m_.n_layer != n_layer) {
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": " + std::to_string(n_layer) +
                                           " code predictor layers in the file, metadata says " +
                                           std::to_string(m_.n_layer));
        }
        std::string b0 = std::string(P) + "blk.0.";
        const int64_t *qn = ne_of(gf_, find(gf_, b0 + "attn_q_norm.weight"));
        const int64_t *q = ne_of(gf_, find(gf_, b0 + "attn_q.weight"));
        const int64_t *k = ne_of(gf_, find(gf_, b0 + "attn_k.weight"));
        const int64_t *g = ne_of(gf_, find(gf_, b0 + "ffn_gate.weight"));
        m_.head_dim = (int)get_u32(gf_, K + "head_dim", (uint32_t)qn[0]);
        if (m_.head_dim <= 0 || m_.head_dim % 2)
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": bad head_dim " + std::to_string(m_.head_dim));
        m_.n_head = (int)get_u32(gf_, K + "num_attention_heads", (uint32_t)(q[1] / m_.head_dim));
        m_.n_head_kv = (int)get_u32(gf_, K + "num_key_value_heads", (uint32_t)(k[1] / m_.head_dim));
        m_.n_ff = (int)get_u32(gf_, K + "intermediate_size", (uint32_t)g[1]);
        uint32_t hs = get_u32(gf_, K + "hidden_size", (uint32_t)m_.n_embd);
        uint32_t vs = get_u32(gf_, K + "vocab_size", (uint32_t)m_.vocab);
        m_.rope_theta = get_f32(gf_, K + "rope_theta", 1e6f);
        m_.eps = get_f32(gf_, K + "rms_norm_eps", 1e-6f);
        if (!(m_.rope_theta > 0.0f) || !(m_.eps > 0.0f) || !std::isfinite(m_.rope_theta) || !std::isfinite(m_.eps)) {
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": rope_theta and rms_norm_eps must be positive");
        }
        if ((int)hs != m_.n_embd || (int)vs != m_.vocab) {
            throw Error(KZ_ERR_FORMAT,
                        gf_.path() + ": code predictor tensors disagree with kazetts.code.hidden_size/vocab_size");
        }
        if (m_.n_head <= 0 || m_.n_head_kv <= 0 || m_.n_head % m_.n_head_kv || m_.n_cb < 1 ||
            m_.n_cb > KZ_MAX_CODEBOOKS || m_.vocab < 1 || m_.cb0_vocab < 1 || m_.n_embd < 1 || m_.n_embd_in < 1 ||
            m_.n_ff < 1) {
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": inconsistent code predictor hyperparameters");
        }
        m_.has_proj = find(gf_, std::string(P) + "proj_in.weight", false) >= 0;
        ggml_type q_t = gguf_get_tensor_type(gf_.gguf(), find(gf_, b0 + "attn_q.weight"));
        if (ggml_is_quantized(q_t)) layer_type_ = q_t;
        m_.n_ctx = m_.n_cb + 1;
    }

    void validate() {
        const int64_t E = m_.n_embd, hd = m_.head_dim;
        expect_shape(gf_, std::string(P) + "embd.weight", {m_.n_embd_in, m_.vocab, m_.n_cb});
        expect_shape(gf_, std::string(P) + "head.weight", {E, m_.vocab, m_.n_cb});
        expect_shape(gf_, std::string(P) + "out_embd.weight", {m_.n_embd_in, m_.cb0_vocab});
        expect_shape(gf_, std::string(P) + "output_norm.weight", {E});
        if (m_.has_proj) {
            expect_shape(gf_, std::string(P) + "proj_in.weight", {m_.n_embd_in, E});
            if (find(gf_, std::string(P) + "proj_in.bias", false) >= 0)
                expect_shape(gf_, std::string(P) + "proj_in.bias", {E});
        } else if (m_.n_embd_in != m_.n_embd) {
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": talker width " + std::to_string(m_.n_embd_in) +
                                           " != code predictor width " + std::to_string(m_.n_embd) +
                                           " and no a.gen.code.proj_in.weight");
        }
        for (int i = 0; i < m_.n_layer; i++) {
            std::string b = std::string(P) + "blk." + std::to_string(i) + ".";
            expect_shape(gf_, b + "ln1.weight", {E});
            expect_shape(gf_, b + "ln2.weight", {E});
            expect_shape(gf_, b + "attn_q.weight", {E, m_.n_head * hd});
            expect_shape(gf_, b + "attn_k.weight", {E, m_.n_head_kv * hd});
            expect_shape(gf_, b + "attn_v.weight", {E, m_.n_head_kv * hd});
            expect_shape(gf_, b + "attn_q_norm.weight", {hd});
            expect_shape(gf_, b + "attn_k_norm.weight", {hd});
            expect_shape(gf_, b + "attn_out.weight", {m_.n_head * hd, E});
            expect_shape(gf_, b + "ffn_gate.weight", {E, m_.n_ff});
            expect_shape(gf_, b + "ffn_up.weight", {E, m_.n_ff});
            expect_shape(gf_, b + "ffn_down.weight", {m_.n_ff, E});
        }
        for (int64_t i = 0; i < gguf_get_n_tensors(gf_.gguf()); i++) {
            std::string n = gguf_get_tensor_name(gf_.gguf(), i);
            if (n.rfind(P, 0) == 0 && !kz::can_dequantize(gguf_get_tensor_type(gf_.gguf(), i))) {
                throw Error(KZ_ERR_FORMAT, gf_.path() + ": tensor " + n + " has unsupported type " +
                                               ggml_type_name(gguf_get_tensor_type(gf_.gguf(), i)));
            }
        }
    }

    // The type a matrix weight is kept in.
    ggml_type matrix_type(const std::string &name, int64_t id) {
        ggml_type file_t = gguf_get_tensor_type(gf_.gguf(), id);
        ggml_type t = override_type(wt_);
        const std::string down_suffix = "ffn_down.weight";
        bool down = name.size() >= down_suffix.size() &&
                    name.compare(name.size() - down_suffix.size(), down_suffix.size(), down_suffix) == 0;
        if (t == GGML_TYPE_COUNT) t = file_t;
        if (wt_ == KZ_CP_WEIGHTS_AUTO && down && file_t == GGML_TYPE_F32) t = layer_type_;
        const int64_t ne0 = ne_of(gf_, id)[0];
        if (ggml_blck_size(t) > 1 && ne0 % ggml_blck_size(t) != 0) t = GGML_TYPE_F32;
        if (down && (t == GGML_TYPE_F16 || t == GGML_TYPE_BF16)) t = GGML_TYPE_F32;  // F16 overflow trap
        // ARM with half-precision arithmetic: ggml sums F16 products in F16, which flips greedy
        // codes against the reference (and could overflow); there F16 weights are kept in F32
        if (t == GGML_TYPE_F16 && ggml_cpu_has_fp16_va()) t = GGML_TYPE_F32;
        return t;
    }

    // a weight; `matrix`: multiplied by activations (converted to the kept type, maybe packed);
    // `layer_matrix`: a decoder layer's 2-D matrix, which ggml may repack
    ggml_tensor *add(const std::string &name, bool matrix, bool layer_matrix = false) {
        int64_t id = find(gf_, name);
        const int64_t *ne = ne_of(gf_, id);
        ggml_type t = matrix ? matrix_type(name, id) : GGML_TYPE_F32;
        return place(name, t, ne, matrix, layer_matrix, {id});
    }

    // a tensor of type t and shape ne filled from the file tensors `ids` stacked row-wise
    ggml_tensor *place(const std::string &name, ggml_type t, const int64_t *ne, bool matrix, bool layer_matrix,
                       std::vector<int64_t> ids) {
        PendingTensor p{nullptr, std::move(ids), t, {ne[0], ne[1], ne[2], ne[3]}, false};
        if (matrix && m_.q8_isa != kz::q8::Isa::none && t == GGML_TYPE_Q8_0 && ne[3] == 1 &&
            kz::q8::fits(ne[0], ne[1])) {
            p.packed = true;
            m_.kernel_name = std::string("kazetts q8_0 ") + kz::q8::isa_name(m_.q8_isa);
            p.t = ggml_new_tensor_3d(m_.wctx, GGML_TYPE_I8, kz::q8::group_bytes(ne[0]), ne[1] / 4, ne[2]);
        } else {
            ggml_context *ctx = layer_matrix && repack_ && takes_weight(repack_, t, ne[0], ne[1]) ? m_.rctx : m_.wctx;
            p.t = ggml_new_tensor(ctx, t, ggml_n_dims_safe(ne), ne);
        }
        ggml_set_name(p.t, name.c_str());
        pending_.push_back(std::move(p));
        return pending_.back().t;
    }

    // decoder-layer matrices over one input, stacked when they are kept in one type
    Fused add_fused(const std::string &stacked_name, const std::vector<std::string> &names) {
        Fused f;
        std::vector<int64_t> ids;
        const ggml_type type = matrix_type(names[0], find(gf_, names[0]));
        bool same = true;
        for (const auto &n : names) {
            ids.push_back(find(gf_, n));
            f.rows.push_back(ne_of(gf_, ids.back())[1]);
            same = same && matrix_type(n, ids.back()) == type;
        }
        if (!same) {
            for (const auto &n : names) f.w.push_back(add(n, true, true));
            return f;
        }
        int64_t ne[GGML_MAX_DIMS] = {ne_of(gf_, ids[0])[0], 0, 1, 1};
        for (int64_t r : f.rows) ne[1] += r;
        f.w.push_back(place(stacked_name, type, ne, true, true, ids));
        return f;
    }

    static int ggml_n_dims_safe(const int64_t *ne) {
        int n = GGML_MAX_DIMS;
        while (n > 1 && ne[n - 1] == 1) n--;
        return n;
    }

    void create() {
        const size_t n_tensors = 8 + 11 * (size_t)m_.n_layer;
        ggml_init_params ip{ggml_tensor_overhead() * n_tensors, nullptr, true};
        m_.wctx = ggml_init(ip);
        m_.rctx = ggml_init(ip);
        if (!m_.wctx || !m_.rctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
        m_.head = add(std::string(P) + "head.weight", true);
        m_.output_norm = add(std::string(P) + "output_norm.weight", false);
        if (m_.has_proj) {
            m_.proj_w = add(std::string(P) + "proj_in.weight", true);
            if (find(gf_, std::string(P) + "proj_in.bias", false) >= 0)
                m_.proj_b = add(std::string(P) + "proj_in.bias", false);
        }
        m_.layers.resize(m_.n_layer);
        for (int i = 0; i < m_.n_layer; i++) {
            Layer &L = m_.layers[i];
            std::string b = std::string(P) + "blk." + std::to_string(i) + ".";
            L.ln1 = add(b + "ln1.weight", false);
            L.qkv = add_fused(b + "attn_qkv", {b + "attn_q.weight", b + "attn_k.weight", b + "attn_v.weight"});
            L.q_norm = add(b + "attn_q_norm.weight", false);
            L.k_norm = add(b + "attn_k_norm.weight", false);
            L.wo = add(b + "attn_out.weight", true, true);
            L.ln2 = add(b + "ln2.weight", false);
            L.gate_up = add_fused(b + "ffn_gate_up", {b + "ffn_gate.weight", b + "ffn_up.weight"});
            L.down = add(b + "ffn_down.weight", true, true);
        }
        m_.wbuf = ggml_backend_alloc_ctx_tensors_from_buft(m_.wctx, ggml_backend_cpu_buffer_type());
        if (!m_.wbuf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the code predictor weights");
        kz::advise_huge_pages(ggml_backend_buffer_get_base(m_.wbuf), ggml_backend_buffer_get_size(m_.wbuf));
        ggml_backend_buffer_clear(m_.wbuf, 0);
        if (ggml_get_first_tensor(m_.rctx)) {
            m_.rbuf = ggml_backend_alloc_ctx_tensors_from_buft(m_.rctx, repack_);
            if (!m_.rbuf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the repacked code predictor weights");
            kz::advise_huge_pages(ggml_backend_buffer_get_base(m_.rbuf), ggml_backend_buffer_get_size(m_.rbuf));
        }
    }

    // Reads every pending tensor, converting to its kept type in row chunks; whole tensors are
    // handed to their buffer at once (a repacking buffer rearranges them as they come in).
    void fill() {
        std::vector<uint8_t> kept, packed;
        for (const auto &p : pending_) {
            const int64_t rows = p.ne[1] * p.ne[2] * p.ne[3];
            kept.resize((size_t)rows * ggml_row_size(p.type, p.ne[0]));
            size_t at = 0;
            for (int64_t id : p.ids) {
                std::vector<uint8_t> raw = gf_.read(id);
                at += convert_rows(raw, gguf_get_tensor_type(gf_.gguf(), id), p, kept.size() - at, kept.data() + at);
            }
            if (at != kept.size()) throw Error(KZ_ERR_FORMAT, gf_.path() + ": size mismatch of " + ggml_get_name(p.t));
            if (!p.packed) {
                ggml_backend_tensor_set(p.t, kept.data(), 0, kept.size());
                continue;
            }
            packed.resize(ggml_nbytes(p.t));
            const size_t slice = (size_t)p.ne[1] * ggml_row_size(p.type, p.ne[0]);
            for (int64_t z = 0; z < p.ne[2]; z++)
                kz::q8::pack(kept.data() + z * slice, p.ne[0], p.ne[1], packed.data() + z * p.t->nb[2]);
            ggml_backend_tensor_set(p.t, packed.data(), 0, packed.size());
        }
    }

    // Converts the rows of `raw` (type src_t) to p's kept type into dst (room: `capacity`
    // bytes); returns the bytes written.
    size_t convert_rows(const std::vector<uint8_t> &raw, ggml_type src_t, const PendingTensor &p, size_t capacity,
                        uint8_t *dst) {
        const int64_t ne0 = p.ne[0];
        const size_t src_row = ggml_row_size(src_t, ne0), dst_row = ggml_row_size(p.type, ne0);
        const int64_t rows = (int64_t)(raw.size() / src_row);
        if ((size_t)rows * dst_row > capacity)
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": size mismatch of " + ggml_get_name(p.t));
        if (src_t == p.type) {
            std::memcpy(dst, raw.data(), raw.size());
            return raw.size();
        }
        const int64_t chunk = std::max<int64_t>(1, (1 << 20) / ne0);
        std::vector<float> f32((size_t)(chunk * ne0));
        for (int64_t r = 0; r < rows; r += chunk) {
            int64_t nr = std::min(chunk, rows - r);
            const uint8_t *src = raw.data() + (size_t)r * src_row;
            if (src_t == GGML_TYPE_F32) {
                std::memcpy(f32.data(), src, (size_t)(nr * ne0) * sizeof(float));
            } else {
                ggml_get_type_traits(src_t)->to_float(src, f32.data(), nr * ne0);
            }
            uint8_t *out = dst + (size_t)r * dst_row;
            if (p.type == GGML_TYPE_F32) {
                std::memcpy(out, f32.data(), (size_t)(nr * ne0) * sizeof(float));
            } else {
                ggml_quantize_chunk(p.type, f32.data(), out, 0, nr, ne0, nullptr);
            }
        }
        return (size_t)rows * dst_row;
    }

    void file_table(FileTable &ft, const std::string &name) {
        ft.file = &gf_;
        ft.id = find(gf_, name);
        const int64_t *ne = ne_of(gf_, ft.id);
        ft.type = gguf_get_tensor_type(gf_.gguf(), ft.id);
        ft.ne0 = ne[0];
        ft.rows = ne[1] * ne[2] * ne[3];
        ft.row_size = ggml_row_size(ft.type, ft.ne0);
        if (gguf_get_tensor_size(gf_.gguf(), ft.id) != ft.row_size * (size_t)ft.rows) {
            throw Error(KZ_ERR_FORMAT, gf_.path() + ": size mismatch of " + name);
        }
    }

    void host_tables() {
        file_table(m_.embd, std::string(P) + "embd.weight");
        file_table(m_.out_embd, std::string(P) + "out_embd.weight");
    }
};

// ------------------------------------------------------------------------------------------
// graphs
// ------------------------------------------------------------------------------------------

// graph nodes (and tensors) of one step: ~50 per layer, a few dozen outside them, and ~21 per
// layer and request when ggml computes the products (ggml_product: a product, a view and a
// concatenation per request and matrix)
int graph_size(int n_layer, int batch) { return 1024 + (64 + 24 * batch) * n_layer; }

// ggml_rms_norm(x) * weight, as ggml nodes
ggml_tensor *rms_norm(const kz_code_predictor &m, ggml_context *ctx, ggml_tensor *x, ggml_tensor *weight) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, m.eps), weight);
}

// w x by ggml, x holding `batch` requests' columns: each request's alone. ggml multiplies one
// column (a dot product a row) and several (llamafile's tiles) in different float orders, so a
// product of all the columns would not give a request the bits of its frame alone; only
// kazetts' Q8_0 kernels, which compute every column on its own, serve a batch in one pass.
ggml_tensor *ggml_product(ggml_context *ctx, ggml_tensor *w, ggml_tensor *x, int batch) {
    if (batch == 1) return ggml_mul_mat(ctx, w, x);
    const int64_t cols = x->ne[1] / batch;
    ggml_tensor *y = nullptr;
    for (int j = 0; j < batch; j++) {
        ggml_tensor *part =
            ggml_mul_mat(ctx, w, ggml_view_2d(ctx, x, x->ne[0], cols, x->nb[1], (size_t)j * cols * x->nb[1]));
        y = y ? ggml_concat(ctx, y, part, 1) : part;
    }
    return y;
}

// residual + w x (residual optional), by kazetts' Q8_0 kernel when w is packed for it (I8: one
// node with the sum), else by ggml
ggml_tensor *mul_mat(const kz_code_predictor &m, ggml_context *ctx, ggml_tensor *w, ggml_tensor *x, int batch,
                     ggml_tensor *residual = nullptr) {
    if (w->type == GGML_TYPE_I8) return kz::q8::mul_mat(ctx, w, x, m.q8_isa, {residual, nullptr, 0.0f});
    ggml_tensor *y = ggml_product(ctx, w, x, batch);
    return residual ? ggml_add(ctx, residual, y) : y;
}

// w rms_norm(x, norm_w): one node when w is packed for kazetts' kernel
ggml_tensor *normed_mul_mat(const kz_code_predictor &m, ggml_context *ctx, ggml_tensor *w, ggml_tensor *x, int batch,
                            ggml_tensor *norm_w) {
    if (w->type == GGML_TYPE_I8) return kz::q8::mul_mat(ctx, w, x, m.q8_isa, {nullptr, norm_w, m.eps});
    return ggml_product(ctx, w, rms_norm(m, ctx, x, norm_w), batch);
}

// The products of each part of `f` with rms_norm(x, norm_w) (x [ne0, n_tok * batch]): views into
// one product when stacked.
std::vector<ggml_tensor *> fused_mul_mat(const kz_code_predictor &m, ggml_context *ctx, const Fused &f, ggml_tensor *x,
                                         int batch, ggml_tensor *norm_w) {
    std::vector<ggml_tensor *> out;
    if (f.w.size() > 1) {
        ggml_tensor *h = rms_norm(m, ctx, x, norm_w);
        for (ggml_tensor *w : f.w) out.push_back(mul_mat(m, ctx, w, h, batch));
        return out;
    }
    ggml_tensor *y = normed_mul_mat(m, ctx, f.w[0], x, batch, norm_w);
    size_t offset = 0;
    for (int64_t r : f.rows) {
        out.push_back(ggml_view_2d(ctx, y, r, y->ne[1], y->nb[1], offset));
        offset += (size_t)r * y->nb[0];
    }
    return out;
}

// [n_heads * hd, n_tok * batch] (possibly a view with a row stride) as [hd, n_heads, n_tok, batch]
ggml_tensor *heads(ggml_context *ctx, ggml_tensor *t, int hd, int n_tok) {
    return ggml_view_4d(ctx, t, hd, t->ne[0] / hd, n_tok, t->ne[1] / n_tok, (size_t)hd * t->nb[0], t->nb[1],
                        (size_t)n_tok * t->nb[1], 0);  // offset relative to t
}

// Positions [pos0, pos0 + n) of the KV cache `cache` for the first `batch` requests:
// [hd, n_head_kv, n, batch].
ggml_tensor *cache_view(ggml_context *ctx, ggml_tensor *cache, int pos0, int n, int batch) {
    return ggml_view_4d(ctx, cache, cache->ne[0], cache->ne[1], n, batch, cache->nb[1], cache->nb[2], cache->nb[3],
                        (size_t)pos0 * cache->nb[2]);
}

// Step s for a batch of `batch` frames. Every request's columns go through the same products
// (one pass over the weights for all) and its own attention over its own KV cache (a slice of
// the batch dimension, broadcast by ggml_mul_mat): each column's values are those of its frame
// alone.
void build_step(kz_code_predictor &m, Step &st, int s, int batch) {
    st.n_tok = s == 0 ? 2 : 1;
    st.pos0 = s == 0 ? 0 : s + 1;
    st.batch = batch;
    const int n_tok = st.n_tok, pos0 = st.pos0, n_kv = pos0 + n_tok;
    const int hd = m.head_dim;
    const int n_graph = graph_size(m.n_layer, batch);
    ggml_init_params ip{ggml_tensor_overhead() * n_graph + ggml_graph_overhead_custom(n_graph, false), nullptr, true};
    st.ctx = ggml_init(ip);
    if (!st.ctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    ggml_context *ctx = st.ctx;
    ggml_cgraph *gf = ggml_new_graph_custom(ctx, n_graph, false);

    st.inp = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, m.n_embd_in, n_tok * batch);
    ggml_set_input(st.inp);
    st.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
    ggml_set_input(st.pos);

    ggml_tensor *x = st.inp;
    if (m.proj_w) {
        x = mul_mat(m, ctx, m.proj_w, x, batch);
        if (m.proj_b) x = ggml_add(ctx, x, m.proj_b);
    }
    const float kq_scale = 1.0f / std::sqrt((float)hd);
    for (int il = 0; il < m.n_layer; il++) {
        const Layer &L = m.layers[il];
        std::vector<ggml_tensor *> qkv = fused_mul_mat(m, ctx, L.qkv, x, batch, L.ln1);
        ggml_tensor *q = heads(ctx, qkv[0], hd, n_tok), *k = heads(ctx, qkv[1], hd, n_tok);
        ggml_tensor *v = heads(ctx, qkv[2], hd, n_tok);
        q = rms_norm(m, ctx, q, L.q_norm);
        k = rms_norm(m, ctx, k, L.k_norm);
        q = ggml_rope_ext(ctx, q, st.pos, nullptr, hd, GGML_ROPE_TYPE_NEOX, 0, m.rope_theta, 1.0f, 0.0f, 1.0f, 0.0f,
                          0.0f);
        k = ggml_rope_ext(ctx, k, st.pos, nullptr, hd, GGML_ROPE_TYPE_NEOX, 0, m.rope_theta, 1.0f, 0.0f, 1.0f, 0.0f,
                          0.0f);

        // write this step's K/V at positions pos0 .. pos0+n_tok-1 of each request's cache
        ggml_build_forward_expand(gf, ggml_cpy(ctx, k, cache_view(ctx, L.k_cache, pos0, n_tok, batch)));
        ggml_build_forward_expand(gf, ggml_cpy(ctx, v, cache_view(ctx, L.v_cache, pos0, n_tok, batch)));

        ggml_tensor *K =
            ggml_permute(ctx, cache_view(ctx, L.k_cache, 0, n_kv, batch), 0, 2, 1, 3);  // [hd, n_kv, n_head_kv, b]
        ggml_tensor *V = cache_view(ctx, L.v_cache, 0, n_kv, batch);
        ggml_tensor *Q = ggml_permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tok, n_head, b]
        ggml_tensor *kq = ggml_mul_mat(ctx, K, Q);          // [n_kv, n_tok, n_head, b]
        if (n_tok > 1) {
            kq = ggml_scale(ctx, kq, kq_scale);
            kq = ggml_diag_mask_inf(ctx, kq, pos0);
            kq = ggml_soft_max(ctx, kq);
        } else {
            kq = ggml_soft_max_ext(ctx, kq, nullptr, kq_scale, 0.0f);
        }
        ggml_tensor *Vt = ggml_cont(ctx, ggml_permute(ctx, V, 1, 2, 0, 3));  // [n_kv, hd, n_head_kv, b]
        ggml_tensor *kqv = ggml_mul_mat(ctx, Vt, kq);                        // [hd, n_tok, n_head, b]
        ggml_tensor *o = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), hd * m.n_head, n_tok * batch);
        x = mul_mat(m, ctx, L.wo, o, batch, x);

        std::vector<ggml_tensor *> gate_up = fused_mul_mat(m, ctx, L.gate_up, x, batch, L.ln2);
        x = mul_mat(m, ctx, L.down, ggml_swiglu_split(ctx, gate_up[0], gate_up[1]), batch, x);
    }
    // each request's last position
    if (n_tok > 1) x = ggml_view_2d(ctx, x, m.n_embd, batch, (size_t)n_tok * x->nb[1], (size_t)(n_tok - 1) * x->nb[1]);
    ggml_tensor *head =
        ggml_view_2d(ctx, m.head, m.head->ne[0], m.head->ne[1], m.head->nb[1], (size_t)s * m.head->nb[2]);
    st.logits = normed_mul_mat(m, ctx, head, x, batch, m.output_norm);
    ggml_set_output(st.logits);
    ggml_build_forward_expand(gf, st.logits);
    st.graph = gf;

    st.galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!st.galloc || !ggml_gallocr_alloc_graph(st.galloc, gf))
        throw Error(KZ_ERR_NO_MEMORY, "cannot allocate a code predictor graph");
}

// Plans every built graph for the handle's threads, sharing one work buffer.
void plan_graphs(kz_code_predictor &m) {
    size_t work = 0;
    for (auto &steps : m.graphs)
        for (auto &st : steps) {
            st->plan = ggml_graph_plan(st->graph, m.n_threads, m.pool);
            work = std::max(work, st->plan.work_size);
        }
    m.work.assign(work + 64, 0);
    for (auto &steps : m.graphs)
        for (auto &st : steps) st->plan.work_data = st->plan.work_size ? m.work.data() : nullptr;
}

// KV caches for `capacity` requests at once. Graphs view them, so they are dropped with them.
void make_kv_caches(kz_code_predictor &m, int capacity) {
    m.graphs.clear();
    if (m.kvbuf) ggml_backend_buffer_free(m.kvbuf);
    if (m.kvctx) ggml_free(m.kvctx);
    m.kvbuf = nullptr;
    m.batch_capacity = 0;
    ggml_init_params ip{ggml_tensor_overhead() * 2 * (size_t)m.n_layer, nullptr, true};
    m.kvctx = ggml_init(ip);
    if (!m.kvctx) throw Error(KZ_ERR_NO_MEMORY, "ggml_init failed");
    for (Layer &L : m.layers) {
        L.k_cache = ggml_new_tensor_4d(m.kvctx, GGML_TYPE_F32, m.head_dim, m.n_head_kv, m.n_ctx, capacity);
        L.v_cache = ggml_new_tensor_4d(m.kvctx, GGML_TYPE_F32, m.head_dim, m.n_head_kv, m.n_ctx, capacity);
    }
    m.kvbuf = ggml_backend_alloc_ctx_tensors_from_buft(m.kvctx, ggml_backend_cpu_buffer_type());
    if (!m.kvbuf) throw Error(KZ_ERR_NO_MEMORY, "cannot allocate the code predictor KV caches");
    ggml_backend_buffer_clear(m.kvbuf, 0);
    m.batch_capacity = capacity;
}

// The steps' graphs for a batch of `batch` frames, built (and KV caches grown) when first asked.
std::vector<std::unique_ptr<Step>> &batch_graphs(kz_code_predictor &m, int batch) {
    if (batch > m.batch_capacity) make_kv_caches(m, batch);
    if ((int)m.graphs.size() < batch) m.graphs.resize(batch);
    std::vector<std::unique_ptr<Step>> &steps = m.graphs[batch - 1];
    if (steps.empty()) {
        for (int s = 0; s < m.n_cb; s++) {
            steps.emplace_back(new Step());
            build_step(m, *steps.back(), s, batch);
        }
        if (m.pool) plan_graphs(m);
    }
    return steps;
}

void set_threads(kz_code_predictor &m, int n) {
    if (n < 1 || n > GGML_MAX_N_THREADS)
        throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be in 1.." + std::to_string(GGML_MAX_N_THREADS));
    if (m.pool && m.n_threads == n) return;
    if (m.pool) {
        ggml_threadpool_free(m.pool);
        m.pool = nullptr;
    }
    ggml_threadpool_params tp = ggml_threadpool_params_default(n);
    m.pool = ggml_threadpool_new(&tp);
    if (!m.pool) throw Error(KZ_ERR_NO_MEMORY, "cannot create a thread pool");
    m.n_threads = n;
    plan_graphs(m);
}

void compute(kz_code_predictor &m, Step &st) {
    // inputs are rewritten before every run: the allocator may reuse their memory once consumed
    for (int i = 0; i < st.n_tok; i++) ((int32_t *)st.pos->data)[i] = st.pos0 + i;
    ggml_status s = ggml_graph_compute(st.graph, &st.plan);
    if (s != GGML_STATUS_SUCCESS)
        throw Error(KZ_ERR_COMPUTE, std::string("ggml_graph_compute failed: ") + ggml_status_to_string(s));
}

// The sampling of a frame (NULL: greedy), checked.
kz_cp_sampling frame_sampling(const kz_cp_sampling *smp) {
    kz_cp_sampling cfg = kz_cp_default_sampling();
    cfg.greedy = 1;
    if (smp) cfg = *smp;
    if (!cfg.greedy) {
        if (!(cfg.temperature > 0.0f)) throw Error(KZ_ERR_INVALID_ARGUMENT, "temperature must be > 0 when sampling");
        if (!cfg.uniforms && !cfg.rng_state)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "sampling needs uniforms or an rng_state");
        if (cfg.top_k < 0) throw Error(KZ_ERR_INVALID_ARGUMENT, "top_k must be >= 0");
    }
    return cfg;
}

// n frames in one pass: frame j from hidden[j * n_embd_in], cb0[j], sampling[j] (sampling NULL:
// all greedy); its outputs at codes[j * n_cb], emb_sum[j * n_embd_in], logits_out[j * n_cb * vocab].
void predict(kz_code_predictor &m, int n, const float *hidden, const int32_t *cb0, const kz_cp_sampling *sampling,
             int32_t *codes, float *emb_sum, float *logits_out) {
    if (n < 1 || n > KZ_CP_MAX_FRAMES)
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "n_frames must be in 1.." + std::to_string(KZ_CP_MAX_FRAMES) + ", got " + std::to_string(n));
    if (!hidden || !cb0 || !codes)
        throw Error(KZ_ERR_INVALID_ARGUMENT, "talker_hidden, cb0 and codes_out must not be NULL");
    std::vector<kz_cp_sampling> cfg;
    for (int j = 0; j < n; j++) {
        if (cb0[j] < 0 || cb0[j] >= m.cb0_vocab)
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "cb0 " + std::to_string(cb0[j]) + " out of range 0.." + std::to_string(m.cb0_vocab - 1));
        cfg.push_back(frame_sampling(sampling ? &sampling[j] : nullptr));
    }
    std::vector<std::unique_ptr<Step>> &steps = batch_graphs(m, n);
    const int E = m.n_embd_in;
    m.sum_buf.resize((size_t)n * E);
    m.row_buf.resize(E);

    float *in0 = (float *)steps[0]->inp->data;  // per frame: its hidden state, then codec_embedding[cb0]
    for (int j = 0; j < n; j++) {
        float *col = in0 + (size_t)2 * j * E;
        std::memcpy(col, hidden + (size_t)j * E, (size_t)E * sizeof(float));
        m.out_embd.row(cb0[j], col + E);
        std::memcpy(&m.sum_buf[(size_t)j * E], col + E, (size_t)E * sizeof(float));
    }

    kz::cp::Scratch scratch;
    for (int s = 0; s < m.n_cb; s++) {
        Step &st = *steps[s];
        compute(m, st);
        for (int j = 0; j < n; j++) {
            const float *lg = (const float *)st.logits->data + (size_t)j * m.vocab;
            if (logits_out)
                std::memcpy(logits_out + ((size_t)j * m.n_cb + s) * m.vocab, lg, (size_t)m.vocab * sizeof(float));
            int code;
            if (cfg[j].greedy) {
                code = kz::cp::argmax(lg, m.vocab);
            } else {
                double u = cfg[j].uniforms ? cfg[j].uniforms[s] : kz::cp::splitmix_uniform(cfg[j].rng_state);
                code = kz::cp::sample(lg, m.vocab, cfg[j].temperature, cfg[j].top_k, cfg[j].top_p, u, scratch);
            }
            codes[(size_t)j * m.n_cb + s] = code;
            float *row = s + 1 < m.n_cb ? (float *)steps[s + 1]->inp->data + (size_t)j * E : m.row_buf.data();
            m.embd.row((int64_t)s * m.vocab + code, row);
            float *sum = &m.sum_buf[(size_t)j * E];
            for (int i = 0; i < E; i++) sum[i] += row[i];
        }
    }
    if (emb_sum) std::memcpy(emb_sum, m.sum_buf.data(), (size_t)n * E * sizeof(float));
}

// One frame's matrix products (every step's graph) by the kernel that computes them.
kz_cp_products count_products(const kz_code_predictor &m) {
    kz_cp_products n{};
    for (const auto &st : m.graphs[0])
        for (int i = 0; i < ggml_graph_n_nodes(st->graph); i++) {
            const ggml_tensor *node = ggml_graph_node(st->graph, i);
            if (kz::q8::product_isa(node) != kz::q8::Isa::none)
                n.kazetts++;
            else if (node->op == GGML_OP_MUL_MAT)
                (ggml_is_quantized(node->src[0]->type) ? n.ggml_quantized : n.ggml_float)++;
        }
    return n;
}

// The kazetts Q8_0 kernel a kz_cp_kernel_choice asks for (none: ggml's kernels).
kz::q8::Isa q8_kernel(int32_t choice) {
    using kz::q8::Isa;
    Isa isa;
    switch (choice) {
        case KZ_CP_KERNELS_AUTO: return kz::q8::best_isa();
        case KZ_CP_KERNELS_GGML: return Isa::none;
        case KZ_CP_KERNELS_AVX2: isa = Isa::avx2; break;
        case KZ_CP_KERNELS_AVX512_VNNI: isa = Isa::avx512_vnni; break;
        case KZ_CP_KERNELS_NEON: isa = Isa::neon; break;
        case KZ_CP_KERNELS_NEON_DOTPROD: isa = Isa::neon_dotprod; break;
        case KZ_CP_KERNELS_NEON_I8MM: isa = Isa::neon_i8mm; break;
        default: throw Error(KZ_ERR_INVALID_ARGUMENT, "unknown kernels " + std::to_string(choice));
    }
    if (!kz::q8::supports(isa))
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    std::string("this CPU cannot run the ") + kz::q8::isa_name(isa) + " kernel");
    return isa;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// C ABI
// ------------------------------------------------------------------------------------------

kz_cp_params kz_cp_default_params(void) {
    kz_cp_params p;
    p.n_threads = 2;
    p.weight_type = KZ_CP_WEIGHTS_AUTO;
    p.kernels = KZ_CP_KERNELS_AUTO;
    return p;
}

kz_cp_sampling kz_cp_default_sampling(void) {
    kz_cp_sampling s;
    s.greedy = 0;
    s.temperature = 0.9f;
    s.top_k = 50;
    s.top_p = 1.0f;
    s.uniforms = nullptr;
    s.rng_state = nullptr;
    return s;
}

int kz_cp_load(const char *path, const kz_cp_params *params, kz_code_predictor **out, char *err, size_t err_len) {
    return kz::load_handle(path, out, err, err_len, [&] {
        kz_cp_params p = params ? *params : kz_cp_default_params();
        if (p.weight_type < KZ_CP_WEIGHTS_FILE || p.weight_type > KZ_CP_WEIGHTS_AUTO) {
            throw Error(KZ_ERR_INVALID_ARGUMENT, "unknown weight_type " + std::to_string(p.weight_type));
        }
        if (p.n_threads < 1 || p.n_threads > GGML_MAX_N_THREADS)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");

        ggml_cpu_init();
        std::unique_ptr<kz_code_predictor> m(new kz_code_predictor());
        m->file.reset(new GgufFile(path));
        m->q8_isa = q8_kernel(p.kernels);
        Loader(*m, *m->file, p.weight_type).run();
        batch_graphs(*m, 1);
        m->frame_products = count_products(*m);
        set_threads(*m, p.n_threads);
        kz::release_free_heap();  // the load's staging
        return m;
    });
}

void kz_cp_free(kz_code_predictor *cp) { delete cp; }

int32_t kz_cp_n_embd_in(const kz_code_predictor *cp) { return cp ? cp->n_embd_in : 0; }
int32_t kz_cp_n_embd(const kz_code_predictor *cp) { return cp ? cp->n_embd : 0; }
int32_t kz_cp_n_codebooks(const kz_code_predictor *cp) { return cp ? cp->n_cb : 0; }
int32_t kz_cp_vocab(const kz_code_predictor *cp) { return cp ? cp->vocab : 0; }
int32_t kz_cp_cb0_vocab(const kz_code_predictor *cp) { return cp ? cp->cb0_vocab : 0; }

int kz_cp_set_threads(kz_code_predictor *cp, int32_t n_threads) {
    return kz::call_handle(cp, [&] { set_threads(*cp, n_threads); });
}

int kz_cp_predict_frame(kz_code_predictor *cp, const float *talker_hidden, int32_t cb0, const kz_cp_sampling *sampling,
                        int32_t *codes_out, float *embedding_sum_out, float *logits_out) {
    return kz::call_handle(
        cp, [&] { predict(*cp, 1, talker_hidden, &cb0, sampling, codes_out, embedding_sum_out, logits_out); });
}

int kz_cp_predict_frames(kz_code_predictor *cp, int32_t n_frames, const float *talker_hidden, const int32_t *cb0,
                         const kz_cp_sampling *sampling, int32_t *codes_out, float *embedding_sum_out,
                         float *logits_out) {
    return kz::call_handle(
        cp, [&] { predict(*cp, n_frames, talker_hidden, cb0, sampling, codes_out, embedding_sum_out, logits_out); });
}

int kz_cp_embed_codes(kz_code_predictor *cp, const int32_t *codes16, float *out) {
    return kz::call_handle(cp, [&] {
        if (!codes16 || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "codes and out must not be NULL");
        if (codes16[0] < 0 || codes16[0] >= cp->cb0_vocab) throw Error(KZ_ERR_INVALID_ARGUMENT, "CB0 out of range");
        const int E = cp->n_embd_in;
        cp->row_buf.resize(E);
        cp->out_embd.row(codes16[0], out);
        for (int g = 0; g < cp->n_cb; g++) {
            int32_t c = codes16[g + 1];
            if (c < 0 || c >= cp->vocab)
                throw Error(KZ_ERR_INVALID_ARGUMENT, "CB" + std::to_string(g + 1) + " out of range");
            cp->embd.row((int64_t)g * cp->vocab + c, cp->row_buf.data());
            for (int i = 0; i < E; i++) out[i] += cp->row_buf[i];
        }
    });
}

const char *kz_cp_kernel_name(const kz_code_predictor *cp) {
    if (!cp) return "null handle";
    return cp->kernel_name.c_str();
}

const char *kz_cp_best_kernel(void) { return kz::q8::isa_name(kz::q8::best_isa()); }

kz_cp_products kz_cp_frame_products(const kz_code_predictor *cp) { return cp ? cp->frame_products : kz_cp_products{}; }

int64_t kz_cp_kernel_runs(const char *kernel) {
    using kz::q8::Isa;
    for (Isa isa : {Isa::avx2, Isa::avx512_vnni, Isa::neon, Isa::neon_dotprod, Isa::neon_i8mm})
        if (kernel && std::strcmp(kernel, kz::q8::isa_name(isa)) == 0) return kz::q8::runs(isa);
    return -1;
}

const char *kz_cp_last_error(const kz_code_predictor *cp) { return cp ? cp->last_error.c_str() : "null handle"; }
