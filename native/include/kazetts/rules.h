/* kazetts rules: the engine's rules on their own, for another orchestrator.
 *
 * kz_tts_synthesize (tts.h) applies these to every request; they are exported on their own so
 * that the Python engine (kazetts.TTS) calls the very same code: each rule here has this one
 * definition, the talker file and the prompt layout included (kazetts/stages/talker_file.py and
 * prompt.py call them). The tests hold them against the reference's goldens and against the numpy
 * statements of the rules in kazetts/validation/oracles. An app needs tts.h (and voice.h) only.
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

/* Text streamed in (an LLM's reply while it is written; kz_tts_stream_* in tts.h): the commit
 * rule, which prefix of the text received so far no later text can change. A final boundary b is
 * a position whose split the talker's tokenizer (Qwen2's pre-tokenizer words, BPE within them)
 * keeps whatever follows: text[b-1] is not whitespace, and text[b] is a space or tab, or text[b-1]
 * is a letter (\p{L}) and text[b] is not, or either is an ASCII digit. Returns the byte offset of
 * the last final boundary inside the first max_chars code points and before the last code point
 * (0: none yet), or -1 when text is not valid UTF-8 or max_chars < 0. The tokens of the text up
 * to it are a prefix of the tokens of any text that starts with it. */
KZ_API int32_t kz_text_final_boundary(const char *text, int32_t max_chars);

/* Where the piece at the start of text (what arrived of it and after it) ends, once no later
 * text can move that: at the first sentence end (kz_text_sentence_ends) at or after
 * piece_chars / 2 code points and at or after byte `committed` (the text whose tokens were fed)
 * that a character other than whitespace or a closing quote or bracket follows, else, when text
 * is longer than piece_chars code points, at kz_text_cut_point of its first piece_chars, else,
 * once the text has ended (ended != 0), at its end. Returns that byte offset, -1 while the piece
 * may still grow, -2 for invalid UTF-8 or a bad argument. A text that ended shorter than
 * piece_chars / 2 is one piece, as kz_text_split would give it. */
KZ_API int32_t kz_text_piece_end(const char *text, int32_t piece_chars, int32_t committed, int32_t ended);

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

/* ---- The talker file and the prompt layout ----------------------------------------------------
 *
 * A talker GGUF opened for what the engines read besides llama.cpp: its voices and ids (kazetts.*
 * keys, else llama.cpp's token names) and token_embd rows, dequantized one at a time from the
 * file. Opening checks what llama.cpp would load and then abort or crash on (a token twice in the
 * vocabulary, an F16 norm vector, an integer matrix), the voices and that every id is inside its
 * table. A handle serializes its calls (one lock); its last error is the last failed call's. */
typedef struct kz_talker_file kz_talker_file;

/* Opens a talker GGUF. On failure returns KZ_ERR_IO or KZ_ERR_FORMAT, *out = NULL, and the
 * message, naming the file, in err (err may be NULL). */
KZ_API int kz_talker_file_open(const char *path, kz_talker_file **out, char *err, size_t err_len);

KZ_API void kz_talker_file_free(kz_talker_file *file);

/* The handle's last error message ("" if none); valid until the next call on the handle. */
KZ_API const char *kz_talker_file_last_error(const kz_talker_file *file);

/* The file as a JSON object, valid while the handle lives: "hidden", "text_vocab", "codec_vocab",
 * "embd_offset" and "embd_bytes" (where token_embd lies in the file), "metadata" ("kazetts" or
 * "token names": where the voices were read) and "voices": {"tts_pad", "tts_bos", "tts_eos",
 * "codec_pad", "codec_bos", "codec_eos", "codec_think", "codec_nothink", "codec_think_bos",
 * "codec_think_eos": ids; "languages", "speakers": {name: codec id}; "speaker_dialects": {speaker:
 * language name}; "spoken_languages": ["auto", the non-dialect languages, sorted]; "model_type":
 * "custom_voice" | "voice_design" | "base"; "supports_instruct": bool}. */
KZ_API const char *kz_talker_file_info(const kz_talker_file *file);

/* Which rows of token_embd: P(text id), the projected text embedding, or C(codec id). */
typedef enum kz_embedding_table { KZ_TEXT_ROWS = 0, KZ_CODEC_ROWS = 1 } kz_embedding_table;

/* Writes the float32 rows [n_ids][hidden] of ids of one table to out (n_ids * hidden floats). An id
 * out of its table is KZ_ERR_INVALID_ARGUMENT; a file cut short, KZ_ERR_IO. */
KZ_API int kz_talker_file_rows(kz_talker_file *file, int32_t table, const int32_t *ids, int32_t n_ids, float *out);

/* A request's voice, as the prompt layout takes it. Set struct_size = sizeof(kz_prompt_request);
 * pointers may be NULL where marked, arrays are read during kz_prompt_build only. */
typedef struct kz_prompt_request {
    size_t struct_size;
    const int32_t
        *text_ids; /* the text, chat-wrapped: <|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n */
    int32_t n_text_ids;
    const char *language;        /* NULL or "" = "auto"; any case */
    const char *speaker;         /* NULL or "" = none (CustomVoice: a speaker name, any case) */
    const int32_t *instruct_ids; /* NULL = no instruct; else <|im_start|>user\n{instruct}<|im_end|>\n */
    int32_t n_instruct_ids;
    const float *xvector; /* NULL = none; else the speaker row, xvector_len values (the talker's hidden) */
    int32_t xvector_len;
    int32_t text_streaming; /* 1: one text row per generated step (the reference's default); 0: all in the prefill */
    /* ICL voice cloning when ref_text_ids is not NULL: the reference's transcript, chat-wrapped
     * (<|im_start|>assistant\n{transcript}<|im_end|>\n), and its frames' talker inputs
     * [n_ref_frames][ref_frame_width] (per frame, the sum of its 16 code embeddings). ICL takes
     * an x-vector and neither a speaker nor an instruct. */
    const int32_t *ref_text_ids;
    int32_t n_ref_text_ids;
    const float *ref_frames;
    int32_t n_ref_frames;
    int32_t ref_frame_width;
} kz_prompt_request;

/* The talker's inputs for one piece of text (see kz_prompt_rows). */
typedef struct kz_prompt kz_prompt;

/* Builds the reference's talker inputs (Qwen3TTSForConditionalGeneration.generate, qwen-tts
 * 0.1.1) for a request: [instruct] role, codec tags (think / language / speaker / pad / bos),
 * then the text (streaming or not, ICL or not); layout in native/src/stages/prompt.h. A request
 * the model cannot take (an unknown speaker or language, a voice its model type does not take,
 * an x-vector of the wrong size, an empty text...) is KZ_ERR_INVALID_ARGUMENT with a one-line
 * message in kz_talker_file_last_error, before any row is read. On success *out is a prompt to
 * free with kz_prompt_free. */
KZ_API int kz_prompt_build(kz_talker_file *file, const kz_prompt_request *request, kz_prompt **out);

/* Which rows of a prompt. */
typedef enum kz_prompt_part {
    KZ_PROMPT_PREFILL = 0,  /* [n][hidden]: the rows fed before the first frame */
    KZ_PROMPT_TRAILING = 1, /* [n][hidden]: text row i goes into generated step i's input */
    KZ_PROMPT_TTS_PAD = 2   /* [1][hidden]: the text row of every step after the trailing ones */
} kz_prompt_part;

/* The rows of one part, owned by the prompt (NULL for a bad part); *n_rows and *hidden (either
 * may be NULL) receive their count and width. */
KZ_API const float *kz_prompt_rows(const kz_prompt *prompt, int32_t part, int32_t *n_rows, int32_t *hidden);

KZ_API void kz_prompt_free(kz_prompt *prompt);

#ifdef __cplusplus
}
#endif

#endif
