// golden_check [--threads N] [--stage NAME]... [--expect-isa KERNEL] [CASE_FILE...]: the native
// golden tests without Python, for builds that run where the Python runtime does not (cross
// builds under qemu-aarch64, devices). Each case file comes from scripts/aarch64_prepare.py; the
// "conv gemm" check needs none and runs once. --stage runs only the named stages' checks (as the
// TIME lines name them; all by default). --expect-isa: the kazetts Q8_0 kernel this CPU must get
// (neon, neon-dotprod, neon-i8mm; avx2, avx512-vnni), which scripts/aarch64_goldens.sh knows
// from the CPU it asks qemu for. Prints one line per gate; exits 1 if any gate fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <set>
#include <string>

#include "check.h"
#include "ggml-cpu.h"
#include "kazetts/code_predictor.h"
#include "kernels/conv_gemm.h"

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

std::string expected_kernel;

namespace {

// The kernels of the CPU this program runs on (under qemu, its -cpu). On aarch64, from the
// hwcaps the kernel gives the process, as libkazetts reads them: kazetts' Q8_0 kernel must be
// the best the CPU has (i8mm, else dotprod, else NEON) and the one the script expects; ggml's CPU
// backend, whose ARM extensions are fixed when it is compiled (ggml_cpu_has_* are #ifs), must
// need none the CPU lacks (one would be a SIGILL, as a +dotprod build on a Cortex-A53).
void check_cpu_features(Report &report) {
    const std::string best = kz_cp_best_kernel();
#if defined(__aarch64__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    const bool asimd = hw & (1UL << 1), asimdhp = hw & (1UL << 10), asimddp = hw & (1UL << 20), sve = hw & (1UL << 22),
               i8mm = hw2 & (1UL << 13);
    const std::string level = i8mm && asimddp ? "neon-i8mm" : asimddp ? "neon-dotprod" : "neon";
    report.gate("q8 kernel for this CPU", best == level && (expected_kernel.empty() || expected_kernel == level),
                fmt("hwcaps asimd %d, asimdhp %d, asimddp %d, i8mm %d, sve %d -> %s; q8::best_isa %s; expected "
                    "(--expect-isa) %s",
                    asimd, asimdhp, asimddp, i8mm, sve, level.c_str(), best.c_str(),
                    expected_kernel.empty() ? "not given" : expected_kernel.c_str()));
    // (the library reads the same hwcap: the codec kernels stage checks what it does with it)
    report.info("codec FP16 arithmetic for this CPU",
                fmt("hwcaps asimdhp %d; conv_gemm_half_arithmetic %d", asimdhp, kz::conv_gemm_half_arithmetic()));
    report.gate("ggml build within this CPU",
                (!ggml_cpu_has_dotprod() || asimddp) && (!ggml_cpu_has_matmul_int8() || i8mm) &&
                    (!ggml_cpu_has_fp16_va() || asimdhp) && (!ggml_cpu_has_sve() || sve),
                fmt("ggml's CPU backend built with NEON %d, dotprod %d, fp16 vector arithmetic %d, i8mm %d, SVE %d",
                    ggml_cpu_has_neon(), ggml_cpu_has_dotprod(), ggml_cpu_has_fp16_va(), ggml_cpu_has_matmul_int8(),
                    ggml_cpu_has_sve()));
#else
    report.info("ggml CPU kernels", fmt("not aarch64: AVX2 %d, F16C %d, FMA %d", ggml_cpu_has_avx2(),
                                        ggml_cpu_has_f16c(), ggml_cpu_has_fma()));
    if (expected_kernel.empty())
        report.info("q8 kernel for this CPU",
                    "q8::best_isa " + best + " (not gated: no --expect-isa; the hwcaps gate is ARM's)");
    else
        report.gate("q8 kernel for this CPU", best == expected_kernel,
                    "q8::best_isa " + best + ", expected (--expect-isa) " + expected_kernel);
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
        else if (option == "--expect-isa")
            expected_kernel = argv[first + 1];
        else
            break;
    }
    if ((first < argc && argv[first][0] == '-') || threads < 1) {
        std::fprintf(stderr, "usage: %s [--threads N] [--stage NAME]... [--expect-isa KERNEL] [CASE_FILE...]\n",
                     argv[0]);
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
            if (c.long_checks()) timed("code predictor kernels", check_code_predictor_kernels, c, report);
            timed("codec", check_codec, c, report);
            if (c.long_checks()) timed("codec kernels", check_codec_kernels, c, report);
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
