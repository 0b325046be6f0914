/* kazetts rules: the engine's rules on their own, for another orchestrator.
 *
 * kz_tts_synthesize (tts.h) applies these to every request; they are exported on their own so
 * that the Python engine (kazetts.TTS) calls the very same code: each rule here has this one
 * definition. The tests hold them against the reference's goldens and against the numpy
 * statements of the rules in kazetts/validation/oracles. An app needs tts.h only.
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

/* The sentence ends the split packs (what a text streamed in is cut at): writes the byte offset
 * just after each sentence end and the whitespace that follows it to ends (at most capacity)
 * and returns their number, or -1 when text is not valid UTF-8. A sentence ends after . ! ? …
 * (and closing quotes or brackets) followed by whitespace, after 。！？, and after a run of
 * newlines. */
KZ_API int32_t kz_text_sentence_ends(const char *text, int32_t *ends, int32_t capacity);

/* Where a sentence too long for a piece is cut, window being its first max_chars code points:
 * the byte offset after its last clause boundary (, ; : ，；：、 and the whitespace after it)
 * inside the window, else after its last whitespace, else the window's end; never at or before
 * byte offset earliest. -1 when window is not valid UTF-8 or earliest < 0. */
KZ_API int32_t kz_text_cut_point(const char *window, int32_t earliest);

/* A piece's frame budget, the guard that stops a model that never says end-of-speech:
 * max_frames when > 0, else 24 + 8 per text token of the piece (n_text_tokens: its chat-wrapped
 * ids), generous for any real speech rate; either clipped to the room the prompt leaves in the
 * talker's context (n_ctx - n_prefill). Returns the budget (>= 1), or -1 when the prompt
 * leaves no room or an argument is negative. */
KZ_API int32_t kz_frame_budget(int32_t n_text_tokens, int32_t max_frames, int32_t n_prefill, int32_t n_ctx);

/* The pieces of a long text joined in order: each piece's last 10 ms (240 samples) is held back
 * and crossfaded linearly (float32) into the first samples of the next piece; the last piece is
 * let through as it comes. One joiner per request; NULL when out of memory. */
typedef struct kz_joiner kz_joiner;

KZ_API kz_joiner *kz_joiner_new(void);
KZ_API void kz_joiner_free(kz_joiner *joiner);

/* The next n samples of the current piece (last_piece != 0: of the request's last piece) ->
 * the samples out now, written to out (room for n; at most n are written), in order. Returns
 * their number, or -1 for a bad argument. */
KZ_API int32_t kz_joiner_push(kz_joiner *joiner, const float *audio, int32_t n, int32_t last_piece, float *out);

/* The current piece has ended: what it holds back fades into the next piece's first samples. */
KZ_API void kz_joiner_end_piece(kz_joiner *joiner);

/* After the last piece ended when that was not known in advance (text streamed in): returns how
 * many samples are still held back (at most 240) and, when capacity is enough, writes them to
 * out and lets them go (capacity 0 asks); -1 for a bad argument. */
KZ_API int32_t kz_joiner_flush(kz_joiner *joiner, float *out, int32_t capacity);

/* Speaking rate: a pitch-preserving time-stretch of a mono stream (WSOLA, Verhelst and
 * Roelands 1993). Output frame k (Hann window of 40 ms, hop 20 ms) copies the input segment
 * that starts near k * hop * speed, shifted by up to +-15 ms to where it best continues the
 * previous segment (normalized cross-correlation), then overlap-adds, so pitch and timbre stay
 * and only the duration changes. A frame is placed once the input it may look at has arrived
 * and output is released once every frame overlapping it is placed, so the samples do not
 * depend on how the input is cut (~75 ms of delay). The stream ends with exactly
 * round(n / speed) samples for n in; speed 1.0 passes the samples through untouched. The
 * arithmetic is float64, the output float32. */
typedef struct kz_stretch kz_stretch;

/* A stream at speed (> 0 and finite; kazetts' requests take 0.25..4) and sample_rate (>= 100):
 * KZ_OK and *out, else KZ_ERR_INVALID_ARGUMENT (KZ_ERR_NO_MEMORY). */
KZ_API int kz_stretch_new(int32_t sample_rate, double speed, kz_stretch **out);
KZ_API void kz_stretch_free(kz_stretch *stretch);

/* n more input samples; *n_ready (optional) = the output samples now ready to read. KZ_OK,
 * KZ_ERR_INVALID_ARGUMENT, or KZ_ERR_STATE after kz_stretch_finish. */
KZ_API int kz_stretch_push(kz_stretch *stretch, const float *audio, int64_t n, int64_t *n_ready);

/* The input has ended: the rest of the output becomes ready (*n_ready as for push). Once only
 * (KZ_ERR_STATE after). */
KZ_API int kz_stretch_finish(kz_stretch *stretch, int64_t *n_ready);

/* Takes up to capacity ready output samples, in order, into out; returns how many (0 when
 * there are none, -1 for a bad argument). */
KZ_API int64_t kz_stretch_read(kz_stretch *stretch, float *out, int64_t capacity);

/* The talker's CB0 rule on its own (what synthesize applies to every step): on the raw codec
 * logits [vocab], the repetition penalty over the distinct ids in history, end-of-speech banned
 * while fewer than min_frames ids were generated, the last 1024 ids but eos suppressed, then
 * greedy argmax or temperature / top-k / top-p and one draw from rng_state (the request's
 * sampling fields and min_frames). Returns the id, -1 for a bad argument, or -2 when the
 * logits hold NaN (a damaged model: argmax and the draw would pick an id from them). */
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
