// Shared pieces of golden_check: one golden case, the pass/fail ledger, the figures.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ggml.h"
#include "npy.h"

// One golden case as scripts/aarch64_prepare.py describes it (a "key value" line each):
// name, golden (dumps/<case>), talker and mmproj (F32 GGUF files), codec_eos, stops_at_eos,
// expected (directory of host-computed expectations), gate.<name> (every golden gate) and, for the long case only,
// mmproj_f16 / mmproj_q8_0 (the same model converted to those types) and talker_q8_0 /
// talker_q4_0 (its talker quantized).
struct GoldenCase {
    std::map<std::string, std::string> values;
    int threads = 2;  // of the code predictor and the talker (2, as the Python tests)

    static GoldenCase read(const std::string &path);
    const std::string &get(const std::string &key) const;
    bool has(const std::string &key) const { return values.count(key) != 0; }
    // The long case also gets the quantized code predictor and the codec streaming checks.
    bool long_checks() const { return has("mmproj_q8_0"); }
    NpyArray golden(const std::string &array) const { return load_npy(get("golden") + "/" + array + ".npy"); }
    // A gate of kazetts/validation/gates.json, passed as a "gate.<name> value" line.
    double gate(const std::string &name) const { return std::stod(get("gate." + name)); }
};

// Counts failed gates; every gate prints its figures, passed or not.
struct Report {
    int checks = 0;
    int failures = 0;
    void gate(const std::string &what, bool ok, const std::string &figures);
    void info(const std::string &what, const std::string &figures);  // a figure with no gate
};

double max_abs_diff(const float *a, const float *b, size_t n);  // NaN if any difference is NaN
double cosine(const float *a, const float *b, size_t n);
double correlation(const float *a, const float *b, size_t n);
// Top-1 minus top-2 value: how close an argmax was to flipping.
double top2_margin(const float *x, size_t n);
// First index of the largest value (torch and numpy argmax on ties).
size_t argmax(const float *x, size_t n);
std::string fmt(const char *format, ...);

// The matrices ggml's CPU_REPACK buffer rearranged while this lives, from ggml's debug log
// ("repack tensor NAME with LAYOUT", one line per matrix): those its repacked kernels compute.
// Other log lines are dropped; the logger found at construction is restored at destruction.
struct RepackLog {
    std::vector<std::pair<std::string, std::string>> tensors;  // (name, layout such as q8_0_4x4)
    RepackLog();
    ~RepackLog();
    RepackLog(const RepackLog &) = delete;
    RepackLog &operator=(const RepackLog &) = delete;
    std::string describe() const;  // "N matrices as LAYOUT, ..."
    // Whether some matrices of `type` (q8_0, q4_0) were repacked, and every matrix, of whichever
    // type, in the layout this build calls for (expected_repack_layout)
    bool as_expected(const std::string &type) const;

  private:
    ggml_log_callback previous_ = nullptr;
    void *previous_data_ = nullptr;
};

// The layout ggml 0.25.3 repacks a 2-D "q8_0" or "q4_0" matrix into on this build of its CPU
// backend (ggml-cpu/repack.cpp), "" when it keeps it as it is: on ARM, 4x8 with i8mm (the SMMLA
// kernels), else 4x4 with dotprod (SDOT); Q4_0 8x8 with AVX2 or 256-bit SVE + i8mm.
std::string expected_repack_layout(const std::string &type);
// "dotprod D, i8mm I: LAYOUT" (or ": no repacking"), for a gate's figures.
std::string repack_features(const std::string &layout);

// The kazetts Q8_0 kernel this CPU must pick (golden_check --expect-isa; "": not given).
extern std::string expected_kernel;

#if defined(__aarch64__)
constexpr bool ARM = true;  // the repacking gates hold on ARM; elsewhere their figures are information
#else
constexpr bool ARM = false;
#endif

void check_code_predictor(const GoldenCase &c, Report &report);
void check_code_predictor_kernels(const GoldenCase &c, Report &report);  // long case: Q8_0, Q4_0
void check_codec(const GoldenCase &c, Report &report);
void check_codec_kernels(const GoldenCase &c, Report &report);  // long case: F16 sums
void check_talker(const GoldenCase &c, Report &report);
void check_talker_repack(const GoldenCase &c, Report &report);  // long case: quantized talkers
void check_engine(const GoldenCase &c, Report &report);         // the whole kazetts/tts.h engine
void check_enroll(const GoldenCase &c, Report &report);         // kz_tts_enroll, from a recording
// kz::conv_gemm_op against a scalar reference (no golden case: synthetic operands)
void check_conv_gemm(Report &report);
void check_rules(Report &report);  // rules.h's WSOLA stream and joiner (no model)
