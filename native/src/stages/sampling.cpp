// Talker CB0 sampling (see sampling.h) and the exported sampling rules.
#include "stages/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kazetts/tts.h"

namespace kz {

SamplingConfig talker_sampling(const kz_tts_request &r) {
    return {r.greedy != 0, r.temperature, r.top_k, r.top_p, r.repetition_penalty, r.min_frames};
}

int TalkerSampler::choose(const float *logits, uint64_t *rng_state) {
    const float NEG_INF = -std::numeric_limits<float>::infinity();
    scores_.assign(logits, logits + vocab_);
    if (config_.repetition_penalty != 1.0f) {  // each distinct id once, float32 as torch does
        std::vector<int32_t> seen(history_);
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        const float p = config_.repetition_penalty;
        for (int32_t id : seen) {
            float &s = scores_[size_t(id)];
            s = s < 0 ? s * p : s / p;
        }
    }
    if (int(history_.size()) < config_.min_new_tokens) scores_[size_t(eos_)] = NEG_INF;
    for (int id = std::max(0, vocab_ - SUPPRESSED_SPECIALS); id < vocab_; ++id) {
        if (id != eos_) scores_[size_t(id)] = NEG_INF;
    }
    int token;
    if (config_.greedy) {
        token = cp::argmax(scores_.data(), vocab_);
    } else {
        double u = cp::splitmix_uniform(rng_state);
        token = cp::sample(scores_.data(), vocab_, config_.temperature, config_.top_k, config_.top_p, u, scratch_);
    }
    history_.push_back(token);
    return token;
}

}  // namespace kz

extern "C" {

KZ_API double kz_rng_uniform(uint64_t *state) { return state ? kz::cp::splitmix_uniform(state) : 0.0; }

KZ_API int32_t kz_talker_choose(const float *logits, int32_t vocab, int32_t eos, const int32_t *history,
                                int32_t n_history, const kz_tts_request *r, uint64_t *rng_state) {
    if (!logits || !r || r->struct_size != sizeof(kz_tts_request) || vocab < 1 || eos < 0 || eos >= vocab ||
        n_history < 0 || (n_history && !history) || (!r->greedy && !rng_state) || r->min_frames < 0) {
        return -1;
    }
    for (int32_t i = 0; i < n_history; ++i) {
        if (history[i] < 0 || history[i] >= vocab) return -1;
    }
    kz::TalkerSampler sampler(kz::talker_sampling(*r), vocab, eos);
    sampler.set_history(history, n_history);
    try {
        return sampler.choose(logits, rng_state);
    } catch (...) {
        return -1;
    }
}

}  // extern "C"
