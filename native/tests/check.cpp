#include "check.h"

#include "ggml-cpu.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

GoldenCase GoldenCase::read(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    GoldenCase c;
    std::string line;
    while (std::getline(in, line)) {
        size_t space = line.find(' ');
        if (space != std::string::npos) c.values[line.substr(0, space)] = line.substr(space + 1);
    }
    return c;
}

const std::string &GoldenCase::get(const std::string &key) const {
    auto it = values.find(key);
    if (it == values.end()) throw std::runtime_error("case file without '" + key + "'");
    return it->second;
}

void Report::gate(const std::string &what, bool ok, const std::string &figures) {
    ++checks;
    failures += ok ? 0 : 1;
    std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", what.c_str(), figures.c_str());
    std::fflush(stdout);
}

void Report::info(const std::string &what, const std::string &figures) {
    std::printf("INFO %s: %s\n", what.c_str(), figures.c_str());
    std::fflush(stdout);
}

double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        double d = std::fabs(double(a[i]) - double(b[i]));
        if (std::isnan(d)) return NAN;  // fails every gate (std::fmax would drop it)
        m = d > m ? d : m;
    }
    return m;
}

double cosine(const float *a, const float *b, size_t n) {
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (size_t i = 0; i < n; ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / (std::sqrt(aa) * std::sqrt(bb));
}

double correlation(const float *a, const float *b, size_t n) {
    double ma = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; ++i) {
        ma += a[i];
        mb += b[i];
    }
    ma /= double(n);
    mb /= double(n);
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (size_t i = 0; i < n; ++i) {
        ab += (a[i] - ma) * (b[i] - mb);
        aa += (a[i] - ma) * (a[i] - ma);
        bb += (b[i] - mb) * (b[i] - mb);
    }
    return ab / std::sqrt(aa * bb);
}

double top2_margin(const float *x, size_t n) {
    double first = -INFINITY, second = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        if (x[i] > first) {
            second = first;
            first = x[i];
        } else if (x[i] > second) {
            second = x[i];
        }
    }
    return first - second;
}

size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

std::string fmt(const char *format, ...) {
    char buf[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buf, sizeof buf, format, args);
    va_end(args);
    return buf;
}

namespace {

void record_repack(ggml_log_level, const char *text, void *user_data) {
    static const char PREFIX[] = "repack: repack tensor ";
    if (std::strncmp(text, PREFIX, sizeof PREFIX - 1) != 0) return;
    std::string rest(text + sizeof PREFIX - 1);
    size_t with = rest.rfind(" with ");
    if (with == std::string::npos) return;
    size_t end = rest.find_last_not_of("\n") + 1;
    static_cast<RepackLog *>(user_data)->tensors.emplace_back(rest.substr(0, with),
                                                              rest.substr(with + 6, end - with - 6));
}

}  // namespace

RepackLog::RepackLog() {
    ggml_log_get(&previous_, &previous_data_);
    ggml_log_set(record_repack, this);
}

RepackLog::~RepackLog() { ggml_log_set(previous_, previous_data_); }

bool RepackLog::as_expected(const std::string &type) const {
    bool some = false;
    for (const auto &t : tensors) {
        const std::string of = t.second.substr(0, t.second.rfind('_'));  // q8_0_4x4 -> q8_0
        if (t.second != expected_repack_layout(of)) return false;
        some = some || of == type;
    }
    return some;
}

std::string RepackLog::describe() const {
    std::map<std::string, int> layouts;
    for (const auto &t : tensors) ++layouts[t.second];
    std::string out;
    for (const auto &l : layouts) out += fmt("%s%d matrices as %s", out.empty() ? "" : ", ", l.second, l.first.c_str());
    return out.empty() ? "no matrix repacked" : out;
}

std::string expected_repack_layout(const std::string &type) {
    if (type != "q8_0" && type != "q4_0") return "";
    const bool sve256_i8mm = ggml_cpu_has_sve() && ggml_cpu_has_matmul_int8() && ggml_cpu_get_sve_cnt() == 32;
    if (type == "q4_0" && (ggml_cpu_has_avx2() || sve256_i8mm)) return "q4_0_8x8";
    if (ggml_cpu_has_neon() && ggml_cpu_has_matmul_int8()) return type + "_4x8";
    if (ggml_cpu_has_neon() && ggml_cpu_has_dotprod()) return type + "_4x4";
    return "";
}

std::string repack_features(const std::string &layout) {
    return fmt("dotprod %d, i8mm %d: %s", ggml_cpu_has_dotprod(), ggml_cpu_has_matmul_int8(),
               layout.empty() ? "no repacking" : layout.c_str());
}
