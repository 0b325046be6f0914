// The rules of kazetts/rules.h: the engine's own rules (stages/sampling, engine/text_split,
// stages/prompt over stages/talker_file), exported on their own behind a C ABI that never throws.
#include "engine/rules.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "engine/model_files.h"
#include "engine/text_split.h"
#include "kazetts/rules.h"
#include "stages/cp_sampling.h"
#include "stages/prompt.h"
#include "stages/talker_file.h"

namespace kz {

SamplingConfig talker_sampling(const kz_tts_request &r) {
    return {r.greedy != 0, r.temperature, r.top_k, r.top_p, r.repetition_penalty, r.min_frames};
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
    kz::TalkerSampler sampler(kz::talker_sampling(*r), vocab, eos);
    sampler.set_history(history, n_history);
    try {
        return sampler.choose(logits, rng_state);
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
