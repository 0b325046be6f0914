// The talker GGUF's voices and embedding rows (see talker_file.h).
#include "stages/talker_file.h"

#include <cstring>
#include <map>
#include <unordered_map>

#include "core/common_internal.h"
#include "ggml.h"
#include "gguf.h"

namespace kz {

namespace {

const char *TALKER_ARCH = "qwen3tts";
const char *TOKEN_EMBD = "token_embd.weight";
const char *OUTPUT = "output.weight";

int64_t key_of(gguf_context *g, const std::string &key) { return gguf_find_key(g, key.c_str()); }

int64_t int_value(gguf_context *g, int64_t id, const std::string &path, const std::string &key) {
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32: return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return int64_t(gguf_get_val_u64(g, id));
        case GGUF_TYPE_INT64: return gguf_get_val_i64(g, id);
        default: throw Error(KZ_ERR_FORMAT, path + ": key " + key + " is not an integer");
    }
}

std::string string_value(gguf_context *g, const std::string &key, const std::string &fallback) {
    int64_t id = key_of(g, key);
    return id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_STRING ? gguf_get_val_str(g, id) : fallback;
}

std::vector<std::string> string_array(gguf_context *g, const std::string &key) {
    std::vector<std::string> out;
    int64_t id = key_of(g, key);
    if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, id) != GGUF_TYPE_STRING)
        return out;
    for (size_t i = 0; i < gguf_get_arr_n(g, id); ++i) out.push_back(gguf_get_arr_str(g, id, i));
    return out;
}

std::vector<int64_t> int_array(gguf_context *g, const std::string &key, const std::string &path) {
    std::vector<int64_t> out;
    int64_t id = key_of(g, key);
    if (id < 0) return out;
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY)
        throw Error(KZ_ERR_FORMAT, path + ": key " + key + " is not an array");
    const size_t n = gguf_get_arr_n(g, id);
    const void *data = n ? gguf_get_arr_data(g, id) : nullptr;
    for (size_t i = 0; i < n; ++i) {
        switch (gguf_get_arr_type(g, id)) {
            case GGUF_TYPE_INT32: out.push_back(static_cast<const int32_t *>(data)[i]); break;
            case GGUF_TYPE_UINT32: out.push_back(static_cast<const uint32_t *>(data)[i]); break;
            case GGUF_TYPE_INT64: out.push_back(static_cast<const int64_t *>(data)[i]); break;
            default: throw Error(KZ_ERR_FORMAT, path + ": key " + key + " is not an integer array");
        }
    }
    return out;
}

// What llama.cpp's vocabulary loader would abort the process on (GGML_ASSERT, not an error it
// returns): two tokens with the same text, an empty one counting as "[EMPTY_<id>]" as llama.cpp
// names it. A flipped byte in a token is enough.
void check_vocabulary(gguf_context *g, const std::string &path) {
    const std::vector<std::string> tokens = string_array(g, "tokenizer.ggml.tokens");
    std::unordered_map<std::string, size_t> first;
    first.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string text = tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : tokens[i];
        const auto seen = first.emplace(text, i);
        if (!seen.second) {
            throw Error(KZ_ERR_FORMAT, path + ": the vocabulary is damaged: token " + std::to_string(i) +
                                           " repeats token " + std::to_string(seen.first->second) +
                                           " (llama.cpp cannot load it); convert the model again");
        }
    }
}

}  // namespace

TalkerFile::TalkerFile(const std::string &path) : path_(path) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) throw Error(KZ_ERR_IO, "talker GGUF not found or unreadable: " + path);
    gguf_init_params gp{true, nullptr};
    g_ = parse_gguf_quietly(path.c_str(), gp);
    if (!g_) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, path + " is not a GGUF file");
    }
    try {
        const std::string arch = string_value(g_, "general.architecture", "");
        if (arch != TALKER_ARCH)
            throw Error(KZ_ERR_FORMAT, path + " is a '" + arch + "' GGUF, not a Qwen3-TTS talker ('qwen3tts')");
        const int64_t embd = gguf_find_tensor(g_, TOKEN_EMBD), out = gguf_find_tensor(g_, OUTPUT);
        if (embd < 0 || out < 0) throw Error(KZ_ERR_FORMAT, path + " has no " + (embd < 0 ? TOKEN_EMBD : OUTPUT));
        const ggml_type type = gguf_get_tensor_type(g_, embd);
        const ggml_type_traits *traits = ggml_get_type_traits(type);
        if (type != GGML_TYPE_F32 && (!traits || !traits->to_float)) {
            throw Error(KZ_ERR_FORMAT, path + ": token_embd has unsupported type " + ggml_type_name(type));
        }
        embd_type_ = int(type);
        const int64_t *ne = gguf_get_tensor_ne(g_, embd);
        hidden_ = int(ne[0]);
        row_bytes_ = ggml_row_size(type, ne[0]);
        codec_vocab_ = int(gguf_get_tensor_ne(g_, out)[1]);
        text_vocab_ = int(ne[1]) - codec_vocab_;
        if (hidden_ < 1 || text_vocab_ < 1 || codec_vocab_ < 1)
            throw Error(KZ_ERR_FORMAT, path + ": token_embd and output shapes disagree");
        embd_offset_ = uint64_t(gguf_get_data_offset(g_)) + gguf_get_tensor_offset(g_, embd);
        check_vocabulary(g_, path);
        voices_ = key_of(g_, "kazetts.model_type") >= 0 ? voices_from_metadata() : voices_from_token_names();
        gguf_free(g_);  // its copy of the vocabulary (155k tokens, 150k merges) is llama.cpp's to keep
        g_ = nullptr;
    } catch (...) {
        gguf_free(g_);
        std::fclose(f_);
        throw;
    }
}

TalkerFile::~TalkerFile() { std::fclose(f_); }

std::vector<float> TalkerFile::rows(const std::vector<int32_t> &ids, int offset) const {
    std::vector<float> out(ids.size() * size_t(hidden_));
    std::vector<uint8_t> raw(row_bytes_);
    const int limit = offset ? codec_vocab_ : text_vocab_;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= limit)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "embedding row " + std::to_string(ids[i]) + " out of range");
        const uint64_t at = embd_offset_ + uint64_t(ids[i] + offset) * row_bytes_;
        if (fseeko(f_, off_t(at), SEEK_SET) != 0 || std::fread(raw.data(), 1, row_bytes_, f_) != row_bytes_) {
            throw Error(KZ_ERR_IO, path_ + ": cannot read token_embd row (truncated?)");
        }
        float *dst = &out[i * size_t(hidden_)];
        if (embd_type_ == GGML_TYPE_F32) {
            std::memcpy(dst, raw.data(), row_bytes_);
        } else {
            ggml_get_type_traits(ggml_type(embd_type_))->to_float(raw.data(), dst, hidden_);
        }
    }
    return out;
}

VoiceTable TalkerFile::voices_from_metadata() const {
    auto id = [&](const std::string &key) {
        int64_t k = key_of(g_, key);
        if (k < 0) throw Error(KZ_ERR_FORMAT, path_ + ": key " + key + " is missing");
        return int32_t(int_value(g_, k, path_, key));
    };
    VoiceTable v;
    const std::string t = "kazetts.text.", c = "kazetts.codec.";
    v.tts_pad = id(t + "tts_pad_token_id"), v.tts_bos = id(t + "tts_bos_token_id"),
    v.tts_eos = id(t + "tts_eos_token_id");
    v.codec_pad = id(c + "pad_id"), v.codec_bos = id(c + "bos_id"), v.codec_eos = id(c + "eos_token_id");
    v.codec_think = id(c + "think_id"), v.codec_nothink = id(c + "nothink_id");
    v.codec_think_bos = id(c + "think_bos_id"), v.codec_think_eos = id(c + "think_eos_id");
    const std::vector<std::string> langs = string_array(g_, "kazetts.languages"),
                                   spk = string_array(g_, "kazetts.speakers");
    const std::vector<std::string> dialects = string_array(g_, "kazetts.speaker_dialects");
    const std::vector<int64_t> lang_ids = int_array(g_, "kazetts.language_ids", path_),
                               spk_ids = int_array(g_, "kazetts.speaker_ids", path_);
    if (lang_ids.size() != langs.size() || spk_ids.size() != spk.size())
        throw Error(KZ_ERR_FORMAT, path_ + ": voice lists and their ids differ in length");
    for (size_t i = 0; i < langs.size(); ++i) v.languages[langs[i]] = int32_t(lang_ids[i]);
    for (size_t i = 0; i < spk.size(); ++i) {
        v.speakers[spk[i]] = int32_t(spk_ids[i]);
        if (i < dialects.size() && !dialects[i].empty()) v.speaker_dialects[spk[i]] = dialects[i];
    }
    v.model_type = string_value(g_, "kazetts.model_type", "custom_voice");
    v.supports_instruct = takes_instruct(v.model_type, string_value(g_, "kazetts.model_size", ""));
    return v;
}

VoiceTable TalkerFile::voices_from_token_names() const {
    const std::vector<std::string> tokens = string_array(g_, "tokenizer.ggml.tokens");
    std::map<std::string, int32_t> index;
    for (size_t i = 0; i < tokens.size(); ++i) index.emplace(tokens[i], int32_t(i));
    auto token = [&](const std::string &name, int offset) {
        auto it = index.find(name);
        if (it == index.end()) throw Error(KZ_ERR_FORMAT, path_ + ": no kazetts metadata and no token named " + name);
        return it->second - offset;
    };
    VoiceTable v;
    v.codec_pad = token("<|codec_pad|>", text_vocab_), v.codec_bos = token("<|codec_bos|>", text_vocab_);
    v.codec_eos = token("<|codec_eos_token|>", text_vocab_), v.codec_think = token("<|codec_think|>", text_vocab_);
    v.codec_nothink = token("<|codec_nothink|>", text_vocab_),
    v.codec_think_bos = token("<|codec_think_bos|>", text_vocab_);
    v.codec_think_eos = token("<|codec_think_eos|>", text_vocab_);
    v.tts_pad = token("<tts_pad>", 0), v.tts_bos = token("<tts_text_bos>", 0), v.tts_eos = token("<tts_text_eod>", 0);
    auto named = [&](const std::string &prefix, std::map<std::string, int32_t> &out) {
        for (const auto &kv : index) {
            const std::string &tok = kv.first;
            if (kv.second >= text_vocab_ && tok.size() > prefix.size() + 2 &&
                tok.compare(0, prefix.size(), prefix) == 0 && tok.compare(tok.size() - 2, 2, "|>") == 0) {
                out[tok.substr(prefix.size(), tok.size() - prefix.size() - 2)] = kv.second - text_vocab_;
            }
        }
    };
    named("<|codec_language_", v.languages);
    named("<|spk_", v.speakers);
    // llama.cpp's converter keeps only Base models, which take an x-vector and no instruct.
    v.model_type = v.speakers.empty() ? "base" : "custom_voice";
    v.supports_instruct = false;
    return v;
}

}  // namespace kz
