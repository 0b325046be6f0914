// The talker through llama.h (see talker.h).
#include "stages/talker.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>

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
// ggml's CPU flash attention of one query row over this many attended cells or more takes its
// split-KV path (ggml_compute_forward_flash_attn_ext_f16; see talker.h)
const int SPLIT_KV_CELLS = 512;

void quiet_log(ggml_log_level, const char *, void *) {}

// The tensor llama.cpp's graphs name the hidden state after the final norm (res->t_embd, what
// llama_get_embeddings copies out): [n_embd, output rows].
const char HIDDEN_TENSOR[] = "result_norm";

bool is_hidden(const ggml_tensor *t) { return std::strcmp(t->name, HIDDEN_TENSOR) == 0; }

// The rows of a computed hidden state of n_embd floats a row (0: not one).
int64_t hidden_rows(const ggml_tensor *t, int64_t n_embd) {
    return t->type == GGML_TYPE_F32 && t->ne[0] == n_embd ? ggml_nrows(t) : 0;
}

// llama.cpp's eval callback of kz_talker_context_params: asked about every node, it wants only
// the hidden state; given it once computed (before later nodes may reuse its memory), it copies
// the last row.
bool copy_hidden(ggml_tensor *t, bool ask, void *user_data) {
    if (ask) return is_hidden(t);
    auto *hidden = static_cast<kz_talker_hidden_out *>(user_data);
    const int64_t rows = hidden_rows(t, hidden->n_embd);
    if (rows > 0) {
        ggml_backend_tensor_get(t, hidden->data, size_t(rows - 1) * t->nb[1], size_t(hidden->n_embd) * sizeof(float));
        hidden->written = 1;
    }
    return true;
}

int whole_kv_steps(int positions) { return (positions + KV_STEP - 1) / KV_STEP * KV_STEP; }

}  // namespace

bool Talker::copy_hidden_rows(ggml_tensor *t, bool ask, void *user_data) {
    if (ask) return is_hidden(t);
    auto *self = static_cast<Talker *>(user_data);
    const size_t rows = size_t(hidden_rows(t, self->hidden_size_));
    for (size_t r = 0; r < rows && self->hidden_copied_ < self->hidden_to_.size(); ++r, ++self->hidden_copied_) {
        ggml_backend_tensor_get(t, self->hidden_to_[self->hidden_copied_], r * t->nb[1],
                                size_t(self->hidden_size_) * sizeof(float));
    }
    return true;
}

Talker::Talker(const std::string &path, int threads, int n_ctx, int n_batch, bool verbose, int slots, bool flash_attn)
    : path_(path), n_ctx_(n_ctx), n_batch_(n_batch), threads_(threads), slots_(slots), flash_attn_(flash_attn) {
    if (slots < 1 || slots > KZ_TALKER_MAX_SLOTS)
        throw Error(KZ_ERR_INVALID_ARGUMENT, "a talker has 1 to " + std::to_string(KZ_TALKER_MAX_SLOTS) + " slots");
    if (threads < 1 || threads > GGML_MAX_N_THREADS || n_ctx < 1 || n_batch < 1)
        throw Error(KZ_ERR_INVALID_ARGUMENT, "a talker needs n_threads >= 1, n_ctx >= 1 and n_batch >= 1");
    if (!verbose) llama_log_set(quiet_log, nullptr);
    static std::once_flag backend;
    std::call_once(backend, [] { llama_backend_init(); });
    llama_model_params mp = llama_model_default_params();
    kz_talker_model_params(&mp);
    kz_talker_backend_setup();  // the talker's Q8_0 products (see kazetts/talker_backend.h)
    model_ = llama_model_load_from_file(path.c_str(), mp);
    if (!model_)
        throw Error(KZ_ERR_FORMAT, "llama.cpp could not load the talker " + path + " (truncated or corrupted?)");
    vocab_ = llama_model_get_vocab(model_);
    hidden_size_ = llama_model_n_embd(model_);
    n_vocab_ = llama_vocab_n_tokens(vocab_);
    hidden_.resize(size_t(slots) * size_t(hidden_size_));
    logits_.resize(size_t(slots) * size_t(n_vocab_));
    positions_.assign(size_t(slots), 0);
    try {
        reserve(1);  // a context that fails, fails here
        shares_steps_ = shares_bits();
    } catch (...) {
        if (ctx_) llama_free(ctx_);
        llama_model_free(model_);
        throw;
    }
}

Talker::~Talker() {
    if (ctx_) llama_free(ctx_);
    llama_model_free(model_);
}

void Talker::reserve(int positions) {
    const int capacity = std::min(n_ctx_, whole_kv_steps(positions));
    if (capacity <= capacity_) return;
    // the utterances under way move to the new context as llama.cpp's sequence states: the same
    // values in the same cells of their streams
    const std::vector<int> under_way = positions_;
    std::vector<std::vector<uint8_t>> kept(static_cast<size_t>(slots_));
    for (int s = 0; s < slots_; ++s) {
        if (under_way[size_t(s)] == 0) continue;
        kept[size_t(s)].resize(llama_state_seq_get_size(ctx_, s));
        llama_state_seq_get_data(ctx_, kept[size_t(s)].data(), kept[size_t(s)].size(), s);
    }
    if (ctx_) llama_free(ctx_);
    ctx_ = nullptr;
    capacity_ = 0;
    std::fill(positions_.begin(), positions_.end(), 0);  // until they are back
    llama_context_params cp = llama_context_default_params();
    kz_talker_context_params(&cp, capacity * slots_, n_batch_, threads_, nullptr);
    cp.n_seq_max = cp.n_outputs_max = uint32_t(slots_);  // an output row per slot in a decode
    cp.kv_unified = false;                               // and a KV stream per slot (see talker.h)
    if (!flash_attn_) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = copy_hidden_rows;
    cp.cb_eval_user_data = this;
    ctx_ = llama_init_from_model(model_, cp);
    if (!ctx_)
        throw Error(KZ_ERR_NO_MEMORY,  // its buffers (the arguments were checked)
                    "llama.cpp could not create a context of " + std::to_string(capacity) + " positions for " + path_);
    capacity_ = capacity;
    for (int s = 0; s < slots_; ++s) {
        const std::vector<uint8_t> &state = kept[size_t(s)];
        if (state.empty()) continue;
        if (llama_state_seq_set_data(ctx_, state.data(), state.size(), s) == 0)
            throw Error(KZ_ERR_COMPUTE, "llama.cpp could not move slot " + std::to_string(s) + " to a larger context");
        positions_[size_t(s)] = under_way[size_t(s)];
    }
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

void Talker::check_slot(int slot) const {
    if (slot < 0 || slot >= slots_)
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "no slot " + std::to_string(slot) + " in a talker of " + std::to_string(slots_));
}

void Talker::forget(int slot) {
    if (ctx_) llama_memory_seq_rm(llama_get_memory(ctx_), slot, -1, -1);
    positions_[size_t(slot)] = 0;
}

void Talker::reset_slot(int slot, int positions) {
    check_slot(slot);
    if (positions < 0 || positions > n_ctx_) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "an utterance of " + std::to_string(positions) +
                                                 " positions does not fit the talker's context of " +
                                                 std::to_string(n_ctx_));
    }
    forget(slot);
    reserve(positions ? positions : n_ctx_);
}

void Talker::step_slots(const std::vector<SlotStep> &steps) {
    std::vector<bool> listed(size_t(slots_), false);
    for (const SlotStep &s : steps) {
        check_slot(s.slot);
        if (listed[size_t(s.slot)] || s.n < 1)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "slot " + std::to_string(s.slot) + " listed twice or without rows");
        listed[size_t(s.slot)] = true;
        if (positions_[size_t(s.slot)] + s.n > capacity_) {
            throw Error(KZ_ERR_STATE, "the utterance needs more than the " + std::to_string(capacity_) +
                                          " positions reset() made room for (the talker's context holds at most " +
                                          std::to_string(n_ctx_) + ")");
        }
    }
    std::vector<const SlotStep *> shared;  // single rows that share decodes (see talker.h)
    for (const SlotStep &s : steps) {
        const bool split_kv =
            flash_attn_ && threads_ > 1 && whole_kv_steps(positions_[size_t(s.slot)] + 1) >= SPLIT_KV_CELLS;
        if (s.n == 1 && shares_steps_ && !split_kv)
            shared.push_back(&s);
        else
            step_alone(s);
    }
    std::sort(shared.begin(), shared.end(), [](const SlotStep *a, const SlotStep *b) { return a->slot < b->slot; });
    std::vector<Segment> run;  // consecutive slots, at most n_batch
    for (size_t i = 0; i < shared.size(); ++i) {
        run.push_back({shared[i]->slot, shared[i]->embeddings, 1, true});
        if (i + 1 == shared.size() || shared[i + 1]->slot != shared[i]->slot + 1 || int(run.size()) == n_batch_) {
            decode(run);
            run.clear();
        }
    }
}

void Talker::step_alone(const SlotStep &s) {
    for (int start = 0; start < s.n; start += n_batch_) {
        decode({{s.slot, s.embeddings + size_t(start) * size_t(hidden_size_), std::min(n_batch_, s.n - start),
                 start + n_batch_ >= s.n}});
    }
}

const float *Talker::hidden(int slot) const {
    check_slot(slot);
    return &hidden_[size_t(slot) * size_t(hidden_size_)];
}

const float *Talker::logits(int slot) const {
    check_slot(slot);
    return &logits_[size_t(slot) * size_t(n_vocab_)];
}

int Talker::position(int slot) const {
    check_slot(slot);
    return positions_[size_t(slot)];
}

void Talker::decode(const std::vector<Segment> &segments) {
    int n = 0;
    for (const Segment &g : segments) n += g.n;
    const size_t rows = size_t(n), width = size_t(hidden_size_);
    rows_.resize(rows * width);
    std::vector<llama_pos> pos(rows * POSITION_STREAMS);
    std::vector<int32_t> n_seq(rows, 1);
    std::vector<llama_seq_id> ids(segments.size());
    std::vector<llama_seq_id *> seq_ids(rows);
    std::vector<int8_t> outputs(rows, 0);
    std::vector<int32_t> last(segments.size());  // each segment's last row in the batch
    hidden_to_.clear();
    size_t i = 0;
    for (size_t k = 0; k < segments.size(); ++k) {
        const Segment &g = segments[k];
        std::memcpy(&rows_[i * width], g.embeddings, size_t(g.n) * width * sizeof(float));
        ids[k] = g.slot;
        for (int r = 0; r < g.n; ++r, ++i) {
            for (size_t j = 0; j < POSITION_STREAMS; ++j) pos[j * rows + i] = positions_[size_t(g.slot)] + r;
            seq_ids[i] = &ids[k];
        }
        last[k] = int32_t(i - 1);
        outputs[i - 1] = g.output ? 1 : 0;
        if (g.output) hidden_to_.push_back(&hidden_[size_t(g.slot) * width]);
    }
    llama_batch batch{};
    batch.n_tokens = n;
    batch.embd = rows_.data();
    batch.pos = pos.data();
    batch.n_seq_id = n_seq.data();
    batch.seq_id = seq_ids.data();
    batch.logits = outputs.data();
    hidden_copied_ = 0;
    const int status = llama_decode(ctx_, batch);
    ++decodes_;
    if (status != 0) {
        std::string at = " at position " + std::to_string(positions_[size_t(segments[0].slot)]);
        if (segments.size() > 1) {  // where each slot was
            at = " at positions";
            for (const Segment &g : segments)
                at += (&g == &segments[0] ? " " : ", ") + std::to_string(positions_[size_t(g.slot)]) + " (slot " +
                      std::to_string(g.slot) + ")";
        }
        throw Error(KZ_ERR_COMPUTE, "llama_decode failed with status " + std::to_string(status) + at + " of " + path_);
    }
    if (hidden_copied_ != hidden_to_.size())
        throw Error(KZ_ERR_COMPUTE, "llama.cpp's graph for " + path_ + " has no " + HIDDEN_TENSOR + " row");
    for (size_t k = 0; k < segments.size(); ++k) {
        const Segment &g = segments[k];
        positions_[size_t(g.slot)] += g.n;
        if (!g.output) continue;
        const float *out = llama_get_logits_ith(ctx_, last[k]);
        if (!out) throw Error(KZ_ERR_COMPUTE, "llama.cpp gave no logits for slot " + std::to_string(g.slot));
        std::memcpy(&logits_[size_t(g.slot) * size_t(n_vocab_)], out, size_t(n_vocab_) * sizeof(float));
    }
}

// Whether single rows of several slots decoded together get the bits each gets alone (the
// matrix products of several columns against those of one, see talker.h): a random row per
// slot at position 0, each alone, then all together.
bool Talker::shares_bits() {
    const int k = std::min(slots_, n_batch_);
    if (k < 2) return false;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t width = size_t(hidden_size_), row = width + size_t(n_vocab_);
    std::vector<float> rows(size_t(k) * width), alone(size_t(k) * row);
    for (float &x : rows) x = normal(rng);
    std::vector<Segment> together;
    for (int s = 0; s < k; ++s) {
        together.push_back({s, &rows[size_t(s) * width], 1, true});
        decode({together.back()});
        std::copy(hidden(s), hidden(s) + width, &alone[size_t(s) * row]);
        std::copy(logits(s), logits(s) + n_vocab_, &alone[size_t(s) * row + width]);
        forget(s);
    }
    decode(together);
    bool same = true;
    for (int s = 0; s < k; ++s) {
        same = same && std::memcmp(hidden(s), &alone[size_t(s) * row], width * sizeof(float)) == 0 &&
               std::memcmp(logits(s), &alone[size_t(s) * row + width], size_t(n_vocab_) * sizeof(float)) == 0;
        forget(s);
    }
    return same;
}

}  // namespace kz

KZ_API void kz_talker_context_params(void *llama_params, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                     kz_talker_hidden_out *hidden) {
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
