// The talker: a llama.cpp qwen3tts model fed embedding vectors through llama.h (the libllama
// that llama-cpp-python ships), the one driver of both engines (the native engine holds this
// class, the Python engine's kazetts/stages/talker.py its C API, kz_talker in kazetts/talker.h):
// IMROPE batches with 4 x n_tokens positions, one output row (the last position) per utterance
// and call, its hidden state read by llama.cpp's eval callback, plain CPU buffers on AMX CPUs.
//
// Several utterances can advance in lockstep, each in a slot of its own: a llama.cpp sequence
// with its own KV stream (kv_unified off). Each slot's outputs are bit for bit those of the same
// rows fed alone, in a talker of one slot (native/tests/talker_slots.cpp checks it):
//  - a slot's several rows (a prompt) are decoded on their own, in the chunks of n_batch rows a
//    talker of one slot cuts them into: how many rows share a decode picks ggml's kernels
//    (flash attention of 64+ query rows is tiled). In its own stream an utterance has the cells
//    it has alone, 0..n-1, whatever the other slots hold (a unified KV cache interleaves them,
//    and a freed hole puts a later position before an earlier one: other sums);
//  - single rows of several slots (the decoding steps) share a decode, a ubatch over the
//    consecutive sequence ids of those slots (llama.cpp's ubatch spans consecutive streams
//    only), when the matrix products of several columns give each column the bits of the
//    one-column product: checked once at load. Q8_0 on x86-64 AVX-512: yes (KZQ8's kernels or
//    ggml's); F32 and F16: no (ggml's products of 2+ columns are llamafile's tinyBLAS, of one
//    its vec_dot, which sums in another order), so every step is decoded on its own;
//  - with flash attention on 2+ threads, a step at position 256 or later is decoded on its own:
//    alone, one query row over 512+ KV cells takes ggml's split-KV path (the cells cut among the
//    threads, the partial sums merged), in a shared decode the one-chunk path, which rounds
//    differently. Without flash attention (other bits) every step can share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kazetts/talker.h"

struct ggml_tensor;
struct llama_model;
struct llama_context;
struct llama_vocab;

namespace kz {

class Talker {
  public:
    // `slots` utterances at most at a time; flash_attn off: llama.cpp's attention without it
    // (other bits than the talker's default, but every step of every slot can share a decode).
    // Throws kz::Error (FORMAT when llama.cpp cannot load the file, NO_MEMORY when it cannot
    // make the context)
    Talker(const std::string &path, int threads, int n_ctx, int n_batch, bool verbose, int slots = 1,
           bool flash_attn = true);
    ~Talker();
    Talker(const Talker &) = delete;
    Talker &operator=(const Talker &) = delete;

    // Token ids of text with the GGUF's tokenizer; special tokens are parsed, none added.
    std::vector<int32_t> tokenize(const std::string &text) const;

    // One utterance at a time: slot 0.
    void reset(int positions = 0) { reset_slot(0, positions); }
    void step(const float *embeddings, int n) { step_slots({{0, embeddings, n}}); }
    const float *hidden() const { return hidden(0); }
    const float *logits() const { return logits(0); }
    int position() const { return position(0); }

    // Forgets the slot's utterance (its KV cells) and makes room for one of up to `positions`
    // (prompt + frames; 0: n_ctx): the KV cache holds, for each slot, what the longest utterance
    // so far asked for, not n_ctx from the start (a larger one moves the other slots' cells to a
    // new context).
    void reset_slot(int slot, int positions = 0);

    struct SlotStep {
        int slot;
        const float *embeddings;  // [n][hidden]
        int n;
    };
    // Feeds each listed slot (at most once) its n embeddings after what came before; then
    // hidden(slot) and logits(slot) are its last position's. The other slots keep theirs.
    void step_slots(const std::vector<SlotStep> &steps);
    const float *hidden(int slot) const;
    const float *logits(int slot) const;  // the whole vocabulary: text ids first, then the codec ids
    int position(int slot) const;

    int slots() const { return slots_; }
    int n_ctx() const { return n_ctx_; }
    int capacity() const { return capacity_; }  // positions each slot's KV cells hold now (see reset_slot)
    int hidden_size() const { return hidden_size_; }
    int n_vocab() const { return n_vocab_; }
    // Whether single rows of several slots share decodes (see the top of this file), and the
    // llama_decode calls so far (tests)
    bool shares_steps() const { return shares_steps_; }
    int64_t decodes() const { return decodes_; }

  private:
    // Rows of a slot in a decode; its last row is an output when `output`.
    struct Segment {
        int slot;
        const float *embeddings;
        int n;
        bool output;
    };
    void decode(const std::vector<Segment> &segments);
    // llama.cpp's eval callback (user data: the talker): each output row's hidden state to hidden_to_
    static bool copy_hidden_rows(ggml_tensor *t, bool ask, void *user_data);
    void step_alone(const SlotStep &s);  // in chunks of n_batch rows
    void check_slot(int slot) const;
    void forget(int slot);  // drops the slot's KV cells
    bool shares_bits();
    void reserve(int positions);  // room for `positions` in every slot (a new context when smaller)

    llama_model *model_ = nullptr;
    llama_context *ctx_ = nullptr;
    const llama_vocab *vocab_ = nullptr;
    std::vector<float> hidden_, logits_;  // [slot][hidden_size], [slot][n_vocab]
    std::vector<float *> hidden_to_;      // where the eval callback copies each output row of a decode
    size_t hidden_copied_ = 0;            // rows it copied
    std::vector<float> rows_;             // a decode's embeddings
    std::vector<int> positions_;          // per slot
    std::string path_;
    int n_ctx_ = 0, n_batch_ = 0, threads_ = 0, slots_ = 0, capacity_ = 0, hidden_size_ = 0, n_vocab_ = 0;
    bool flash_attn_ = true, shares_steps_ = false;
    int64_t decodes_ = 0;
};

// The kz::Talker of a handle of the C API (kazetts/talker.h, stages/talker_api.cpp), for the
// library's own callers of that API (e.g. one that drives a handle's slots in C++).
Talker &talker_of(kz_talker *handle);

}  // namespace kz
