// The code predictor against the goldens, as tests/test_code_predictor.py gates it.
#include <algorithm>
#include <memory>
#include <stdexcept>

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

}  // namespace

void check_code_predictor(const GoldenCase &c, Report &report) {
    check_greedy_f32(c, report);
    if (c.long_checks()) check_quantized(c, report);
}

// Q8_0 and Q4_0 layer matrices on ggml's repacked kernels where it has them (ARM dotprod / i8mm;
// the Q8_0 ones on x86-64 run on kazetts' kernels instead). Their results: check_quantized (Q8_0).
void check_code_predictor_repack(const GoldenCase &c, Report &report) {
    const struct {
        const char *label, *type;
        std::string path;
        int weights;
    } variants[] = {{"q8_0 file", "q8_0", c.get("mmproj_q8_0"), KZ_CP_WEIGHTS_AUTO},
                    {"q4_0 at load", "q4_0", c.get("mmproj"), KZ_CP_WEIGHTS_Q4_0}};
    for (const auto &v : variants) {
        const std::string want = expected_repack_layout(v.type);
        RepackLog log;
        Cp cp = load(v.path, c.threads, v.weights);
        const std::string label = c.get("name") + " code predictor " + v.label,
                          figures = fmt("%s, kernel %s (this build: %s)", log.describe().c_str(),
                                        kz_cp_kernel_name(cp.get()), repack_features(want).c_str());
        if (ARM)
            report.gate(label + " on ggml's repacked kernels", layer_matrices_repacked(log, v.type), figures);
        else
            report.info(label + " repacking", figures);
    }
}
