// golden_check [--threads N] [--stage NAME]... [CASE_FILE...]: the native golden tests without
// Python, for builds that run where the Python runtime does not (cross builds under qemu-aarch64,
// devices). Each case file comes from scripts/aarch64_prepare.py; the "conv gemm" check needs
// none and runs once. --stage runs only the named stages' checks (as the TIME lines name them;
// all by default). Prints one line per gate; exits 1 if any gate fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <set>
#include <string>

#include "check.h"
#include "ggml-cpu.h"

namespace {

// Which kernels ggml's CPU backend was compiled with. A cross build has one CPU variant (no
// run-time dispatch), so on aarch64 these are the paths that ran; NEON, dotprod and F16
// vector arithmetic are what an Android-class build must have.
void check_cpu_features(Report &report) {
#if defined(__aarch64__)
    report.gate("ggml ARM kernels", ggml_cpu_has_neon() && ggml_cpu_has_dotprod() && ggml_cpu_has_fp16_va(),
                fmt("NEON %d, dotprod %d, fp16 vector arithmetic %d (i8mm %d, SVE %d)", ggml_cpu_has_neon(),
                    ggml_cpu_has_dotprod(), ggml_cpu_has_fp16_va(), ggml_cpu_has_matmul_int8(), ggml_cpu_has_sve()));
#else
    report.info("ggml CPU kernels", fmt("not aarch64: AVX2 %d, F16C %d, FMA %d", ggml_cpu_has_avx2(),
                                        ggml_cpu_has_f16c(), ggml_cpu_has_fma()));
#endif
}

std::set<std::string> stages;  // --stage: the only ones to run (empty: all)

// Runs one stage's checks and prints its wall time (qemu makes it worth knowing).
void timed(const char *stage, const std::string &what, const std::function<void()> &check) {
    if (!stages.empty() && !stages.count(stage)) return;
    auto start = std::chrono::steady_clock::now();
    check();
    std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    std::printf("TIME %s: %.1f s\n", what.c_str(), s.count());
}

void timed(const char *stage, void (*check)(const GoldenCase &, Report &), const GoldenCase &c, Report &report) {
    timed(stage, c.get("name") + " " + stage, [&] { check(c, report); });
}

}  // namespace

int main(int argc, char **argv) {
    int first = 1, threads = 2;
    for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
        const std::string option = argv[first];
        if (option == "--threads")
            threads = std::atoi(argv[first + 1]);
        else if (option == "--stage")
            stages.insert(argv[first + 1]);
        else
            break;
    }
    if ((first < argc && argv[first][0] == '-') || threads < 1) {
        std::fprintf(stderr, "usage: %s [--threads N] [--stage NAME]... [CASE_FILE...]\n", argv[0]);
        return 2;
    }
    Report report;
    check_cpu_features(report);
    try {
        timed("conv gemm", "conv gemm", [&] { check_conv_gemm(report); });
    } catch (const std::exception &e) {
        report.gate("conv gemm", false, std::string("error: ") + e.what());
    }
    timed("rules", "rules", [&] { check_rules(report); });
    for (int i = first; i < argc; ++i) {
        try {
            GoldenCase c = GoldenCase::read(argv[i]);
            c.threads = threads;
            timed("code predictor", check_code_predictor, c, report);
            if (c.long_checks()) timed("code predictor repacking", check_code_predictor_repack, c, report);
            timed("codec", check_codec, c, report);
            timed("talker", check_talker, c, report);
            if (c.long_checks()) timed("quantized talkers", check_talker_repack, c, report);
            timed("engine", check_engine, c, report);
            if (c.has("enroll")) timed("enroll", check_enroll, c, report);
        } catch (const std::exception &e) {
            report.gate(argv[i], false, std::string("error: ") + e.what());
        }
    }
    std::printf("%d/%d gates passed\n", report.checks - report.failures, report.checks);
    return report.failures == 0 ? 0 : 1;
}
