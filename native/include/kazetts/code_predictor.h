/* kazetts code predictor (stage 2 of Qwen3-TTS 12 Hz): CB0 + talker hidden -> CB1..CB15.
 *
 * Loaded from the mmproj GGUF (tensors a.gen.code.*, hparams kazetts.code.*). One handle owns
 * its weights, a 16-position KV cache per frame of a batch, its per-step graphs (built once per
 * batch size and replayed every frame) and its thread pool; handles share nothing, so two can be used at once from
 * two threads. A single handle is not thread-safe.
 *
 * Conventions: see kazetts/common.h (kz_status codes, errors of loaders into a caller buffer,
 * errors of calls on a handle through kz_cp_last_error).
 */
#ifndef KAZETTS_CODE_PREDICTOR_H
#define KAZETTS_CODE_PREDICTOR_H

#include "kazetts/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kz_code_predictor kz_code_predictor;

/* Weight type of the decoder layers and the 15 output heads, converted at load time.
 * KZ_CP_WEIGHTS_FILE keeps the types stored in the file. KZ_CP_WEIGHTS_AUTO (the default) too,
 * except for an F32 ffn_down beside block-quantized layer matrices (Q8_0, Q4_0, K-quants...):
 * it takes their type. llama.cpp's converter stores ffn_down in F32 in every file because
 * its input exceeds the F16 range; quantized types have no such limit, and an F32 ffn_down is
 * ~40% of what a Q8_0 step reads. Whatever is asked, ffn_down is never
 * kept in F16 (its input exceeds the F16 range, ~1.5e5): an F16 ffn_down becomes F32; on CPUs
 * where ggml sums F16 products in half precision (ARMv8.2+ fp16 arithmetic) no weight is kept
 * in F16 at all (F32 instead: half-precision sums flip greedy codes). Norms stay F32; the input
 * embedding tables stay as stored (rows are dequantized on use). */
typedef enum kz_cp_weight_type {
    KZ_CP_WEIGHTS_FILE = 0,
    KZ_CP_WEIGHTS_F32 = 1,
    KZ_CP_WEIGHTS_F16 = 2,
    KZ_CP_WEIGHTS_Q8_0 = 3,
    KZ_CP_WEIGHTS_Q4_0 = 4,
    KZ_CP_WEIGHTS_AUTO = 5
} kz_cp_weight_type;

/* Matrix-vector kernels. AUTO: Q8_0 matrices use kazetts' own kernel, the fastest this CPU runs
 * (x86-64: AVX-512 VNNI, else AVX2; aarch64: i8mm, else dotprod, else NEON, from the CPU's
 * hwcaps; same integer block sums as ggml's, another float summation order), ggml's elsewhere.
 * GGML: ggml's kernels only. The others: that kazetts kernel (loading fails with
 * KZ_ERR_INVALID_ARGUMENT on a CPU without it), for cross-checks. */
typedef enum kz_cp_kernel_choice {
    KZ_CP_KERNELS_AUTO = 0,
    KZ_CP_KERNELS_GGML = 1,
    KZ_CP_KERNELS_AVX2 = 2,
    KZ_CP_KERNELS_AVX512_VNNI = 3,
    KZ_CP_KERNELS_NEON = 4,
    KZ_CP_KERNELS_NEON_DOTPROD = 5,
    KZ_CP_KERNELS_NEON_I8MM = 6
} kz_cp_kernel_choice;

typedef struct kz_cp_params {
    int32_t n_threads;   /* >= 1 */
    int32_t weight_type; /* a kz_cp_weight_type */
    int32_t kernels;     /* a kz_cp_kernel_choice */
} kz_cp_params;

/* Sampling of CB1..15, as Hugging Face generate with the reference's subtalker settings:
 * greedy = argmax (first index on ties); otherwise logits / temperature, then top-k (values
 * tied with the k-th largest are kept; 0 = off), then top-p (only if < 1), then one draw from
 * the softmax by inverse CDF. The random numbers come from the caller: either `uniforms`
 * (15 doubles in [0, 1), one per codebook, e.g. numpy Generator.random(15), which reproduces
 * kazetts.validation.oracles.sampling.CodePredictorSampler draw for draw), or, when `uniforms` is NULL, the
 * caller-owned 64-bit state `rng_state` (splitmix64, advanced by one per draw; seed it with
 * any value). Greedy needs neither. */
typedef struct kz_cp_sampling {
    int32_t greedy;
    float temperature;
    int32_t top_k;
    float top_p;
    const double *uniforms; /* optional, 15 values */
    uint64_t *rng_state;    /* optional, in/out */
} kz_cp_sampling;

/* Defaults: n_threads 2, weights AUTO, kernels AUTO. */
KZ_API kz_cp_params kz_cp_default_params(void);
/* Defaults: sampling with temperature 0.9, top-k 50, top-p 1.0 (the reference's). */
KZ_API kz_cp_sampling kz_cp_default_sampling(void);

/* Loads the code predictor from an mmproj GGUF. On success *out is a new handle; on failure
 * *out is NULL and the message is written to err (err_len bytes, NUL-terminated). */
KZ_API int kz_cp_load(const char *path, const kz_cp_params *params, kz_code_predictor **out, char *err, size_t err_len);
KZ_API void kz_cp_free(kz_code_predictor *cp);

/* Model shape: talker hidden width (input), code predictor width, codebook count (15),
 * codebook vocabulary (2048), CB0 vocabulary (talker codec table rows). */
KZ_API int32_t kz_cp_n_embd_in(const kz_code_predictor *cp);
KZ_API int32_t kz_cp_n_embd(const kz_code_predictor *cp);
KZ_API int32_t kz_cp_n_codebooks(const kz_code_predictor *cp);
KZ_API int32_t kz_cp_vocab(const kz_code_predictor *cp);
KZ_API int32_t kz_cp_cb0_vocab(const kz_code_predictor *cp);

KZ_API int kz_cp_set_threads(kz_code_predictor *cp, int32_t n_threads);

/* One frame. talker_hidden: [n_embd_in] floats (the talker's last hidden state), cb0: the
 * frame's codebook-0 id. Writes codes_out[n_codebooks] (CB1..CB15), embedding_sum_out[n_embd_in]
 * (codec_embedding[cb0] + sum_g table_g[CB_{g+1}], the talker's next input minus its text row;
 * may be NULL) and, when logits_out is not NULL, the raw logits [n_codebooks * vocab].
 * sampling NULL = greedy. */
KZ_API int kz_cp_predict_frame(kz_code_predictor *cp, const float *talker_hidden, int32_t cb0,
                               const kz_cp_sampling *sampling, int32_t *codes_out, float *embedding_sum_out,
                               float *logits_out);

/* n_frames frames at once, e.g. one per request of a batch. Frame j reads talker_hidden
 * [j * n_embd_in ...], cb0[j] and sampling[j] (sampling NULL: every frame greedy; each frame its
 * own rng_state or uniforms) and writes codes_out[j * n_codebooks ...], embedding_sum_out
 * [j * n_embd_in ...] and logits_out[j * n_codebooks * vocab ...] (both optional). Each frame
 * has its own KV cache and gets the bits kz_cp_predict_frame gives it alone. On kazetts' Q8_0
 * kernels each step is one pass over the weights for all the frames (the stage reads ~84 MB of
 * Q8_0 weights a step at 0.6b, whatever the number of frames); with ggml's kernels (other
 * weight types) each frame's products run one after the other, as ggml does not give a column
 * the same bits alone and among others. The KV caches and graphs of a batch size are made on its
 * first call. n_frames: 1..KZ_CP_MAX_FRAMES. */
#define KZ_CP_MAX_FRAMES 64
KZ_API int kz_cp_predict_frames(kz_code_predictor *cp, int32_t n_frames, const float *talker_hidden, const int32_t *cb0,
                                const kz_cp_sampling *sampling, int32_t *codes_out, float *embedding_sum_out,
                                float *logits_out);

/* The summed embedding of 16 codes [CB0..CB15] without running the model (what
 * kz_cp_predict_frame writes to embedding_sum_out). */
KZ_API int kz_cp_embed_codes(kz_code_predictor *cp, const int32_t *codes16, float *out);

/* Which kernel computes the quantized matrix products of this handle: "ggml", or "kazetts q8_0 "
 * and one of kz_cp_best_kernel's names. Valid while the handle lives. */
KZ_API const char *kz_cp_kernel_name(const kz_code_predictor *cp);

/* The kazetts Q8_0 kernel KZ_CP_KERNELS_AUTO takes on this CPU: "neon-i8mm", "neon-dotprod" or
 * "neon" (aarch64, from the CPU's hwcaps), "avx512-vnni" or "avx2" (x86-64), "none" (ggml's). */
KZ_API const char *kz_cp_best_kernel(void);

/* Diagnostics, for tests (native/tests/golden_check): the matrix products of one frame of a
 * handle, counted in its graphs: on kazetts' Q8_0 kernel, on ggml's kernels with a quantized
 * weight, on ggml's with float operands (F32 or F16 weights, the attention's products). */
typedef struct kz_cp_products {
    int64_t kazetts;
    int64_t ggml_quantized;
    int64_t ggml_float;
} kz_cp_products;
KZ_API kz_cp_products kz_cp_frame_products(const kz_code_predictor *cp);

/* Diagnostics, for tests: the product nodes kazetts' Q8_0 kernel `kernel` (a kz_cp_best_kernel
 * name) has computed so far in this process, counted by the kernel as it runs; -1 for an unknown
 * name. */
KZ_API int64_t kz_cp_kernel_runs(const char *kernel);

/* The last error message of a call on this handle ("" if none); valid until the next call. */
KZ_API const char *kz_cp_last_error(const kz_code_predictor *cp);

#ifdef __cplusplus
}
#endif

#endif
