// The talker GGUF's voices and embedding rows (see talker_file.h).
#include "stages/talker_file.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
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

// An integer of any GGUF integer type: the element i of an array (kv type ARRAY) or the value.
bool int_of(gguf_context *g, int64_t id, gguf_type type, size_t i, int64_t &out) {
    if (type == GGUF_TYPE_FLOAT32 || type == GGUF_TYPE_FLOAT64 || type == GGUF_TYPE_BOOL || type == GGUF_TYPE_STRING ||
        type == GGUF_TYPE_ARRAY) {
        return false;  // (gguf_get_*_data asserts on a string)
    }
    const void *data = gguf_get_kv_type(g, id) == GGUF_TYPE_ARRAY ? gguf_get_arr_data(g, id) : gguf_get_val_data(g, id);
    switch (type) {
        case GGUF_TYPE_UINT8: out = static_cast<const uint8_t *>(data)[i]; return true;
        case GGUF_TYPE_INT8: out = static_cast<const int8_t *>(data)[i]; return true;
        case GGUF_TYPE_UINT16: out = static_cast<const uint16_t *>(data)[i]; return true;
        case GGUF_TYPE_INT16: out = static_cast<const int16_t *>(data)[i]; return true;
        case GGUF_TYPE_UINT32: out = static_cast<const uint32_t *>(data)[i]; return true;
        case GGUF_TYPE_INT32: out = static_cast<const int32_t *>(data)[i]; return true;
        case GGUF_TYPE_UINT64: out = int64_t(static_cast<const uint64_t *>(data)[i]); return true;
        case GGUF_TYPE_INT64: out = static_cast<const int64_t *>(data)[i]; return true;
        default: return false;
    }
}

std::string string_value(gguf_context *g, const std::string &key, const std::string &fallback) {
    int64_t id = key_of(g, key);
    return id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_STRING ? gguf_get_val_str(g, id) : fallback;
}

// "of 9" / "of any number of": what a list key must hold
std::string list_of(size_t n) { return n == size_t(-1) ? "any number of" : std::to_string(n); }

// A list of strings (empty when absent), n long unless n is size_t(-1).
std::vector<std::string> string_array(gguf_context *g, const std::string &key, const std::string &path,
                                      size_t n = size_t(-1)) {
    std::vector<std::string> out;
    int64_t id = key_of(g, key);
    if (id < 0 && (n == size_t(-1) || n == 0)) return out;
    if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, id) != GGUF_TYPE_STRING ||
        (n != size_t(-1) && gguf_get_arr_n(g, id) != n)) {
        throw Error(KZ_ERR_FORMAT, path + ": " + key + " is not a list of " + list_of(n) + " str");
    }
    for (size_t i = 0; i < gguf_get_arr_n(g, id); ++i) out.push_back(gguf_get_arr_str(g, id, i));
    return out;
}

// A list of n integers (empty when absent and n is 0).
std::vector<int64_t> int_array(gguf_context *g, const std::string &key, const std::string &path, size_t n) {
    std::vector<int64_t> out(n);
    int64_t id = key_of(g, key);
    if (id < 0 && n == 0) return out;
    bool ok = id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_ARRAY && gguf_get_arr_n(g, id) == n;
    for (size_t i = 0; ok && i < n; ++i) ok = int_of(g, id, gguf_get_arr_type(g, id), i, out[i]);
    if (!ok) throw Error(KZ_ERR_FORMAT, path + ": " + key + " is not a list of " + list_of(n) + " int");
    return out;
}

std::string type_name(ggml_type type) {
    std::string name = ggml_type_name(type);
    for (char &c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
    return name;
}

// A tensor's shape as ggml's ne, without the trailing dimensions of 1: "[64, 3136]".
std::string shape_of(gguf_context *g, int64_t tensor) {
    const int64_t *ne = gguf_get_tensor_ne(g, tensor);
    int n = GGML_MAX_DIMS;
    while (n > 1 && ne[n - 1] == 1) --n;
    return shape_str(ne, n);
}

// The shape [row length, rows] of a table whose rows are read, or an error naming what it is.
std::pair<int64_t, int64_t> table_shape(gguf_context *g, const std::string &path, const char *name) {
    const int64_t t = gguf_find_tensor(g, name);
    if (t < 0) throw Error(KZ_ERR_FORMAT, path + " has no " + name);
    const int64_t *ne = gguf_get_tensor_ne(g, t);
    const ggml_type type = gguf_get_tensor_type(g, t);
    if (ne[0] < 1 || ne[1] < 2 || ne[2] != 1 || ne[3] != 1 || !can_dequantize(type)) {
        throw Error(KZ_ERR_FORMAT, path + ": " + name + " is " + type_name(type) + " " + shape_of(g, t) +
                                       ", expected a 2-D table of a type ggml dequantizes");
    }
    return {ne[0], ne[1]};
}

// Types llama.cpp's CPU backend computes with: it loads any ggml type, then aborts multiplying
// by an F16 norm vector (binary_op: unsupported types) or calls a null kernel for an integer
// matrix (both found by the fuzzer).
void check_types(gguf_context *g, const std::string &path) {
    for (int64_t t = 0; t < gguf_get_n_tensors(g); ++t) {
        const int64_t *ne = gguf_get_tensor_ne(g, t);
        const ggml_type type = gguf_get_tensor_type(g, t);
        const std::string about = path + ": " + gguf_get_tensor_name(g, t) + " is " + type_name(type);
        if (ne[1] == 1 && ne[2] == 1 && ne[3] == 1 && type != GGML_TYPE_F32) {
            throw Error(KZ_ERR_FORMAT, about + ", llama.cpp takes vectors in F32 only");
        }
        if (type == GGML_TYPE_I8 || type == GGML_TYPE_I16 || type == GGML_TYPE_I32 || type == GGML_TYPE_I64 ||
            type == GGML_TYPE_F64) {
            throw Error(KZ_ERR_FORMAT, about + ", a type llama.cpp cannot multiply");
        }
    }
}

// What llama.cpp's vocabulary loader would abort the process on (GGML_ASSERT, not an error it
// returns): two tokens with the same text, an empty one counting as "[EMPTY_<id>]" as llama.cpp
// names it. A flipped byte in a token is enough.
void check_vocabulary(gguf_context *g, const std::string &path) {
    const std::vector<std::string> tokens = string_array(g, "tokenizer.ggml.tokens", path);
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
    // the magic and the version first: a flipped byte of the version is the common damage
    unsigned char head[8] = {0};
    const bool gguf = std::fread(head, 1, 8, f_) == 8 && std::memcmp(head, "GGUF", 4) == 0 &&
                      (head[4] == 2 || head[4] == 3) && !head[5] && !head[6] && !head[7];
    gguf_init_params gp{true, nullptr};
    g_ = gguf ? parse_gguf_quietly(path.c_str(), gp) : nullptr;
    if (!g_) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, path + " is not a GGUF file");
    }
    try {
        const std::string arch = string_value(g_, "general.architecture", "");
        if (arch != TALKER_ARCH)
            throw Error(KZ_ERR_FORMAT, path + " is a '" + arch + "' GGUF, not a Qwen3-TTS talker ('qwen3tts')");
        const std::pair<int64_t, int64_t> embd = table_shape(g_, path, TOKEN_EMBD), out = table_shape(g_, path, OUTPUT);
        if (embd.first != out.first || embd.second <= out.second) {
            throw Error(KZ_ERR_FORMAT, path + ": " + TOKEN_EMBD + " " + shape_of(g_, gguf_find_tensor(g_, TOKEN_EMBD)) +
                                           " and " + OUTPUT + " " + shape_of(g_, gguf_find_tensor(g_, OUTPUT)) +
                                           " do not fit together");
        }
        check_types(g_, path);
        const int64_t t = gguf_find_tensor(g_, TOKEN_EMBD);
        embd_type_ = int(gguf_get_tensor_type(g_, t));
        hidden_ = int(embd.first);
        row_bytes_ = ggml_row_size(ggml_type(embd_type_), embd.first);
        codec_vocab_ = int(out.second);
        text_vocab_ = int(embd.second - out.second);
        embd_offset_ = uint64_t(gguf_get_data_offset(g_)) + gguf_get_tensor_offset(g_, t);
        kazetts_keys_ = key_of(g_, "kazetts.model_type") >= 0;
        voices_ = kazetts_keys_ ? voices_from_metadata() : voices_from_token_names();
        check_ids();
        check_vocabulary(g_, path);
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
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "embedding row " + std::to_string(ids[i]) + " out of range 0.." + std::to_string(limit - 1));
        const uint64_t at = embd_offset_ + uint64_t(ids[i] + offset) * row_bytes_;
        // (pread: the requests said at once read rows from their threads; a seek and a read would interleave)
        if (::pread(fileno(f_), raw.data(), row_bytes_, off_t(at)) != ssize_t(row_bytes_)) {
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
    auto id = [&](const char *name, const std::string &key) {
        const int64_t k = key_of(g_, key);
        if (k < 0) throw Error(KZ_ERR_FORMAT, path_ + ": " + name + " id is missing (key " + key + ")");
        int64_t value = 0;
        if (gguf_get_kv_type(g_, k) == GGUF_TYPE_ARRAY || !int_of(g_, k, gguf_get_kv_type(g_, k), 0, value)) {
            throw Error(KZ_ERR_FORMAT, path_ + ": " + name + " id is not an integer (key " + key + ")");
        }
        return int32_t(std::max<int64_t>(INT32_MIN, std::min<int64_t>(INT32_MAX, value)));
    };
    VoiceTable v;
    const std::string t = "kazetts.text.", c = "kazetts.codec.";
    v.tts_pad = id("tts_pad", t + "tts_pad_token_id"), v.tts_bos = id("tts_bos", t + "tts_bos_token_id");
    v.tts_eos = id("tts_eos", t + "tts_eos_token_id");
    v.codec_pad = id("codec_pad", c + "pad_id"), v.codec_bos = id("codec_bos", c + "bos_id");
    v.codec_eos = id("codec_eos", c + "eos_token_id"), v.codec_think = id("codec_think", c + "think_id");
    v.codec_nothink = id("codec_nothink", c + "nothink_id");
    v.codec_think_bos = id("codec_think_bos", c + "think_bos_id");
    v.codec_think_eos = id("codec_think_eos", c + "think_eos_id");
    const std::vector<std::string> spk = string_array(g_, "kazetts.speakers", path_),
                                   langs = string_array(g_, "kazetts.languages", path_);
    const std::vector<int64_t> spk_ids = int_array(g_, "kazetts.speaker_ids", path_, spk.size()),
                               lang_ids = int_array(g_, "kazetts.language_ids", path_, langs.size());
    const std::vector<std::string> dialects = key_of(g_, "kazetts.speaker_dialects") >= 0
                                                  ? string_array(g_, "kazetts.speaker_dialects", path_, spk.size())
                                                  : std::vector<std::string>();
    for (size_t i = 0; i < langs.size(); ++i) v.languages[langs[i]] = int32_t(lang_ids[i]);
    for (size_t i = 0; i < spk.size(); ++i) {
        v.speakers[spk[i]] = int32_t(spk_ids[i]);
        if (i < dialects.size() && !dialects[i].empty()) v.speaker_dialects[spk[i]] = dialects[i];
    }
    for (const char *key : {"kazetts.model_type", "kazetts.model_size"}) {
        const int64_t k = key_of(g_, key);
        if (k >= 0 && gguf_get_kv_type(g_, k) != GGUF_TYPE_STRING)
            throw Error(KZ_ERR_FORMAT, path_ + ": kazetts.model_type and kazetts.model_size must be strings");
    }
    v.model_type = string_value(g_, "kazetts.model_type", "custom_voice");
    v.supports_instruct = takes_instruct(v.model_type, string_value(g_, "kazetts.model_size", ""));
    return v;
}

// Every special id, speaker and language inside the table it indexes.
void TalkerFile::check_ids() const {
    const VoiceTable &v = voices_;
    auto within = [&](const std::string &name, int64_t id, int limit) {
        if (id < 0 || id >= limit) {
            throw Error(KZ_ERR_FORMAT, path_ + ": " + name + " id " + std::to_string(id) + " is not in 0.." +
                                           std::to_string(limit - 1));
        }
    };
    within("tts_pad", v.tts_pad, text_vocab_), within("tts_bos", v.tts_bos, text_vocab_);
    within("tts_eos", v.tts_eos, text_vocab_);
    within("codec_pad", v.codec_pad, codec_vocab_), within("codec_bos", v.codec_bos, codec_vocab_);
    within("codec_eos", v.codec_eos, codec_vocab_), within("codec_think", v.codec_think, codec_vocab_);
    within("codec_nothink", v.codec_nothink, codec_vocab_);
    within("codec_think_bos", v.codec_think_bos, codec_vocab_);
    within("codec_think_eos", v.codec_think_eos, codec_vocab_);
    for (const auto &kv : v.languages) within("language " + kv.first, kv.second, codec_vocab_);
    for (const auto &kv : v.speakers) within("speaker " + kv.first, kv.second, codec_vocab_);
    for (const auto &kv : v.speaker_dialects) {
        if (!v.languages.count(kv.second)) {
            throw Error(KZ_ERR_FORMAT,
                        path_ + ": speaker " + kv.first + "'s dialect '" + kv.second + "' is not one of its languages");
        }
    }
}

VoiceTable TalkerFile::voices_from_token_names() const {
    const std::vector<std::string> tokens = string_array(g_, "tokenizer.ggml.tokens", path_);
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
