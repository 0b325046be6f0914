// The talker through llama.h (see talker.h).
#include "talker.h"

#include <algorithm>
#include <mutex>

#include "common_internal.h"
#include "kazetts/talker_backend.h"
#include "ggml-cpu.h"
#include "llama.h"

namespace kz {

namespace {

const int POSITION_STREAMS = 4;  // IMROPE: pos[j * n_tokens + i] = p_i for j = 0..3
// The KV cache grows in steps of llama.cpp's padding of attended cells (256): a context of whole
// steps computes what an n_ctx one does, bit for bit (as kazetts/stages/talker.py).
const int KV_STEP = 256;

void quiet_log(ggml_log_level, const char *, void *) {}

}  // namespace

Talker::Talker(const std::string &path, int threads, int n_ctx, int n_batch, bool verbose)
    : path_(path), n_ctx_(n_ctx), n_batch_(n_batch), threads_(threads) {
    if (!verbose) llama_log_set(quiet_log, nullptr);
    static std::once_flag backend;
    std::call_once(backend, [] { llama_backend_init(); });
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // llama.cpp's extra CPU buffer types (repacked weights): on AMX CPUs a GCC 12 build of ggml
    // dies of SIGILL in ggml_backend_amx_mul_mat on any batch of 2+ rows (its tile config is
    // miscompiled; see extra_buffers_are_safe in kazetts/stages/talker.py): plain CPU buffers there.
    mp.use_extra_bufts = !ggml_cpu_has_amx_int8();
    kz_talker_backend_setup();  // the decoding steps' Q8_0 products (see kazetts/talker_backend.h)
    model_ = llama_model_load_from_file(path.c_str(), mp);
    if (!model_) throw Error(KZ_ERR_FORMAT, "llama.cpp could not load " + path);
    vocab_ = llama_model_get_vocab(model_);
    hidden_size_ = llama_model_n_embd(model_);
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
    cp.n_ctx = uint32_t(capacity);
    cp.n_batch = cp.n_ubatch = uint32_t(n_batch_);
    cp.n_threads = cp.n_threads_batch = threads_;
    cp.embeddings = true;
    cp.pooling_type = LLAMA_POOLING_TYPE_NONE;
    cp.no_perf = true;
    ctx_ = llama_init_from_model(model_, cp);
    if (!ctx_) throw Error(KZ_ERR_FORMAT, "llama.cpp could not create a context of " + std::to_string(capacity) + " positions for " + path_);
    capacity_ = capacity;
}

std::vector<int32_t> Talker::tokenize(const std::string &text) const {
    std::vector<llama_token> tokens(text.size() + 16);
    int n = llama_tokenize(vocab_, text.data(), int32_t(text.size()), tokens.data(), int32_t(tokens.size()), false, true);
    if (n < 0) {
        tokens.resize(size_t(-n));
        n = llama_tokenize(vocab_, text.data(), int32_t(text.size()), tokens.data(), int32_t(tokens.size()), false, true);
        if (n < 0) throw Error(KZ_ERR_INVALID_ARGUMENT, "text too long to tokenize");
    }
    return std::vector<int32_t>(tokens.begin(), tokens.begin() + n);
}

void Talker::reset(int positions) {
    if (positions < 0 || positions > n_ctx_) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "an utterance of " + std::to_string(positions) + " positions does not fit the talker's context of " +
                                                 std::to_string(n_ctx_));
    }
    reserve(positions ? positions : n_ctx_);
    llama_memory_clear(llama_get_memory(ctx_), true);
    position_ = 0;
}

void Talker::step(const float *embeddings, int n) {
    if (position_ + n > capacity_) {
        throw Error(KZ_ERR_STATE, "the utterance needs more than the " + std::to_string(capacity_) + " positions reset() made room for (the talker's context holds at most " +
                                      std::to_string(n_ctx_) + ")");
    }
    for (int start = 0; start < n; start += n_batch_) {
        decode(embeddings + size_t(start) * size_t(hidden_size_), std::min(n_batch_, n - start), start + n_batch_ >= n);
    }
}

const float *Talker::hidden() const { return llama_get_embeddings_ith(ctx_, -1); }
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
