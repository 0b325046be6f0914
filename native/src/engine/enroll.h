// Native enrollment's core (kz_tts_enroll, kazetts/tts.h): a recording -> a kz_voice, in the
// steps and words of the Python engine's enroll (kazetts/engine/voice.py, stages/audio_input.py).
// Internal; the engine (tts.cpp) hands it its model and its lazily loaded encoders.
#pragma once

#include <string>

#include "kazetts/codec_encoder.h"
#include "kazetts/speaker_encoder.h"
#include "kazetts/voice.h"

namespace kz {

struct EnrollModel {
    std::string model_type, mmproj_path;
    int32_t hidden_size = 0;
    int n_threads = 1;
    std::string *speaker_encoder_sha256;   // the engine's cache of the digest ("" until computed)
    kz_speaker_encoder **speaker_encoder;  // the engine's handles, loaded here on first use
    kz_codec_encoder **codec_encoder;
};

// The voice of `pcm` (n mono samples at sample_rate); throws kz::Error with the Python engine's
// one-line message for what it refuses.
kz_voice *enroll(EnrollModel &m, const float *pcm, int64_t n, int32_t sample_rate, const char *ref_text,
                 float ref_silence);

}  // namespace kz
