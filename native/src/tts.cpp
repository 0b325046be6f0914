// The TTS engine behind kazetts/tts.h: checks a request and builds every piece's prompt, then
// runs the frame loop of kazetts/engine/talker_loop.py and the streaming of
// kazetts/engine/tts.py (first frame alone, then chunk_frames per codec push, pieces joined
// with a crossfade). Same order of random draws as the Python engine: per sampled frame one
// uniform for CB0, then the code predictor's 15, all from one splitmix64 state.
#include "kazetts/tts.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common_internal.h"
#include "kazetts/code_predictor.h"
#include "kazetts/codec.h"
#include "prompt.h"
#include "sampling.h"
#include "talker.h"
#include "talker_file.h"
#include "text_split.h"

namespace {

const int N_CODEBOOKS = 16;
const size_t PIECE_CHARS = 300;       // pieces of long text, in code points
const size_t CROSSFADE_SAMPLES = 240;  // 10 ms at 24 kHz between pieces
const int BUDGET_BASE = 24, BUDGET_PER_TOKEN = 8;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out + "\"";
}

std::string json_list(const std::vector<std::string> &items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
    return out + "]";
}

std::string str(const char *s) { return s ? s : ""; }

// One piece of the request, ready to run.
struct Piece {
    kz::Prompt prompt;
    int budget;
};

// The pieces' audio in order, each piece's last samples crossfaded into the next (the
// Python engine's _Joiner, with the same float32 arithmetic).
class Joiner {
  public:
    std::vector<float> push(std::vector<float> audio, bool last_piece) {
        if (has_tail_ && !audio.empty()) {
            const size_t n = std::min(tail_.size(), audio.size());
            const double step = 1.0 / double(n);
            for (size_t i = 0; i < n; ++i) {
                const float ramp = float(double(i) * step);
                audio[i] = tail_[i] * (1.0f - ramp) + audio[i] * ramp;
            }
            has_tail_ = false;
        }
        if (last_piece) return audio;
        held_.insert(held_.end(), audio.begin(), audio.end());
        const size_t keep = std::min(CROSSFADE_SAMPLES, held_.size());
        std::vector<float> out(held_.begin(), held_.end() - long(keep));
        held_.erase(held_.begin(), held_.end() - long(keep));
        return out;
    }
    void end_piece() {
        if (!held_.empty()) {
            tail_.swap(held_);
            held_.clear();
            has_tail_ = true;
        }
    }

  private:
    std::vector<float> held_, tail_;
    bool has_tail_ = false;
};

}  // namespace

struct kz_tts {
    std::unique_ptr<kz::TalkerFile> file;
    std::unique_ptr<kz::Talker> talker;
    kz_code_predictor *cp = nullptr;
    kz_codec *codec = nullptr;
    int sample_rate = 0, samples_per_frame = 0;
    std::string info, last_error;
    std::atomic<bool> cancelled{false};
    std::atomic<bool> busy{false};
    std::vector<int32_t> last_codes;

    ~kz_tts() {
        kz_cp_free(cp);
        kz_codec_free(codec);
    }

    std::vector<Piece> plan(const std::string &text, const kz_tts_request &r);
    void run(const std::vector<Piece> &pieces, const kz_tts_request &r, kz_tts_chunk_cb cb, void *user, kz_tts_result &res);
};

namespace {

using kz::Error;

void check_request(const kz_tts_request &r) {
    auto bad = [](const std::string &m) { throw Error(KZ_ERR_INVALID_ARGUMENT, m); };
    if (r.chunk_frames < 1) bad("chunk_frames must be >= 1, got " + std::to_string(r.chunk_frames));
    if (r.max_frames < 0) bad("max_frames must be >= 0 (0: a budget from the text), got " + std::to_string(r.max_frames));
    if (r.xvector_len < 0 || (r.xvector_len > 0) != (r.xvector != nullptr)) bad("xvector and xvector_len disagree");
    // the ranges of kazetts.stages.sampling's checks, greedy or not (a bad value is a bad request)
    auto positive = [](float v) { return v > 0.0f && std::isfinite(v); };
    if (!positive(r.repetition_penalty)) bad("repetition_penalty must be > 0");
    auto unit = [](float v) { return v > 0.0f && v <= 1.0f; };
    if (!positive(r.temperature)) bad("temperature must be > 0");
    if (!positive(r.cp_temperature)) bad("cp_temperature must be > 0");
    if (r.top_k < 0) bad("top_k must be >= 0 (0: off)");
    if (r.cp_top_k < 0) bad("cp_top_k must be >= 0 (0: off)");
    if (!unit(r.top_p)) bad("top_p must be in (0, 1]");
    if (!unit(r.cp_top_p)) bad("cp_top_p must be in (0, 1]");
}

bool blank(const std::u32string &s) {
    for (char32_t c : s) {
        if (!kz::is_space(c)) return false;
    }
    return true;
}

}  // namespace

std::vector<Piece> kz_tts::plan(const std::string &text, const kz_tts_request &r) {
    check_request(r);
    const std::u32string chars = kz::decode_utf8(text);
    if (chars.empty() || blank(chars)) throw Error(KZ_ERR_INVALID_ARGUMENT, "empty text: there is nothing to say");
    const std::string instruct = str(r.instruct);
    if (!instruct.empty()) kz::decode_utf8(instruct);
    const std::vector<int32_t> instruct_ids = instruct.empty() ? std::vector<int32_t>() : talker->tokenize(kz::instruct_text(instruct));
    kz::PromptRequest pr;
    pr.language = r.language && *r.language ? r.language : "auto";
    pr.speaker = str(r.speaker);
    pr.instruct_ids = instruct.empty() ? nullptr : &instruct_ids;
    pr.xvector = r.xvector;
    pr.xvector_len = r.xvector_len;
    pr.text_streaming = r.text_streaming != 0;
    std::vector<Piece> pieces;
    for (const std::u32string &piece : kz::split_text(chars, PIECE_CHARS)) {
        if (blank(piece)) continue;
        const std::vector<int32_t> ids = talker->tokenize(kz::chat_text(kz::encode_utf8(piece)));
        kz::Prompt prompt = kz::build_prompt(*file, file->voices(), ids, pr);
        int budget = r.max_frames > 0 ? r.max_frames : BUDGET_BASE + BUDGET_PER_TOKEN * int(ids.size());
        const int room = talker->n_ctx() - int(prompt.n_prefill());
        if (budget > room) {
            budget = room;
            if (budget < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "text too long for the talker context of " + std::to_string(talker->n_ctx()));
        }
        pieces.push_back({std::move(prompt), budget});
    }
    return pieces;
}

void kz_tts::run(const std::vector<Piece> &pieces, const kz_tts_request &r, kz_tts_chunk_cb cb, void *user,
                 kz_tts_result &res) {
    const auto start = Clock::now();
    uint64_t state = r.seed >= 0 ? uint64_t(r.seed) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    kz::SamplingConfig sc{r.greedy != 0, r.temperature, r.top_k, r.top_p, r.repetition_penalty};
    kz::TalkerSampler sampler(sc, file->codec_vocab(), file->voices().codec_eos);
    kz_cp_sampling cps = kz_cp_default_sampling();
    cps.greedy = r.greedy != 0;
    cps.temperature = r.cp_temperature, cps.top_k = r.cp_top_k, cps.top_p = r.cp_top_p;
    cps.rng_state = r.greedy ? nullptr : &state;
    const int H = talker->hidden_size(), text_vocab = file->text_vocab();
    std::vector<float> input(size_t(H), 0.0f), embedding(size_t(H), 0.0f);
    std::vector<int32_t> rest(N_CODEBOOKS - 1);
    Joiner joiner;
    bool stop = false;

    for (size_t index = 0; index < pieces.size() && !stop; ++index) {
        const Piece &piece = pieces[index];
        const bool last_piece = index + 1 == pieces.size();
        std::vector<int32_t> pending;  // codes of the frames waiting for the codec
        int want = 1;                  // a piece's first frame alone, then chunk_frames
        int status = kz_codec_reset(codec);
        if (status != KZ_OK) throw Error(status, kz_codec_last_error(codec));
        talker->reset(int(piece.prompt.n_prefill()) + piece.budget);
        sampler.reset();

        // Decodes the pending frames and hands their audio to the callback; false = stop.
        auto flush = [&]() {
            const int n = int(pending.size() / N_CODEBOOKS);
            std::vector<float> audio(size_t(n) * size_t(samples_per_frame));
            size_t written = 0;
            auto t = Clock::now();
            int s = kz_codec_stream_push(codec, pending.data(), n, N_CODEBOOKS, audio.data(), audio.size(), &written);
            if (s != KZ_OK) throw Error(s, kz_codec_last_error(codec));
            res.codec_ms += ms_since(t);
            audio.resize(written);
            last_codes.insert(last_codes.end(), pending.begin(), pending.end());
            res.n_frames += n;
            std::vector<float> out = joiner.push(std::move(audio), last_piece);
            res.n_samples += int64_t(out.size());
            if (res.first_audio_ms < 0) res.first_audio_ms = ms_since(start);
            kz_tts_chunk chunk{out.data(), int32_t(out.size()), pending.data(), n, int32_t(index), res.n_frames};
            const bool go_on = cb == nullptr || cb(&chunk, user) != 0;
            pending.clear();
            want = r.chunk_frames;
            return go_on;
        };

        auto t = Clock::now();
        talker->step(piece.prompt.prefill.data(), int(piece.prompt.n_prefill()));
        res.prefill_ms += ms_since(t);
        bool at_eos = false;
        for (int frame = 0; frame <= piece.budget; ++frame) {
            const auto now = Clock::now();
            res.talker_ms += std::chrono::duration<double, std::milli>(now - t).count();
            const int cb0 = sampler.choose(talker->logits() + text_vocab, &state);
            if (cb0 == file->voices().codec_eos) {
                at_eos = true;
                break;
            }
            if (frame == piece.budget) break;
            status = kz_cp_predict_frame(cp, talker->hidden(), cb0, &cps, rest.data(), embedding.data(), nullptr);
            if (status != KZ_OK) throw Error(status, kz_cp_last_error(cp));
            res.code_predictor_ms += ms_since(now);
            pending.push_back(cb0);
            pending.insert(pending.end(), rest.begin(), rest.end());
            if (int(pending.size()) == want * N_CODEBOOKS && !flush()) stop = true;
            if (cancelled.load()) stop = true;
            if (stop) break;
            const float *text_row = piece.prompt.text_row(size_t(frame));
            for (int k = 0; k < H; ++k) input[size_t(k)] = embedding[size_t(k)] + text_row[k];
            t = Clock::now();
            talker->step(input.data(), 1);
        }
        if (!stop && !pending.empty() && !flush()) stop = true;
        joiner.end_piece();
        ++res.n_pieces;
        if (!stop && !at_eos) ++res.pieces_at_budget;
    }
    res.stop_reason = stop ? KZ_TTS_STOP_CANCELLED : res.pieces_at_budget ? KZ_TTS_STOP_BUDGET : KZ_TTS_STOP_EOS;
    res.total_ms = ms_since(start);
}

extern "C" {

KZ_API kz_tts_params kz_tts_default_params(void) {
    kz_tts_params p{};
    p.struct_size = sizeof(kz_tts_params);
    p.n_threads = 2;
    p.codec_weights = KZ_CODEC_WEIGHTS_F16;
    p.cp_weights = KZ_CP_WEIGHTS_AUTO;
    p.n_ctx = 2048;
    p.n_batch = 64;
    p.verbose = 0;
    return p;
}

KZ_API kz_tts_request kz_tts_default_request(void) {
    kz_tts_request r{};
    r.struct_size = sizeof(kz_tts_request);
    r.text_streaming = 1;
    r.temperature = r.cp_temperature = 0.9f;
    r.top_k = r.cp_top_k = 50;
    r.top_p = r.cp_top_p = 1.0f;
    r.repetition_penalty = 1.05f;
    r.seed = -1;
    r.chunk_frames = 4;
    return r;
}

KZ_API int kz_tts_load(const char *talker_path, const char *mmproj_path, const kz_tts_params *params, kz_tts **out,
                       char *err, size_t err_len) {
    if (out) *out = nullptr;
    std::unique_ptr<kz_tts> tts;
    int status = kz::run_guarded(
        [&] {
            if (!talker_path || !mmproj_path || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "talker_path, mmproj_path and out are required");
            const kz_tts_params p = params ? *params : kz_tts_default_params();
            if (p.struct_size != sizeof(kz_tts_params)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_params.struct_size is " + std::to_string(p.struct_size) + ", this library's is " +
                                                         std::to_string(sizeof(kz_tts_params)) + ": start from kz_tts_default_params()");
            }
            if (p.n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
            if (p.n_ctx < 16 || p.n_batch < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_ctx must be >= 16 and n_batch >= 1");
            tts.reset(new kz_tts());
            tts->file.reset(new kz::TalkerFile(talker_path));
            // the talker first: llama.cpp reads all of its file in while loading, so its peak comes
            // before the other stages exist; token_embd's pages then leave the process (the prompt
            // reads its rows from the file, llama.cpp never does: the talker is fed embeddings)
            tts->talker.reset(new kz::Talker(talker_path, p.n_threads, p.n_ctx, p.n_batch, p.verbose != 0));
            kz_release_file_pages(talker_path, tts->file->embd_offset(), tts->file->embd_bytes());
            char buf[1024] = "";
            kz_cp_params cpp = kz_cp_default_params();
            cpp.n_threads = p.n_threads;
            cpp.weight_type = p.cp_weights;
            int s = kz_cp_load(mmproj_path, &cpp, &tts->cp, buf, sizeof buf);
            if (s != KZ_OK) throw Error(s, buf);
            s = kz_codec_load(mmproj_path, p.n_threads, p.codec_weights, &tts->codec, buf, sizeof buf);
            if (s != KZ_OK) throw Error(s, buf);
            if (kz_cp_n_embd_in(tts->cp) != tts->file->hidden() || kz_cp_cb0_vocab(tts->cp) != tts->file->codec_vocab()) {
                throw Error(KZ_ERR_FORMAT, std::string(mmproj_path) + " does not belong to " + talker_path +
                                               " (code predictor width or codec vocabulary differ)");
            }
            tts->sample_rate = kz_codec_sample_rate(tts->codec);
            tts->samples_per_frame = kz_codec_samples_per_frame(tts->codec);
            const kz::VoiceTable &v = tts->file->voices();
            std::vector<std::string> speakers;
            for (const auto &kv : v.speakers) speakers.push_back(kv.first);
            tts->info = "{\"model_type\": " + json_string(v.model_type) + ", \"sample_rate\": " + std::to_string(tts->sample_rate) +
                        ", \"speakers\": " + json_list(speakers) + ", \"languages\": " + json_list(v.spoken_languages()) +
                        ", \"supports_instruct\": " + (v.supports_instruct ? "true" : "false") +
                        ", \"xvector_size\": " + std::to_string(tts->file->hidden()) + "}";
        },
        [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_FORMAT);
    if (status == KZ_OK) *out = tts.release();
    return status;
}

KZ_API void kz_tts_free(kz_tts *tts) { delete tts; }

KZ_API const char *kz_tts_model_info(const kz_tts *tts) { return tts ? tts->info.c_str() : "{}"; }

KZ_API int32_t kz_tts_sample_rate(const kz_tts *tts) { return tts ? tts->sample_rate : 0; }

KZ_API const char *kz_tts_last_error(const kz_tts *tts) { return tts ? tts->last_error.c_str() : "no handle"; }

KZ_API int kz_tts_synthesize(kz_tts *tts, const char *text, const kz_tts_request *request, kz_tts_chunk_cb callback,
                             void *user_data, kz_tts_result *result) {
    if (!tts) return KZ_ERR_INVALID_ARGUMENT;
    if (tts->busy.exchange(true)) {
        return KZ_ERR_STATE;  // last_error belongs to the running request
    }
    tts->cancelled.store(false);
    kz_tts_result res{};
    res.struct_size = sizeof(kz_tts_result);
    res.first_audio_ms = -1;
    tts->last_error.clear();
    int status = kz::run_guarded(
        [&] {
            if (!text || !request) throw Error(KZ_ERR_INVALID_ARGUMENT, "text and request are required");
            if (request->struct_size != sizeof(kz_tts_request)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_request.struct_size is " + std::to_string(request->struct_size) +
                                                         ", this library's is " + std::to_string(sizeof(kz_tts_request)) +
                                                         ": start from kz_tts_default_request()");
            }
            if (result && result->struct_size != sizeof(kz_tts_result)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_result.struct_size must be sizeof(kz_tts_result)");
            }
            const std::vector<Piece> pieces = tts->plan(text, *request);
            tts->last_codes.clear();
            tts->run(pieces, *request, callback, user_data, res);
        },
        [&](const char *m) { tts->last_error = m; }, KZ_ERR_COMPUTE);
    if (result && result->struct_size == sizeof(kz_tts_result)) *result = res;
    tts->busy.store(false);
    return status;
}

KZ_API void kz_tts_cancel(kz_tts *tts) {
    if (tts) tts->cancelled.store(true);
}

KZ_API int32_t kz_tts_last_codes(const kz_tts *tts, int32_t *out, size_t capacity) {
    if (!tts) return 0;
    const size_t n = std::min(capacity, tts->last_codes.size());
    if (out && n) std::copy(tts->last_codes.begin(), tts->last_codes.begin() + long(n), out);
    return int32_t(tts->last_codes.size() / N_CODEBOOKS);
}

}  // extern "C"
