// Talker (codebook 0) sampling, the one definition both engines run (kz_talker_choose):
// HF's repetition penalty, min_new_tokens, suppressed control ids, then the warpers and the
// draw that the code predictor uses too (cp_sampling.h). Pinned to its numpy statement
// (kazetts/validation/oracles/sampling.py) by tests/test_native_engine.py.
#pragma once

#include <cstdint>
#include <vector>

#include "stages/cp_sampling.h"

namespace kz {

struct SamplingConfig {
    bool greedy = false;
    float temperature = 0.9f;
    int top_k = 50;
    float top_p = 1.0f;
    float repetition_penalty = 1.05f;
    int min_new_tokens = 2;  // end-of-speech banned while fewer ids were generated
};

// What a step with NaN logits says (a damaged model, or a stage that failed): the same words as
// kazetts/stages/sampling.py's NAN_LOGITS (the Python engine's KazettsError).
inline constexpr const char *NAN_LOGITS = "the talker's logits hold NaN: the model's weights are damaged";

// One utterance's CB0 sampler: keeps the ids generated so far (HF's input_ids of talker.generate).
class TalkerSampler {
  public:
    static const int SUPPRESSED_SPECIALS = 1024;  // the last ids of the codec vocabulary, except eos

    TalkerSampler(const SamplingConfig &config, int vocab, int eos) : config_(config), vocab_(vocab), eos_(eos) {}

    void reset() { history_.clear(); }
    void set_history(const int32_t *ids, int n) { history_.assign(ids, ids + n); }

    // Raw codec logits [vocab] -> the next id (appended to the history). rng_state is only read
    // when sampling: one uniform per call. Throws kz::Error (KZ_ERR_COMPUTE) on NaN logits.
    int choose(const float *logits, uint64_t *rng_state);

  private:
    SamplingConfig config_;
    int vocab_, eos_;
    std::vector<int32_t> history_;
    std::vector<float> scores_;
    cp::Scratch scratch_;
};

}  // namespace kz
