// The rules of kazetts/rules.h: the engine's own rules (stages/sampling, engine/text_split,
// stages/prompt over stages/talker_file, engine/joiner, engine/time_stretch, the frame budget),
// exported on their own behind a C ABI that never throws.
#include "engine/rules.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "engine/joiner.h"
#include "engine/model_files.h"
#include "engine/text_split.h"
#include "engine/text_stream.h"
#include "engine/time_stretch.h"
#include "kazetts/rules.h"
#include "stages/cp_sampling.h"
#include "stages/prompt.h"
#include "stages/talker_file.h"

namespace kz {

SamplingConfig talker_sampling(const kz_tts_request &r) {
    return {r.greedy != 0, r.temperature, r.top_k, r.top_p, r.repetition_penalty, r.min_frames};
}

int32_t frame_budget(int64_t n_text_tokens, int32_t max_frames, int64_t n_prefill, int64_t n_ctx) {
    const int64_t BASE = 24, PER_TOKEN = 8;  // generous for any real speech rate
    const int64_t room = n_ctx - n_prefill;
    if (room < 1) return -1;
    return int32_t(std::min(max_frames > 0 ? int64_t(max_frames) : BASE + PER_TOKEN * n_text_tokens, room));
}

namespace {

template <class Map, class Value>
std::string json_object(const Map &map, Value &&value) {
    std::string out = "{";
    for (const auto &kv : map) out += (out.size() > 1 ? ", " : "") + json_string(kv.first) + ": " + value(kv.second);
    return out + "}";
}

// kz_talker_file_info's JSON (see kazetts/rules.h)
std::string talker_file_info(const TalkerFile &f, bool from_metadata) {
    const VoiceTable &v = f.voices();
    auto number = [](int64_t x) { return std::to_string(x); };
    const std::pair<const char *, int32_t> ids[] = {{"tts_pad", v.tts_pad},
                                                    {"tts_bos", v.tts_bos},
                                                    {"tts_eos", v.tts_eos},
                                                    {"codec_pad", v.codec_pad},
                                                    {"codec_bos", v.codec_bos},
                                                    {"codec_eos", v.codec_eos},
                                                    {"codec_think", v.codec_think},
                                                    {"codec_nothink", v.codec_nothink},
                                                    {"codec_think_bos", v.codec_think_bos},
                                                    {"codec_think_eos", v.codec_think_eos}};
    std::string voices = "{";
    for (const auto &id : ids) voices += json_string(id.first) + ": " + number(id.second) + ", ";
    voices += "\"languages\": " + json_object(v.languages, number) +
              ", \"speakers\": " + json_object(v.speakers, number) +
              ", \"speaker_dialects\": " + json_object(v.speaker_dialects, json_string) +
              ", \"spoken_languages\": " + json_list(v.spoken_languages()) +
              ", \"model_type\": " + json_string(v.model_type) +
              ", \"supports_instruct\": " + (v.supports_instruct ? "true" : "false") + "}";
    return "{\"hidden\": " + number(f.hidden()) + ", \"text_vocab\": " + number(f.text_vocab()) +
           ", \"codec_vocab\": " + number(f.codec_vocab()) + ", \"embd_offset\": " + number(int64_t(f.embd_offset())) +
           ", \"embd_bytes\": " + number(int64_t(f.embd_bytes())) +
           ", \"metadata\": " + json_string(from_metadata ? "kazetts" : "token names") + ", \"voices\": " + voices +
           "}";
}

// A C array of n values (NULL only when n is 0) as a vector.
template <class T>
std::vector<T> array_of(const T *data, int32_t n, const char *what) {
    if (n < 0 || (n && !data)) throw Error(KZ_ERR_INVALID_ARGUMENT, std::string("null or negative-length ") + what);
    return std::vector<T>(data, data + n);
}

}  // namespace

}  // namespace kz

struct kz_talker_file {
    std::unique_ptr<kz::TalkerFile> file;
    std::string info, last_error;
    std::mutex lock;
};

struct kz_prompt {
    kz::Prompt prompt;
};

struct kz_joiner {
    kz::Joiner joiner;
};

struct kz_stretch {
    kz::TimeStretch stretch;
    std::vector<float> ready;  // output not read yet
    bool finished = false;
};

namespace {

// Byte offsets of code point positions in text (its UTF-8 encoding).
std::vector<int32_t> byte_offsets(const std::u32string &text) {
    std::vector<int32_t> at(text.size() + 1, 0);
    for (size_t i = 0; i < text.size(); ++i) {
        const char32_t c = text[i];
        at[i + 1] = at[i] + (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);
    }
    return at;
}

}  // namespace

extern "C" {

KZ_API int32_t kz_text_split(const char *text, int32_t max_chars, int32_t *ends, int32_t capacity) {
    if (!text || max_chars < 1 || capacity < 0 || (capacity && !ends)) return -1;
    try {
        std::vector<std::u32string> pieces = kz::split_text(kz::decode_utf8(text), size_t(max_chars));
        int64_t at = 0;
        for (size_t i = 0; i < pieces.size(); ++i) {
            at += int64_t(kz::encode_utf8(pieces[i]).size());
            if (int32_t(i) < capacity) ends[i] = int32_t(at);
        }
        return int32_t(pieces.size());
    } catch (...) {
        return -1;
    }
}

KZ_API int32_t kz_text_sentence_ends(const char *text, int32_t *ends, int32_t capacity) {
    if (!text || capacity < 0 || (capacity && !ends)) return -1;
    try {
        const std::u32string chars = kz::decode_utf8(text);
        const std::vector<int32_t> at = byte_offsets(chars);
        const std::vector<size_t> found = kz::sentence_ends(chars);
        for (size_t i = 0; i < found.size() && int32_t(i) < capacity; ++i) ends[i] = at[found[i]];
        return int32_t(found.size());
    } catch (...) {
        return -1;
    }
}

KZ_API int32_t kz_text_cut_point(const char *window, int32_t earliest) {
    if (!window || earliest < 0) return -1;
    try {
        const std::u32string chars = kz::decode_utf8(window);
        const std::vector<int32_t> at = byte_offsets(chars);
        // the code points that end at or before byte `earliest`
        const size_t first = size_t(std::upper_bound(at.begin(), at.end(), earliest) - at.begin()) - 1;
        return at[kz::cut_point(chars, first)];
    } catch (...) {
        return -1;
    }
}

KZ_API int32_t kz_text_final_boundary(const char *text, int32_t max_chars) {
    if (!text || max_chars < 0) return -1;
    try {
        const std::u32string chars = kz::decode_utf8(text);
        return byte_offsets(chars)[kz::final_boundary(chars, size_t(max_chars))];
    } catch (...) {
        return -1;
    }
}

KZ_API int32_t kz_text_piece_end(const char *text, int32_t piece_chars, int32_t committed, int32_t ended) {
    if (!text || piece_chars < 1 || committed < 0) return -2;
    try {
        const std::u32string chars = kz::decode_utf8(text);
        const std::vector<int32_t> at = byte_offsets(chars);
        if (committed > at.back()) return -2;
        // the code points that end at or before byte `committed`
        const size_t fed = size_t(std::upper_bound(at.begin(), at.end(), committed) - at.begin()) - 1;
        const size_t end = kz::piece_end(chars, size_t(piece_chars), fed, ended != 0);
        return end == std::u32string::npos ? -1 : at[end];
    } catch (...) {
        return -2;
    }
}

KZ_API int32_t kz_frame_budget(int32_t n_text_tokens, int32_t max_frames, int32_t n_prefill, int32_t n_ctx) {
    if (n_text_tokens < 0 || max_frames < 0 || n_prefill < 0 || n_ctx < 0) return -1;
    return kz::frame_budget(n_text_tokens, max_frames, n_prefill, n_ctx);
}

KZ_API kz_joiner *kz_joiner_new(void) { return new (std::nothrow) kz_joiner(); }

KZ_API void kz_joiner_free(kz_joiner *joiner) { delete joiner; }

KZ_API int32_t kz_joiner_push(kz_joiner *joiner, const float *audio, int32_t n, int32_t last_piece, float *out) {
    if (!joiner || n < 0 || (n && (!audio || !out))) return -1;
    try {
        return int32_t(joiner->joiner.push(audio, size_t(n), last_piece != 0, out));
    } catch (...) {
        return -1;
    }
}

KZ_API void kz_joiner_end_piece(kz_joiner *joiner) {
    if (joiner) joiner->joiner.end_piece();
}

KZ_API int32_t kz_joiner_flush(kz_joiner *joiner, float *out, int32_t capacity) {
    if (!joiner || capacity < 0 || (capacity && !out)) return -1;
    const int32_t held = int32_t(joiner->joiner.held());
    if (held <= capacity) {
        const std::vector<float> tail = joiner->joiner.flush();
        std::copy(tail.begin(), tail.end(), out);
    }
    return held;
}

KZ_API int kz_stretch_new(int32_t sample_rate, double speed, kz_stretch **out) {
    if (out) *out = nullptr;
    if (!out || sample_rate < 100 || !(speed > 0) || !std::isfinite(speed)) return KZ_ERR_INVALID_ARGUMENT;
    return kz::run_guarded([&] { *out = new kz_stretch{kz::TimeStretch(sample_rate, speed), {}, false}; },
                           [](const char *) {}, KZ_ERR_NO_MEMORY);
}

KZ_API void kz_stretch_free(kz_stretch *stretch) { delete stretch; }

KZ_API int kz_stretch_push(kz_stretch *stretch, const float *audio, int64_t n, int64_t *n_ready) {
    if (!stretch || n < 0 || (n && !audio)) return KZ_ERR_INVALID_ARGUMENT;
    if (stretch->finished) return KZ_ERR_STATE;
    const int status = kz::run_guarded([&] { stretch->stretch.push(audio, size_t(n), stretch->ready); },
                                       [](const char *) {}, KZ_ERR_NO_MEMORY);
    if (n_ready) *n_ready = int64_t(stretch->ready.size());
    return status;
}

KZ_API int kz_stretch_finish(kz_stretch *stretch, int64_t *n_ready) {
    if (!stretch) return KZ_ERR_INVALID_ARGUMENT;
    if (stretch->finished) return KZ_ERR_STATE;
    stretch->finished = true;
    const int status =
        kz::run_guarded([&] { stretch->stretch.finish(stretch->ready); }, [](const char *) {}, KZ_ERR_NO_MEMORY);
    if (n_ready) *n_ready = int64_t(stretch->ready.size());
    return status;
}

KZ_API int64_t kz_stretch_read(kz_stretch *stretch, float *out, int64_t capacity) {
    if (!stretch || capacity < 0 || (capacity && !out)) return -1;
    const size_t n = std::min(stretch->ready.size(), size_t(capacity));
    if (n) std::memcpy(out, stretch->ready.data(), n * sizeof(float));
    stretch->ready.erase(stretch->ready.begin(), stretch->ready.begin() + long(n));
    return int64_t(n);
}

KZ_API double kz_rng_uniform(uint64_t *state) { return state ? kz::cp::splitmix_uniform(state) : 0.0; }

KZ_API int32_t kz_talker_choose(const float *logits, int32_t vocab, int32_t eos, const int32_t *history,
                                int32_t n_history, const kz_tts_request *r, uint64_t *rng_state) {
    if (!logits || !r || r->struct_size != sizeof(kz_tts_request) || vocab < 1 || eos < 0 || eos >= vocab ||
        n_history < 0 || (n_history && !history) || (!r->greedy && !rng_state) || r->min_frames < 0) {
        return -1;
    }
    for (int32_t i = 0; i < n_history; ++i) {
        if (history[i] < 0 || history[i] >= vocab) return -1;
    }
    try {
        kz::TalkerSampler sampler(kz::talker_sampling(*r), vocab, eos);
        sampler.set_history(history, n_history);
        return sampler.choose(logits, rng_state);
    } catch (const kz::Error &e) {
        return e.status == KZ_ERR_COMPUTE ? -2 : -1;  // NaN logits
    } catch (...) {
        return -1;
    }
}

KZ_API int kz_model_files_check(const char *talker_path, const char *mmproj_path, char *err, size_t err_len) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(
        [&] {
            if (!talker_path || !mmproj_path) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null path");
            kz::check_model_files(talker_path, mmproj_path);
        },
        [&](const char *message) { kz::write_error(err, err_len, message); }, KZ_ERR_FORMAT);
}

KZ_API int kz_talker_file_open(const char *path, kz_talker_file **out, char *err, size_t err_len) {
    return kz::load_handle(path, out, err, err_len, [&] {
        std::unique_ptr<kz_talker_file> f(new kz_talker_file());
        f->file.reset(new kz::TalkerFile(path));
        f->info = kz::talker_file_info(*f->file, f->file->voices_from_kazetts_keys());
        return f;
    });
}

KZ_API void kz_talker_file_free(kz_talker_file *file) { delete file; }

KZ_API const char *kz_talker_file_last_error(const kz_talker_file *file) {
    return file ? file->last_error.c_str() : "null handle";
}

KZ_API const char *kz_talker_file_info(const kz_talker_file *file) { return file ? file->info.c_str() : nullptr; }

KZ_API int kz_talker_file_rows(kz_talker_file *file, int32_t table, const int32_t *ids, int32_t n_ids, float *out) {
    if (!file) return KZ_ERR_INVALID_ARGUMENT;
    std::lock_guard<std::mutex> hold(file->lock);
    return kz::call_handle(file, [&] {
        if (table != KZ_TEXT_ROWS && table != KZ_CODEC_ROWS) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "bad table");
        if (n_ids && !out) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null output");
        const std::vector<int32_t> wanted = kz::array_of(ids, n_ids, "ids");
        const std::vector<float> rows = table == KZ_TEXT_ROWS ? file->file->text(wanted) : file->file->codec(wanted);
        std::copy(rows.begin(), rows.end(), out);
    });
}

KZ_API int kz_prompt_build(kz_talker_file *file, const kz_prompt_request *request, kz_prompt **out) {
    if (!file) return KZ_ERR_INVALID_ARGUMENT;
    if (out) *out = nullptr;
    std::lock_guard<std::mutex> hold(file->lock);
    return kz::call_handle(file, [&] {
        if (!request || !out) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null request or output");
        if (request->struct_size != sizeof(kz_prompt_request)) {
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "struct_size is not sizeof(kz_prompt_request) of this library");
        }
        const kz_prompt_request &r = *request;
        const std::vector<int32_t> text_ids = kz::array_of(r.text_ids, r.n_text_ids, "text_ids");
        const std::vector<int32_t> instruct_ids = kz::array_of(r.instruct_ids, r.n_instruct_ids, "instruct_ids");
        kz::PromptRequest pr;
        pr.language = r.language && *r.language ? r.language : "auto";
        pr.speaker = r.speaker ? r.speaker : "";
        pr.instruct_ids = r.instruct_ids ? &instruct_ids : nullptr;
        pr.xvector = r.xvector;
        pr.xvector_len = r.xvector_len;
        pr.text_streaming = r.text_streaming != 0;
        std::unique_ptr<kz_prompt> p(new kz_prompt());
        const kz::TalkerFile &rows = *file->file;
        if (r.ref_text_ids) {
            const std::vector<int32_t> ref_ids = kz::array_of(r.ref_text_ids, r.n_ref_text_ids, "ref_text_ids");
            kz::IclReference ref;
            ref.text_ids = &ref_ids;
            ref.frames = r.ref_frames;
            ref.n_frames = r.n_ref_frames;
            ref.frame_width = r.ref_frame_width;
            p->prompt = kz::build_icl_prompt(rows, rows.voices(), text_ids, ref, pr);
        } else {
            p->prompt = kz::build_prompt(rows, rows.voices(), text_ids, pr);
        }
        *out = p.release();
    });
}

KZ_API const float *kz_prompt_rows(const kz_prompt *prompt, int32_t part, int32_t *n_rows, int32_t *hidden) {
    if (!prompt) return nullptr;
    const kz::Prompt &p = prompt->prompt;
    const std::vector<float> *rows = part == KZ_PROMPT_PREFILL    ? &p.prefill
                                     : part == KZ_PROMPT_TRAILING ? &p.trailing
                                     : part == KZ_PROMPT_TTS_PAD  ? &p.tts_pad
                                                                  : nullptr;
    if (!rows) return nullptr;
    if (n_rows) *n_rows = int32_t(rows->size() / size_t(p.hidden));
    if (hidden) *hidden = p.hidden;
    return rows->data();
}

KZ_API void kz_prompt_free(kz_prompt *prompt) { delete prompt; }

}  // extern "C"
