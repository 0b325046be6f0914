// Talker inputs for every voice mode, exactly as the reference builds them: the one definition
// of the prompt layout, which both engines run (the Python engine through kz_prompt_build in
// kazetts/rules.h).
//
// `Qwen3TTSForConditionalGeneration.generate` (qwen-tts 0.1.1) feeds the talker embedding
// vectors only. With P(x) the projected text embedding of token x and C(x) the talker's codec
// embedding:
//
//   [instruct]  P(<|im_start|>user\n{instruct}<|im_end|>\n)                 (when given)
//   role        P(ids[0:3])                                 <|im_start|>assistant\n
//   codec tags  P(tts_pad) + C(t) for each tag but the last of  prefix + [speaker] + [pad, bos],
//               the last of those rows with P(tts_bos) instead of P(tts_pad)
//   text        streaming:     P(ids[3]) + C(bos); then one text row per generated step
//               non-streaming: P(t) + C(pad) for t in ids[3:-5], P(tts_eos) + C(pad), P(tts_pad) + C(bos)
//
// where prefix = [think, think_bos, language, think_eos], or [nothink, think_bos, think_eos] for
// language "auto"; a dialect speaker turns chinese/auto into its dialect's language id; the
// speaker is C(speaker id) or an x-vector row. Every generated step's input is C(CB0) +
// sum_g CP_g(CB_g) + the next trailing text row (P(tts_pad) once they run out).
//
// ICL voice cloning (`generate_icl_prompt`) keeps the x-vector prefix up to C(pad) and then
// aligns text rows P(ref body ++ text body) ++ P(tts_eos) with codec rows C(bos) ++ ref_frames
// (each reference frame's talker input: the sum of its 16 code embeddings). Streaming: row i is
// text row i + codec row i; text rows beyond the codec rows are fed one per generated step, and
// a shorter text is padded with P(tts_pad). Non-streaming: every text row + C(pad), then every
// codec row + P(tts_pad).
//
// Ids (codec control ids, speakers, languages) come from the model (VoiceTable), never from
// here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kz {

const int ROLE_TOKENS = 3;      // <|im_start|>assistant\n
const int TAIL_TOKENS = 5;      // <|im_end|>\n<|im_start|>assistant\n
const int REF_TAIL_TOKENS = 2;  // <|im_end|>\n closing an ICL reference's transcript

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

// The reference of an ICL voice clone: its transcript, chat-wrapped (ref_chat_text), and its
// frames' talker inputs [n_frames][frame_width] (frame_width must be the talker's hidden size).
struct IclReference {
    const std::vector<int32_t> *text_ids = nullptr;
    const float *frames = nullptr;
    int n_frames = 0, frame_width = 0;
};

// Builds the reference's talker inputs from the chat-wrapped text ids. Throws kz::Error
// (KZ_ERR_INVALID_ARGUMENT) for a request the model cannot take, before reading any row.
Prompt build_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                    const PromptRequest &request);

// The ICL voice-clone inputs: the request's language, x-vector (required) and text mode; it takes
// neither a speaker name nor an instruct. Throws as build_prompt.
Prompt build_icl_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                        const IclReference &reference, const PromptRequest &request);

std::string chat_text(const std::string &text);
std::string instruct_text(const std::string &instruct);
// The assistant turn the reference tokenizes around an ICL reference's transcript.
std::string ref_chat_text(const std::string &ref_text);

}  // namespace kz
