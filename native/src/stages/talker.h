// The talker: a llama.cpp qwen3tts model fed embedding vectors through llama.h (the libllama
// that llama-cpp-python ships), as kazetts/stages/talker.py drives it: IMROPE batches with
// 4 x n_tokens positions, one output row (the last position) per call, its hidden state read
// by the eval callback (kazetts/talker.h), plain CPU buffers on AMX CPUs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kazetts/talker.h"

struct llama_model;
struct llama_context;
struct llama_vocab;

namespace kz {

class Talker {
  public:
    // throws kz::Error (FORMAT when llama.cpp cannot load the file)
    Talker(const std::string &path, int threads, int n_ctx, int n_batch, bool verbose);
    ~Talker();
    Talker(const Talker &) = delete;
    Talker &operator=(const Talker &) = delete;

    // Token ids of text with the GGUF's tokenizer; special tokens are parsed, none added.
    std::vector<int32_t> tokenize(const std::string &text) const;

    // Forgets the previous utterance (clears the KV cache) and makes room for one of up to
    // `positions` (prompt + frames; 0: n_ctx): the KV cache holds what the longest utterance so
    // far asked for, not n_ctx from the start.
    void reset(int positions = 0);
    // Feeds n embeddings [n][hidden] after what came before; then hidden() and logits() are
    // the last position's.
    void step(const float *embeddings, int n);
    const float *hidden() const;
    const float *logits() const;  // the whole vocabulary: text ids first, then the codec ids

    int n_ctx() const { return n_ctx_; }
    int position() const { return position_; }
    int hidden_size() const { return hidden_size_; }

  private:
    void decode(const float *embeddings, int n, bool output_last);
    void reserve(int positions);  // a context of at least `positions` (made anew when smaller)

    llama_model *model_ = nullptr;
    llama_context *ctx_ = nullptr;
    const llama_vocab *vocab_ = nullptr;
    std::vector<float> hidden_row_;  // the last call's hidden state, written by the eval callback
    kz_talker_hidden hidden_{};
    std::string path_;
    int n_ctx_ = 0, n_batch_ = 0, threads_ = 0, capacity_ = 0, hidden_size_ = 0, position_ = 0;
};

}  // namespace kz
