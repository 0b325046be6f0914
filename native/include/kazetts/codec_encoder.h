/* kazetts codec encoder (Qwen3-TTS-Tokenizer-12Hz encoder): 24 kHz PCM -> RVQ codes.
 *
 * The encoder half of transformers' MimiModel as the 12 Hz tokenizer uses it: a causal SEANet
 * (25 Hz), an 8-layer transformer with full causal attention, a stride-2 downsample (12.5 Hz)
 * and the split RVQ's nearest-neighbour search, keeping the first n_codebooks (16) codebooks.
 * It turns a reference recording into the codes of the ICL voice-clone prompt.
 *
 * Loaded from a Base model's mmproj GGUF (tensors kazetts.enc.*, hparams kazetts.enc.*, written
 * by `kazetts convert`); llama.cpp-made files have no encoder and fail with KZ_ERR_FORMAT.
 * Codes come back frame-major: codes[t * n_codebooks + q] is codebook q of frame t, as the
 * codec decoder takes them; n samples give ceil(n / samples_per_frame) frames.
 *
 * Conventions: see kazetts/common.h. A handle is not thread-safe; two handles are independent.
 */
#ifndef KAZETTS_CODEC_ENCODER_H
#define KAZETTS_CODEC_ENCODER_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_codec_encoder kz_codec_encoder;

/* Loads the codec encoder from an mmproj GGUF. n_threads >= 1. Every weight is held in F32.
 * On failure returns a status, *out = NULL, and the message in err (err may be NULL). */
KZ_API int kz_codec_encoder_load(const char *mmproj_path, int n_threads, kz_codec_encoder **out, char *err,
                                 size_t err_len);

KZ_API void kz_codec_encoder_free(kz_codec_encoder *enc);

/* The handle's last error message ("" if none); valid until the next call on the handle. */
KZ_API const char *kz_codec_encoder_last_error(const kz_codec_encoder *enc);

KZ_API int kz_codec_encoder_n_codebooks(const kz_codec_encoder *enc);       /* 16 */
KZ_API int kz_codec_encoder_samples_per_frame(const kz_codec_encoder *enc); /* 1920 */
KZ_API int kz_codec_encoder_sample_rate(const kz_codec_encoder *enc);       /* 24000 */
KZ_API int kz_codec_encoder_hidden(const kz_codec_encoder *enc);            /* 512: width of the debug outputs */
/* SEANet steps per frame (2: the transformer runs at twice the frame rate). */
KZ_API int kz_codec_encoder_downsample(const kz_codec_encoder *enc);

KZ_API int kz_codec_encoder_set_threads(kz_codec_encoder *enc, int n_threads);

/* Frames that n_samples samples give: ceil(n_samples / samples_per_frame). */
KZ_API int64_t kz_codec_encoder_n_frames(const kz_codec_encoder *enc, int64_t n_samples);

/* Encodes n_samples >= 1 samples of mono 24 kHz PCM (as is: no gain change, no padding).
 * codes receives n_frames * n_codebooks values (capacity is the size of codes in int32). */
KZ_API int kz_codec_encoder_encode(kz_codec_encoder *enc, const float *pcm, int64_t n_samples, int32_t *codes,
                                   size_t capacity);

/* Encode with intermediate outputs (each may be NULL), time-major, channel fastest, hidden wide:
 * seanet [n_steps][hidden] and transformer [n_steps][hidden] at the SEANet rate
 * (n_steps = ceil(n_samples / (samples_per_frame / downsample))), downsampled [n_frames][hidden]. */
KZ_API int kz_codec_encoder_encode_debug(kz_codec_encoder *enc, const float *pcm, int64_t n_samples, int32_t *codes,
                                         size_t capacity, float *seanet, float *transformer, float *downsampled);

#ifdef __cplusplus
}
#endif

#endif
