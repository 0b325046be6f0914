// Speaking rate: the WSOLA time-stretch of kazetts/rules.h (kz_stretch_*), the one definition of
// it (the Python engine streams through the export). Its numpy statement,
// kazetts/validation/oracles/time_stretch.py, is held against it by tests/test_time_stretch.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kz {

class TimeStretch {
  public:
    // speed > 0 and finite, sample_rate >= 100 (the caller checks them)
    TimeStretch(int sample_rate, double speed);

    // More input; the output it completes is appended to `out`.
    void push(const float *audio, size_t n, std::vector<float> &out);
    // The input has ended: the rest of the output (round(n_in / speed) samples in all).
    void finish(std::vector<float> &out);

  private:
    int64_t nominal(int64_t k) const;  // where output frame k's input segment would start at this speed
    void run(bool final, std::vector<float> &out);
    double sample(int64_t at) const;  // input at an absolute position, 0 outside what is kept
    int64_t best(int64_t nominal) const;
    void place(int64_t position);
    void release(int64_t until, std::vector<float> &out);
    void forget(int64_t before);

    double speed_;
    int64_t frame_, hop_, tolerance_;
    std::vector<double> window_, first_window_;
    std::vector<double> input_;  // input from absolute position input_start_
    int64_t input_start_ = 0, received_ = 0;
    std::vector<double> output_, weight_;  // overlap-add sums from output position output_start_
    int64_t output_start_ = 0;
    int64_t k_ = 0, previous_ = 0;  // the next frame; input position of the last placed segment
};

}  // namespace kz
