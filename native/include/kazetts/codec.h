/* kazetts codec decoder (Qwen3-TTS-Tokenizer-12Hz decoder): RVQ codes -> 24 kHz PCM.
 *
 * Codes are given frame-major: codes[t * n_codebooks + q] is codebook q of frame t (CB0 first),
 * as the talker/code predictor produce them. Every frame gives samples_per_frame (1920) samples.
 *
 * Two ways to decode, both the exact model:
 *  - kz_codec_decode: a whole utterance from a fresh state (the handle's stream is untouched).
 *  - kz_codec_stream_push: the next frames of the handle's stream; their samples come back at
 *    once. The handle keeps every causal conv's left context, every ConvTranspose's overlap tail
 *    and the transformer's sliding-window KV cache, so concatenated pushes equal one decode of
 *    all frames (up to float rounding) for any chunking and any length.
 * A handle is not thread-safe; two handles are independent.
 */
#ifndef KAZETTS_CODEC_H
#define KAZETTS_CODEC_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_codec kz_codec;

typedef enum kz_codec_weights {
    KZ_CODEC_WEIGHTS_F32 = 0,     /* every weight in F32: the reference path */
    KZ_CODEC_WEIGHTS_F16 = 1,     /* every conv / linear weight in F16: fast path; the convs, ConvTransposes and linears
                                     multiply them with F32 inputs and sums; codebooks, norms, biases, Snake, attention and
                                     the last conv stay F32 */
    KZ_CODEC_WEIGHTS_F16_SUMS = 2 /* as F16, and on ARM cores with FP16 arithmetic (asimdhp: Cortex-A55/A75 and later)
                                     the convs, ConvTransposes and linears multiply F16 inputs in float16, summing 32
                                     rows at a time before the float sums: ~1.8x fewer vector instructions in the codec,
                                     waveform correlation ~0.99995 with the reference (the F16 gate is 0.9999; real
                                     weights not checked); elsewhere the same as F16 */
} kz_codec_weights;

/* Loads the codec decoder (a.gen.wav.*) from an mmproj GGUF. n_threads >= 1.
 * On failure returns a status, *out = NULL, and the message in err (err may be NULL). */
KZ_API int kz_codec_load(const char *mmproj_path, int n_threads, int weights, kz_codec **out, char *err,
                         size_t err_len);

KZ_API void kz_codec_free(kz_codec *codec);

/* The handle's last error message ("" if none); valid until the next call on the handle. */
KZ_API const char *kz_codec_last_error(const kz_codec *codec);

KZ_API int kz_codec_n_codebooks(const kz_codec *codec);          /* 16 */
KZ_API int kz_codec_codebook_size(const kz_codec *codec, int q); /* valid codes are [0, size) */
KZ_API int kz_codec_samples_per_frame(const kz_codec *codec);    /* 1920 */
KZ_API int kz_codec_sample_rate(const kz_codec *codec);          /* 24000 */

/* Sizes of the intermediate outputs, per frame: quantizer (codebook_dim), pre-conv and
 * transformer (latent_dim), upsample (latent_dim channels, upsample_factor steps a frame). */
KZ_API int kz_codec_dim(const kz_codec *codec, int which); /* 0 codebook_dim, 1 latent_dim, 2 upsample factor */

KZ_API int kz_codec_set_threads(kz_codec *codec, int n_threads);

/* Frames per internal graph (default 16): bounds memory; results do not depend on it. */
KZ_API int kz_codec_set_max_chunk(kz_codec *codec, int n_frames);

/* Full decode of n_frames frames: out receives n_frames * samples_per_frame samples
 * (capacity is the size of out in floats). */
KZ_API int kz_codec_decode(kz_codec *codec, const int32_t *codes, int n_frames, int n_codebooks, float *out,
                           size_t capacity);

/* Full decode with intermediate outputs (each may be NULL), all time-major, channel fastest:
 * quantized [n_frames][codebook_dim], pre_conv [n_frames][latent_dim],
 * transformer [n_frames][latent_dim], upsample [n_frames * factor][latent_dim]. */
KZ_API int kz_codec_decode_debug(kz_codec *codec, const int32_t *codes, int n_frames, int n_codebooks, float *out,
                                 size_t capacity, float *quantized, float *pre_conv, float *transformer,
                                 float *upsample);

/* Streams n_frames more frames (n_frames may be 0); *written = n_frames * samples_per_frame.
 * On error the stream is left as it was before the call. */
KZ_API int kz_codec_stream_push(kz_codec *codec, const int32_t *codes, int n_frames, int n_codebooks, float *out,
                                size_t capacity, size_t *written);

/* Frames pushed since the last reset. */
KZ_API int64_t kz_codec_stream_position(const kz_codec *codec);

/* Starts a new stream (drops every state). */
KZ_API int kz_codec_reset(kz_codec *codec);

/* Streams of their own on one codec, e.g. one per request said at once: each keeps its own state
 * (conv contexts, attention window), all share the codec's weights and compute memory. Pushes on
 * the streams of one codec may come from several threads: they compute one at a time. A stream is
 * used by one thread at a time and freed before its codec; it decodes what kz_codec_stream_push
 * would from the same codes, bit for bit. */
typedef struct kz_codec_stream kz_codec_stream;
KZ_API int kz_codec_stream_new(kz_codec *codec, kz_codec_stream **out);
KZ_API void kz_codec_stream_free(kz_codec_stream *stream);
/* kz_codec_stream_push on this stream. */
KZ_API int kz_codec_stream_decode(kz_codec_stream *stream, const int32_t *codes, int n_frames, int n_codebooks,
                                  float *out, size_t capacity, size_t *written);
/* Starts this stream anew (kz_codec_reset). */
KZ_API int kz_codec_stream_restart(kz_codec_stream *stream);
/* The stream's last error message ("" if none); valid until its next call. */
KZ_API const char *kz_codec_stream_last_error(const kz_codec_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
