/* One request of exactly FRAMES frames through the native engine (kazetts/tts.h), for counting its
 * work per stage under qemu-aarch64 (scripts/aarch64_count.py, scripts/qemu/kzcount.c): one thread,
 * the codec on the same thread (codec_threads 0), greedy, the non-streaming text prompt (as
 * llama-tts builds it), end-of-speech forbidden until FRAMES (min_frames = max_frames), a Base
 * model's x-vector. The request is marked as stage 1 around kz_tts_synthesize; the engine marks
 * its own stages inside (native/src/core/stage_mark.h).
 *
 *   kazetts_frames TALKER MMPROJ XVECTOR.f32 FRAMES TEXT LANGUAGE [CODEC_WEIGHTS]
 *
 * CODEC_WEIGHTS: a kz_codec_weights number (default KZ_CODEC_WEIGHTS_F16).
 * XVECTOR.f32: the x-vector as raw little-endian float32. Prints one JSON line: frames, stop
 * reason, the first frame's codes. */
#include <stdio.h>
#include <stdlib.h>

#include "kazetts/tts.h"

#if defined(__aarch64__)
#define BEGIN_REQUEST() __asm__ __volatile__("hint %0" ::"i"(96 + 2 * 1) : "memory")
#define END_REQUEST() __asm__ __volatile__("hint %0" ::"i"(97 + 2 * 1) : "memory")
#else
#define BEGIN_REQUEST()
#define END_REQUEST()
#endif

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: %s TALKER MMPROJ XVECTOR.f32 FRAMES TEXT LANGUAGE [CODEC_WEIGHTS]\n", argv[0]);
        return 2;
    }
    const int frames = atoi(argv[4]);
    FILE *f = fopen(argv[3], "rb");
    if (!f) {
        perror(argv[3]);
        return 1;
    }
    static float xvector[8192];
    const size_t n_xvector = fread(xvector, sizeof(float), sizeof(xvector) / sizeof(float), f);
    fclose(f);

    kz_tts_params params = kz_tts_default_params();
    params.n_threads = 1;
    params.codec_threads = 0;
    if (argc == 8) params.codec_weights = atoi(argv[7]);
    kz_tts *tts = NULL;
    char err[1024];
    if (kz_tts_load(argv[1], argv[2], &params, &tts, err, sizeof(err)) != KZ_OK) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    kz_tts_request r = kz_tts_default_request();
    r.language = argv[6];
    r.xvector = xvector;
    r.xvector_len = (int32_t)n_xvector;
    r.text_streaming = 0;
    r.greedy = 1;
    r.seed = 0;
    r.min_frames = frames;
    r.max_frames = frames;
    kz_tts_result res = {0};
    res.struct_size = sizeof(res);
    BEGIN_REQUEST();
    const int status = kz_tts_synthesize(tts, argv[5], &r, NULL, NULL, &res);
    END_REQUEST();
    if (status != KZ_OK) {
        fprintf(stderr, "synthesize: %s\n", kz_tts_last_error(tts));
        kz_tts_free(tts);
        return 1;
    }
    int32_t codes[16] = {0};
    kz_tts_last_codes(tts, codes, 16);
    printf("{\"frames\": %d, \"stop_reason\": %d, \"first_codes\": [", res.n_frames, res.stop_reason);
    for (int i = 0; i < 16; ++i) printf("%s%d", i ? ", " : "", codes[i]);
    printf("]}\n");
    kz_tts_free(tts);
    return res.n_frames == frames ? 0 : 1;
}
