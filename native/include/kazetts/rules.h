/* kazetts rules: the engine's rules on their own, for tests and for another orchestrator.
 *
 * kz_tts_synthesize (tts.h) applies these to every request; they are exported on their own so
 * that the Python engine and the tests can call the very same code (tests/test_native_engine.py
 * pins them to the Python engine's). An app needs tts.h only.
 */
#ifndef KAZETTS_RULES_H
#define KAZETTS_RULES_H

#include "kazetts/tts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The long-text rule on its own (what synthesize splits a text into): writes the byte offset
 * of each piece's end to ends (at most capacity) and returns the number of pieces, or -1 when
 * text is not valid UTF-8 or max_chars < 1. Pieces are whole sentences packed to at most
 * max_chars code points; joined, they give back the text. */
KZ_API int32_t kz_text_split(const char *text, int32_t max_chars, int32_t *ends, int32_t capacity);

/* The talker's CB0 rule on its own (what synthesize applies to every step): on the raw codec
 * logits [vocab], the repetition penalty over the distinct ids in history, end-of-speech banned
 * while fewer than min_frames ids were generated, the last 1024 ids but eos suppressed, then
 * greedy argmax or temperature / top-k / top-p and one draw from rng_state (the request's
 * sampling fields and min_frames). Returns the id, or -1 for a bad argument. */
KZ_API int32_t kz_talker_choose(const float *logits, int32_t vocab, int32_t eos, const int32_t *history,
                                int32_t n_history, const kz_tts_request *sampling, uint64_t *rng_state);

/* The random stream both engines sample from: splitmix64, one uniform double in [0, 1) per call
 * from a caller-owned state (the request's seed). A sampled frame draws 1 uniform for CB0, then
 * 15 for CB1..15. */
KZ_API double kz_rng_uniform(uint64_t *state);

/* The model directory's rule (what kz_tts_load checks once both files loaded): the talker and the mmproj come from
 * one checkpoint, as far as the files say (the fingerprint `kazetts convert` writes into both, the
 * model type; files made by llama.cpp's converter carry neither). KZ_OK, or KZ_ERR_FORMAT with a
 * message naming both files and what differs in err. */
KZ_API int kz_model_files_check(const char *talker_path, const char *mmproj_path, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
