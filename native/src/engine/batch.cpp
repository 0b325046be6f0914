// kazetts/batch.h: the C face of kz::Batcher, for the Python engine's frame loops.
#include "kazetts/batch.h"

#include <memory>
#include <new>
#include <string>

#include "core/common_internal.h"
#include "engine/batcher.h"
#include "stages/talker.h"

struct kz_batch {
    kz::Batcher batcher;
    kz_batch(kz::Talker &talker, kz_code_predictor *cp) : batcher(talker, cp) {}
};

struct kz_batch_member {
    kz::Batcher::Member member;
    std::unique_ptr<kz::Batcher::Member::Away> away;
    explicit kz_batch_member(kz::Batcher &b) : member(b) {}
};

namespace {

thread_local std::string last_error;

template <typename Body>
int guarded(Body &&body) {
    return kz::run_guarded(body, [](const char *message) { last_error = message; }, KZ_ERR_COMPUTE);
}

}  // namespace

extern "C" {

KZ_API kz_batch *kz_batch_new(kz_talker *talker, kz_code_predictor *cp) {
    if (!talker || !cp) return nullptr;
    return new (std::nothrow) kz_batch(kz::talker_of(talker), cp);
}

KZ_API void kz_batch_free(kz_batch *batch) { delete batch; }

KZ_API kz_batch_member *kz_batch_enter(kz_batch *batch) {
    if (!batch) return nullptr;
    auto *m = new (std::nothrow) kz_batch_member(batch->batcher);
    if (m) m->member.enter();
    return m;
}

KZ_API void kz_batch_away(kz_batch_member *member, int32_t away) {
    if (!member) return;
    if (away && !member->away) member->away = std::make_unique<kz::Batcher::Member::Away>(member->member);
    if (!away) member->away.reset();
}

KZ_API void kz_batch_leave(kz_batch_member *member) {
    if (!member) return;
    member->away.reset();
    member->member.leave();
    delete member;
}

KZ_API int kz_batch_talker_step(kz_batch *batch, int32_t slot, const float *embeddings, int32_t n,
                                int32_t reset_positions, int32_t *together) {
    return guarded([&] {
        if (!batch || !embeddings || n < 1)
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null batch or embeddings, or n < 1");
        const int t = batch->batcher.talker_step(slot, embeddings, n, reset_positions);
        if (together) *together = t;
    });
}

KZ_API int kz_batch_cp_frame(kz_batch *batch, int32_t slot, int32_t cb0, const kz_cp_sampling *sampling,
                             int32_t *codes_out, float *embedding_sum_out, int32_t *together) {
    return guarded([&] {
        if (!batch || !codes_out || !embedding_sum_out) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null argument");
        kz_cp_sampling greedy = kz_cp_default_sampling();
        greedy.greedy = 1;
        const int t = batch->batcher.cp_frame(slot, cb0, sampling ? *sampling : greedy, codes_out, embedding_sum_out);
        if (together) *together = t;
    });
}

KZ_API int kz_batch_codec_decode(kz_batch *batch, kz_codec_stream *stream, const int32_t *codes, int n_frames,
                                 int n_codebooks, float *out, size_t capacity, size_t *written) {
    if (!batch) return KZ_ERR_INVALID_ARGUMENT;
    int status = KZ_OK;
    const int guard = guarded([&] {
        batch->batcher.solo(
            [&] { status = kz_codec_stream_decode(stream, codes, n_frames, n_codebooks, out, capacity, written); });
    });
    return guard != KZ_OK ? guard : status;
}

KZ_API int kz_batch_embed_codes(kz_batch *batch, const int32_t *codes16, float *out) {
    return guarded([&] {
        if (!batch || !codes16 || !out) throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null argument");
        batch->batcher.embed_codes(codes16, out);
    });
}

KZ_API const char *kz_batch_last_error(void) { return last_error.c_str(); }

}  // extern "C"
