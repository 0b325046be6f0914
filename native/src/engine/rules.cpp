// The rules of kazetts/rules.h: the engine's own rules (stages/sampling, engine/text_split),
// exported on their own behind a C ABI that never throws.
#include "engine/rules.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "engine/model_files.h"
#include "engine/text_split.h"
#include "kazetts/rules.h"
#include "stages/cp_sampling.h"

namespace kz {

SamplingConfig talker_sampling(const kz_tts_request &r) {
    return {r.greedy != 0, r.temperature, r.top_k, r.top_p, r.repetition_penalty, r.min_frames};
}

}  // namespace kz

extern "C" {

KZ_API int32_t kz_text_split(const char *text, int32_t max_chars, int32_t *ends, int32_t capacity) {
    if (!text || max_chars < 1 || capacity < 0 || (capacity && !ends)) return -1;
    try {
        std::vector<std::u32string> pieces = kz::split_text(kz::decode_utf8(text), size_t(max_chars));
        int64_t at = 0;
        for (size_t i = 0; i < pieces.size(); ++i) {
            at += int64_t(kz::encode_utf8(pieces[i]).size());
            if (int32_t(i) < capacity) ends[i] = int32_t(at);
        }
        return int32_t(pieces.size());
    } catch (...) {
        return -1;
    }
}

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

KZ_API int kz_model_files_check(const char *talker_path, const char *mmproj_path, char *err, size_t err_len) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(
        [&] {
            if (!talker_path || !mmproj_path) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null path");
            kz::check_model_files(talker_path, mmproj_path);
        },
        [&](const char *message) { kz::write_error(err, err_len, message); }, KZ_ERR_FORMAT);
}

}  // extern "C"
