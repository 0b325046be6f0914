// What the engines read from a talker GGUF besides what llama.cpp loads: the voices and ids
// (kazetts.* metadata, else llama.cpp's token names), and token_embd rows, dequantized one row
// at a time from the file (never the whole table: llama.cpp's own helper copies all of it to F32,
// ~635 MB for the 0.6B). Opening it checks what llama.cpp would load and then crash on (see
// kz_talker_file_open in kazetts/rules.h, through which the Python engine reads it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "stages/prompt.h"

struct gguf_context;

namespace kz {

class TalkerFile : public EmbeddingRows {
  public:
    explicit TalkerFile(const std::string &path);  // throws kz::Error (IO / FORMAT)
    ~TalkerFile() override;
    TalkerFile(const TalkerFile &) = delete;
    TalkerFile &operator=(const TalkerFile &) = delete;

    int hidden() const override { return hidden_; }
    std::vector<float> text(const std::vector<int32_t> &ids) const override { return rows(ids, 0); }
    std::vector<float> codec(const std::vector<int32_t> &ids) const override { return rows(ids, text_vocab_); }

    int text_vocab() const { return text_vocab_; }
    int codec_vocab() const { return codec_vocab_; }
    const VoiceTable &voices() const { return voices_; }
    // whether the voices come from kazetts.* keys (else from llama.cpp's token names)
    bool voices_from_kazetts_keys() const { return kazetts_keys_; }
    // where token_embd lies in the file (the prompt reads its rows here, never through llama.cpp)
    uint64_t embd_offset() const { return embd_offset_; }
    uint64_t embd_bytes() const { return row_bytes_ * uint64_t(text_vocab_ + codec_vocab_); }

  private:
    std::vector<float> rows(const std::vector<int32_t> &ids, int offset) const;
    VoiceTable voices_from_metadata() const;
    VoiceTable voices_from_token_names() const;
    void check_ids() const;

    std::string path_;
    gguf_context *g_ = nullptr;  // the header, while the constructor reads it
    FILE *f_ = nullptr;
    int hidden_ = 0, text_vocab_ = 0, codec_vocab_ = 0;
    int embd_type_ = 0;
    size_t row_bytes_ = 0;
    uint64_t embd_offset_ = 0;
    VoiceTable voices_;
    bool kazetts_keys_ = false;
};

}  // namespace kz
