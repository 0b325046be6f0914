// The codec decoder against the goldens, as tests/test_codec.py gates it; its kernels (the long
// case): KZ_CODEC_WEIGHTS_F16_SUMS, FP16 arithmetic where the CPU has it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "check.h"
#include "kazetts/codec.h"
#include "kernels/conv_gemm.h"

namespace {

struct CodecDeleter {
    void operator()(kz_codec *codec) const { kz_codec_free(codec); }
};
using Codec = std::unique_ptr<kz_codec, CodecDeleter>;

Codec load(const std::string &path, int threads, int weights) {
    kz_codec *codec = nullptr;
    char err[512];
    if (kz_codec_load(path.c_str(), threads, weights, &codec, err, sizeof err) != KZ_OK) throw std::runtime_error(err);
    return Codec(codec);
}

void ok_or_throw(kz_codec *codec, int status) {
    if (status != KZ_OK) throw std::runtime_error(kz_codec_last_error(codec));
}

std::vector<float> decode(kz_codec *codec, const NpyArray &codes) {
    std::vector<float> wav(size_t(codes.dim(0) * kz_codec_samples_per_frame(codec)));
    ok_or_throw(codec,
                kz_codec_decode(codec, codes.i32.data(), int(codes.dim(0)), int(codes.dim(1)), wav.data(), wav.size()));
    return wav;
}

// Concatenated pushes of chunks of the given sizes (cycled) from a fresh stream.
std::vector<float> stream(kz_codec *codec, const NpyArray &codes, const std::vector<int> &sizes) {
    ok_or_throw(codec, kz_codec_reset(codec));
    const int n_frames = int(codes.dim(0)), n_cb = int(codes.dim(1)), spf = kz_codec_samples_per_frame(codec);
    std::vector<float> wav(size_t(n_frames) * size_t(spf));
    size_t k = 0, written = 0;
    for (int frame = 0; frame < n_frames; ++k) {
        int n = std::min(sizes[k % sizes.size()], n_frames - frame);
        size_t got = 0;
        ok_or_throw(codec, kz_codec_stream_push(codec, &codes.i32[size_t(frame) * size_t(n_cb)], n, n_cb, &wav[written],
                                                wav.size() - written, &got));
        written += got;
        frame += n;
    }
    return wav;
}

// Golden stage arrays are [channels, steps]; the C ABI writes [steps, channels].
double stage_diff(const std::vector<float> &time_major, const NpyArray &golden) {
    const int64_t channels = golden.dim(0), steps = golden.dim(1);
    if (int64_t(time_major.size()) != channels * steps) return INFINITY;
    std::vector<float> transposed(time_major.size());
    for (int64_t t = 0; t < steps; ++t)
        for (int64_t ch = 0; ch < channels; ++ch)
            transposed[size_t(ch * steps + t)] = time_major[size_t(t * channels + ch)];
    return max_abs_diff(transposed.data(), golden.f32.data(), transposed.size());
}

void check_f32(const GoldenCase &c, const NpyArray &codes, const NpyArray &waveform, Report &report) {
    Codec codec = load(c.get("mmproj"), 1, KZ_CODEC_WEIGHTS_F32);
    const size_t n = size_t(codes.dim(0)), cdim = size_t(kz_codec_dim(codec.get(), 0)),
                 latent = size_t(kz_codec_dim(codec.get(), 1)), factor = size_t(kz_codec_dim(codec.get(), 2));
    std::vector<float> wav(waveform.f32.size()), quantized(n * cdim), pre(n * latent), tfm(n * latent),
        up(n * factor * latent);
    ok_or_throw(codec.get(), kz_codec_decode_debug(codec.get(), codes.i32.data(), int(n), int(codes.dim(1)), wav.data(),
                                                   wav.size(), quantized.data(), pre.data(), tfm.data(), up.data()));
    const double d[5] = {stage_diff(quantized, c.golden("codec_quantized")),
                         stage_diff(pre, c.golden("codec_pre_conv")), stage_diff(tfm, c.golden("codec_transformer")),
                         stage_diff(up, c.golden("codec_upsample")),
                         max_abs_diff(wav.data(), waveform.f32.data(), wav.size())};
    double worst = 0.0;
    for (double x : d) worst = std::max(worst, x);
    report.gate(
        c.get("name") + " codec f32", worst <= c.gate("codec_max_abs"),
        fmt("%zu frames, max abs diff: quantized %.2e, pre_conv %.2e, transformer %.2e, upsample %.2e, waveform %.2e",
            n, d[0], d[1], d[2], d[3], d[4]));
}

void check_f16(const GoldenCase &c, const NpyArray &codes, const NpyArray &waveform, Report &report) {
    Codec codec = load(c.get("mmproj"), 1, KZ_CODEC_WEIGHTS_F16);
    std::vector<float> wav = decode(codec.get(), codes);
    double corr = correlation(wav.data(), waveform.f32.data(), wav.size());
    report.gate(
        c.get("name") + " codec f16", corr >= c.gate("codec_f16_min_correlation"),
        fmt("correlation %.7f, max abs diff %.2e", corr, max_abs_diff(wav.data(), waveform.f32.data(), wav.size())));
}

// Exact streaming and thread-count independence of one weight mode (`what` names it in the
// gates), on the golden codes of one case.
void check_same_model(const GoldenCase &c, const NpyArray &codes, int weights, const std::string &what,
                      Report &report) {
    Codec one = load(c.get("mmproj"), 1, weights), two = load(c.get("mmproj"), 2, weights);
    std::vector<float> full = decode(one.get(), codes), threads2 = decode(two.get(), codes);
    double d_threads = max_abs_diff(full.data(), threads2.data(), full.size());
    report.gate(c.get("name") + " codec " + what + "2 threads vs 1", d_threads <= c.gate("same_model_max_abs"),
                fmt("max abs diff %.1e", d_threads));
    for (const std::vector<int> &sizes : {std::vector<int>{1}, std::vector<int>{3, 1, 9}, std::vector<int>{40}}) {
        std::vector<float> got = stream(one.get(), codes, sizes);
        double d = max_abs_diff(got.data(), full.data(), full.size());
        std::string label;
        for (int s : sizes) label += (label.empty() ? "" : ",") + std::to_string(s);
        report.gate(c.get("name") + " codec " + what + "stream chunks [" + label + "] vs full",
                    d <= c.gate("same_model_max_abs"), fmt("max abs diff %.1e", d));
    }
}

}  // namespace

// F16 weights summed in float16 (ARM cores with FP16 arithmetic): the F16 gate against the golden
// waveform, exact streaming and threads as every codec path; other bits than F16's (float sums)
// where the CPU has FP16 arithmetic, the same elsewhere.
void check_codec_kernels(const GoldenCase &c, Report &report) {
    NpyArray codes = c.golden("codes"), waveform = c.golden("waveform");
    const bool half = kz::conv_gemm_half_arithmetic();
    Codec one = load(c.get("mmproj"), 1, KZ_CODEC_WEIGHTS_F16_SUMS);
    std::vector<float> full = decode(one.get(), codes);
    Codec f16 = load(c.get("mmproj"), 1, KZ_CODEC_WEIGHTS_F16);
    std::vector<float> plain = decode(f16.get(), codes);
    const bool same = full == plain;
    const double corr = correlation(full.data(), waveform.f32.data(), full.size());
    report.gate(c.get("name") + " codec f16 sums", corr >= c.gate("codec_f16_min_correlation") && same != half,
                fmt("%s; correlation %.7f, max abs diff %.2e; vs F16 (float sums) %s",
                    half ? "FP16 arithmetic" : "no FP16 arithmetic: float sums", corr,
                    max_abs_diff(full.data(), waveform.f32.data(), full.size()), same ? "identical" : "differs"));
    check_same_model(c, codes, KZ_CODEC_WEIGHTS_F16_SUMS, "f16 sums ", report);
}

void check_codec(const GoldenCase &c, Report &report) {
    NpyArray codes = c.golden("codes"), waveform = c.golden("waveform");
    check_f32(c, codes, waveform, report);
    check_f16(c, codes, waveform, report);
    if (c.long_checks()) check_same_model(c, codes, KZ_CODEC_WEIGHTS_F32, "", report);
}
