/* kazetts batch: several utterances said at once on one talker and one code predictor, each on
 * its own thread (the Python engine's TTS(max_batch=N); kz_tts uses the same meeting point).
 *
 * Each utterance runs its own frame loop and hands its talker steps and code predictor frames
 * in here. Once every member that is present (entered and not away) has handed one in, the
 * batch's own thread runs them together: the talker steps as one call over the talker's slots
 * (kz_talker: one slot, one sequence per utterance), the code predictor frames as one
 * kz_cp_predict_frames (each weight read once for all). Each utterance gets the bits it gets
 * alone: batching changes no code and no sample. A member waiting for something else (text, its
 * codec, its consumer) says it is away, so the others do not wait for it.
 *
 * Conventions: see kazetts/common.h. The calls that can fail return a kz_status; the message is
 * the calling thread's kz_batch_last_error().
 */
#ifndef KAZETTS_BATCH_H
#define KAZETTS_BATCH_H

#include "kazetts/code_predictor.h"
#include "kazetts/codec.h"
#include "kazetts/common.h"
#include "kazetts/talker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_batch kz_batch;
typedef struct kz_batch_member kz_batch_member;

/* A meeting point on `talker` and `cp`, which must outlive it and which nothing else may use
 * while it lives (but kz_talker_hidden / kz_talker_logits of a member's own slot between its
 * steps). NULL: a null argument or no memory. */
KZ_API kz_batch *kz_batch_new(kz_talker *talker, kz_code_predictor *cp);
/* After every member has left. */
KZ_API void kz_batch_free(kz_batch *batch);

/* An utterance in its frame loop, present (the others wait for its steps). NULL: no memory. */
KZ_API kz_batch_member *kz_batch_enter(kz_batch *batch);
/* Away (away = 1: not waited for) or back (0); nested aways count once. */
KZ_API void kz_batch_away(kz_batch_member *member, int32_t away);
/* The utterance ended (or failed): no longer waited for; frees the member. */
KZ_API void kz_batch_leave(kz_batch_member *member);

/* Feeds n embeddings [n][hidden] to the talker slot `slot` (first making it start anew with room
 * for `reset_positions` positions when that is >= 0: a piece's prefill); then kz_talker_hidden
 * and kz_talker_logits of the slot are its last row's. *together (optional): the utterances that
 * stepped in the same call. */
KZ_API int kz_batch_talker_step(kz_batch *batch, int32_t slot, const float *embeddings, int32_t n,
                                int32_t reset_positions, int32_t *together);

/* A code predictor frame from the talker slot's hidden state, as kz_cp_predict_frame:
 * codes_out[15], embedding_sum_out[n_embd_in]. sampling NULL: greedy. */
KZ_API int kz_batch_cp_frame(kz_batch *batch, int32_t slot, int32_t cb0, const kz_cp_sampling *sampling,
                             int32_t *codes_out, float *embedding_sum_out, int32_t *together);

/* kz_codec_stream_decode of a member's codec stream, run on the batch's thread between the batches
 * (the thread that computes the talker and the code predictor: ggml's OpenMP team of another
 * thread, idle between its computes, would spin on the cores they need). The stream's error
 * message is its kz_codec_stream_last_error. */
KZ_API int kz_batch_codec_decode(kz_batch *batch, kz_codec_stream *stream, const int32_t *codes, int n_frames,
                                 int n_codebooks, float *out, size_t capacity, size_t *written);

/* kz_cp_embed_codes between the batches (e.g. an ICL reference's frames). */
KZ_API int kz_batch_embed_codes(kz_batch *batch, const int32_t *codes16, float *out);

/* The message of this thread's last failed kz_batch call ("" when none). */
KZ_API const char *kz_batch_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
