/* Stage marks for llama.cpp's own llama-tts, which is not modified: an LD_PRELOAD library that
 * wraps the public calls of its frame loop (tools/tts/tts.cpp -> mtmd_helper_gen_audio_* in
 * libmtmd -> llama_process in libllama, mtmd_gen_audio_process in libmtmd) and puts the marks of
 * scripts/qemu/kzcount.c around them (the same stages as native/src/core/stage_mark.h):
 *
 *   mtmd_helper_gen_audio_set_input .. the end of _get_output   request (set_input: the text, the
 *                                                                prompt rows, the speaker encoding)
 *   mtmd_helper_gen_audio_step_prompt                            prefill
 *   llama_process inside mtmd_helper_gen_audio_step_gen          talker
 *   mtmd_gen_audio_process, type GEN_CODE                        code predictor
 *   mtmd_gen_audio_process, type GEN_WAV                         codec (at the end: < 72 frames)
 *
 * Needs llama.cpp built with shared libraries (the calls then cross library boundaries through the
 * PLT, where LD_PRELOAD interposes; a call inside libmtmd goes through it too, libmtmd being built
 * -fPIC without -Bsymbolic). Built for aarch64 by scripts/aarch64_count.py:
 *   aarch64-linux-gnu-gcc -shared -fPIC -O2 -I<llama.cpp>/{include,ggml/include,tools/mtmd} ... -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "mtmd-helper.h"

#define BEGIN(stage) __asm__ __volatile__("hint %0" ::"i"(96 + 2 * (stage)) : "memory")
#define END(stage) __asm__ __volatile__("hint %0" ::"i"(97 + 2 * (stage)) : "memory")
enum { REQUEST = 1, PREFILL = 2, TALKER = 3, CODE_PREDICTOR = 4, CODEC = 5 };

static int in_step_gen;

static void *next(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "llama_tts_stages: no %s after this library: %s\n", name, dlerror());
        abort();
    }
    return f;
}
#define REAL(name)                 \
    static __typeof__(name) *real; \
    if (!real) real = (__typeof__(name) *)next(#name)

int32_t mtmd_helper_gen_audio_set_input(mtmd_helper_gen_audio *ctx, const struct mtmd_helper_gen_audio_inp *inp) {
    REAL(mtmd_helper_gen_audio_set_input);
    BEGIN(REQUEST);
    return real(ctx, inp);
}

int32_t mtmd_helper_gen_audio_step_prompt(mtmd_helper_gen_audio *ctx, int32_t n_batch) {
    REAL(mtmd_helper_gen_audio_step_prompt);
    BEGIN(PREFILL);
    const int32_t r = real(ctx, n_batch);
    END(PREFILL);
    return r;
}

int32_t mtmd_helper_gen_audio_step_gen(mtmd_helper_gen_audio *ctx, llama_token sampled, const float *h_state_in,
                                       const float **h_state_out, bool *out_stop) {
    REAL(mtmd_helper_gen_audio_step_gen);
    ++in_step_gen;
    const int32_t r = real(ctx, sampled, h_state_in, h_state_out, out_stop);
    --in_step_gen;
    return r;
}

int32_t mtmd_helper_gen_audio_get_output(mtmd_helper_gen_audio *ctx, int32_t *out_sample_rate, const char **out_data,
                                         size_t *out_data_len, int64_t *out_n_samples) {
    REAL(mtmd_helper_gen_audio_get_output);
    const int32_t r = real(ctx, out_sample_rate, out_data, out_data_len, out_n_samples);
    END(REQUEST);
    return r;
}

int32_t llama_process(struct llama_context *ctx, enum llama_process_type type, struct llama_batch_ext *batch) {
    REAL(llama_process);
    if (!in_step_gen) return real(ctx, type, batch);
    BEGIN(TALKER);
    const int32_t r = real(ctx, type, batch);
    END(TALKER);
    return r;
}

int32_t mtmd_gen_audio_process(mtmd_context *ctx, const struct mtmd_gen_inp *inp, struct mtmd_gen_out *out) {
    REAL(mtmd_gen_audio_process);
    int32_t r;
    if (inp->type == MTMD_GEN_PROCESS_TYPE_GEN_CODE) {
        BEGIN(CODE_PREDICTOR);
        r = real(ctx, inp, out);
        END(CODE_PREDICTOR);
    } else {
        BEGIN(CODEC);
        r = real(ctx, inp, out);
        END(CODEC);
    }
    return r;
}
