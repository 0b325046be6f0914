// Talker prompt (see prompt.h): the one definition of the layout. Each row is one float32
// addition of a text row and a codec row, as the reference (and kazetts' numpy statement of it
// before this one) adds them.
#include "stages/prompt.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

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
// generate_voice_clone (Base: an x-vector).
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

namespace {

// The checks every mode makes, in the order of the first fault a request names: the text, the
// language, the speaker row (both given, the x-vector's size and values, the speaker's name),
// the instruct, then the voice the model type takes. Returns the language id (-1: "auto") and the
// speaker's codec id (-1: none or an x-vector).
std::pair<int32_t, int32_t> check_request(const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                                          const PromptRequest &r, int H) {
    if (text_ids.size() <= size_t(ROLE_TOKENS + TAIL_TOKENS))
        throw Error(KZ_ERR_INVALID_ARGUMENT, "empty text: there is nothing to say");
    const int32_t lang = voices.language_id(r.language, r.speaker);
    if (r.xvector && !r.speaker.empty()) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "give either a speaker name or a speaker embedding, not both");
    }
    if (r.xvector && r.xvector_len != H) {
        const std::string h = std::to_string(H);
        throw Error(KZ_ERR_INVALID_ARGUMENT, "speaker embedding has " + std::to_string(r.xvector_len) +
                                                 " values; this model needs " + h + " values (shape [" + h + "])");
    }
    if (r.xvector && !std::all_of(r.xvector, r.xvector + H, [](float v) { return std::isfinite(v); })) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "speaker embedding holds NaN or infinite values");
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
    return {lang, speaker_id};
}

// What every mode starts with: the rows [instruct], role, codec tags up to C(pad); the C(bos)
// row the text part starts from; and the rows P(tts_bos), P(tts_eos), P(tts_pad).
struct Prefix {
    std::vector<float> rows, codec_bos, tts_bos, tts_eos, tts_pad;
};

Prefix prefix(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
              const PromptRequest &r) {
    const int H = rows.hidden();
    const std::pair<int32_t, int32_t> ids = check_request(voices, text_ids, r, H);
    const int32_t lang = ids.first, speaker_id = ids.second;
    std::vector<int32_t> tags =
        lang < 0 ? std::vector<int32_t>{voices.codec_nothink, voices.codec_think_bos, voices.codec_think_eos}
                 : std::vector<int32_t>{voices.codec_think, voices.codec_think_bos, lang, voices.codec_think_eos};
    const std::vector<float> specials = rows.text({voices.tts_bos, voices.tts_eos, voices.tts_pad});
    Prefix p;
    p.tts_bos.assign(specials.begin(), specials.begin() + H);
    p.tts_eos.assign(specials.begin() + H, specials.begin() + 2 * H);
    p.tts_pad.assign(specials.begin() + 2 * H, specials.end());

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

    if (r.instruct_ids) p.rows = rows.text(*r.instruct_ids);
    std::vector<float> role = rows.text(std::vector<int32_t>(text_ids.begin(), text_ids.begin() + ROLE_TOKENS));
    p.rows.insert(p.rows.end(), role.begin(), role.end());
    for (size_t i = 0; i + 1 < n_codec; ++i) {  // P(tts_pad) + C(tag), the last with P(tts_bos)
        const std::vector<float> &text_side = i + 2 == n_codec ? p.tts_bos : p.tts_pad;
        for (int k = 0; k < H; ++k) p.rows.push_back(text_side[size_t(k)] + codec[i * size_t(H) + size_t(k)]);
    }
    p.codec_bos.assign(codec.end() - H, codec.end());
    return p;
}

// dst += rows of a [n][H] + the one row b, row by row
void add_row_to_each(std::vector<float> &dst, const std::vector<float> &a, const std::vector<float> &b) {
    for (size_t i = 0; i < a.size(); ++i) dst.push_back(a[i] + b[i % b.size()]);
}

}  // namespace

Prompt build_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                    const PromptRequest &r) {
    Prefix pre = prefix(rows, voices, text_ids, r);
    Prompt p;
    p.hidden = rows.hidden();
    p.prefill = std::move(pre.rows);
    const std::vector<int32_t> body(text_ids.begin() + ROLE_TOKENS, text_ids.end() - TAIL_TOKENS);
    if (r.text_streaming) {
        add_row_to_each(p.prefill, rows.text({body[0]}), pre.codec_bos);
        p.trailing = rows.text(std::vector<int32_t>(body.begin() + 1, body.end()));
        p.trailing.insert(p.trailing.end(), pre.tts_eos.begin(), pre.tts_eos.end());
    } else {
        const std::vector<float> pad = rows.codec({voices.codec_pad});
        add_row_to_each(p.prefill, rows.text(body), pad);
        add_row_to_each(p.prefill, pre.tts_eos, pad);
        add_row_to_each(p.prefill, pre.tts_pad, pre.codec_bos);
    }
    p.tts_pad = std::move(pre.tts_pad);
    return p;
}

Prompt build_icl_prompt(const EmbeddingRows &rows, const VoiceTable &voices, const std::vector<int32_t> &text_ids,
                        const IclReference &ref, const PromptRequest &r) {
    const int H = rows.hidden();
    if (!r.speaker.empty() || r.instruct_ids) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "ICL voice cloning takes neither a speaker name nor an instruct");
    }
    if (!r.xvector) {
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "voice cloning from reference codes needs the reference's speaker embedding (x-vector)");
    }
    if (!ref.text_ids || ref.text_ids->size() <= size_t(ROLE_TOKENS + REF_TAIL_TOKENS)) {
        throw Error(KZ_ERR_INVALID_ARGUMENT,
                    "empty reference text: ICL cloning needs the transcript of the reference audio");
    }
    Prefix pre = prefix(rows, voices, text_ids, r);
    if (ref.n_frames < 1 || ref.frame_width != H || !ref.frames) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "reference frames must be [frames >= 1, " + std::to_string(H) +
                                                 "], got shape (" + std::to_string(ref.n_frames) + ", " +
                                                 std::to_string(ref.frame_width) + ")");
    }
    // text rows P(ref body ++ text body) ++ P(tts_eos), codec rows C(bos) ++ frames
    std::vector<int32_t> body(ref.text_ids->begin() + ROLE_TOKENS, ref.text_ids->end() - REF_TAIL_TOKENS);
    body.insert(body.end(), text_ids.begin() + ROLE_TOKENS, text_ids.end() - TAIL_TOKENS);
    std::vector<float> text = rows.text(body);
    text.insert(text.end(), pre.tts_eos.begin(), pre.tts_eos.end());
    std::vector<float> codec = pre.codec_bos;
    codec.insert(codec.end(), ref.frames, ref.frames + size_t(ref.n_frames) * size_t(H));
    const size_t n_text = text.size() / size_t(H), n_codec = codec.size() / size_t(H);

    Prompt p;
    p.hidden = H;
    p.prefill = std::move(pre.rows);
    if (!r.text_streaming) {
        add_row_to_each(p.prefill, text, rows.codec({voices.codec_pad}));
        add_row_to_each(p.prefill, codec, pre.tts_pad);
    } else {
        // row i: text row i (P(tts_pad) past the text) + codec row i; the text left over trails
        const size_t n = std::min(n_text, n_codec);
        for (size_t i = 0; i < n_codec * size_t(H); ++i) {
            p.prefill.push_back((i < n * size_t(H) ? text[i] : pre.tts_pad[i % size_t(H)]) + codec[i]);
        }
        p.trailing.assign(text.begin() + std::ptrdiff_t(n * size_t(H)), text.end());
    }
    p.tts_pad = std::move(pre.tts_pad);
    return p;
}

std::string chat_text(const std::string &text) {
    return "<|im_start|>assistant\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
}

std::string ref_chat_text(const std::string &ref_text) { return "<|im_start|>assistant\n" + ref_text + "<|im_end|>\n"; }

std::string instruct_text(const std::string &instruct) { return "<|im_start|>user\n" + instruct + "<|im_end|>\n"; }

}  // namespace kz
