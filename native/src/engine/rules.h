// What the engine reads from a request for a stage's rule (kazetts/tts.h's kz_tts_request ->
// the stage's own config), shared by the frame loop (tts.cpp) and the exported rules (rules.cpp).
#pragma once

#include "kazetts/tts.h"
#include "stages/sampling.h"

namespace kz {

// A request's CB0 fields (kz_tts_request: the sampling ones and min_frames).
SamplingConfig talker_sampling(const kz_tts_request &r);

}  // namespace kz
