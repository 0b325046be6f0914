// The engine's own rules shared by the frame loop (tts.cpp) and the exported rules (rules.cpp):
// what it reads from a request for a stage's rule (kazetts/tts.h's kz_tts_request -> the
// stage's own config), and a piece's frame budget.
#pragma once

#include "kazetts/tts.h"
#include "stages/sampling.h"

namespace kz {

// A request's CB0 fields (kz_tts_request: the sampling ones and min_frames).
SamplingConfig talker_sampling(const kz_tts_request &r);

// kz_frame_budget (kazetts/rules.h): max_frames when > 0, else 24 + 8 per text id, clipped to
// the context's room; -1 when the prompt leaves no room.
int32_t frame_budget(int64_t n_text_tokens, int32_t max_frames, int64_t n_prefill, int64_t n_ctx);

}  // namespace kz
