// The pieces of a long text joined in order (kazetts/rules.h's kz_joiner, which the Python
// engine streams through; tts.cpp's frame loop uses it directly): each piece's last
// CROSSFADE_SAMPLES are held back and crossfaded linearly into the next piece's first samples.
#pragma once

#include <cstddef>
#include <vector>

namespace kz {

class Joiner {
  public:
    static constexpr size_t CROSSFADE_SAMPLES = 240;  // 10 ms at 24 kHz between pieces

    // n samples of the current piece -> the samples out now (at most n), written to out.
    size_t push(const float *audio, size_t n, bool last_piece, float *out);
    // The current piece has ended: its held samples fade into the next piece.
    void end_piece();
    // What is still held once the last piece has ended (when that was not known in advance).
    std::vector<float> flush();
    size_t held() const { return tail_.size(); }

  private:
    std::vector<float> held_, tail_;
};

}  // namespace kz
