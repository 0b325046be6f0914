// The C API of kazetts/talker.h over kz::Talker (stages/talker.h). Apart from talker.cpp, which
// native/tests/talker_slots compiles in on its own: this file uses the library's handle helpers.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "kazetts/talker.h"
#include "stages/talker.h"

struct kz_talker {
    std::unique_ptr<kz::Talker> talker;
    std::string last_error;
};

kz::Talker &kz::talker_of(kz_talker *handle) { return *handle->talker; }

kz_talker_params kz_talker_default_params(void) {
    kz_talker_params p;
    p.struct_size = sizeof(kz_talker_params);
    p.n_threads = 2;
    p.n_ctx = 1024;
    p.n_batch = 64;
    p.slots = 1;
    p.verbose = 0;
    return p;
}

int kz_talker_load(const char *path, const kz_talker_params *params, kz_talker **out, char *err, size_t err_len) {
    return kz::load_handle(path, out, err, err_len, [&] {
        const kz_talker_params p = params ? *params : kz_talker_default_params();
        if (p.struct_size != sizeof(kz_talker_params)) {
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "kz_talker_params.struct_size is " +
                                                         std::to_string(p.struct_size) + ", this library's is " +
                                                         std::to_string(sizeof(kz_talker_params)) +
                                                         ": start from kz_talker_default_params()");
        }
        std::unique_ptr<kz_talker> t(new kz_talker());
        t->talker.reset(new kz::Talker(path, p.n_threads, p.n_ctx, p.n_batch, p.verbose != 0, p.slots));
        return t;
    });
}

void kz_talker_free(kz_talker *talker) { delete talker; }

const char *kz_talker_last_error(const kz_talker *talker) {
    return talker ? talker->last_error.c_str() : "null handle";
}

int kz_talker_tokenize(kz_talker *talker, const char *text, int32_t text_len, int32_t *tokens, int32_t capacity,
                       int32_t *n_tokens) {
    return kz::call_handle(talker, [&] {
        if (n_tokens) *n_tokens = 0;
        if ((!text && text_len != 0) || text_len < 0 || capacity < 0 || (!tokens && capacity > 0) || !n_tokens)
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null text, tokens or n_tokens, or a negative length");
        const std::vector<int32_t> ids = talker->talker->tokenize(std::string(text ? text : "", size_t(text_len)));
        *n_tokens = int32_t(ids.size());
        if (ids.size() > size_t(capacity)) {
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "the text has " + std::to_string(ids.size()) +
                                                         " tokens, room was given for " + std::to_string(capacity));
        }
        std::copy(ids.begin(), ids.end(), tokens);
    });
}

int kz_talker_reset_slot(kz_talker *talker, int32_t slot, int32_t positions) {
    return kz::call_handle(talker, [&] { talker->talker->reset_slot(slot, positions); });
}

int kz_talker_step_slots(kz_talker *talker, int32_t n_steps, const int32_t *slots, const float *const *embeddings,
                         const int32_t *n_rows) {
    return kz::call_handle(talker, [&] {
        if (n_steps < 0 || (n_steps > 0 && (!slots || !embeddings || !n_rows)))
            throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "a negative step count, or null slots, embeddings or n_rows");
        std::vector<kz::Talker::SlotStep> steps;
        for (int32_t i = 0; i < n_steps; ++i) {
            if (!embeddings[i])
                throw kz::Error(KZ_ERR_INVALID_ARGUMENT, "null embeddings for slot " + std::to_string(slots[i]));
            steps.push_back({slots[i], embeddings[i], n_rows[i]});
        }
        talker->talker->step_slots(steps);
    });
}

namespace {

bool has_slot(const kz_talker *talker, int32_t slot) { return talker && slot >= 0 && slot < talker->talker->slots(); }

}  // namespace

const float *kz_talker_hidden(const kz_talker *talker, int32_t slot) {
    return has_slot(talker, slot) ? talker->talker->hidden(slot) : nullptr;
}

const float *kz_talker_logits(const kz_talker *talker, int32_t slot) {
    return has_slot(talker, slot) ? talker->talker->logits(slot) : nullptr;
}

int32_t kz_talker_position(const kz_talker *talker, int32_t slot) {
    return has_slot(talker, slot) ? talker->talker->position(slot) : -1;
}

int32_t kz_talker_n_ctx(const kz_talker *talker) { return talker ? talker->talker->n_ctx() : 0; }
int32_t kz_talker_slots(const kz_talker *talker) { return talker ? talker->talker->slots() : 0; }
int32_t kz_talker_capacity(const kz_talker *talker) { return talker ? talker->talker->capacity() : 0; }
int32_t kz_talker_hidden_size(const kz_talker *talker) { return talker ? talker->talker->hidden_size() : 0; }
int32_t kz_talker_n_vocab(const kz_talker *talker) { return talker ? talker->talker->n_vocab() : 0; }
int32_t kz_talker_shares_steps(const kz_talker *talker) { return talker && talker->talker->shares_steps() ? 1 : 0; }
int64_t kz_talker_decodes(const kz_talker *talker) { return talker ? talker->talker->decodes() : 0; }
