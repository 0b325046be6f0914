// Native enrollment (kz_tts_enroll, kazetts/tts.h) on the recording of a Base golden case,
// against what the x86-64 host's Python engine made of it (scripts/aarch64_prepare.py): the
// libsoxr resampling and the C++ log-mel, then the voice (x-vector within xvector_max_rel,
// the ICL reference codes identical). On x86-64 the resampling and log-mel are bit-identical
// (tests/test_native_enroll.py); on aarch64 the compiler may fuse multiply-adds in libsoxr and the
// FFT, so their gate is a measured bound, and the figures are printed.
#include <cmath>
#include <memory>
#include <stdexcept>

#include "check.h"
#include "kazetts/speaker_encoder.h"
#include "kazetts/tts.h"

namespace {

struct TtsDeleter {
    void operator()(kz_tts *t) const { kz_tts_free(t); }
};
struct VoiceDeleter {
    void operator()(kz_voice *v) const { kz_voice_free(v); }
};

double max_rel(const float *got, const float *want, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

}  // namespace

void check_enroll(const GoldenCase &c, Report &report) {
    const std::string dir = c.get("enroll") + "/";
    const NpyArray pcm = load_npy(dir + "pcm.npy"), resampled = load_npy(dir + "resampled.npy");
    const NpyArray mel = load_npy(dir + "log_mel.npy"), xvector = load_npy(dir + "xvector.npy");
    const NpyArray codes = load_npy(dir + "ref_codes.npy");
    const int32_t rate = std::stoi(c.get("enroll_rate"));
    const std::string name = c.get("name") + " enroll";
    char err[1024] = "";

    std::vector<float> y(size_t(kz_resample_length(int64_t(pcm.f32.size()), rate)));
    if (kz_resample(pcm.f32.data(), int64_t(pcm.f32.size()), rate, y.data(), err, sizeof err) != KZ_OK)
        throw std::runtime_error(std::string("kz_resample: ") + err);
    const double resample_diff =
        y.size() == resampled.f32.size() ? max_abs_diff(y.data(), resampled.f32.data(), y.size()) : 1e9;
    report.gate(name + " resample", resample_diff <= c.gate("enroll_resample_max_abs"),
                fmt("%zu samples at 24 kHz, max abs diff %.2e from python-soxr on x86-64", y.size(), resample_diff));

    std::vector<float> m(size_t(kz_speaker_encoder_mel_frames(int64_t(resampled.f32.size()))) * 128);
    if (kz_speaker_encoder_log_mel(resampled.f32.data(), int64_t(resampled.f32.size()), m.data(), err, sizeof err))
        throw std::runtime_error(std::string("kz_speaker_encoder_log_mel: ") + err);
    const double mel_diff = m.size() == mel.f32.size() ? max_abs_diff(m.data(), mel.f32.data(), m.size()) : 1e9;
    report.gate(name + " log-mel", mel_diff <= c.gate("enroll_log_mel_max_abs"),
                fmt("%zu frames, max abs diff %.2e from x86-64", m.size() / 128, mel_diff));

    kz_tts_params params = kz_tts_default_params();
    params.n_threads = c.threads;
    kz_tts *raw = nullptr;
    if (kz_tts_load(c.get("talker").c_str(), c.get("mmproj").c_str(), &params, &raw, err, sizeof err) != KZ_OK)
        throw std::runtime_error(std::string("kz_tts_load: ") + err);
    std::unique_ptr<kz_tts, TtsDeleter> tts(raw);
    kz_voice *v = nullptr;
    if (kz_tts_enroll(tts.get(), pcm.f32.data(), int64_t(pcm.f32.size()), rate, c.get("enroll_text").c_str(), 0.0f,
                      &v) != KZ_OK)
        throw std::runtime_error(std::string("kz_tts_enroll: ") + kz_tts_last_error(tts.get()));
    std::unique_ptr<kz_voice, VoiceDeleter> voice(v);
    kz_voice_info info = kz_voice_default_info();
    kz_voice_get(v, &info);
    const double rel = size_t(info.hidden_size) == xvector.f32.size()
                           ? max_rel(info.xvector, xvector.f32.data(), xvector.f32.size())
                           : 1e9;
    report.gate(name + " x-vector", rel <= c.gate("xvector_max_rel"), fmt("max rel diff %.2e", rel));
    const bool same = size_t(info.ref_frames) * 16 == codes.i32.size() &&
                      std::equal(codes.i32.begin(), codes.i32.end(), info.ref_codes);
    report.gate(name + " reference codes", same,
                fmt("%d frames (Python engine %lld), %s", info.ref_frames, (long long)codes.dim(0),
                    same ? "identical" : "differ"));
}
