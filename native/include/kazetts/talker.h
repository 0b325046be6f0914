/* kazetts talker (stage 1 of Qwen3-TTS 12 Hz): how both engines set up its llama.cpp context.
 *
 * The talker runs through llama.h (the Python engine through llama-cpp-python, the native engine
 * in C++). Each call needs one row out: the last position's hidden state after the final norm
 * (the code predictor's input) and its logits. A context with `embeddings` on makes llama.cpp
 * output every row of a batch (the last layer's FFN, the head and its 155008-wide padded logits
 * for each prompt row, and compute and output buffers sized for n_ubatch such rows: ~85 MB on
 * the 0.6B). So the context computes logits only, one output row at most, and the hidden state
 * of that row is read while the graph runs (llama.cpp's eval callback on its `result_norm`
 * tensor, the one llama_get_embeddings would copy): the same values, without the other rows.
 *
 * Conventions: see kazetts/common.h.
 */
#ifndef KAZETTS_TALKER_H
#define KAZETTS_TALKER_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a decode puts the hidden state of its output row. The caller owns `data` (n_embd
 * floats) and clears `written` before a decode; the eval callback sets it to 1 when it copied
 * the row (a decode without an output row leaves it as it is). */
typedef struct kz_talker_hidden {
    float *data;
    int64_t n_embd;
    int32_t written;
} kz_talker_hidden;

/* Fills `llama_params` (a `struct llama_context_params` of the libllama this library was built
 * against, from llama_context_default_params()) for the talker: n_ctx positions, prefill chunks
 * (n_batch = n_ubatch) of n_batch rows, n_threads, logits without embeddings, at most one output
 * row, and the eval callback that copies that row's hidden state into `hidden`, which must
 * outlive the context. Every batch must ask for at most one output row (llama.cpp aborts
 * otherwise). */
KZ_API void kz_talker_context_params(void *llama_params, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                     kz_talker_hidden *hidden);

/* Fills `llama_params` (a `struct llama_model_params` from llama_model_default_params()) for the
 * native engine's talker: CPU only, with llama.cpp's extra CPU buffer types (CPU_REPACK: the
 * layer matrices rearranged at load for ggml's ARM dotprod / i8mm Q8_0 and Q4_0 kernels, and its
 * x86 AVX2 Q4_0 one) except on CPUs with AMX, where a GCC 12 build of ggml dies of SIGILL in its
 * AMX kernels on any batch of 2+ rows (see extra_buffers_are_safe in kazetts/stages/talker.py,
 * which decides the same for the Python engine). */
KZ_API void kz_talker_model_params(void *llama_params);

#ifdef __cplusplus
}
#endif

#endif
