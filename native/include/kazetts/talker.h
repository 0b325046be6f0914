/* kazetts talker (stage 1 of Qwen3-TTS 12 Hz): a llama.cpp `qwen3tts` model fed embedding vectors.
 *
 * The talker runs through llama.h, the libllama of the llama-cpp-python this library was built
 * against, in one driver both engines use: the native engine (kazetts/tts.h) holds its C++
 * class, the Python engine (kazetts/stages/talker.py) this handle. Each step feeds embedding rows
 * (a prompt, then one row a frame) and gives, for the last position only, the hidden state after
 * the final norm (the code predictor's input) and the logits. A context with `embeddings` on
 * makes llama.cpp output every row of a batch (the last layer's FFN, the head and its
 * 155008-wide padded logits for each prompt row, and compute and output buffers sized for
 * n_ubatch such rows: ~85 MB on the 0.6B). So the context computes logits only, one output row
 * per utterance at most, and the hidden state of that row is read while the graph runs
 * (llama.cpp's eval callback on its `result_norm` tensor, the one llama_get_embeddings would
 * copy): the same values, without the other rows.
 *
 * Slots: a handle holds up to `slots` utterances at a time, each a llama.cpp sequence with its
 * own KV stream, stepped together by kz_talker_step_slots. Each slot's outputs are bit for bit
 * those of the same rows fed alone to a handle of one slot (the rules that make it so:
 * native/src/stages/talker.h). A handle is not thread-safe; two handles are independent, but
 * llama.cpp's log (silenced at load unless verbose) and the talker backend
 * (kazetts/talker_backend.h, set up at load) are process-wide.
 *
 * Conventions: see kazetts/common.h (kz_status codes, errors of the loader into a caller
 * buffer, errors of calls on a handle through kz_talker_last_error).
 */
#ifndef KAZETTS_TALKER_H
#define KAZETTS_TALKER_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_talker kz_talker;

/* Most slots a handle may have: llama.cpp's sequences (LLAMA_MAX_SEQ). */
#define KZ_TALKER_MAX_SLOTS 256

typedef struct kz_talker_params {
    uint32_t struct_size; /* sizeof(kz_talker_params), set by kz_talker_default_params */
    int32_t n_threads;    /* >= 1; default 2 */
    int32_t n_ctx;        /* positions of one utterance at most (prompt + frames), >= 1; default 1024 */
    int32_t n_batch;      /* rows of a prompt decoded at a time (llama.cpp's n_batch = n_ubatch), >= 1; default 64 */
    int32_t slots;        /* utterances at a time, 1..KZ_TALKER_MAX_SLOTS; default 1 */
    int32_t verbose;      /* 1: keep llama.cpp's log on stderr (0, the default: silenced, process-wide) */
} kz_talker_params;

KZ_API kz_talker_params kz_talker_default_params(void);

/* Loads a talker GGUF (arch qwen3tts) with llama.cpp (CPU only, kz_talker_model_params) and makes
 * its context, with room for one position a slot until kz_talker_reset_slot asks for more. On
 * failure returns a status (KZ_ERR_FORMAT when llama.cpp cannot load the file, KZ_ERR_NO_MEMORY
 * when it cannot make the context, KZ_ERR_INVALID_ARGUMENT for params out of range), *out = NULL,
 * and a one-line message naming the file in err (err may be NULL). llama.cpp aborts the process
 * on some damaged files it would load: open the file with kz_talker_file_open (kazetts/rules.h)
 * first, which refuses them. params NULL: the defaults. */
KZ_API int kz_talker_load(const char *path, const kz_talker_params *params, kz_talker **out, char *err, size_t err_len);

/* Frees the handle (NULL is allowed). */
KZ_API void kz_talker_free(kz_talker *talker);

/* The last error message of a call on this handle ("" if none); valid until the next call. */
KZ_API const char *kz_talker_last_error(const kz_talker *talker);

/* The token ids of text_len bytes of UTF-8 text, with the GGUF's tokenizer: special tokens
 * (<|im_start|> ...) parsed, none added. Writes up to `capacity` ids to tokens and their count to
 * *n_tokens; when there are more than `capacity`, *n_tokens is how many there are, and the call
 * returns KZ_ERR_INVALID_ARGUMENT (call again with room for them). */
KZ_API int kz_talker_tokenize(kz_talker *talker, const char *text, int32_t text_len, int32_t *tokens, int32_t capacity,
                              int32_t *n_tokens);

/* Forgets the slot's utterance and makes room for one of up to `positions` (prompt + frames;
 * 0: n_ctx; at most n_ctx): the KV cache holds, for each slot, what the longest utterance so far
 * asked for, in steps of 256 positions, not n_ctx from the start (a larger one moves the other
 * slots' utterances to a new context, unchanged). */
KZ_API int kz_talker_reset_slot(kz_talker *talker, int32_t slot, int32_t positions);

/* Feeds n_steps slots (each listed once) their next rows: slot slots[i] gets n_rows[i] >= 1
 * embeddings, embeddings[i] [n_rows[i]][hidden_size] floats, after what it was fed since its reset.
 * Then kz_talker_hidden and kz_talker_logits of those slots are their last row's; the other slots
 * keep theirs. A slot out of range, listed twice or without rows is KZ_ERR_INVALID_ARGUMENT, an
 * utterance longer than its reset made room for KZ_ERR_STATE, both before anything is computed. */
KZ_API int kz_talker_step_slots(kz_talker *talker, int32_t n_steps, const int32_t *slots,
                                const float *const *embeddings, const int32_t *n_rows);

/* The outputs of the slot's last step, owned by the handle and valid until the next step, reset
 * or free (NULL for a slot out of range): the hidden state [hidden_size] and the logits of the
 * whole vocabulary [n_vocab] (the text ids first, then the codec ids). */
KZ_API const float *kz_talker_hidden(const kz_talker *talker, int32_t slot);
KZ_API const float *kz_talker_logits(const kz_talker *talker, int32_t slot);

/* The positions the slot was fed since its reset (-1 for a slot out of range). */
KZ_API int32_t kz_talker_position(const kz_talker *talker, int32_t slot);

/* The handle's shape: n_ctx and slots as loaded, the positions each slot has room for now
 * (see kz_talker_reset_slot), the hidden width and the vocabulary (text + codec ids). */
KZ_API int32_t kz_talker_n_ctx(const kz_talker *talker);
KZ_API int32_t kz_talker_slots(const kz_talker *talker);
KZ_API int32_t kz_talker_capacity(const kz_talker *talker);
KZ_API int32_t kz_talker_hidden_size(const kz_talker *talker);
KZ_API int32_t kz_talker_n_vocab(const kz_talker *talker);

/* Diagnostics, for tests: whether single rows of several slots share decodes (checked at load;
 * see native/src/stages/talker.h), and the llama_decode calls so far (the load's included). */
KZ_API int32_t kz_talker_shares_steps(const kz_talker *talker);
KZ_API int64_t kz_talker_decodes(const kz_talker *talker);

/* ---- llama.cpp's parameters as the handle sets them (for programs that drive llama.h
 * themselves, e.g. native/tests/check_talker) ------------------------------------------------ */

/* Where a decode puts the hidden state of its output row. The caller owns `data` (n_embd
 * floats) and clears `written` before a decode; the eval callback sets it to 1 when it copied
 * the row (a decode without an output row leaves it as it is). */
typedef struct kz_talker_hidden_out {
    float *data;
    int64_t n_embd;
    int32_t written;
} kz_talker_hidden_out;

/* Fills `llama_params` (a `struct llama_context_params` of the libllama this library was built
 * against, from llama_context_default_params()) for a talker of one utterance: n_ctx positions,
 * prefill chunks (n_batch = n_ubatch) of n_batch rows, n_threads, logits without embeddings, at
 * most one output row, and the eval callback that copies that row's hidden state into `hidden`,
 * which must outlive the context. Every batch must ask for at most one output row (llama.cpp
 * aborts otherwise). */
KZ_API void kz_talker_context_params(void *llama_params, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                     kz_talker_hidden_out *hidden);

/* Fills `llama_params` (a `struct llama_model_params` from llama_model_default_params()) for the
 * talker: CPU only, with llama.cpp's extra CPU buffer types (CPU_REPACK: the layer matrices
 * rearranged at load for ggml's ARM dotprod / i8mm Q8_0 and Q4_0 kernels, and its x86 AVX2 Q4_0
 * one) except on CPUs with AMX. There ggml's AMX kernels for batches of 2+ rows (the prefill; one
 * row takes an AVX-512 VNNI path) start with ggml_tile_config_init, whose
 * `_tile_loadconfig(&tc)` GCC 12 compiles wrongly: its amxtileintrin.h declares ldtilecfg's
 * memory operand as 8 bytes, so the stores of the 64-byte config's rows and colsb are
 * dead-store-eliminated and every tile has 0 rows; the next tile instruction (tilezero) raises
 * #UD, the process dies of SIGILL. Any weight type with AMX kernels, any thread count; keeping
 * only some tensors in AMX buffers does not help (see docs/benchmarks.md). */
KZ_API void kz_talker_model_params(void *llama_params);

#ifdef __cplusplus
}
#endif

#endif
