// The code predictor against the goldens, as tests/test_code_predictor.py gates it.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "check.h"
#include "kazetts/code_predictor.h"

namespace {

struct CpDeleter {
    void operator()(kz_code_predictor *cp) const { kz_cp_free(cp); }
};
using Cp = std::unique_ptr<kz_code_predictor, CpDeleter>;

Cp load(const std::string &path, int threads, int weights) {
    kz_cp_params params = kz_cp_default_params();
    params.n_threads = threads;
    params.weight_type = weights;
    kz_code_predictor *cp = nullptr;
    char err[512];
    if (kz_cp_load(path.c_str(), &params, &cp, err, sizeof err) != KZ_OK) throw std::runtime_error(err);
    return Cp(cp);
}

// One greedy frame: codes [15], embedding sum [n_embd_in], logits [15 * vocab].
struct Frame {
    std::vector<int32_t> codes;
    std::vector<float> embedding, logits;
};

// n greedy frames in one batch (kz_cp_predict_frames): frame j from hidden[j * n_embd_in], cb0[j * cb0_stride]
std::vector<Frame> predict_batch(kz_code_predictor *cp, int n, const float *hidden, const int32_t *cb0,
                                 size_t cb0_stride) {
    const size_t n_cb = size_t(kz_cp_n_codebooks(cp)), n_embd = size_t(kz_cp_n_embd_in(cp)),
                 n_logits = n_cb * size_t(kz_cp_vocab(cp));
    std::vector<int32_t> first((size_t)n), codes((size_t)n * n_cb);
    std::vector<float> embedding((size_t)n * n_embd), logits((size_t)n * n_logits);
    for (int j = 0; j < n; ++j) first[size_t(j)] = cb0[size_t(j) * cb0_stride];
    if (kz_cp_predict_frames(cp, n, hidden, first.data(), nullptr, codes.data(), embedding.data(), logits.data()) !=
        KZ_OK)
        throw std::runtime_error(kz_cp_last_error(cp));
    std::vector<Frame> frames;
    for (size_t j = 0; j < size_t(n); ++j)
        frames.push_back({std::vector<int32_t>(&codes[j * n_cb], &codes[(j + 1) * n_cb]),
                          std::vector<float>(&embedding[j * n_embd], &embedding[(j + 1) * n_embd]),
                          std::vector<float>(&logits[j * n_logits], &logits[(j + 1) * n_logits])});
    return frames;
}

Frame predict(kz_code_predictor *cp, const float *hidden, int32_t cb0) {
    Frame f{std::vector<int32_t>(size_t(kz_cp_n_codebooks(cp))), std::vector<float>(size_t(kz_cp_n_embd_in(cp))),
            std::vector<float>(size_t(kz_cp_n_codebooks(cp)) * size_t(kz_cp_vocab(cp)))};
    if (kz_cp_predict_frame(cp, hidden, cb0, nullptr, f.codes.data(), f.embedding.data(), f.logits.data()) != KZ_OK)
        throw std::runtime_error(kz_cp_last_error(cp));
    return f;
}

// First codebook where got differs from the golden frame (CB0 first), or -1.
int first_difference(const std::vector<int32_t> &got, const int32_t *golden16) {
    for (size_t g = 0; g < got.size(); ++g)
        if (got[g] != golden16[1 + g]) return int(g);
    return -1;
}

void check_greedy_f32(const GoldenCase &c, Report &report) {
    Cp cp = load(c.get("mmproj"), c.threads, KZ_CP_WEIGHTS_FILE);
    NpyArray codes = c.golden("codes"), hidden = c.golden("talker_hidden"), ref = c.golden("cp_logits");
    NpyArray want_emb = load_npy(c.get("expected") + "/cp_embedding_sum.npy");
    const size_t n_cb = size_t(ref.dim(1)), vocab = size_t(ref.dim(2)), n_embd = size_t(hidden.dim(1));
    int mismatches = 0;
    double min_cos = 1.0, max_logit_diff = 0.0, max_emb_diff = 0.0, worst_margin = 0.0;
    bool embed_codes_equal = true;
    std::vector<float> summed(n_embd);
    for (int64_t f = 0; f < codes.dim(0); ++f) {
        const int32_t *golden16 = &codes.i32[size_t(f) * 16];
        Frame got = predict(cp.get(), &hidden.f32[size_t(f) * n_embd], golden16[0]);
        int g = first_difference(got.codes, golden16);
        if (g >= 0) {
            ++mismatches;
            worst_margin = std::max(worst_margin, top2_margin(&got.logits[size_t(g) * vocab], vocab));
        }
        if (f < ref.dim(0)) {
            const float *want = &ref.f32[size_t(f) * n_cb * vocab];
            for (size_t k = 0; k < n_cb; ++k)
                min_cos = std::min(min_cos, cosine(&got.logits[k * vocab], want + k * vocab, vocab));
            max_logit_diff = std::max(max_logit_diff, max_abs_diff(got.logits.data(), want, n_cb * vocab));
        }
        if (f < want_emb.dim(0)) {
            max_emb_diff =
                std::max(max_emb_diff, max_abs_diff(got.embedding.data(), &want_emb.f32[size_t(f) * n_embd], n_embd));
            if (kz_cp_embed_codes(cp.get(), golden16, summed.data()) != KZ_OK)
                throw std::runtime_error(kz_cp_last_error(cp.get()));
            embed_codes_equal = embed_codes_equal && summed == got.embedding;
        }
    }
    const std::string name = c.get("name");
    report.gate(name + " code predictor codes", mismatches == 0,
                fmt("%lld/%lld frames identical (largest margin at a difference %.4f)",
                    (long long)(codes.dim(0) - mismatches), (long long)codes.dim(0), worst_margin));
    report.gate(name + " code predictor logits", min_cos >= c.gate("cosine_min"),
                fmt("%lld frames: min cosine %.8f, max abs diff %.2e", (long long)ref.dim(0), min_cos, max_logit_diff));
    report.gate(name + " code predictor embedding sum",
                max_emb_diff <= c.gate("embedding_sum_max_abs") && embed_codes_equal,
                fmt("%lld frames: max abs diff %.2e, kz_cp_embed_codes identical: %s", (long long)want_emb.dim(0),
                    max_emb_diff, embed_codes_equal ? "yes" : "no"));
}

// Share of greedy codes equal to the golden ones; every first difference must be a near-tie
// of the F32 model explained by the quantization noise (F32 margin <= 2 x logit change).
struct Agreement {
    double ratio = 0.0;
    int frames_differing = 0, unexplained = 0;
    double worst_margin = 0.0;
};

Agreement agreement(kz_code_predictor *cp, kz_code_predictor *f32, const NpyArray &codes, const NpyArray &hidden) {
    const size_t vocab = size_t(kz_cp_vocab(cp)), n_embd = size_t(hidden.dim(1));
    Agreement a;
    int64_t same = 0, total = 0;
    for (int64_t f = 0; f < codes.dim(0); ++f) {
        const int32_t *golden16 = &codes.i32[size_t(f) * 16];
        const float *h = &hidden.f32[size_t(f) * n_embd];
        Frame got = predict(cp, h, golden16[0]);
        for (size_t g = 0; g < got.codes.size(); ++g) same += got.codes[g] == golden16[1 + g];
        total += int64_t(got.codes.size());
        int g = first_difference(got.codes, golden16);
        if (g < 0) continue;
        Frame ref = predict(f32, h, golden16[0]);
        const float *ref_row = &ref.logits[size_t(g) * vocab];
        double margin = top2_margin(ref_row, vocab),
               noise = max_abs_diff(&got.logits[size_t(g) * vocab], ref_row, vocab);
        ++a.frames_differing;
        a.unexplained += margin > 2 * noise;
        a.worst_margin = std::max(a.worst_margin, margin);
    }
    a.ratio = double(same) / double(total);
    return a;
}

std::string describe(const Agreement &a, int64_t frames) {
    return fmt(
        "%.2f%% of %lld codes identical; %d/%lld frames differ, largest F32 margin at a first difference "
        "%.4f, %d not explained by the logit noise",
        a.ratio * 100, (long long)frames * 15, a.frames_differing, (long long)frames, a.worst_margin, a.unexplained);
}

void check_quantized(const GoldenCase &c, Report &report) {
    NpyArray codes = c.golden("codes"), hidden = c.golden("talker_hidden");
    Cp f32 = load(c.get("mmproj"), c.threads, KZ_CP_WEIGHTS_FILE);
    struct Variant {
        const char *label;
        std::string path;
        int weights;
        double min_ratio;
    };
    const Variant variants[] = {
        {"q8_0 file", c.get("mmproj_q8_0"), KZ_CP_WEIGHTS_AUTO, c.gate("code_predictor_quantized_min_agreement")},
        {"q8_0 at load", c.get("mmproj"), KZ_CP_WEIGHTS_Q8_0, c.gate("code_predictor_quantized_min_agreement")},
        {"f16 file", c.get("mmproj_f16"), KZ_CP_WEIGHTS_AUTO, c.gate("code_predictor_f16_min_agreement")},
        {"f16 at load", c.get("mmproj"), KZ_CP_WEIGHTS_F16, c.gate("code_predictor_f16_min_agreement")},
    };
    for (const Variant &v : variants) {
        Cp cp = load(v.path, c.threads, v.weights);
        Agreement a = agreement(cp.get(), f32.get(), codes, hidden);
        report.gate(c.get("name") + " code predictor " + v.label, a.ratio >= v.min_ratio && a.unexplained == 0,
                    describe(a, codes.dim(0)) + fmt(" (gate %.1f%%)", v.min_ratio * 100));
    }
}

// The decoder layers' 4 matrices (q/k/v and gate/up stacked) of every layer, as ggml's CPU_REPACK
// rearranged them while loading (equally many of each, nothing else), in the layout this build
// calls for.
bool layer_matrices_repacked(const RepackLog &log, const std::string &type) {
    static const char *const SUFFIXES[] = {".attn_qkv", ".attn_out.weight", ".ffn_gate_up", ".ffn_down.weight"};
    int counts[4] = {0, 0, 0, 0};
    for (const auto &t : log.tensors)
        for (int k = 0; k < 4; ++k) {
            const std::string suffix = SUFFIXES[k];
            counts[k] += t.first.size() > suffix.size() &&
                         t.first.compare(t.first.size() - suffix.size(), suffix.size(), suffix) == 0;
        }
    return log.as_expected(type) && counts[0] > 0 && std::count(counts, counts + 4, counts[0]) == 4 &&
           log.tensors.size() == size_t(4 * counts[0]);
}

// kazetts' Q8_0 kernels of this architecture (kz_cp_best_kernel's names) and their kz_cp_kernel_choice
struct Kernel {
    const char *name;
    int choice;
};
#if defined(__aarch64__)
constexpr Kernel KERNELS[] = {
    {"neon", KZ_CP_KERNELS_NEON}, {"neon-dotprod", KZ_CP_KERNELS_NEON_DOTPROD}, {"neon-i8mm", KZ_CP_KERNELS_NEON_I8MM}};
#else
constexpr Kernel KERNELS[] = {{"avx2", KZ_CP_KERNELS_AVX2}, {"avx512-vnni", KZ_CP_KERNELS_AVX512_VNNI}};
#endif

// Greedy frames teacher-forced with the case's golden hidden states and CB0: a digest of the
// codes' and logits' bytes (the same bits give the same digest), and the product nodes each
// kazetts kernel computed meanwhile, as the kernels counted them.
// The digest of the same frames also made in batches of 3, 2 and 4 frames (kz_cp_predict_frames,
// issue #30), which must equal it: a frame's bits do not depend on the frames beside it.
struct Outputs {
    std::string digest, batched_digest;
    int64_t frames = 0;
    std::map<std::string, int64_t> runs;  // kernel name -> nodes computed (frames alone)
};

// FNV-1a (64 bits) of frames' codes and logits
struct Digest {
    uint64_t h = 1469598103934665603ull;
    void add(const Frame &f) {
        bytes(f.codes.data(), f.codes.size() * sizeof(int32_t));
        bytes(f.logits.data(), f.logits.size() * sizeof(float));
    }
    void bytes(const void *data, size_t n) {
        for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t *>(data)[i]) * 1099511628211ull;
    }
    std::string hex() const { return fmt("%016llx", (unsigned long long)h); }
};

Outputs run_frames(kz_code_predictor *cp, const NpyArray &codes, const NpyArray &hidden) {
    const size_t n_embd = size_t(hidden.dim(1));
    std::map<std::string, int64_t> before;
    for (const Kernel &k : KERNELS) before[k.name] = kz_cp_kernel_runs(k.name);
    Outputs o;
    Digest alone, batched;
    for (int64_t f = 0; f < codes.dim(0); ++f, ++o.frames)
        alone.add(predict(cp, &hidden.f32[size_t(f) * n_embd], codes.i32[size_t(f) * 16]));
    for (const Kernel &k : KERNELS) o.runs[k.name] = kz_cp_kernel_runs(k.name) - before[k.name];
    static const int SIZES[] = {3, 2, 4};
    for (int64_t f = 0, i = 0; f < codes.dim(0); ++i) {
        const int n = int(std::min<int64_t>(SIZES[i % 3], codes.dim(0) - f));
        for (const Frame &got : predict_batch(cp, n, &hidden.f32[size_t(f) * n_embd], &codes.i32[size_t(f) * 16], 16))
            batched.add(got);
        f += n;
    }
    o.digest = alone.hex();
    o.batched_digest = batched.hex();
    return o;
}

// Whether every product node of `o`'s frames ran on `kernel` (per frame: `per_frame`), none on another
bool ran_on(const Outputs &o, const std::string &kernel, int64_t per_frame) {
    for (const auto &r : o.runs)
        if (r.second != (r.first == kernel ? o.frames * per_frame : 0)) return false;
    return per_frame > 0;
}

std::string describe_runs(const Outputs &o) {
    std::string out;
    for (const auto &r : o.runs) out += fmt("%s%s %lld", out.empty() ? "" : ", ", r.first.c_str(), (long long)r.second);
    return fmt("%lld frames, product nodes run by kazetts' kernels: %s", (long long)o.frames, out.c_str());
}

std::string describe(const kz_cp_products &p) {
    return fmt("per frame %lld products on kazetts' kernel, %lld quantized and %lld float on ggml's",
               (long long)p.kazetts, (long long)p.ggml_quantized, (long long)p.ggml_float);
}

}  // namespace

void check_code_predictor(const GoldenCase &c, Report &report) {
    check_greedy_f32(c, report);
    if (c.long_checks()) check_quantized(c, report);
}

// Which kernels the quantized code predictor runs on. The Q8_0 file and the F32 file quantized to
// Q8_0 at load: every quantized matrix (decoder layers, heads) packed for kazetts' Q8_0 kernel,
// the one this CPU calls for (the --expect-isa of golden_check, else kz_cp_best_kernel), every
// product of every frame computed by it (as the kernel counts its runs) and none by ggml's
// quantized kernels; ggml repacks nothing. Their outputs' digests (DIGEST lines:
// scripts/aarch64_goldens.sh compares them across CPU levels), and the Q8_0 file's with each
// kazetts kernel forced: on ARM the three kernels give the same bits, and a kernel the CPU lacks
// is refused at load. Q4_0 at load: ggml's kernels, repacked in the layout its build calls for
// (none in an ARMv8.0 build: its choice is made at compile time). Their results: check_quantized.
void check_code_predictor_kernels(const GoldenCase &c, Report &report) {
    NpyArray codes = c.golden("codes"), hidden = c.golden("talker_hidden");
    const std::string name = c.get("name") + " code predictor ";
    const std::string want = expected_kernel.empty() ? kz_cp_best_kernel() : expected_kernel;
    // the Q8_0 file, and the F32 file quantized to Q8_0 at load
    Outputs q8;
    for (const auto &[label, path, weights] : {std::tuple{"q8_0 file", c.get("mmproj_q8_0"), KZ_CP_WEIGHTS_AUTO},
                                               std::tuple{"q8_0 at load", c.get("mmproj"), KZ_CP_WEIGHTS_Q8_0}}) {
        RepackLog log;
        Cp cp = load(path, c.threads, weights);
        const std::string repacked = log.describe();
        const kz_cp_products per_frame = kz_cp_frame_products(cp.get());
        const Outputs o = run_frames(cp.get(), codes, hidden);
        const std::string kernel = kz_cp_kernel_name(cp.get());
        report.gate(name + label + " on kazetts' kernel",
                    kernel == "kazetts q8_0 " + want && per_frame.ggml_quantized == 0 && log.tensors.empty() &&
                        ran_on(o, want, per_frame.kazetts),
                    fmt("kernel %s (expected %s); %s; %s; ggml repacked: %s", kernel.c_str(), want.c_str(),
                        describe(per_frame).c_str(), describe_runs(o).c_str(), repacked.c_str()));
        report.gate(name + label + " frames batched as alone", o.batched_digest == o.digest,
                    fmt("digest of %lld frames alone %s, in batches of 3, 2 and 4 frames %s", (long long)o.frames,
                        o.digest.c_str(), o.batched_digest.c_str()));
        std::printf("DIGEST %s%s: %s\n", name.c_str(), label, o.digest.c_str());
        if (q8.digest.empty()) q8 = o;
    }
    std::string forced;
    bool same = true, batched_same = true;  // (batched_same: forced kernels' frames batched as alone)
    for (const Kernel &k : KERNELS) {
        if (k.name == want) {  // the run above
            forced += fmt("%s%s: auto", forced.empty() ? "" : "; ", k.name);
            continue;
        }
        kz_cp_params params = kz_cp_default_params();
        params.n_threads = c.threads;
        params.kernels = k.choice;
        kz_code_predictor *raw = nullptr;
        char err[512];
        const int status = kz_cp_load(c.get("mmproj_q8_0").c_str(), &params, &raw, err, sizeof err);
        Cp cp(raw);
        if (status != KZ_OK) {  // the CPU lacks it: refused, never a SIGILL
            same = same && status == KZ_ERR_INVALID_ARGUMENT;
            const std::string why = err,
                              reason = why.substr(why.rfind(": ") == std::string::npos ? 0 : why.rfind(": ") + 2);
            forced += fmt("%s%s refused (%s)", forced.empty() ? "" : "; ", k.name, reason.c_str());
            continue;
        }
        const Outputs o = run_frames(cp.get(), codes, hidden);
        const bool ok = o.digest == q8.digest && ran_on(o, k.name, kz_cp_frame_products(cp.get()).kazetts);
        batched_same = batched_same && o.batched_digest == o.digest;
        same = same && ok;
        forced +=
            fmt("%s%s %s%s", forced.empty() ? "" : "; ", k.name, o.digest.c_str(), ok || !ARM ? "" : " (differs)");
    }
    report.gate(name + "q8_0 forced kernels' frames batched as alone", batched_same, forced);
    if (ARM)
        report.gate(name + "q8_0 kernels give the same bits", same,
                    fmt("digest of %lld frames' codes and logits: auto (%s) %s; forced: %s", (long long)q8.frames,
                        want.c_str(), q8.digest.c_str(), forced.c_str()));
    else  // the x86 kernels sum in different orders
        report.info(name + "q8_0 kernels",
                    fmt("digests: auto (%s) %s; forced: %s", want.c_str(), q8.digest.c_str(), forced.c_str()));

    const std::string layout = expected_repack_layout("q4_0");
    RepackLog log;
    Cp cp = load(c.get("mmproj"), c.threads, KZ_CP_WEIGHTS_Q4_0);
    const kz_cp_products per_frame = kz_cp_frame_products(cp.get());
    const std::string kernel = kz_cp_kernel_name(cp.get());
    report.gate(name + "q4_0 at load on ggml's kernels",
                kernel == "ggml" && per_frame.kazetts == 0 && per_frame.ggml_quantized > 0 &&
                    (layout.empty() ? log.tensors.empty() : layer_matrices_repacked(log, "q4_0")),
                fmt("kernel %s; %s; ggml repacked: %s (this build: %s)", kernel.c_str(), describe(per_frame).c_str(),
                    log.describe().c_str(), repack_features(layout).c_str()));
}
