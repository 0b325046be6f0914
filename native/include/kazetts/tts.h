/* kazetts TTS engine: the whole Qwen3-TTS 12 Hz pipeline behind one handle.
 *
 *   text -> prompt (talker GGUF's token_embd rows) -> talker (llama.cpp, libllama)
 *        -> code predictor (CB1..15) -> codec decoder -> 24 kHz float PCM, frame by frame.
 *
 * The same rules as the Python engine (kazetts/engine/tts.py): long text split at sentence
 * boundaries (pieces of <= 300 characters, joined with a 10 ms crossfade), a frame budget per
 * piece from its length, the reference's prompt layout and HF-exact sampling. With the same
 * request and seed both engines give the same codes and samples (tests/test_native_engine.py).
 *
 * Shape (whisper.cpp / llama.cpp / sherpa-onnx): opaque handle, *_default_params(), structs whose
 * first field is their size (set by the *_default_* functions; a size this library does not
 * know is KZ_ERR_INVALID_ARGUMENT), a generate call with a chunk callback.
 *
 * Threads: up to max_batch requests at once per handle (kz_tts_params; default 1), each on its
 * own thread (synthesize, a text stream, enroll); more wait for a seat (kz_tts_params.queue) or
 * are KZ_ERR_STATE. kz_tts_cancel may be
 * called from any thread while they run (Android's TextToSpeechService.onStop). Two handles are
 * independent. The callback runs on the thread that called synthesize (a text
 * stream's, on the stream's worker thread: see kz_tts_stream_begin). With
 * codec_threads (kz_tts_params) the codec decoder runs on one worker thread of the request
 * while the caller's thread makes the next frames; the worker ends before synthesize returns.
 * kz_tts_load silences llama.cpp's logging (llama_log_set is process-wide) unless verbose.
 */
#ifndef KAZETTS_TTS_H
#define KAZETTS_TTS_H

#include "kazetts/common.h"
#include "kazetts/voice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_tts kz_tts;

typedef struct kz_tts_params {
    uint32_t struct_size;  /* sizeof(kz_tts_params) */
    int32_t n_threads;     /* >= 1; default 2 */
    int32_t codec_weights; /* a kz_codec_weights; default KZ_CODEC_WEIGHTS_F16 */
    int32_t cp_weights;    /* a kz_cp_weight_type; default KZ_CP_WEIGHTS_AUTO */
    int32_t n_ctx;         /* talker positions per piece (prompt + frames); default 2048 */
    int32_t n_batch;       /* talker prefill chunk; default 64 */
    int32_t verbose;       /* 1: keep llama.cpp's log on stderr; default 0 */
    int32_t codec_threads; /* the codec decoder's own threads, overlapped with the talker and code
                            * predictor (which keep n_threads): 0 = serial (the codec runs between
                            * frames on n_threads); < 0 (default) = kz_tts_auto_codec_threads(n_threads).
                            * The audio, chunks and callbacks are the same either way. */
    int32_t max_batch;     /* requests said at once, from as many threads (1..KZ_TTS_MAX_BATCH; default 1):
                            * their talker steps and code predictor frames run together, each weight
                            * read once for all (the stages' cost is reading them); each request gets
                            * the codes and audio it gets alone. Each live request holds its own
                            * talker KV cache. */
    int32_t queue;         /* requests that may wait for a seat beyond max_batch (>= 0; default 0): one
                            * more waits, in arrival order, until a request ends (kz_tts_cancel makes
                            * the waiting ones give up: KZ_ERR_STATE); beyond them, KZ_ERR_STATE at once. */
} kz_tts_params;

#define KZ_TTS_MAX_BATCH 16

KZ_API kz_tts_params kz_tts_default_params(void);

/* codec_threads' default: the cores this process may run on (its CPU affinity) beyond the
 * talker's n_threads, at most n_threads; 0 (serial) when there is no spare core, where an
 * overlapped codec would only take cycles from the talker. */
KZ_API int32_t kz_tts_auto_codec_threads(int32_t n_threads);

/* Loads a model: the talker GGUF (arch qwen3tts) and the mmproj GGUF (code predictor, codec).
 * On failure returns a status, *out = NULL and the message in err (err may be NULL). */
KZ_API int kz_tts_load(const char *talker_path, const char *mmproj_path, const kz_tts_params *params, kz_tts **out,
                       char *err, size_t err_len);

/* Frees the handle (NULL is allowed). Not while synthesize runs on it. */
KZ_API void kz_tts_free(kz_tts *tts);

/* What the model offers, as JSON (valid while the handle lives):
 * {"model_type": "custom_voice"|"voice_design"|"base", "sample_rate": 24000,
 *  "speakers": [...], "languages": ["auto", ...], "supports_instruct": bool,
 *  "xvector_size": hidden width (the length a speaker x-vector must have)} */
KZ_API const char *kz_tts_model_info(const kz_tts *tts);
KZ_API int32_t kz_tts_sample_rate(const kz_tts *tts);

/* The last error message of a call on this handle from the calling thread ("" if none); valid
 * until that thread's next call. */
KZ_API const char *kz_tts_last_error(const kz_tts *tts);

typedef enum kz_tts_stop {
    KZ_TTS_STOP_EOS = 0,      /* every piece ended with end-of-speech */
    KZ_TTS_STOP_BUDGET = 1,   /* a piece reached its frame budget (max_frames or the text-length guard) */
    KZ_TTS_STOP_CANCELLED = 2 /* kz_tts_cancel, or the callback returned 0 */
} kz_tts_stop;

/* One request. Strings are UTF-8; NULL or "" means "not given". The text is at most 100000 code
 * points. The voice each model type takes: a speaker (CustomVoice; required), an instruct and
 * no speaker (VoiceDesign; required), an x-vector (Base; required); anything else is
 * KZ_ERR_INVALID_ARGUMENT, with the same words as the Python engine. The sampling defaults are the
 * reference's generate defaults (kazetts.request, pinned by tests/test_native_engine.py);
 * their ranges are checked greedy or not: temperatures and the penalty finite and > 0, top-k
 * >= 0, top-p in (0, 1]; and chunk_frames >= 1, max_frames and min_frames >= 0. */
typedef struct kz_tts_request {
    uint32_t struct_size; /* sizeof(kz_tts_request) */
    const char *speaker;  /* a named speaker (CustomVoice), case-insensitive */
    const char *language; /* "auto" (NULL) or one of the model's languages */
    const char *instruct; /* VoiceDesign, 1.7B CustomVoice */
    const float *xvector; /* speaker x-vector (Base), xvector_size floats; excludes speaker */
    int32_t xvector_len;
    int32_t text_streaming;   /* 1 (default): the reference's streaming text mode */
    int32_t greedy;           /* 1: argmax after the logits processors (penalty still applies) */
    float temperature;        /* talker CB0 sampling: 0.9 */
    int32_t top_k;            /* 50 (0 = off) */
    float top_p;              /* 1.0 (off) */
    float repetition_penalty; /* 1.05 over the CB0 ids generated so far */
    float cp_temperature;     /* code predictor CB1..15 sampling: 0.9 */
    int32_t cp_top_k;         /* 50 */
    float cp_top_p;           /* 1.0 */
    int64_t seed;             /* >= 0: reproducible sampling; < 0 (default): a random seed */
    int32_t max_frames;       /* frames per piece; 0 (default): a budget from the piece's length */
    int32_t chunk_frames;     /* frames per codec push after a piece's first frame; default 4 */
    int32_t min_frames;       /* end-of-speech banned until a piece has this many frames: 2 (the
                               * reference's min_new_tokens); a piece still ends at its budget */
    const kz_voice *voice;    /* a cloned voice (Base; kazetts/voice.h), checked against this model;
                               * excludes speaker and xvector; the caller keeps it alive during the call */
    int32_t xvector_only;     /* with a voice: -1 (default) ICL when it has a reference text, else
                               * x-vector cloning; 0 ICL (needs its text and codes); 1 x-vector only.
                               * ICL decodes each piece after the reference's frames, whose audio is dropped. */
    float speed;              /* the speaking rate, KZ_MIN_SPEED..KZ_MAX_SPEED (1: as the model says it): the
                               * audio time-stretched, pitch kept (WSOLA, kz_stretch_* in rules.h, as the
                               * Python engine's); the codes are those of speed 1. A chunk whose stretched
                               * audio is not ready yet is held back (its codes come with the next one) and
                               * the stream's rest comes in a last chunk of no frames. */
} kz_tts_request;

#define KZ_MIN_SPEED 0.25f
#define KZ_MAX_SPEED 4.0f

KZ_API kz_tts_request kz_tts_default_request(void);

/* What the callback receives: audio and the frames it was decoded from. Pointers are valid
 * during the call only. Across pieces of a long text the last 10 ms of a piece are held back
 * and crossfaded into the next piece, so n_samples is not always n_frames * 1920. */
typedef struct kz_tts_chunk {
    const float *samples; /* mono float PCM in [-1, 1] at the model's sample rate */
    int32_t n_samples;
    const int32_t *codes; /* [n_frames][16] codes of the frames decoded for this chunk */
    int32_t n_frames;
    int32_t piece;        /* index of the text piece */
    int32_t frames_total; /* frames decoded so far in the request */
} kz_tts_chunk;

/* Return non-zero to continue, 0 to stop (the request then ends as KZ_TTS_STOP_CANCELLED). */
typedef int32_t (*kz_tts_chunk_cb)(const kz_tts_chunk *chunk, void *user_data);

/* Per-request figures (milliseconds). talker_ms includes prefill_ms. */
typedef struct kz_tts_result {
    uint32_t struct_size; /* sizeof(kz_tts_result), set by the caller */
    int32_t stop_reason;  /* a kz_tts_stop */
    int32_t n_frames;
    int32_t n_pieces;
    int32_t pieces_at_budget;
    int64_t n_samples;
    double prefill_ms, talker_ms, code_predictor_ms, codec_ms, first_audio_ms, total_ms;
    int32_t batch_max; /* the most requests whose talker steps or code predictor frames ran with this
                        * one's (max_batch; 1: it ran alone) */
} kz_tts_result;

/* Synthesizes text. Every check (text, speaker, language, instruct, x-vector, sampling values,
 * context size) and every piece's prompt are done before any compute: a bad request returns
 * KZ_ERR_INVALID_ARGUMENT and calls no callback. The first chunk comes after a piece's first
 * frame, then every chunk_frames frames. callback may be NULL (codes and result only).
 * A cancelled or stopped request returns KZ_OK with stop_reason KZ_TTS_STOP_CANCELLED.
 * result may be NULL. */
KZ_API int kz_tts_synthesize(kz_tts *tts, const char *text, const kz_tts_request *request, kz_tts_chunk_cb callback,
                             void *user_data, kz_tts_result *result);

/* Stops the running requests (synthesize, text streams) within one frame (with codec_threads, after the codec push
 * that is running, if any: its audio is dropped); no chunk is delivered after the cancel is seen. Safe from any thread,
 * a no-op when idle. A cancel that arrives before synthesize starts does not affect that request. */
KZ_API void kz_tts_cancel(kz_tts *tts);

/* ---- Text streamed in (an app speaks an on-device LLM's reply while it is written) ----------
 *
 * kz_tts_stream_begin checks the request as synthesize does (voice, language, instruct,
 * sampling, speed: a bad request fails with the message in err, before any compute and any
 * callback) and starts the request's worker thread; the app then pushes the text as it
 * arrives, cut anywhere (even inside a UTF-8 character), and finishes. The worker runs the frame
 * loop of kz_tts_synthesize in the model's streaming-text mode (text_streaming must be 1), one
 * text token per frame, feeding only tokens no later text can change (kz_text_final_boundary,
 * kz_text_piece_end in rules.h) and waiting for text when the talker catches up with it; audio
 * already decoded is delivered before it waits. So speech starts with the first words, nothing
 * is dropped or reordered, and a text of up to 150 code points gives exactly the codes and
 * samples of kz_tts_synthesize(text) (and of the Python engine's TTS.stream_text), however it is
 * cut. Longer text is said in the same pieces as kazetts.TTS.stream_text: each ends at the first
 * settled sentence end after 150 code points, or is cut inside 300; the last piece's crossfade
 * tail comes in a last chunk of no frames after the input ends. A voice clones by its x-vector
 * (ICL is refused: its prompt aligns the whole text with the reference).
 *
 * Threads: the callback runs on the stream's worker thread, never on the thread that pushes;
 * push, finish and free are the app's calls, from one thread at a time (e.g. the LLM's), and
 * push never waits for audio. kz_tts_cancel (any thread) stops the request within one frame,
 * waiting for text or not. The stream holds one of the handle's max_batch seats until it is
 * finished or freed. */
typedef struct kz_tts_stream kz_tts_stream;

/* Starts a request whose text comes by kz_tts_stream_push; callback may be NULL. The request
 * is read during the call only (its strings, x-vector and voice are copied). KZ_OK and *out, or
 * a status (KZ_ERR_INVALID_ARGUMENT: a bad request; KZ_ERR_STATE: no seat, see kz_tts_params.queue),
 * *out = NULL and the message in err (err may be NULL). */
KZ_API int kz_tts_stream_begin(kz_tts *tts, const kz_tts_request *request, kz_tts_chunk_cb callback, void *user_data,
                               kz_tts_stream **out, char *err, size_t err_len);

/* The next n bytes of the text (UTF-8, cut anywhere). KZ_OK; KZ_ERR_INVALID_ARGUMENT for bytes
 * that are not UTF-8 (they are not taken, the stream goes on); KZ_ERR_STATE after finish. Does
 * not wait for the speech; a request that has stopped (cancelled, failed) takes and drops text. */
KZ_API int kz_tts_stream_push(kz_tts_stream *stream, const char *utf8, size_t n);

/* The text has ended: waits until the rest is said (its last chunks delivered on the worker)
 * and returns the request's status, as kz_tts_synthesize's (message in kz_tts_last_error):
 * KZ_ERR_INVALID_ARGUMENT "empty text: there is nothing to say" when no word came, or when the
 * text ends inside a UTF-8 character; KZ_OK with stop_reason KZ_TTS_STOP_CANCELLED after a
 * cancel. result (may be NULL) as synthesize's. Once only (KZ_ERR_STATE after); then free. */
KZ_API int kz_tts_stream_finish(kz_tts_stream *stream, kz_tts_result *result);

/* Frees a stream (NULL is allowed); one not finished is cancelled first and waited for. */
KZ_API void kz_tts_stream_free(kz_tts_stream *stream);

/* The codes of the last request that ended on this handle (those delivered), frame-major
 * [n_frames][16]: writes min(capacity, 16 * n_frames) values and returns n_frames. */
KZ_API int32_t kz_tts_last_codes(const kz_tts *tts, int32_t *out, size_t capacity);

/* Enrolls a voice from a recording (Base models): n_samples mono float samples at sample_rate
 * (8000 Hz or more; resampled to 24 kHz with libsoxr, see kz_resample in kazetts/voice.h), with
 * ref_silence seconds (0..2) of silence appended, as the Python engine's enroll: the speaker
 * encoder's x-vector, and with ref_text (the words said; NULL: x-vector only) the reference's
 * codec codes for ICL. The same voice, bit for bit, as the Python engine's
 * tts.enroll((pcm, sample_rate), ref_text, ref_silence=...). The encoders are loaded on the
 * first call. *out: a new voice (kz_voice_free), or NULL. KZ_ERR_INVALID_ARGUMENT with the
 * Python engine's one-line message (kz_tts_last_error) for what it refuses: not a Base model,
 * empty ref_text, empty, non-finite, silent, too short or too long audio, a rate below 8000 Hz;
 * KZ_ERR_STATE for a rate other than 24000 in a library built without libsoxr, or when it gets no
 * seat (enrolment takes one, and waits for one as a request does: kz_tts_params.queue). */
KZ_API int kz_tts_enroll(kz_tts *tts, const float *pcm, int64_t n_samples, int32_t sample_rate, const char *ref_text,
                         float ref_silence, kz_voice **out);

#ifdef __cplusplus
}
#endif

#endif
