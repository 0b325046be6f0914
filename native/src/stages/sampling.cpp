// Talker CB0 sampling (see sampling.h).
#include "stages/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common_internal.h"

namespace kz {

int TalkerSampler::choose(const float *logits, uint64_t *rng_state) {
    const float NEG_INF = -std::numeric_limits<float>::infinity();
    for (int id = 0; id < vocab_; ++id) {
        if (std::isnan(logits[id])) throw Error(KZ_ERR_COMPUTE, NAN_LOGITS);
    }
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
