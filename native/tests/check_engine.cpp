// The whole native engine (kazetts/tts.h) on a golden case's request, as
// tests/test_native_engine.py gates it: greedy codes identical to the reference's, the same
// stop decision, the F32-codec waveform within 1e-4; the codec on its own thread, so that the
// sanitizer and aarch64 runs cover the overlapped path. In the streaming-text mode, the text also
// streamed in (kz_tts_stream_*) word by word and cut inside its UTF-8 characters: the same codes
// and samples as synthesize. Once per run, three requests said at once (max_batch) and alone:
// the same codes and samples.
#include <algorithm>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

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

// A request's audio and codes, through the chunk callback.
struct Heard {
    std::vector<float> audio;
    std::vector<int32_t> codes;
    int status = -1;
};

int32_t hear(const kz_tts_chunk *chunk, void *user) {
    auto *out = static_cast<Heard *>(user);
    out->audio.insert(out->audio.end(), chunk->samples, chunk->samples + chunk->n_samples);
    out->codes.insert(out->codes.end(), chunk->codes, chunk->codes + size_t(chunk->n_frames) * 16);
    return 1;
}

// The request greedy, seeded and seeded in chunks of one frame, each alone and then the three at
// once from three threads (the handle's max_batch is 3): each the same codes and samples.
void check_together(kz_tts *tts, const kz_tts_request &greedy, const std::string &text, const std::string &name,
                    Report &report) {
    std::vector<kz_tts_request> requests(3, greedy);
    requests[1].greedy = 0, requests[1].seed = 1;
    requests[2].greedy = 0, requests[2].seed = 2, requests[2].chunk_frames = 1;
    std::vector<Heard> alone(3), together(3);
    auto say = [&](size_t i, Heard &out) {
        out.status = kz_tts_synthesize(tts, text.c_str(), &requests[i], hear, &out, nullptr);
    };
    for (size_t i = 0; i < 3; ++i) say(i, alone[i]);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < 3; ++i) threads.emplace_back(say, i, std::ref(together[i]));
    for (auto &t : threads) t.join();
    bool same = true;
    for (size_t i = 0; i < 3; ++i) {
        same = same && alone[i].status == KZ_OK && together[i].status == KZ_OK && alone[i].codes == together[i].codes &&
               alone[i].audio == together[i].audio;
    }
    report.gate(name + " engine requests together", same,
                fmt("3 requests (greedy, seeded, seeded in 1-frame chunks): %zu, %zu, %zu frames, codes and samples %s",
                    alone[0].codes.size() / 16, alone[1].codes.size() / 16, alone[2].codes.size() / 16,
                    same ? "identical to alone" : "differ"));
}

}  // namespace

void check_engine(const GoldenCase &c, Report &report) {
    kz_tts_params params = kz_tts_default_params();
    params.n_threads = c.threads;
    params.codec_weights = KZ_CODEC_WEIGHTS_F32;
    params.codec_threads = 1;  // the overlapped codec (tests/test_codec_overlap.py: the same audio as serial)
    params.max_batch = 3;      // (check_together; a request alone is the same with any max_batch)
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
    static bool together_checked = false;
    if (!together_checked) {
        together_checked = true;
        check_together(tts.get(), r, c.get("text"), name, report);
    }
}
