// Where the requests said at once on one model (kz_tts_params.max_batch) meet. Each request runs
// its own frame loop on its own thread; for the two stages whose cost is reading their weights
// (the talker, the code predictor) it hands in its next step here and waits. When every request
// in its frame loop has handed one in (those waiting for text, the codec or their callback are
// away and not waited for), the batcher's own thread runs them all: the talker steps as one call
// (a row per request, each its own sequence; a newcomer's prefill is decoded on its own there,
// as Talker::step_slots keeps a prompt's bits), the code predictor frames as one
// kz_cp_predict_frames (one pass over the weights for all). Each request's results are those of
// its step alone, bit for bit, so batching changes no code and no sample. One thread computes
// every batch, and the requests' codec pushes too (solo): ggml's OpenMP team stays that
// thread's. With a team per request thread, the idle teams' spinning took the cores from the
// working one: a request alone from another thread than the loader's ran ~1.6x slower (x86).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kazetts/code_predictor.h"

namespace kz {

class Talker;

class Batcher {
  public:
    Batcher(Talker &talker, kz_code_predictor *cp);
    ~Batcher();
    Batcher(const Batcher &) = delete;
    Batcher &operator=(const Batcher &) = delete;

    // A request's presence: while it is in its frame loop (enter .. leave) and not away, the
    // others wait for its steps. Away: while it waits for something else than the stages (text,
    // the codec, its callback); nested aways count once.
    class Member {
      public:
        explicit Member(Batcher &b) : b_(b) {}
        ~Member() { leave(); }
        Member(const Member &) = delete;
        Member &operator=(const Member &) = delete;
        void enter() { set(true, away_); }
        void leave() { set(false, away_); }

        class Away {
          public:
            explicit Away(Member &m) : m_(m) { m_.set(m_.in_, m_.away_ + 1); }
            ~Away() { m_.set(m_.in_, m_.away_ - 1); }
            Away(const Away &) = delete;
            Away &operator=(const Away &) = delete;

          private:
            Member &m_;
        };

      private:
        void set(bool in, int away) {
            const bool was = in_ && away_ == 0, is = in && away == 0;
            in_ = in, away_ = away;
            if (was != is) b_.count(is ? +1 : -1);
        }
        Batcher &b_;
        bool in_ = false;
        int away_ = 0;
    };

    // Feeds n embeddings to the talker sequence `slot` (after making it start anew with room for
    // `reset_positions` positions when that is >= 0: a piece's prefill); then the talker's
    // hidden(slot) and logits(slot) are its last row's. Returns the number of requests that
    // stepped together. Throws kz::Error.
    int talker_step(int slot, const float *embeddings, int n, int reset_positions = -1);

    // A code predictor frame of the talker sequence `slot` (from its hidden state), as
    // kz_cp_predict_frame: codes[15], embedding_sum[n_embd_in]. Returns the number of frames
    // made together. Throws kz::Error.
    int cp_frame(int slot, int32_t cb0, const kz_cp_sampling &sampling, int32_t *codes, float *embedding_sum);

    // kz_cp_embed_codes, between the batches (the code predictor is not thread-safe).
    void embed_codes(const int32_t *codes16, float *out);

    // Runs `fn` (e.g. a codec push) on the batcher's thread, before the next batch; waits for it.
    // Whatever fn throws is rethrown here.
    void solo(const std::function<void()> &fn);

  private:
    enum class Kind { talker, cp, solo };
    struct Job {
        Kind kind = Kind::solo;
        int slot = -1;
        const float *embeddings = nullptr;  // talker: n rows; cp: the talker's hidden state
        int n = 0, reset_positions = -1;
        int32_t cb0 = 0;
        kz_cp_sampling sampling{};
        int32_t *codes = nullptr;
        float *embedding_sum = nullptr;
        const std::function<void()> *fn = nullptr;  // solo
        bool done = false;
        int batch = 0;   // jobs run together
        int status = 0;  // KZ_OK, or the error of its batch
        std::string error;
    };

    void count(int delta);  // present_ += delta
    int submit(Job &job);
    void work();  // the batcher's thread
    // Runs the jobs of a batch (all of one kind).
    void run(const std::vector<Job *> &batch);
    void run_talker(const std::vector<Job *> &batch);
    void run_cp(const std::vector<Job *> &batch);

    Talker &talker_;
    kz_code_predictor *cp_;
    std::mutex mutex_, cp_mutex_;  // (cp_mutex_: run_cp and embed_codes)
    std::condition_variable changed_;
    std::vector<Job *> pending_;
    int present_ = 0;  // requests in their frame loop and not away
    bool stop_ = false;
    std::thread worker_;
    // the code predictor's batch arrays
    std::vector<float> hidden_, sums_;
    std::vector<int32_t> cb0_, codes_;
    std::vector<kz_cp_sampling> samplings_;
};

}  // namespace kz
