// The talker through llama.h (see talker.h).
#include "stages/talker.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/common_internal.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "kazetts/talker.h"
#include "kazetts/talker_backend.h"
#include "llama.h"

namespace kz {

namespace {

const int POSITION_STREAMS = 4;  // IMROPE: pos[j * n_tokens + i] = p_i for j = 0..3
// The KV cache grows in steps of llama.cpp's padding of attended cells (256): a context of whole
// steps computes what an n_ctx one does, bit for bit (as kazetts/stages/talker.py).
const int KV_STEP = 256;

void quiet_log(ggml_log_level, const char *, void *) {}

// The tensor llama.cpp's graphs name the hidden state after the final norm (res->t_embd, what
// llama_get_embeddings copies out): [n_embd, output rows].
const char HIDDEN_TENSOR[] = "result_norm";

// llama.cpp's eval callback: asked about every node, it wants only the hidden state; given it
// once computed (before later nodes may reuse its memory), it copies the last row.
bool copy_hidden(ggml_tensor *t, bool ask, void *user_data) {
    if (ask) return std::strcmp(t->name, HIDDEN_TENSOR) == 0;
    auto *hidden = static_cast<kz_talker_hidden *>(user_data);
    const int64_t rows = ggml_nrows(t);
    if (t->type == GGML_TYPE_F32 && t->ne[0] == hidden->n_embd && rows > 0) {
        ggml_backend_tensor_get(t, hidden->data, size_t(rows - 1) * t->nb[1], size_t(hidden->n_embd) * sizeof(float));
        hidden->written = 1;
    }
    return true;
}

}  // namespace

Talker::Talker(const std::string &path, int threads, int n_ctx, int n_batch, bool verbose)
    : path_(path), n_ctx_(n_ctx), n_batch_(n_batch), threads_(threads) {
    if (!verbose) llama_log_set(quiet_log, nullptr);
    static std::once_flag backend;
    std::call_once(backend, [] { llama_backend_init(); });
    llama_model_params mp = llama_model_default_params();
    kz_talker_model_params(&mp);
    kz_talker_backend_setup();  // the talker's Q8_0 products (see kazetts/talker_backend.h)
    model_ = llama_model_load_from_file(path.c_str(), mp);
    if (!model_) throw Error(KZ_ERR_FORMAT, "llama.cpp could not load " + path);
    vocab_ = llama_model_get_vocab(model_);
    hidden_size_ = llama_model_n_embd(model_);
    hidden_row_.resize(size_t(hidden_size_));
    hidden_ = {hidden_row_.data(), hidden_size_, 0};
    try {
        reserve(1);  // a context that fails, fails here
    } catch (...) {
        llama_model_free(model_);
        throw;
    }
}

Talker::~Talker() {
    if (ctx_) llama_free(ctx_);
    llama_model_free(model_);
}

void Talker::reserve(int positions) {
    const int capacity = std::min(n_ctx_, (positions + KV_STEP - 1) / KV_STEP * KV_STEP);
    if (capacity <= capacity_) return;
    if (ctx_) llama_free(ctx_);
    ctx_ = nullptr;
    capacity_ = 0;
    llama_context_params cp = llama_context_default_params();
    kz_talker_context_params(&cp, capacity, n_batch_, threads_, &hidden_);
    ctx_ = llama_init_from_model(model_, cp);
    if (!ctx_)
        throw Error(KZ_ERR_FORMAT,
                    "llama.cpp could not create a context of " + std::to_string(capacity) + " positions for " + path_);
    capacity_ = capacity;
}

std::vector<int32_t> Talker::tokenize(const std::string &text) const {
    std::vector<llama_token> tokens(text.size() + 16);
    int n =
        llama_tokenize(vocab_, text.data(), int32_t(text.size()), tokens.data(), int32_t(tokens.size()), false, true);
    if (n < 0) {
        tokens.resize(size_t(-n));
        n = llama_tokenize(vocab_, text.data(), int32_t(text.size()), tokens.data(), int32_t(tokens.size()), false,
                           true);
        if (n < 0) throw Error(KZ_ERR_INVALID_ARGUMENT, "text too long to tokenize");
    }
    return std::vector<int32_t>(tokens.begin(), tokens.begin() + n);
}

void Talker::reset(int positions) {
    if (positions < 0 || positions > n_ctx_) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "an utterance of " + std::to_string(positions) +
                                                 " positions does not fit the talker's context of " +
                                                 std::to_string(n_ctx_));
    }
    reserve(positions ? positions : n_ctx_);
    llama_memory_clear(llama_get_memory(ctx_), true);
    position_ = 0;
}

void Talker::step(const float *embeddings, int n) {
    if (position_ + n > capacity_) {
        throw Error(KZ_ERR_STATE, "the utterance needs more than the " + std::to_string(capacity_) +
                                      " positions reset() made room for (the talker's context holds at most " +
                                      std::to_string(n_ctx_) + ")");
    }
    hidden_.written = 0;
    for (int start = 0; start < n; start += n_batch_) {
        decode(embeddings + size_t(start) * size_t(hidden_size_), std::min(n_batch_, n - start), start + n_batch_ >= n);
    }
    if (!hidden_.written)
        throw Error(KZ_ERR_COMPUTE, "llama.cpp's graph for " + path_ + " has no " + HIDDEN_TENSOR + " row");
}

const float *Talker::hidden() const { return hidden_row_.data(); }
const float *Talker::logits() const { return llama_get_logits_ith(ctx_, -1); }

void Talker::decode(const float *embeddings, int n, bool output_last) {
    std::vector<llama_pos> pos(size_t(n) * POSITION_STREAMS);
    for (int j = 0; j < POSITION_STREAMS; ++j) {
        for (int i = 0; i < n; ++i) pos[size_t(j) * size_t(n) + size_t(i)] = position_ + i;
    }
    std::vector<int32_t> n_seq(size_t(n), 1);
    llama_seq_id seq0 = 0;
    std::vector<llama_seq_id *> seq_ids(size_t(n), &seq0);
    std::vector<int8_t> outputs(size_t(n), 0);
    outputs.back() = output_last ? 1 : 0;
    llama_batch batch{};
    batch.n_tokens = n;
    batch.embd = const_cast<float *>(embeddings);
    batch.pos = pos.data();
    batch.n_seq_id = n_seq.data();
    batch.seq_id = seq_ids.data();
    batch.logits = outputs.data();
    const int status = llama_decode(ctx_, batch);
    if (status != 0) throw Error(KZ_ERR_COMPUTE, "llama_decode failed with status " + std::to_string(status));
    position_ += n;
}

}  // namespace kz

KZ_API void kz_talker_context_params(void *llama_params, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                     kz_talker_hidden *hidden) {
    auto &cp = *static_cast<llama_context_params *>(llama_params);
    cp.n_ctx = uint32_t(n_ctx);
    cp.n_batch = cp.n_ubatch = uint32_t(n_batch);
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.embeddings = false;  // with embeddings on, every row of a batch is an output
    cp.n_outputs_max = 1;   // sizes the compute and output buffers for one row of logits
    cp.cb_eval = kz::copy_hidden;
    cp.cb_eval_user_data = hidden;
    cp.no_perf = true;
}

KZ_API void kz_talker_model_params(void *llama_params) {
    auto &mp = *static_cast<llama_model_params *>(llama_params);
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = !ggml_cpu_has_amx_int8();  // AMX: plain CPU buffers (see the header)
}
