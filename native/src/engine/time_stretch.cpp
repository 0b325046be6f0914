// WSOLA (see time_stretch.h). Every step is the numpy statement's, in the same float64
// arithmetic and order where it reaches the output: the window, the overlap-add sums and the
// division by the summed window are elementwise, so a segment placed at the same position gives
// the same samples bit for bit. Only the correlation's sums are accumulated in another order
// than numpy's BLAS dot, which could only matter where two shifts correlate equally to the last bit.
#include "engine/time_stretch.h"

#include <algorithm>
#include <cmath>

namespace kz {

namespace {

const double FRAME_SECONDS = 0.04, TOLERANCE_SECONDS = 0.015;

// Python's round() of a double to an integer: halves to even, as nearbyint in the default mode.
int64_t round_even(double x) { return int64_t(std::nearbyint(x)); }

}  // namespace

TimeStretch::TimeStretch(int sample_rate, double speed)
    : speed_(speed),
      frame_(2 * round_even(FRAME_SECONDS * sample_rate / 2)),
      hop_(frame_ / 2),
      tolerance_(round_even(TOLERANCE_SECONDS * sample_rate)) {
    const double two_pi = 2 * M_PI;
    window_.resize(size_t(frame_));
    first_window_.resize(size_t(frame_));
    for (int64_t i = 0; i < frame_; ++i) {
        window_[size_t(i)] = 0.5 - 0.5 * std::cos(two_pi * double(i) / double(frame_));
        first_window_[size_t(i)] = i < hop_ ? 1.0 : window_[size_t(i)];  // nothing before frame 0 to fade with
    }
    output_.assign(size_t(frame_), 0.0);
    weight_.assign(size_t(frame_), 0.0);
}

void TimeStretch::push(const float *audio, size_t n, std::vector<float> &out) {
    if (speed_ == 1.0) {
        out.insert(out.end(), audio, audio + n);
        return;
    }
    input_.insert(input_.end(), audio, audio + n);
    received_ += int64_t(n);
    run(false, out);
}

void TimeStretch::finish(std::vector<float> &out) {
    if (speed_ != 1.0) run(true, out);
}

int64_t TimeStretch::nominal(int64_t k) const { return round_even(double(k * hop_) * speed_); }

void TimeStretch::run(bool final, std::vector<float> &out) {
    const int64_t total = round_even(double(received_) / speed_);
    while (true) {
        const int64_t at = nominal(k_);
        const int64_t needed = std::max(at + tolerance_, previous_ + hop_) + frame_;
        if ((final && k_ * hop_ >= total) || (!final && needed > received_)) break;
        const int64_t position = k_ == 0 ? at : best(at);
        place(position);
        release(k_ * hop_, out);  // frames from k on start at k * hop
        ++k_;
        previous_ = position;
        forget(std::min(nominal(k_) - tolerance_, position + hop_));
    }
    if (final) release(total, out);
}

double TimeStretch::sample(int64_t at) const {
    const int64_t i = at - input_start_;
    return i >= 0 && i < int64_t(input_.size()) ? input_[size_t(i)] : 0.0;
}

// The segment start within the tolerance that best continues the previous segment: the largest
// correlation with the input that followed it, normalized by the candidate's energy.
int64_t TimeStretch::best(int64_t at) const {
    std::vector<double> target(static_cast<size_t>(frame_));
    double target_energy = 0;
    for (int64_t i = 0; i < frame_; ++i) {
        target[size_t(i)] = sample(previous_ + hop_ + i);
        target_energy += target[size_t(i)] * target[size_t(i)];
    }
    if (target_energy < 1e-12) return at;  // silence: nothing to align
    const int64_t lo = std::max<int64_t>(0, at - tolerance_);
    std::vector<double> region(size_t(at + tolerance_ - lo + frame_));
    for (size_t i = 0; i < region.size(); ++i) region[i] = sample(lo + int64_t(i));
    int64_t best_shift = 0;
    double best_score = 0;
    for (int64_t shift = 0; shift + frame_ <= int64_t(region.size()); ++shift) {
        const double *r = region.data() + shift, *t = target.data();
        double corr[4] = {0, 0, 0, 0}, energy[4] = {0, 0, 0, 0};  // 4 lanes: sums in 4 independent chains
        int64_t i = 0;
        for (; i + 4 <= frame_; i += 4) {
            for (int lane = 0; lane < 4; ++lane) {
                corr[lane] += r[i + lane] * t[i + lane];
                energy[lane] += r[i + lane] * r[i + lane];
            }
        }
        for (; i < frame_; ++i) corr[0] += r[i] * t[i], energy[0] += r[i] * r[i];
        const double score = ((corr[0] + corr[1]) + (corr[2] + corr[3])) /
                             std::sqrt(((energy[0] + energy[1]) + (energy[2] + energy[3])) + 1e-9);
        if (shift == 0 || score > best_score) best_shift = shift, best_score = score;
    }
    return lo + best_shift;
}

void TimeStretch::place(int64_t position) {
    const std::vector<double> &window = k_ ? window_ : first_window_;
    const int64_t start = k_ * hop_ - output_start_;
    if (start + frame_ > int64_t(output_.size())) {
        output_.resize(size_t(start + frame_), 0.0);
        weight_.resize(size_t(start + frame_), 0.0);
    }
    for (int64_t i = 0; i < frame_; ++i) {
        output_[size_t(start + i)] += window[size_t(i)] * sample(position + i);
        weight_[size_t(start + i)] += window[size_t(i)];
    }
}

// Output [output_start, until), which no later frame touches.
void TimeStretch::release(int64_t until, std::vector<float> &out) {
    const size_t n = size_t(std::min<int64_t>(std::max<int64_t>(0, until - output_start_), int64_t(output_.size())));
    for (size_t i = 0; i < n; ++i) out.push_back(float(output_[i] / std::max(weight_[i], 1e-6)));
    output_.erase(output_.begin(), output_.begin() + long(n));
    weight_.erase(weight_.begin(), weight_.begin() + long(n));
    output_start_ += int64_t(n);
}

void TimeStretch::forget(int64_t before) {
    const int64_t drop = std::min(std::max<int64_t>(0, before - input_start_), int64_t(input_.size()));
    input_.erase(input_.begin(), input_.begin() + long(drop));
    input_start_ += drop;
}

}  // namespace kz
