// The exported rules of kazetts/rules.h that need no model, through the C ABI: the WSOLA stream
// (its output length and its independence from how the input is cut, at several speeds) and the
// joiner (the 10 ms held back and crossfaded between pieces). Python holds them against their
// numpy statements (tests/test_time_stretch.py, tests/test_native_engine.py); here they run where
// Python does not (aarch64 under qemu) and under the sanitizers.
#include <cmath>
#include <random>
#include <vector>

#include "check.h"
#include "kazetts/rules.h"

namespace {

// The whole stream of `audio` at `speed`, pushed in chunks of the given sizes (repeated).
std::vector<float> stretched(const std::vector<float> &audio, double speed, const std::vector<int64_t> &chunks) {
    kz_stretch *s = nullptr;
    if (kz_stretch_new(24000, speed, &s) != KZ_OK) return {};
    std::vector<float> out;
    auto take = [&](int64_t ready) {
        const size_t at = out.size();
        out.resize(at + size_t(ready));
        kz_stretch_read(s, out.data() + at, ready);
    };
    int64_t ready = 0;
    for (size_t at = 0, i = 0; at < audio.size(); ++i) {
        const int64_t n = std::min<int64_t>(chunks[i % chunks.size()], int64_t(audio.size() - at));
        kz_stretch_push(s, audio.data() + at, n, &ready);
        take(ready);
        at += size_t(n);
    }
    kz_stretch_finish(s, &ready);
    take(ready);
    kz_stretch_free(s);
    return out;
}

}  // namespace

void check_rules(Report &report) {
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    std::vector<float> audio(36000);
    for (size_t i = 0; i < audio.size(); ++i)
        audio[i] = 0.4f * float(std::sin(2 * M_PI * 180.0 * double(i) / 24000)) + noise(rng);
    for (double speed : {0.25, 0.6, 1.0, 1.7, 4.0}) {
        const std::vector<float> whole = stretched(audio, speed, {int64_t(audio.size())});
        const std::vector<float> cut = stretched(audio, speed, {1, 7, 1920, 5000});
        const size_t want = size_t(std::nearbyint(double(audio.size()) / speed));
        const bool same = cut == whole;
        report.gate(
            fmt("time stretch at %.2f", speed), whole.size() == want && same,
            fmt("%zu samples (want %zu), chunked stream %s", whole.size(), want, same ? "identical" : "differs"));
    }
    kz_joiner *j = kz_joiner_new();
    std::vector<float> ones(1920, 1.0f), zeros(1920, 0.0f), out(1920);
    const int32_t first = kz_joiner_push(j, ones.data(), 1920, 0, out.data());
    kz_joiner_end_piece(j);
    const int32_t second = kz_joiner_push(j, zeros.data(), 1920, 1, out.data());
    const bool faded = out[0] == 1.0f && out[120] == 0.5f && out[239] > 0.0f && out[240] == 0.0f;
    kz_joiner_free(j);
    report.gate("joiner", first == 1920 - 240 && second == 1920 && faded,
                fmt("%d then %d samples out, crossfade %.3f %.3f %.3f %.3f", first, second, out[0], out[120], out[239],
                    out[240]));
}
