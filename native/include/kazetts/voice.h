/* kazetts voices: a cloned voice (Base models) and the `.voice` file that keeps it.
 *
 * A voice is what a Base model needs to speak like a reference recording: the speaker encoder's
 * x-vector and, for ICL cloning, the reference's transcript and its codec codes. It names the
 * model it was made for (model type, talker width, a digest of the speaker encoder's weights).
 * The file is a GGUF of architecture "kazetts.voice" sealed by a digest of everything the voice
 * is made of (docs/voices.md); the Python engine reads and writes it through these functions,
 * so both sides read and write the same bytes.
 *
 *   kz_voice *v; kz_voice_read("me.voice", &v, err, sizeof err);
 *   kz_voice_info info = kz_voice_default_info(); kz_voice_get(v, &info);
 *   kz_voice_save(v, "copy.voice", 0, err, sizeof err);
 *   kz_voice_free(v);
 */
#ifndef KAZETTS_VOICE_H
#define KAZETTS_VOICE_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KZ_VOICE_FORMAT 2 /* the format written; formats 1 (unsealed) and 2 are read */

typedef struct kz_voice kz_voice;

/* What a voice holds. Filled by kz_voice_get (pointers valid while the voice lives), or by the
 * caller for kz_voice_new (copied). Strings are UTF-8. */
typedef struct kz_voice_info {
    uint32_t struct_size;               /* sizeof(kz_voice_info), set by kz_voice_default_info */
    const char *model_type;             /* the model it was made for: "base" */
    int32_t hidden_size;                /* its talker width = the x-vector's length */
    const char *speaker_encoder_sha256; /* its speaker encoder's digest (64 hex digits) */
    const float *xvector;               /* hidden_size floats */
    const char *ref_text;               /* the reference's transcript (ICL); NULL: none */
    const int32_t *ref_codes;           /* [ref_frames][16] codec codes of the reference (ICL); NULL: none */
    int32_t ref_frames;
    float ref_seconds;      /* the recording's length at 24 kHz */
    float ref_silence;      /* seconds of silence appended to it before encoding */
    int32_t format_version; /* kz_voice_get: of the file it was read from (KZ_VOICE_FORMAT for a new voice) */
} kz_voice_info;

KZ_API kz_voice_info kz_voice_default_info(void);

/* A voice from its parts (copied); KZ_ERR_INVALID_ARGUMENT naming the part that is wrong. */
KZ_API int kz_voice_new(const kz_voice_info *info, kz_voice **out, char *err, size_t err_len);

/* Reads a voice file. KZ_ERR_IO when it cannot be read; KZ_ERR_FORMAT, with a one-line message
 * naming the file and what is wrong, when it is not a voice file kazetts wrote (another kind of
 * file, a damaged one, a changed byte: the seal does not match). A format-1 file (written before
 * the seal) is read; its info says format_version 1. */
KZ_API int kz_voice_read(const char *path, kz_voice **out, char *err, size_t err_len);

/* Its parts; KZ_ERR_INVALID_ARGUMENT for a NULL or unknown-size info. */
KZ_API int kz_voice_get(const kz_voice *voice, kz_voice_info *info);

/* The seal of this voice: 64 hex digits and a NUL into out (at least 65 bytes). */
KZ_API void kz_voice_payload_sha256(const kz_voice *voice, char *out);

/* Writes the voice file to exactly `path` (created or truncated); the caller stages and renames
 * it (the Python engine's OutputFile does). Apps use kz_voice_save. */
KZ_API int kz_voice_write(const kz_voice *voice, const char *path, char *err, size_t err_len);

/* Saves the voice file to `path` without ever leaving a partial file: written to a new file
 * beside it, then renamed over it (replace != 0) or linked to it only when no file is there
 * (replace == 0: an existing file is KZ_ERR_IO "exists", and is left as it was). */
KZ_API int kz_voice_save(const kz_voice *voice, const char *path, int replace, char *err, size_t err_len);

KZ_API void kz_voice_free(kz_voice *voice);

/* Whether a voice made for one model (voice_*) fits another (model_*): the same type, width and
 * speaker encoder digest. KZ_OK, or KZ_ERR_INVALID_ARGUMENT with a one-line message into err,
 * starting with `what` ("this voice"), naming what differs and saying to enroll again. */
KZ_API int kz_voice_check_model(const char *voice_type, int32_t voice_hidden, const char *voice_sha256,
                                const char *model_type, int32_t model_hidden, const char *model_sha256,
                                const char *what, char *err, size_t err_len);

/* ---- enrollment from a recording at any sample rate (the Python engine's enroll) ---------------
 * The voice's 24 kHz audio is made as the Python engine makes it (kazetts/stages/audio_input.py):
 * libsoxr at its "HQ" quality (the python-soxr build: the same samples, bit for bit), then cut or
 * zero-padded to kz_resample_length samples. A library built without libsoxr (pip's build, which
 * cannot download it) takes 24000 Hz only: any other rate is KZ_ERR_STATE "this libkazetts was
 * built without libsoxr: ...". */

/* 1 when this library was built with libsoxr (it resamples any rate), else 0 (24000 Hz only). */
KZ_API int kz_resample_has_soxr(void);

/* The length at 24 kHz of n samples at sample_rate: ceil(n * 24000 / sample_rate) (n itself at
 * 24000); -1 for a negative n or a rate <= 0. */
KZ_API int64_t kz_resample_length(int64_t n, int32_t sample_rate);

/* Resamples n mono samples at sample_rate to 24 kHz into out (kz_resample_length(n,
 * sample_rate) floats, caller-owned). KZ_ERR_INVALID_ARGUMENT for NULL buffers or a bad count or
 * rate; KZ_ERR_STATE without libsoxr (a rate other than 24000) or when libsoxr fails. */
KZ_API int kz_resample(const float *pcm, int64_t n, int32_t sample_rate, float *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
