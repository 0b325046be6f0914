// The pieces' crossfade (see joiner.h). The ramp is numpy's linspace(0, 1, n, endpoint=False)
// in float32: float(i * (1.0 / n)), then tail * (1 - ramp) + audio * ramp in float32.
#include "engine/joiner.h"

#include <algorithm>

namespace kz {

size_t Joiner::push(const float *audio, size_t n, bool last_piece, float *out) {
    std::copy(audio, audio + n, out);
    if (!tail_.empty() && n) {
        const size_t m = std::min(tail_.size(), n);
        const double step = 1.0 / double(m);
        for (size_t i = 0; i < m; ++i) {
            const float ramp = float(double(i) * step);
            out[i] = tail_[i] * (1.0f - ramp) + out[i] * ramp;
        }
        tail_.clear();
    }
    if (last_piece) return n;
    held_.insert(held_.end(), out, out + n);
    const size_t keep = std::min(CROSSFADE_SAMPLES, held_.size()), ready = held_.size() - keep;
    std::copy(held_.begin(), held_.begin() + long(ready), out);
    held_.erase(held_.begin(), held_.begin() + long(ready));
    return ready;
}

void Joiner::end_piece() {
    if (!held_.empty()) tail_.swap(held_), held_.clear();
}

std::vector<float> Joiner::flush() {
    std::vector<float> tail;
    tail.swap(tail_);
    return tail;
}

}  // namespace kz
