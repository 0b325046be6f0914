/* kazetts rules: the engine's rules on their own, for tests and for another orchestrator.
 *
 * kz_tts_synthesize (tts.h) applies these to every request; they are exported on their own so
 * that the Python engine and the tests can call the very same code (tests/test_native_engine.py
 * pins them to the Python engine's). The talker file and the prompt layout below are the one
 * definition the Python engine runs too (kazetts/stages/talker_file.py and prompt.py call them).
 * An app needs tts.h only.
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
