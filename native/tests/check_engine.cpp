// The whole native engine (kazetts/tts.h) on a golden case's request, as
// tests/test_native_engine.py gates it: greedy codes identical to the reference's, the same
// stop decision, the F32-codec waveform within 1e-4; the codec on its own thread, so that the
// sanitizer and aarch64 runs cover the overlapped path. In the streaming-text mode, the text also
// streamed in (kz_tts_stream_*) word by word and cut inside its UTF-8 characters: the same codes
// and samples as synthesize.
#include <algorithm>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "check.h"
#include "kazetts/codec.h"
#include "kazetts/tts.h"

namespace {

struct TtsDeleter {
    void operator()(kz_tts *t) const { kz_tts_free(t); }
};

// A chunk callback that appends the samples to a std::vector<float>.
int32_t collect(const kz_tts_chunk *chunk, void *user) {
    auto *out = static_cast<std::vector<float> *>(user);
    out->insert(out->end(), chunk->samples, chunk->samples + chunk->n_samples);
    return 1;
}

// The text pushed in pieces of 3 bytes (inside words and UTF-8 characters) through a text stream:
// the codes and samples of synthesize (the text is shorter than half a piece).
void check_text_stream(kz_tts *tts, const kz_tts_request &r, const std::string &text, const std::vector<int32_t> &codes,
                       const std::vector<float> &audio, const std::string &name, Report &report) {
    std::vector<float> heard;
    kz_tts_stream *stream = nullptr;
    char err[1024] = "";
    if (kz_tts_stream_begin(tts, &r, collect, &heard, &stream, err, sizeof err) != KZ_OK) {
        throw std::runtime_error(std::string("kz_tts_stream_begin: ") + err);
    }
    for (size_t at = 0; at < text.size(); at += 3) {
        if (kz_tts_stream_push(stream, text.data() + at, std::min<size_t>(3, text.size() - at)) != KZ_OK) {
            kz_tts_stream_free(stream);
            throw std::runtime_error("kz_tts_stream_push refused the text");
        }
    }
    kz_tts_result res{};
    res.struct_size = sizeof res;
    const int status = kz_tts_stream_finish(stream, &res);
    kz_tts_stream_free(stream);
    if (status != KZ_OK) throw std::runtime_error(std::string("kz_tts_stream_finish: ") + kz_tts_last_error(tts));
    std::vector<int32_t> got(size_t(res.n_frames) * 16);
    kz_tts_last_codes(tts, got.data(), got.size());
    report.gate(name + " engine text stream", got == codes && heard == audio,
                fmt("%d frames, codes %s, %zu samples %s", res.n_frames, got == codes ? "identical" : "differ",
                    heard.size(), heard == audio ? "identical" : "differ"));
}

}  // namespace

void check_engine(const GoldenCase &c, Report &report) {
    kz_tts_params params = kz_tts_default_params();
    params.n_threads = c.threads;
    params.codec_weights = KZ_CODEC_WEIGHTS_F32;
    params.codec_threads = 1;  // the overlapped codec (tests/test_codec_overlap.py: the same audio as serial)
    kz_tts *raw = nullptr;
    char err[1024] = "";
    if (kz_tts_load(c.get("talker").c_str(), c.get("mmproj").c_str(), &params, &raw, err, sizeof err) != KZ_OK) {
        throw std::runtime_error(std::string("kz_tts_load: ") + err);
    }
    std::unique_ptr<kz_tts, TtsDeleter> tts(raw);
    NpyArray codes = c.golden("codes"), waveform = c.golden("waveform");
    NpyArray xvector;
    kz_tts_request r = kz_tts_default_request();
    r.greedy = 1;
    r.language = c.get("language").c_str();
    r.speaker = c.get("speaker").c_str();
    r.instruct = c.get("instruct").c_str();
    r.text_streaming = std::stoi(c.get("text_streaming"));
    r.max_frames = std::stoi(c.get("max_frames"));
    if (std::ifstream(c.get("golden") + "/xvector.npy").good()) {  // Base: the golden's speaker x-vector
        xvector = c.golden("xvector");
        r.xvector = xvector.f32.data();
        r.xvector_len = int32_t(xvector.f32.size());
    }
    std::vector<float> audio;
    kz_tts_result res{};
    res.struct_size = sizeof res;
    if (kz_tts_synthesize(tts.get(), c.get("text").c_str(), &r, collect, &audio, &res) != KZ_OK) {
        throw std::runtime_error(std::string("kz_tts_synthesize: ") + kz_tts_last_error(tts.get()));
    }
    std::vector<int32_t> got(size_t(res.n_frames) * 16);
    kz_tts_last_codes(tts.get(), got.data(), got.size());
    const bool same_codes = got == codes.i32;
    const bool want_eos = c.get("stops_at_eos") == "1";
    const std::string name = c.get("name");
    report.gate(name + " engine codes", same_codes && (res.stop_reason == KZ_TTS_STOP_EOS) == want_eos,
                fmt("%d frames (reference %lld), codes %s, stop %s (reference %s)", res.n_frames,
                    (long long)codes.dim(0), same_codes ? "identical" : "differ",
                    res.stop_reason == KZ_TTS_STOP_EOS ? "eos" : "budget", want_eos ? "eos" : "budget"));
    const double diff =
        audio.size() == waveform.f32.size() ? max_abs_diff(audio.data(), waveform.f32.data(), audio.size()) : 1e9;
    report.gate(name + " engine waveform", diff <= 1e-4, fmt("%zu samples, max abs diff %.2e", audio.size(), diff));
    if (r.text_streaming) check_text_stream(tts.get(), r, c.get("text"), got, audio, name, report);
}
