// The speaker encoder's log-mel front-end (kz_speaker_encoder_log_mel, kazetts/speaker_encoder.h):
// `mel_spectrogram` of qwen-tts 0.1.1 on 24 kHz audio, in double precision, rounded once to float.
// Reflect pad 384 samples each side, frames of 1024 every 256 (torch.stft center=False), periodic
// Hann window, magnitude sqrt(re^2 + im^2 + 1e-9), 128 Slaney mel bands over 0-12 kHz with Slaney
// area norm (librosa.filters.mel: triangles rounded to float, scaled in double, rounded again),
// natural log of max(x, 1e-5). Its oracle: kazetts/validation/oracles/mel.py (numpy).
#include <cmath>
#include <complex>
#include <vector>

#include "core/common_internal.h"
#include "kazetts/speaker_encoder.h"

namespace {

const int RATE = 24000, N_FFT = 1024, HOP = 256, N_MELS = 128, PAD = (N_FFT - HOP) / 2, BINS = N_FFT / 2 + 1;
const double FMAX = 12000.0, MAG_EPS = 1e-9, LOG_FLOOR = 1e-5;
// Slaney's mel scale (librosa htk=False): linear below 1 kHz, logarithmic above
const double F_SP = 200.0 / 3, LOG_HZ = 1000.0, LOG_MEL = LOG_HZ / F_SP;
const double LOG_STEP = std::log(6.4) / 27.0;

double hz_to_mel(double hz) { return hz >= LOG_HZ ? LOG_MEL + std::log(hz / LOG_HZ) / LOG_STEP : hz / F_SP; }
double mel_to_hz(double mel) { return mel >= LOG_MEL ? LOG_HZ * std::exp(LOG_STEP * (mel - LOG_MEL)) : F_SP * mel; }

struct FrontEnd {
    std::vector<double> window, filters;        // [N_FFT], [N_MELS][BINS]
    std::vector<std::complex<double>> twiddle;  // exp(-2 pi i k / N_FFT), k < N_FFT / 2
    std::vector<int> reversed;                  // bit reversal of 0..N_FFT-1

    FrontEnd() : window(N_FFT), filters(size_t(N_MELS) * BINS), twiddle(N_FFT / 2), reversed(N_FFT) {
        const double pi = std::acos(-1.0);
        for (int i = 0; i < N_FFT; i++) window[i] = 0.5 - 0.5 * std::cos(2.0 * pi * i / N_FFT);
        for (int k = 0; k < N_FFT / 2; k++) twiddle[k] = std::polar(1.0, -2.0 * pi * k / N_FFT);
        for (int i = 0, bits = 10; i < N_FFT; i++) {
            int r = 0;
            for (int b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
            reversed[i] = r;
        }
        // the band edges as np.linspace(hz_to_mel(0), hz_to_mel(FMAX), N_MELS + 2) -> Hz
        double edges[N_MELS + 2];
        const double top = hz_to_mel(FMAX), step = top / (N_MELS + 1);
        for (int m = 0; m < N_MELS + 2; m++) edges[m] = mel_to_hz(m == N_MELS + 1 ? top : m * step);
        const double bin_hz = 1.0 / (N_FFT * (1.0 / RATE));
        for (int m = 0; m < N_MELS; m++) {
            const double area = 2.0 / (edges[m + 2] - edges[m]);
            for (int k = 0; k < BINS; k++) {
                const double f = k * bin_hz;
                const double rise = (f - edges[m]) / (edges[m + 1] - edges[m]);
                const double fall = (edges[m + 2] - f) / (edges[m + 2] - edges[m + 1]);
                const float triangle = float(std::max(0.0, std::min(rise, fall)));
                filters[size_t(m) * BINS + k] = double(float(double(triangle) * area));
            }
        }
    }

    // the magnitude spectrum of one windowed frame (iterative radix-2 FFT)
    void magnitude(const double *frame, double *out) const {
        std::complex<double> x[N_FFT];
        for (int i = 0; i < N_FFT; i++) x[reversed[i]] = frame[i] * window[i];
        for (int len = 2; len <= N_FFT; len *= 2) {
            const int half = len / 2, stride = N_FFT / len;
            for (int s = 0; s < N_FFT; s += len)
                for (int j = 0; j < half; j++) {
                    const std::complex<double> t = twiddle[j * stride] * x[s + j + half];
                    x[s + j + half] = x[s + j] - t;
                    x[s + j] += t;
                }
        }
        for (int k = 0; k < BINS; k++)
            out[k] = std::sqrt(x[k].real() * x[k].real() + x[k].imag() * x[k].imag() + MAG_EPS);
    }
};

const FrontEnd &front_end() {
    static const FrontEnd f;
    return f;
}

}  // namespace

extern "C" {

KZ_API int64_t kz_speaker_encoder_mel_frames(int64_t n_samples) {
    return n_samples <= PAD ? 0 : (n_samples + 2 * PAD - N_FFT) / HOP + 1;
}

KZ_API int kz_speaker_encoder_log_mel(const float *audio, int64_t n_samples, float *out, char *err, size_t err_len) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(
        [&] {
            if (!audio || !out) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "log_mel needs audio and an output");
            if (n_samples <= PAD)
                throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "audio of " + std::to_string(n_samples) +
                                                             " samples is too short for the mel front-end (needs > " +
                                                             std::to_string(PAD) + ")");
            const FrontEnd &fe = front_end();
            // reflect padding (numpy mode "reflect": the edge sample is not repeated)
            std::vector<double> padded(size_t(n_samples) + 2 * PAD);
            for (int64_t i = 0; i < int64_t(padded.size()); i++) {
                int64_t j = i - PAD;
                if (j < 0) j = -j;
                if (j >= n_samples) j = 2 * (n_samples - 1) - j;
                padded[i] = audio[j];
            }
            const int64_t frames = kz_speaker_encoder_mel_frames(n_samples);
            double magnitude[BINS];
            for (int64_t t = 0; t < frames; t++) {
                fe.magnitude(padded.data() + t * HOP, magnitude);
                for (int m = 0; m < N_MELS; m++) {
                    const double *filter = fe.filters.data() + size_t(m) * BINS;
                    double energy = 0.0;
                    for (int k = 0; k < BINS; k++) energy += magnitude[k] * filter[k];
                    out[t * N_MELS + m] = float(std::log(std::max(energy, LOG_FLOOR)));
                }
            }
        },
        [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_INVALID_ARGUMENT);
}

}  // extern "C"
