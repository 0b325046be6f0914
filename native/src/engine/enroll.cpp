// Native enrollment (kazetts/voice.h): a recording at any sample rate -> 24 kHz as the Python
// engine's kazetts/stages/audio_input.py makes it (libsoxr "HQ", then cut or zero-padded to
// ceil(n * 24000 / sr) samples, librosa's fix_length).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/common_internal.h"
#include "kazetts/voice.h"

#ifdef KZ_HAVE_SOXR
#include <soxr.h>
#endif

namespace {

const int32_t RATE = 24000;

// libsoxr as python-soxr 1.1.0's soxr.resample(x, sr, 24000, quality="soxr_hq") runs it on a mono
// float32 array (csoxr_split_ch): HQ recipe, no flags, the input handed over in pieces of
// max(1000, 48000 * sr / 24000) samples into an output of n * 24000 / sr + 1 samples, then a
// flush. Returns the samples written.
size_t soxr_hq(const float *in, size_t n, int32_t sample_rate, std::vector<float> &out) {
#ifdef KZ_HAVE_SOXR
    const double in_rate = sample_rate, out_rate = RATE;
    const size_t olen = size_t(double(n) * out_rate / in_rate + 1);
    const size_t piece = size_t(std::max(1000., 48000 * in_rate / out_rate));
    out.assign(olen, 0.0f);
    soxr_error_t error = nullptr;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_S, SOXR_FLOAT32_S);
    const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
    soxr_t s = soxr_create(in_rate, out_rate, 1, &error, &io, &quality, nullptr);
    if (error) throw kz::Error(KZ_ERR_STATE, std::string("libsoxr: ") + error);
    size_t pos = 0, done = 0;
    for (size_t i = 0; i < n && !error; i += piece) {
        const float *src = in + i;
        float *dst = out.data() + pos;
        error = soxr_process(s, &src, std::min(piece, n - i), nullptr, &dst, olen - pos, &done);
        pos += done;
    }
    if (!error) {
        float *dst = out.data() + pos;
        error = soxr_process(s, nullptr, 0, nullptr, &dst, olen - pos, &done);
        pos += done;
    }
    soxr_delete(s);
    if (error) throw kz::Error(KZ_ERR_STATE, std::string("libsoxr: ") + error);
    return pos;
#else
    (void)in, (void)n, (void)out;
    throw kz::Error(KZ_ERR_STATE, "this libkazetts was built without libsoxr: it cannot resample " +
                                      std::to_string(sample_rate) +
                                      " Hz audio to 24000 Hz (record at 24 kHz, or build it with KAZETTS_SOXR_SRC)");
#endif
}

}  // namespace

extern "C" {

KZ_API int kz_resample_has_soxr(void) {
#ifdef KZ_HAVE_SOXR
    return 1;
#else
    return 0;
#endif
}

KZ_API int64_t kz_resample_length(int64_t n, int32_t sample_rate) {
    if (n < 0 || sample_rate <= 0) return -1;
    return sample_rate == RATE ? n : int64_t(std::ceil(double(n) * (double(RATE) / sample_rate)));
}

KZ_API int kz_resample(const float *pcm, int64_t n, int32_t sample_rate, float *out, char *err, size_t err_len) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(
        [&] {
            if ((!pcm && n) || !out || n < 0 || sample_rate <= 0)
                throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "resample needs samples, a positive rate and an output");
            const int64_t length = kz_resample_length(n, sample_rate);
            if (sample_rate == RATE) {
                std::copy(pcm, pcm + n, out);
                return;
            }
            std::vector<float> y;
            const size_t got = std::min(soxr_hq(pcm, size_t(n), sample_rate, y), size_t(length));
            std::copy(y.begin(), y.begin() + got, out);
            std::fill(out + got, out + length, 0.0f);
        },
        [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_STATE);
}

}  // extern "C"
