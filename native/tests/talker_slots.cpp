// talker_slots [--threads N] [--steps N] TALKER.gguf...: kz::Talker's slots (src/stages/talker.h)
// against the same requests fed alone. Four requests in three slots advance in lockstep: one
// joins later (its 250-row prompt decoded between the others' steps, its reset growing the
// context while two slots are under way, past position 256 a few steps on), one leaves early and
// a last one takes its slot (whose stream still holds the old cells). After every step each
// request's hidden state and logits must equal, bit for bit, those of the request alone in a
// talker of one slot (what the engine runs today), with llama.cpp's flash attention (the
// talker's default) and without. Prints one line per gate; exits 1 if any gate fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "kazetts/talker_backend.h"
#include "stages/talker.h"

namespace {

// Largest |a - b| over the entries that differ (the logits of the text ids are -inf in both).
double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

const int SLOTS = 3, N_CTX = 2048, N_BATCH = 64;

// A request: the slot it runs in, its prompt rows, the steps it is under way [join, leave): its
// prompt at step `join`, then a row a step.
struct Request {
    int slot, prompt, join, leave;
    std::vector<float> rows;  // prompt, then a row per step
    int n_rows() const { return prompt + leave - join - 1; }
};

std::vector<Request> requests(int steps, int width) {
    std::vector<Request> r = {
        {0, 40, 0, steps, {}},
        {1, 13, 0, 8, {}},        // leaves early
        {2, 250, 3, steps, {}},   // joins later: a prefill of 4 chunks, the context grows, position 256 at step 10
        {1, 70, 10, steps, {}}};  // in the slot freed by the second
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (Request &q : r) {
        q.rows.resize(size_t(q.n_rows()) * size_t(width));
        for (float &x : q.rows) x = normal(rng);
    }
    return r;
}

// Each request's outputs (hidden state, then logits) per call, from a talker of one slot.
std::vector<std::vector<float>> alone(const std::string &path, int threads, bool flash_attn,
                                      const std::vector<Request> &rs) {
    kz::Talker talker(path, threads, N_CTX, N_BATCH, false, 1, flash_attn);
    const size_t width = size_t(talker.hidden_size());
    std::vector<std::vector<float>> out;
    for (const Request &r : rs) {
        std::vector<float> calls;
        auto keep = [&] {
            calls.insert(calls.end(), talker.hidden(), talker.hidden() + width);
            calls.insert(calls.end(), talker.logits(), talker.logits() + talker.n_vocab());
        };
        talker.reset(r.n_rows());
        talker.step(r.rows.data(), r.prompt);
        keep();
        for (int i = r.prompt; i < r.n_rows(); ++i) {
            talker.step(&r.rows[size_t(i) * width], 1);
            keep();
        }
        out.push_back(std::move(calls));
    }
    return out;
}

void check(const std::string &path, int threads, int steps, bool flash_attn, Report &report) {
    const std::string label =
        fmt("talker slots %s, flash attention %s", path.substr(path.rfind('/') + 1).c_str(), flash_attn ? "on" : "off");
    kz::Talker talker(path, threads, N_CTX, N_BATCH, false, SLOTS, flash_attn);
    const int width = talker.hidden_size(), vocab = talker.n_vocab();
    const size_t row = size_t(width) + size_t(vocab);
    std::vector<Request> rs = requests(steps, width);
    const std::vector<std::vector<float>> want = alone(path, threads, flash_attn, rs);
    std::vector<int> calls(rs.size(), 0), differ(rs.size(), 0), argmax_same(rs.size(), 0);
    double hidden_diff = 0.0, logits_diff = 0.0;
    const int64_t kzq8_before = kz_talker_backend_calls(), decodes_before = talker.decodes();
    int slot_steps = 0;
    for (int t = 0; t < steps; ++t) {
        std::vector<kz::Talker::SlotStep> step;
        std::vector<size_t> stepped;
        for (size_t i = 0; i < rs.size(); ++i) {
            const Request &r = rs[i];
            if (t < r.join || t >= r.leave) continue;
            if (t == r.join) {
                talker.reset_slot(r.slot, r.n_rows());
                step.push_back({r.slot, r.rows.data(), r.prompt});
            } else {
                step.push_back({r.slot, &r.rows[size_t(r.prompt + t - r.join - 1) * size_t(width)], 1});
                ++slot_steps;
            }
            stepped.push_back(i);
        }
        talker.step_slots(step);
        for (size_t i : stepped) {
            const int slot = rs[i].slot;
            const float *w = &want[i][size_t(calls[i]) * row];
            const bool same = std::memcmp(talker.hidden(slot), w, size_t(width) * sizeof(float)) == 0 &&
                              std::memcmp(talker.logits(slot), w + width, size_t(vocab) * sizeof(float)) == 0;
            differ[i] += !same;
            argmax_same[i] += argmax(talker.logits(slot), size_t(vocab)) == argmax(w + width, size_t(vocab));
            hidden_diff = std::max(hidden_diff, max_diff(talker.hidden(slot), w, size_t(width)));
            logits_diff = std::max(logits_diff, max_diff(talker.logits(slot), w + width, size_t(vocab)));
            ++calls[i];
        }
    }
    std::string figures;
    int differing = 0;
    for (size_t i = 0; i < rs.size(); ++i) {
        figures += fmt("%s%d calls in slot %d (prompt %d): %d differ, argmax %d/%d", i ? "; " : "", calls[i],
                       rs[i].slot, rs[i].prompt, differ[i], argmax_same[i], calls[i]);
        differing += differ[i];
    }
    report.gate(label + ": = alone", differing == 0,
                figures + fmt("; largest difference: hidden %g, logits %g", hidden_diff, logits_diff));
    report.info(label + ": decodes",
                fmt("steps shared: %s; %lld llama_decode calls for %d steps of %d slot steps and 4 prompts; KZQ8 "
                    "products %lld",
                    talker.shares_steps() ? "yes" : "no", (long long)(talker.decodes() - decodes_before), steps,
                    slot_steps, (long long)(kz_talker_backend_calls() - kzq8_before)));
}

}  // namespace

int main(int argc, char **argv) {
    int first = 1, threads = 2, steps = 24;
    for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
        const std::string option = argv[first];
        if (option == "--threads")
            threads = std::atoi(argv[first + 1]);
        else if (option == "--steps")
            steps = std::atoi(argv[first + 1]);
        else
            break;
    }
    if (first == argc || argv[first][0] == '-' || threads < 1 || steps < 11) {
        std::fprintf(stderr, "usage: %s [--threads N] [--steps N >= 11] TALKER.gguf...\n", argv[0]);
        return 2;
    }
    Report report;
    for (int i = first; i < argc; ++i) {
        for (bool flash_attn : {true, false}) {
            try {
                check(argv[i], threads, steps, flash_attn, report);
            } catch (const std::exception &e) {
                report.gate(argv[i], false, std::string("error: ") + e.what());
            }
        }
    }
    std::printf("%d/%d gates passed\n", report.checks - report.failures, report.checks);
    return report.failures == 0 ? 0 : 1;
}
