/* kazetts speaker encoder (the ECAPA-TDNN of Qwen3-TTS Base models): log-mel -> x-vector.
 *
 * The x-vector is the talker-width vector (1024 on 0.6B, 2048 on 1.7B) that a Base model takes
 * as its speaker row. The input is the log-mel spectrogram of 24 kHz audio (128 bands, hop 256;
 * kazetts/stages/mel.py computes it), given frame-major: mel[t * n_mels + m].
 *
 * Weights are the mmproj's a.* / mm.a.fc tensors (llama.cpp's names; Base models only), staged
 * in F32 whatever their file type. Every conv is "same"-padded by reflection, as the reference
 * (padding_mode="reflect"), so an input needs more frames than the widest padding: see
 * kz_speaker_encoder_min_frames. A handle is not thread-safe; two handles are independent.
 */
#ifndef KAZETTS_SPEAKER_ENCODER_H
#define KAZETTS_SPEAKER_ENCODER_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_speaker_encoder kz_speaker_encoder;

/* Loads the speaker encoder from an mmproj GGUF. n_threads >= 1. An mmproj without one
 * (CustomVoice, VoiceDesign) gives KZ_ERR_FORMAT. On failure *out = NULL and the message is in
 * err (err may be NULL). */
KZ_API int kz_speaker_encoder_load(const char *mmproj_path, int n_threads, kz_speaker_encoder **out, char *err,
                                   size_t err_len);

KZ_API void kz_speaker_encoder_free(kz_speaker_encoder *enc);

/* The handle's last error message ("" if none); valid until the next call on the handle. */
KZ_API const char *kz_speaker_encoder_last_error(const kz_speaker_encoder *enc);

KZ_API int kz_speaker_encoder_n_mels(const kz_speaker_encoder *enc);     /* 128 */
KZ_API int kz_speaker_encoder_dim(const kz_speaker_encoder *enc);        /* x-vector width (enc_dim) */
KZ_API int kz_speaker_encoder_min_frames(const kz_speaker_encoder *enc); /* fewest frames accepted */

KZ_API int kz_speaker_encoder_set_threads(kz_speaker_encoder *enc, int n_threads);

/* The x-vector of n_frames mel frames (frame-major [n_frames][n_mels]) into out (capacity
 * floats, at least kz_speaker_encoder_dim). */
KZ_API int kz_speaker_encoder_encode(kz_speaker_encoder *enc, const float *mel, int n_frames, int n_mels, float *out,
                                     size_t capacity);

/* The fingerprint of an mmproj's speaker encoder, which a voice names its model by: sha256 of
 * its tensors (sorted by name; "name:[ne0, ne1, ...];" then the values rounded to float16),
 * the same for the F32, F16 and Q8_0 files of one checkpoint. 64 hex digits and a NUL into out
 * (out_len >= 65). KZ_ERR_FORMAT when the file has no speaker encoder. */
KZ_API int kz_speaker_encoder_fingerprint(const char *mmproj_path, char *out, size_t out_len, char *err,
                                          size_t err_len);

/* The speaker encoder's log-mel front-end on mono 24 kHz audio (the input of
 * kz_speaker_encoder_encode): qwen-tts's mel_spectrogram, computed in double precision and rounded
 * once to float. The Python engine calls it too (kazetts/stages/mel.py), so both engines encode
 * the same mel. out: kz_speaker_encoder_mel_frames(n_samples) x 128 floats, time-major.
 * KZ_ERR_INVALID_ARGUMENT for NULL buffers or audio of 384 samples or fewer. */
KZ_API int64_t kz_speaker_encoder_mel_frames(int64_t n_samples); /* 0 when too short to frame */
KZ_API int kz_speaker_encoder_log_mel(const float *audio, int64_t n_samples, float *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
