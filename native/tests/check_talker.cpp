// The talker through llama.cpp (llama.h), teacher-forced with the golden inputs, as
// tests/test_talker.py gates it: greedy CB0 after the reference's logits processors, the
// hidden state and the raw codec logits of every call.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>

#include "check.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "kazetts/talker.h"
#include "kazetts/talker_backend.h"
#include "llama.h"

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace {

const int POSITION_STREAMS = 4;        // IMROPE: 4 position values per token, section-major
const int SUPPRESSED_SPECIALS = 1024;  // the last ids of the codec vocabulary, except EOS
const int MIN_NEW_TOKENS = 2;
const float REPETITION_PENALTY = 1.05f;
const int REPACK_CALLS = 16;  // the prefill and 15 decoding steps per quantized talker (qemu is slow)

struct ModelDeleter {
    void operator()(llama_model *m) const { llama_model_free(m); }
};
struct ContextDeleter {
    void operator()(llama_context *c) const { llama_free(c); }
};

void quiet_log(ggml_log_level, const char *, void *) {}

// Which buffers the weights of the matrix products of one type sit in, counted per product
// of one F32 column (the decoding steps and the prefill's output row), and the Q8_0 products of
// any column count (those the talker backend, KZQ8, can take).
struct ProductCount {
    ggml_type type = GGML_TYPE_COUNT;  // COUNT: nothing counted
    int products = 0, repacked = 0;
    int q8_0_one_column = 0, q8_0_repacked = 0, q8_0_all = 0;
};

// A loaded talker as the native engine sets it up (kz_talker_model_params: llama.cpp's extra
// buffer types, so ggml's CPU_REPACK where it repacks the matrices), or with plain CPU buffers;
// 1024 positions, prefill chunks of 64, the context of kz_talker_context_params (one output
// row, its hidden state from the eval callback, which also counts products here).
struct Talker {
    std::unique_ptr<llama_model, ModelDeleter> model;
    std::unique_ptr<llama_context, ContextDeleter> ctx;
    int n_embd = 0, n_vocab = 0, n_batch = 64, position = 0;
    std::vector<float> hidden_row;
    kz_talker_hidden_out hidden_out{};
    ProductCount count;

    Talker(const std::string &path, int threads, bool extra_buffers = true) {
        llama_model_params mp = llama_model_default_params();
        kz_talker_model_params(&mp);
        mp.use_extra_bufts = mp.use_extra_bufts && extra_buffers;
        model.reset(llama_model_load_from_file(path.c_str(), mp));
        if (!model) throw std::runtime_error("llama.cpp could not load " + path);
        n_embd = llama_model_n_embd(model.get());
        n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
        hidden_row.resize(size_t(n_embd));
        hidden_out = {hidden_row.data(), n_embd, 0};
        llama_context_params cp = llama_context_default_params();
        kz_talker_context_params(&cp, 1024, n_batch, threads, &hidden_out);
        copy_hidden_ = cp.cb_eval;
        cp.cb_eval = observe;
        cp.cb_eval_user_data = this;
        ctx.reset(llama_init_from_model(model.get(), cp));
        if (!ctx) throw std::runtime_error("llama.cpp could not create a context for " + path);
    }
    Talker(const Talker &) = delete;
    Talker &operator=(const Talker &) = delete;

    // Feeds n embeddings; only the last position of the last chunk is an output.
    void step(const float *embd, int n) {
        hidden_out.written = 0;
        for (int start = 0; start < n; start += n_batch)
            decode(embd + size_t(start) * size_t(n_embd), std::min(n_batch, n - start), start + n_batch >= n);
        if (!hidden_out.written) throw std::runtime_error("the talker's graph gave no hidden state");
    }

    const float *hidden() { return hidden_row.data(); }
    const float *logits() { return llama_get_logits_ith(ctx.get(), -1); }

  private:
    void decode(const float *embd, int n, bool output_last) {
        std::vector<llama_pos> pos(size_t(n) * POSITION_STREAMS);
        for (int j = 0; j < POSITION_STREAMS; ++j)
            for (int i = 0; i < n; ++i) pos[size_t(j * n + i)] = position + i;
        std::vector<int32_t> n_seq(size_t(n), 1);
        llama_seq_id seq0 = 0;
        std::vector<llama_seq_id *> seq_ids(size_t(n), &seq0);
        std::vector<int8_t> outputs(size_t(n), 0);
        outputs.back() = output_last ? 1 : 0;
        llama_batch batch{
            n, nullptr, const_cast<float *>(embd), pos.data(), n_seq.data(), seq_ids.data(), outputs.data()};
        int status = llama_decode(ctx.get(), batch);
        if (status != 0) throw std::runtime_error(fmt("llama_decode failed with status %d", status));
        position += n;
    }

    ggml_backend_sched_eval_callback copy_hidden_ = nullptr;

    static bool observe(ggml_tensor *t, bool ask, void *user_data) {
        auto *self = static_cast<Talker *>(user_data);
        const ggml_tensor *w = t->src[0];
        if (ask && t->op == GGML_OP_MUL_MAT && ggml_n_dims(w) == 2) {
            const bool one_column = t->src[1]->ne[1] == 1;
            const bool repacked =
                w->buffer &&
                std::strcmp(ggml_backend_buft_name(ggml_backend_buffer_get_type(w->buffer)), "CPU_REPACK") == 0;
            ProductCount &count = self->count;
            if (w->type == count.type && one_column) ++count.products, count.repacked += repacked;
            if (w->type == GGML_TYPE_Q8_0) {
                ++count.q8_0_all;
                if (one_column) ++count.q8_0_one_column, count.q8_0_repacked += repacked;
            }
        }
        return self->copy_hidden_(t, ask, &self->hidden_out);
    }
};

// HF greedy CB0 as kazetts.stages.sampling.TalkerSampler: repetition penalty over the distinct ids
// generated so far (`history`, `generated` of them), EOS banned for the first MIN_NEW_TOKENS
// steps, control ids suppressed.
int32_t greedy_cb0(const float *raw, int vocab, int eos, const std::set<int32_t> &history, int generated) {
    std::vector<float> s(raw, raw + vocab);
    for (int32_t id : history)
        s[size_t(id)] = s[size_t(id)] < 0 ? s[size_t(id)] * REPETITION_PENALTY : s[size_t(id)] / REPETITION_PENALTY;
    if (generated < MIN_NEW_TOKENS) s[size_t(eos)] = -INFINITY;
    for (int id = vocab - SUPPRESSED_SPECIALS; id < vocab; ++id)
        if (id != eos) s[size_t(id)] = -INFINITY;
    return int32_t(argmax(s.data(), size_t(vocab)));
}

}  // namespace

// Teacher-forces a case's golden inputs (the prompt, then each frame's input) through a talker;
// visit(call, hidden, codec_logits) sees each call's outputs, the last call's too.
template <typename Visit>
void teacher_force(Talker &talker, const GoldenCase &c, int calls, int vocab, Visit visit) {
    NpyArray prompt = c.golden("prompt_embeds"), inputs = c.golden("talker_inputs");
    talker.step(prompt.f32.data(), int(prompt.dim(0)));
    for (int call = 0; call < calls; ++call) {
        visit(call, talker.hidden(), talker.logits() + (talker.n_vocab - vocab));
        if (call + 1 < calls) talker.step(&inputs.f32[size_t(call) * size_t(talker.n_embd)], 1);
    }
}

void check_talker(const GoldenCase &c, Report &report) {
    llama_log_set(quiet_log, nullptr);
    NpyArray codes = c.golden("codes"), ref_hidden = c.golden("talker_hidden"), ref_logits = c.golden("talker_logits");
    const int calls = int(ref_hidden.dim(0)), vocab = int(ref_logits.dim(1)), eos = std::stoi(c.get("codec_eos"));
    Talker talker(c.get("talker"), c.threads);
    if (talker.n_embd != ref_hidden.dim(1) || talker.n_vocab < vocab)
        throw std::runtime_error("talker shape differs from the golden's");
    std::set<int32_t> history;
    int identical = 0;
    bool stopped_at_eos = false;
    double min_hidden_cos = 1.0, min_logits_cos = 1.0;
    teacher_force(talker, c, calls, vocab, [&](int call, const float *hidden, const float *codec_logits) {
        min_hidden_cos = std::min(min_hidden_cos, cosine(hidden, &ref_hidden.f32[size_t(call) * size_t(talker.n_embd)],
                                                         size_t(talker.n_embd)));
        min_logits_cos = std::min(min_logits_cos,
                                  cosine(codec_logits, &ref_logits.f32[size_t(call) * size_t(vocab)], size_t(vocab)));
        int32_t cb0 = greedy_cb0(codec_logits, vocab, eos, history, call);
        history.insert(cb0);
        if (call == calls - 1) {  // the reference's last call: EOS, or the frame budget ran out
            stopped_at_eos = cb0 == eos;
        } else {
            identical += cb0 == codes.i32[size_t(call) * 16];
        }
    });
    const std::string name = c.get("name");
    const bool want_eos = c.get("stops_at_eos") == "1";
    report.gate(name + " talker CB0", identical == codes.dim(0) && stopped_at_eos == want_eos,
                fmt("%d/%lld frames identical; last call %s EOS (reference: %s)", identical, (long long)codes.dim(0),
                    stopped_at_eos ? "picks" : "does not pick", want_eos ? "EOS" : "frame budget"));
    report.gate(name + " talker hidden and logits",
                min_hidden_cos >= c.gate("cosine_min") && min_logits_cos >= c.gate("cosine_min"),
                fmt("%d calls: min cosine hidden %.7f, logits %.7f", calls, min_hidden_cos, min_logits_cos));
}

namespace {

// Runs `f` with KAZETTS_TALKER_BACKEND=0 set up (contexts created meanwhile keep every product on
// ggml's CPU backend), then sets the talker backend up again as it was.
template <typename F>
void without_talker_backend(F f) {
    const char *was = std::getenv("KAZETTS_TALKER_BACKEND");
    const std::string previous = was ? was : "";
    setenv("KAZETTS_TALKER_BACKEND", "0", 1);
    kz_talker_backend_setup();
    try {
        f();
    } catch (...) {
        was ? setenv("KAZETTS_TALKER_BACKEND", previous.c_str(), 1) : unsetenv("KAZETTS_TALKER_BACKEND");
        kz_talker_backend_setup();
        throw;
    }
    was ? setenv("KAZETTS_TALKER_BACKEND", previous.c_str(), 1) : unsetenv("KAZETTS_TALKER_BACKEND");
    kz_talker_backend_setup();
}

// The talker backend's kernel on this CPU, from the test's own reading of its hwcaps (not the
// library's choice): SDOT where the CPU has dotprod (i8mm CPUs too), else NEON.
std::string expected_talker_kernel() {
#if defined(__aarch64__)
    return getauxval(AT_HWCAP) & (1UL << 20) ? "neon-dotprod" : "neon";  // HWCAP_ASIMDDP
#else
    return "";
#endif
}

// The talker backend's own checks on this CPU: its one-column and many-column products equal
// ggml's mul_mat bit for bit (an odd block count: ggml's scalar tail; rows past the groups of 4;
// 1 and 2 threads), and the check sees a kernel off by one rounding (the mutant).
void check_talker_kernels(Report &report) {
    double worst = 0.0;  // -1: a check refused (no kernel)
    auto take = [&](double d) { worst = worst < 0 || d < 0 ? -1.0 : std::max(worst, d); };
    for (int threads = 1; threads <= 2; ++threads)
        for (const auto &[rows, cols] : {std::pair{70, 1024}, std::pair{1024, 3072}, std::pair{7, 1056}}) {
            take(kz_talker_backend_check(rows, cols, 1, threads));
            take(kz_talker_backend_check_columns(rows, cols, 5, cols, 2, threads, 0));
            take(kz_talker_backend_check_columns(rows, cols, 3, cols + 5, 3, threads, 0));
        }
    const double mutant = kz_talker_backend_check_columns(70, 1024, 7, 1024, 1, 1, 1);
    report.gate("talker backend kernels = ggml's mul_mat", worst == 0.0 && mutant > 0.0,
                fmt("%s; largest difference %g over one- and many-column products (3 shapes, 1-2 threads); the "
                    "mutant (one rounding changed): %g",
                    kz_talker_backend_status(), worst, mutant));
}

}  // namespace

// The quantized talkers as the native engine loads them (kz_talker_model_params, then
// kz_talker_backend_setup), and their Q8_0 / Q4_0 products on the kernels this build calls for.
//
// ARM. With a ggml built for ARMv8.0 (the cross build), ggml repacks nothing and its Q8_0
// product has no SDOT: every Q8_0 product (the prefill's and the decoding steps') runs on the
// talker backend (KZQ8) with the kernel this CPU's hwcaps call for ("neon-dotprod" with dotprod,
// "neon" without), bit for bit ggml's ARMv8.0 product, so the outputs equal the same file's on
// ggml's own kernels (KAZETTS_TALKER_BACKEND=0) exactly; the Q4_0 matrices stay on ggml's plain
// Q4_0 kernel (no CPU_REPACK buffer). With a ggml built with dotprod (or i8mm), ggml repacks
// both types in the layout the build calls for (q8_0_4x4 / q4_0_4x4, _4x8 with i8mm), every
// product of the decoding steps reads a CPU_REPACK weight and the backend stays off; the outputs
// are then those of the same file in plain CPU buffers, the same block products summed in another
// order, which can move an activation across a Q8_0 rounding step in a later layer (logits cosine
// 0.999994 over all 120 calls of the long case at Q8_0, 1.0 over the first 16), so within the
// quantized files' gate.
// x86-64: the figures only (no gate on the kernels), and the outputs against plain CPU buffers.
void check_talker_repack(const GoldenCase &c, Report &report) {
    llama_log_set(quiet_log, nullptr);
    NpyArray ref_logits = c.golden("talker_logits");
    const int calls = std::min(REPACK_CALLS, int(ref_logits.dim(0))), vocab = int(ref_logits.dim(1));
    const std::string name = c.get("name");
    if (ARM) kz_talker_backend_setup();  // as the native engine's Talker does before loading
    const bool q8_0_repacked = !expected_repack_layout("q8_0").empty();
    const bool on_kzq8 = ARM && !q8_0_repacked;  // the Q8_0 products' kernels: KZQ8's
    if (on_kzq8) check_talker_kernels(report);
    for (const auto &[type_name, type] : {std::pair{"q8_0", GGML_TYPE_Q8_0}, std::pair{"q4_0", GGML_TYPE_Q4_0}}) {
        const std::string path = c.get(std::string("talker_") + type_name), want = expected_repack_layout(type_name);
        std::unique_ptr<Talker> repacked;
        std::string layouts;
        bool layouts_ok;
        int tensors_repacked;
        {
            RepackLog log;
            repacked = std::make_unique<Talker>(path, c.threads);
            layouts = log.describe();
            layouts_ok = log.as_expected(type_name);
            tensors_repacked = int(log.tensors.size());
        }
        repacked->count.type = type;
        const std::string status = ARM ? kz_talker_backend_status() : "";
        const int64_t calls_before = kz_talker_backend_calls();
        int64_t calls_after_prefill = 0;
        ProductCount after_prefill;
        std::vector<float> outputs;  // per call: hidden, then codec logits
        teacher_force(*repacked, c, calls, vocab, [&](int call, const float *hidden, const float *logits) {
            if (call == 0) calls_after_prefill = kz_talker_backend_calls(), after_prefill = repacked->count;
            outputs.insert(outputs.end(), hidden, hidden + repacked->n_embd);
            outputs.insert(outputs.end(), logits, logits + vocab);
        });
        const ProductCount count = repacked->count;
        const int64_t kzq8_calls = kz_talker_backend_calls() - calls_before,
                      kzq8_step_calls = kz_talker_backend_calls() - calls_after_prefill;
        const int step_q8_0 = count.q8_0_one_column - after_prefill.q8_0_one_column;
        const size_t n_embd = size_t(repacked->n_embd), row = n_embd + size_t(vocab);
        repacked.reset();
        double min_hidden_cos = 1.0, min_logits_cos = 1.0, max_diff = 0.0;
        auto compare = [&] {
            Talker plain(path, c.threads, false);
            teacher_force(plain, c, calls, vocab, [&](int call, const float *hidden, const float *logits) {
                const float *r = &outputs[size_t(call) * row];
                min_hidden_cos = std::min(min_hidden_cos, cosine(hidden, r, n_embd));
                min_logits_cos = std::min(min_logits_cos, cosine(logits, r + n_embd, size_t(vocab)));
                max_diff = std::max(
                    {max_diff, max_abs_diff(hidden, r, n_embd), max_abs_diff(logits, r + n_embd, size_t(vocab))});
            });
        };
        if (ARM)
            without_talker_backend(compare);  // ggml's own kernels in plain buffers
        else
            compare();
        const std::string label = name + " talker " + type_name;
        const std::string figures =
            fmt("%s; %d/%d %s products of the decoding steps on CPU_REPACK (this build: %s)", layouts.c_str(),
                count.repacked, count.products, type_name, repack_features(want).c_str());
        const double gate = c.gate("quantized_cosine_min");
        const std::string cosines =
            fmt("%d calls: min cosine hidden %.8f, logits %.8f", calls, min_hidden_cos, min_logits_cos);
        if (!ARM) {
            report.info(label + " repacking", figures);
            report.gate(label + " repacked = plain buffers", min_hidden_cos >= gate && min_logits_cos >= gate, cosines);
            continue;
        }
        const std::string kzq8 =
            fmt("KZQ8 '%s': %lld calls for %d q8_0 products (%lld for the %d of the decoding steps)", status.c_str(),
                (long long)kzq8_calls, count.q8_0_all, (long long)kzq8_step_calls, step_q8_0);
        if (!on_kzq8) {  // ggml built with dotprod: its repacked kernels, KZQ8 off
            report.gate(label + " on ggml's repacked kernels",
                        layouts_ok && count.products > 0 && count.repacked == count.products && kzq8_calls == 0,
                        figures + "; " + kzq8);
            report.gate(label + " repacked = plain buffers", min_hidden_cos >= gate && min_logits_cos >= gate, cosines);
            continue;
        }
        // ggml for ARMv8.0: the Q8_0 products on KZQ8 (in the Q4_0 talker: its Q8_0 output head)
        report.gate(label + (type == GGML_TYPE_Q8_0 ? "" : " (its q8_0 products)") + " on KZQ8 (" +
                        expected_talker_kernel() + ")",
                    status == expected_talker_kernel() && count.q8_0_all > 0 && kzq8_calls == count.q8_0_all &&
                        step_q8_0 > 0 && kzq8_step_calls == step_q8_0 && count.q8_0_repacked == 0 &&
                        tensors_repacked == 0,
                    kzq8 + fmt(", %d on CPU_REPACK; %s", count.q8_0_repacked, layouts.c_str()));
        if (type == GGML_TYPE_Q4_0)
            report.gate(label + " on ggml's plain kernels",
                        want.empty() && tensors_repacked == 0 && count.products > 0 && count.repacked == 0, figures);
        report.gate(label + " = ggml's own kernels",
                    min_hidden_cos >= gate && min_logits_cos >= gate && max_diff == 0.0,
                    cosines + fmt("; max abs diff %g (KZQ8 repeats ggml's product bit for bit)", max_diff));
    }
}
