// The meeting point of the requests said at once (see batcher.h).
#include "engine/batcher.h"

#include <algorithm>
#include <cstring>

#include "core/common_internal.h"
#include "stages/talker.h"

namespace kz {

void Batcher::count(int delta) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        present_ += delta;
    }
    changed_.notify_all();  // the others may no longer wait for this one
}

int Batcher::talker_step(int slot, const float *embeddings, int n, int reset_positions) {
    Job job;
    job.kind = Kind::talker, job.slot = slot, job.embeddings = embeddings, job.n = n;
    job.reset_positions = reset_positions;
    return submit(job);
}

int Batcher::cp_frame(int slot, int32_t cb0, const kz_cp_sampling &sampling, int32_t *codes, float *embedding_sum) {
    Job job;
    job.kind = Kind::cp, job.slot = slot, job.embeddings = talker_.hidden(slot), job.n = 1;
    job.cb0 = cb0, job.sampling = sampling, job.codes = codes, job.embedding_sum = embedding_sum;
    return submit(job);
}

void Batcher::solo(const std::function<void()> &fn) {
    Job job;
    job.fn = &fn;
    submit(job);
}

void Batcher::embed_codes(const int32_t *codes16, float *out) {
    std::lock_guard<std::mutex> lock(cp_mutex_);
    const int s = kz_cp_embed_codes(cp_, codes16, out);
    if (s != KZ_OK) throw Error(s, kz_cp_last_error(cp_));
}

Batcher::Batcher(Talker &talker, kz_code_predictor *cp) : talker_(talker), cp_(cp) {
    worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
}

// Hands the job in and waits until the batcher's thread has run it.
int Batcher::submit(Job &job) {
    std::unique_lock<std::mutex> lock(mutex_);
    pending_.push_back(&job);
    changed_.notify_all();
    changed_.wait(lock, [&] { return job.done; });
    if (job.status != KZ_OK) throw Error(job.status, job.error);
    return job.batch;
}

// A solo job at once (its request is away, not waited for); else, once every present request
// has handed in a job, the jobs of the oldest one's kind, run together. The others wait for their
// requests' next steps, which come once these are done.
void Batcher::work() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto solo = [this] {
        return std::find_if(pending_.begin(), pending_.end(), [](const Job *j) { return j->kind == Kind::solo; });
    };
    auto steps = [this] { return int(pending_.size()); };
    for (;;) {
        changed_.wait(lock, [&] { return stop_ || solo() != pending_.end() || (steps() > 0 && steps() >= present_); });
        if (stop_) return;
        std::vector<Job *> batch, rest;
        if (solo() != pending_.end()) {
            batch.push_back(*solo());
            pending_.erase(solo());
        } else {
            const Kind kind = pending_.front()->kind;
            for (Job *j : pending_) (j->kind == kind ? batch : rest).push_back(j);
            pending_.swap(rest);
        }
        lock.unlock();
        std::string error;
        const int status = run_guarded([&] { run(batch); }, [&](const char *m) { error = m; }, KZ_ERR_COMPUTE);
        lock.lock();
        for (Job *j : batch) j->done = true, j->batch = int(batch.size()), j->status = status, j->error = error;
        changed_.notify_all();
    }
}

void Batcher::run(const std::vector<Job *> &batch) {
    switch (batch.front()->kind) {
        case Kind::talker: return run_talker(batch);
        case Kind::cp: return run_cp(batch);
        case Kind::solo: return (*batch.front()->fn)();
    }
}

void Batcher::run_talker(const std::vector<Job *> &batch) {
    std::vector<Talker::SlotStep> steps;
    for (const Job *j : batch) {
        if (j->reset_positions >= 0) talker_.reset_slot(j->slot, j->reset_positions);
        steps.push_back({j->slot, j->embeddings, j->n});
    }
    talker_.step_slots(steps);
}

void Batcher::run_cp(const std::vector<Job *> &batch) {
    std::lock_guard<std::mutex> lock(cp_mutex_);
    const size_t n = batch.size(), E = size_t(kz_cp_n_embd_in(cp_)), n_cb = size_t(kz_cp_n_codebooks(cp_));
    hidden_.resize(n * E), sums_.resize(n * E), codes_.resize(n * n_cb);
    cb0_.clear(), samplings_.clear();
    for (size_t i = 0; i < n; ++i) {
        std::memcpy(&hidden_[i * E], batch[i]->embeddings, E * sizeof(float));
        cb0_.push_back(batch[i]->cb0);
        samplings_.push_back(batch[i]->sampling);
    }
    const int s = kz_cp_predict_frames(cp_, int32_t(n), hidden_.data(), cb0_.data(), samplings_.data(), codes_.data(),
                                       sums_.data(), nullptr);
    if (s != KZ_OK) throw Error(s, kz_cp_last_error(cp_));
    for (size_t i = 0; i < n; ++i) {
        std::memcpy(batch[i]->codes, &codes_[i * n_cb], n_cb * sizeof(int32_t));
        std::memcpy(batch[i]->embedding_sum, &sums_[i * E], E * sizeof(float));
    }
}

}  // namespace kz
