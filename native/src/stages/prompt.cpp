// Talker prompt (see prompt.h); mirrors kazetts/stages/prompt.py step for step, in the same
// float32 additions, so both engines feed the talker identical rows.
#include "stages/prompt.h"

#include <algorithm>
#include <cctype>

#include "core/common_internal.h"

namespace kz {

namespace {

std::string lower(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string join(const std::vector<std::string> &items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + items[i] + "'";
    return out + "]";
}

std::vector<std::string> speaker_names(const VoiceTable &voices) {
    std::vector<std::string> names;
    for (const auto &kv : voices.speakers) names.push_back(kv.first);
    return names;  // std::map iterates sorted
}

// The voice each model type is made for, as the reference's entry points take it:
// generate_custom_voice (a named speaker), generate_voice_design (an instruct, no speaker),
// generate_voice_clone (Base: an x-vector). As _check_voice in kazetts/stages/prompt.py.
void check_voice(const VoiceTable &voices, const PromptRequest &r) {
    const std::string &kind = voices.model_type;
    if (kind == "custom_voice" && r.speaker.empty()) {
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "this custom_voice model needs a speaker; choose one of " + join(speaker_names(voices)));
    }
    if (kind == "voice_design" && (!r.speaker.empty() || r.xvector)) {
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "this voice_design model takes no speaker: describe the voice with an instruct");
    }
    if (kind == "voice_design" && !r.instruct_ids) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "this voice_design model needs an instruct describing the voice");
    }
    if (kind == "base" && !r.xvector) {
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "this base model needs a speaker_embedding (an x-vector of the voice to clone)");
    }
}

void add_rows(std::vector<float> &dst, const std::vector<float> &a, const std::vector<float> &b) {
    for (size_t i = 0; i < a.size(); ++i) dst.push_back(a[i] + b[i]);
}

}  // namespace

bool takes_instruct(const std::string &model_type, const std::string &size_tag) {
    return model_type == "voice_design" || (model_type == "custom_voice" && size_tag != "0b6");
}

std::vector<std::string> VoiceTable::spoken_languages() const {
    std::vector<std::string> out{"auto"};
    for (const auto &kv : languages) {
        if (kv.first.find("dialect") == std::string::npos) out.push_back(kv.first);
    }
    return out;  // std::map iterates sorted
}

int32_t VoiceTable::language_id(const std::string &language, const std::string &speaker) const {
    const std::string lang = lower(language);
    const std::vector<std::string> spoken = spoken_languages();
    if (std::find(spoken.begin(), spoken.end(), lang) == spoken.end()) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "unknown language '" + language + "'; choose one of " + join(spoken));
    }
    auto dialect = speaker.empty() ? speaker_dialects.end() : speaker_dialects.find(lower(speaker));
    if (dialect != speaker_dialects.end() && (lang == "chinese" || lang == "auto")) {
        return languages.at(dialect->second);
    }
    return lang == "auto" ? -1 : languages.at(lang);
}

Prompt build_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                    const PromptRequest &r) {
    const int H = rows.hidden();
    if (text_ids.size() <= size_t(ROLE_TOKENS + TAIL_TOKENS))
        throw Error(KZ_ERR_INVALID_ARGUMENT, "empty text: there is nothing to say");
    // checked in kazetts/stages/prompt.py's order (the first fault of a request is the one named):
    // the language, the speaker row (both given, the x-vector's size, the speaker's name), the
    // instruct, then the voice the model type takes
    const int32_t lang = voices.language_id(r.language, r.speaker);
    if (r.xvector && !r.speaker.empty()) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "give either a speaker name or a speaker embedding, not both");
    }
    if (r.xvector && r.xvector_len != H) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "speaker embedding has " + std::to_string(r.xvector_len) +
                                                 " values; this model needs " + std::to_string(H));
    }
    int32_t speaker_id = -1;
    if (!r.xvector && !r.speaker.empty()) {
        auto it = voices.speakers.find(lower(r.speaker));
        if (it == voices.speakers.end()) {
            const std::vector<std::string> names = speaker_names(voices);
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "unknown speaker '" + r.speaker + "'; choose one of " +
                            (names.empty() ? "none: this model has no named speakers" : join(names)));
        }
        speaker_id = it->second;
    }
    if (r.instruct_ids && !voices.supports_instruct) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "this " + voices.model_type + " model does not take an instruct");
    }
    check_voice(voices, r);

    std::vector<int32_t> tags =
        lang < 0 ? std::vector<int32_t>{voices.codec_nothink, voices.codec_think_bos, voices.codec_think_eos}
                 : std::vector<int32_t>{voices.codec_think, voices.codec_think_bos, lang, voices.codec_think_eos};
    const std::vector<float> specials = rows.text({voices.tts_bos, voices.tts_eos, voices.tts_pad});
    const float *tts_bos = &specials[0], *tts_eos = &specials[size_t(H)], *tts_pad = &specials[2 * size_t(H)];

    std::vector<float> codec = rows.codec(tags);
    if (r.xvector) {
        codec.insert(codec.end(), r.xvector, r.xvector + H);
    } else if (speaker_id >= 0) {
        std::vector<float> spk = rows.codec({speaker_id});
        codec.insert(codec.end(), spk.begin(), spk.end());
    }
    std::vector<float> pad_bos = rows.codec({voices.codec_pad, voices.codec_bos});
    codec.insert(codec.end(), pad_bos.begin(), pad_bos.end());
    const size_t n_codec = codec.size() / size_t(H);

    Prompt p;
    p.hidden = H;
    if (r.instruct_ids) p.prefill = rows.text(*r.instruct_ids);
    std::vector<float> role = rows.text(std::vector<int32_t>(text_ids.begin(), text_ids.begin() + ROLE_TOKENS));
    p.prefill.insert(p.prefill.end(), role.begin(), role.end());
    for (size_t i = 0; i + 1 < n_codec; ++i) {  // P(tts_pad) + C(tag), the last with P(tts_bos)
        const float *text_side = i + 2 == n_codec ? tts_bos : tts_pad;
        for (int k = 0; k < H; ++k) p.prefill.push_back(text_side[k] + codec[i * size_t(H) + size_t(k)]);
    }
    const std::vector<float> last_codec(codec.end() - H, codec.end());
    const std::vector<int32_t> body(text_ids.begin() + ROLE_TOKENS, text_ids.end() - TAIL_TOKENS);
    if (r.text_streaming) {
        add_rows(p.prefill, rows.text({body[0]}), last_codec);
        p.trailing = rows.text(std::vector<int32_t>(body.begin() + 1, body.end()));
        p.trailing.insert(p.trailing.end(), tts_eos, tts_eos + H);
    } else {
        const std::vector<float> pad = rows.codec({voices.codec_pad});
        const std::vector<float> text = rows.text(body);
        for (size_t t = 0; t < body.size(); ++t) {
            for (int k = 0; k < H; ++k) p.prefill.push_back(text[t * size_t(H) + size_t(k)] + pad[size_t(k)]);
        }
        for (int k = 0; k < H; ++k) p.prefill.push_back(tts_eos[k] + pad[size_t(k)]);
        const std::vector<float> bos = rows.codec({voices.codec_bos});
        for (int k = 0; k < H; ++k) p.prefill.push_back(tts_pad[k] + bos[size_t(k)]);
    }
    p.tts_pad.assign(tts_pad, tts_pad + H);
    return p;
}

std::string chat_text(const std::string &text) {
    return "<|im_start|>assistant\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
}

std::string instruct_text(const std::string &instruct) { return "<|im_start|>user\n" + instruct + "<|im_end|>\n"; }

}  // namespace kz
