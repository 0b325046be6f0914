// Native enrollment (kazetts/voice.h): a recording at any sample rate -> 24 kHz as the Python
// engine's kazetts/stages/audio_input.py makes it (libsoxr "HQ", then cut or zero-padded to
// ceil(n * 24000 / sr) samples, librosa's fix_length).
#include "engine/enroll.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/common_internal.h"
#include "engine/text_split.h"
#include "gguf.h"
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

const int32_t MIN_SAMPLE_RATE = 8000;  // the Python engine's audio_input constants
const double MAX_SECONDS = 60.0, SILENCE_PEAK = 1e-4, MAX_REF_SILENCE = 2.0;
const char *const NAME = "ref_audio";

std::string format(const char *fmt, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

void refuse(const std::string &message) { throw kz::Error(KZ_ERR_INVALID_ARGUMENT, message); }

// reference_audio's checks and resampling (mono already): the 24 kHz recording
std::vector<float> reference_audio(const float *pcm, int64_t n, int32_t sample_rate, int64_t min_samples) {
    const std::string name = NAME;
    if (sample_rate <= 0)
        refuse(name + ": the sample rate must be a positive integer, got " + std::to_string(sample_rate));
    if (sample_rate < MIN_SAMPLE_RATE)
        refuse(name + ": a sample rate of " + std::to_string(sample_rate) +
               " Hz is too low to clone a voice from (at least 8000 Hz; record at 16 kHz or more)");
    if (n <= 0 || !pcm) refuse(name + ": the audio is empty");
    for (int64_t i = 0; i < n; i++)
        if (!std::isfinite(pcm[i])) refuse(name + ": the audio holds NaN or infinite samples");
    const double seconds = double(n) / sample_rate;
    if (seconds > MAX_SECONDS)
        refuse(name + ": the audio is " + format("%.1f", seconds) +
               " s long; at most 60 s is taken (3-10 s of clean speech clone best: trim it)");
    std::vector<float> out(size_t(kz_resample_length(n, sample_rate)));
    char err[512];
    const int status = kz_resample(pcm, n, sample_rate, out.data(), err, sizeof err);
    if (status != KZ_OK) throw kz::Error(status, err);
    if (int64_t(out.size()) < min_samples)
        refuse(name + ": the audio is " + format("%.0f", seconds * 1000) +
               " ms long; the speaker encoder needs at least " + format("%.0f", 1000.0 * min_samples / RATE) + " ms (" +
               std::to_string(min_samples) + " samples at 24000 Hz)");
    float peak = 0.0f;
    for (float v : out) peak = std::max(peak, std::fabs(v));
    if (peak < SILENCE_PEAK) refuse(name + ": the audio is silent (peak " + format("%.1e", peak) + ", below -80 dBFS)");
    return out;
}

bool blank(const char *text) {
    for (char32_t c : kz::decode_utf8(text))
        if (!kz::is_space(c)) return false;
    return true;
}

// Whether the mmproj holds the codec encoder (kazetts convert writes it, llama.cpp's converter
// does not): the Python engine's has_codec_encoder.
bool has_codec_encoder(const std::string &mmproj_path) {
    gguf_init_params params = {true, nullptr};
    gguf_context *g = gguf_init_from_file(mmproj_path.c_str(), params);
    if (!g) throw kz::Error(KZ_ERR_IO, mmproj_path + ": cannot read the mmproj");
    bool found = false;
    for (int64_t i = 0; i < gguf_get_n_tensors(g) && !found; i++)
        found = std::string(gguf_get_tensor_name(g, i)).rfind("kazetts.enc.", 0) == 0;
    gguf_free(g);
    return found;
}

}  // namespace

kz_voice *kz::enroll(EnrollModel &m, const float *pcm, int64_t n, int32_t sample_rate, const char *ref_text,
                     float ref_silence) {
    if (m.model_type != "base")
        refuse("voice cloning needs a Base model; this is a " + m.model_type +
               " model (it speaks with speaker= or instruct=)");
    if (ref_text && blank(ref_text))
        refuse("ref_text is empty: give the words said in the reference, or none for x-vector cloning");
    if (!(ref_silence >= 0.0f && ref_silence <= MAX_REF_SILENCE))
        refuse("ref_silence must be a number of seconds in 0..2 (about 0.5 helps ICL), got " +
               format("%g", ref_silence));
    char err[1024];
    if (!*m.speaker_encoder) {
        const int s = kz_speaker_encoder_load(m.mmproj_path.c_str(), m.n_threads, m.speaker_encoder, err, sizeof err);
        if (s != KZ_OK) throw kz::Error(s, err);
    }
    kz_speaker_encoder *speaker = *m.speaker_encoder;
    const int64_t min_samples = 256 * int64_t(kz_speaker_encoder_min_frames(speaker));  // mel.min_samples
    const std::vector<float> recording = reference_audio(pcm, n, sample_rate, min_samples);
    std::vector<float> audio = recording;  // append_silence: round half to even, as Python's round
    audio.resize(recording.size() + size_t(std::nearbyint(double(ref_silence) * RATE)), 0.0f);

    std::vector<float> mel(size_t(kz_speaker_encoder_mel_frames(int64_t(audio.size()))) * 128);
    int s = kz_speaker_encoder_log_mel(audio.data(), int64_t(audio.size()), mel.data(), err, sizeof err);
    if (s != KZ_OK) throw kz::Error(s, err);
    std::vector<float> xvector(size_t(kz_speaker_encoder_dim(speaker)));
    s = kz_speaker_encoder_encode(speaker, mel.data(), int(mel.size() / 128), 128, xvector.data(), xvector.size());
    if (s != KZ_OK) throw kz::Error(s, kz_speaker_encoder_last_error(speaker));

    std::vector<int32_t> codes;
    if (ref_text && *ref_text && has_codec_encoder(m.mmproj_path)) {
        if (!*m.codec_encoder) {
            s = kz_codec_encoder_load(m.mmproj_path.c_str(), m.n_threads, m.codec_encoder, err, sizeof err);
            if (s != KZ_OK) throw kz::Error(s, err);
        }
        kz_codec_encoder *enc = *m.codec_encoder;
        codes.resize(size_t(kz_codec_encoder_n_frames(enc, int64_t(audio.size()))) * 16);
        s = kz_codec_encoder_encode(enc, audio.data(), int64_t(audio.size()), codes.data(), codes.size());
        if (s != KZ_OK) throw kz::Error(s, kz_codec_encoder_last_error(enc));
    }
    if (m.speaker_encoder_sha256->empty()) {
        char sha[65];
        s = kz_speaker_encoder_fingerprint(m.mmproj_path.c_str(), sha, sizeof sha, err, sizeof err);
        if (s != KZ_OK) throw kz::Error(s, err);
        *m.speaker_encoder_sha256 = sha;
    }
    kz_voice_info info = kz_voice_default_info();
    info.model_type = m.model_type.c_str();
    info.hidden_size = m.hidden_size;
    info.speaker_encoder_sha256 = m.speaker_encoder_sha256->c_str();
    info.xvector = xvector.data();
    info.ref_text = ref_text;
    info.ref_codes = codes.empty() ? nullptr : codes.data();
    info.ref_frames = int32_t(codes.size() / 16);
    info.ref_seconds = float(double(recording.size()) / RATE);
    info.ref_silence = ref_silence;
    kz_voice *voice = nullptr;
    s = kz_voice_new(&info, &voice, err, sizeof err);
    if (s != KZ_OK) throw kz::Error(s, err);
    return voice;
}

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
