// Talker inputs for every voice mode, the layout of kazetts/stages/prompt.py (module docstring
// there): instruct, role, codec tags with the speaker, then the text (streaming or not) and the
// trailing text rows fed one per generated step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kz {

const int ROLE_TOKENS = 3;  // <|im_start|>assistant\n
const int TAIL_TOKENS = 5;  // <|im_end|>\n<|im_start|>assistant\n

// A model's special ids, speakers and languages (from the talker GGUF).
struct VoiceTable {
    int32_t tts_pad = 0, tts_bos = 0, tts_eos = 0;
    int32_t codec_pad = 0, codec_bos = 0, codec_eos = 0, codec_think = 0, codec_nothink = 0;
    int32_t codec_think_bos = 0, codec_think_eos = 0;
    std::map<std::string, int32_t> languages;  // includes dialect entries such as "sichuan_dialect"
    std::map<std::string, int32_t> speakers;
    std::map<std::string, std::string> speaker_dialects;
    std::string model_type = "custom_voice";
    bool supports_instruct = true;

    // "auto" plus every non-dialect language, sorted.
    std::vector<std::string> spoken_languages() const;
    // The codec language id of a request (-1 for "auto"), with the dialect speaker rule; throws
    // kz::Error naming the choices for an unknown language.
    int32_t language_id(const std::string &language, const std::string &speaker) const;
};

bool takes_instruct(const std::string &model_type, const std::string &size_tag);

// Where rows come from: P(text ids) (projected) and C(codec ids), float32 [n][hidden].
class EmbeddingRows {
  public:
    virtual ~EmbeddingRows() = default;
    virtual int hidden() const = 0;
    virtual std::vector<float> text(const std::vector<int32_t> &ids) const = 0;
    virtual std::vector<float> codec(const std::vector<int32_t> &ids) const = 0;
};

struct Prompt {
    int hidden = 0;
    std::vector<float> prefill;   // [n_prefill][hidden]
    std::vector<float> trailing;  // [n_trailing][hidden], one per generated step
    std::vector<float> tts_pad;   // [hidden], the text row once trailing runs out

    size_t n_prefill() const { return prefill.size() / size_t(hidden); }
    size_t n_trailing() const { return trailing.size() / size_t(hidden); }
    const float *text_row(size_t step) const {
        return step < n_trailing() ? &trailing[step * size_t(hidden)] : tts_pad.data();
    }
};

struct PromptRequest {
    std::string language = "auto";
    std::string speaker;  // "" = none
    const std::vector<int32_t> *instruct_ids = nullptr;
    const float *xvector = nullptr;  // replaces the speaker row
    int xvector_len = 0;
    bool text_streaming = true;
};

// Builds the reference's talker inputs from the chat-wrapped text ids. Throws kz::Error
// (KZ_ERR_INVALID_ARGUMENT) for a request the model cannot take, before reading any row.
Prompt build_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                    const PromptRequest &request);

std::string chat_text(const std::string &text);
std::string instruct_text(const std::string &instruct);

}  // namespace kz
