// Code predictor sampling on the host: HF temperature -> top-k keeping ties -> top-p; argmax
// when greedy (its numpy statement: CodePredictorSampler in kazetts/validation/oracles/sampling.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace kz {
namespace cp {

struct Scratch {
    std::vector<float> scores, tmp, probs;
    std::vector<int> order;
    std::vector<double> cdf;
};

// First index of the maximum (torch/numpy argmax on ties).
inline int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) best = i;
    }
    return best;
}

// splitmix64: one uniform double in [0, 1) from a caller-owned 64-bit state.
inline double splitmix_uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

// logits -> one id. u in [0, 1) is the caller's uniform draw (numpy Generator.random()).
inline int sample(const float *logits, int n, float temperature, int top_k, float top_p, double u, Scratch &sc) {
    const float NEG_INF = -std::numeric_limits<float>::infinity();
    std::vector<float> &s = sc.scores;
    s.assign(logits, logits + n);
    if (temperature != 1.0f) {
        for (float &v : s) v = v / temperature;
    }
    if (top_k > 0) {
        int k = std::min(top_k, n);
        sc.tmp = s;
        std::nth_element(sc.tmp.begin(), sc.tmp.begin() + (n - k), sc.tmp.end());
        float kth = sc.tmp[n - k];
        for (float &v : s) {
            if (v < kth) v = NEG_INF;
        }
    }
    if (top_p < 1.0f) {
        // ascending stable sort, float32 softmax, cumulative sum in double, drop cum <= 1 - top_p
        sc.order.resize(n);
        std::iota(sc.order.begin(), sc.order.end(), 0);
        std::stable_sort(sc.order.begin(), sc.order.end(), [&](int a, int b) { return s[a] < s[b]; });
        float mx = s[sc.order[n - 1]];
        sc.probs.resize(n);
        float total = 0.0f;
        for (int i = 0; i < n; i++) {
            sc.probs[i] = std::exp(s[sc.order[i]] - mx);
            total += sc.probs[i];
        }
        const float limit = (float)(1.0 - (double)top_p);
        double cum = 0.0;
        std::vector<int> drop;
        for (int i = 0; i < n - 1; i++) {  // the largest is always kept
            cum += (double)(sc.probs[i] / total);
            if ((float)cum <= limit) drop.push_back(sc.order[i]);
        }
        for (int i : drop) s[i] = NEG_INF;
    }
    // inverse CDF over exp(x - max) in double, as kazetts.stages.sampling.pick
    double mx = -std::numeric_limits<double>::infinity();
    for (float v : s) {
        if (std::isfinite(v)) mx = std::max(mx, (double)v);
    }
    if (!std::isfinite(mx)) return argmax(logits, n);
    sc.cdf.resize(n);
    double acc = 0.0;
    int last_nonzero = 0;
    for (int i = 0; i < n; i++) {
        double w = std::isfinite(s[i]) ? std::exp((double)s[i] - mx) : 0.0;
        if (w != 0.0) last_nonzero = i;
        acc += w;
        sc.cdf[i] = acc;
    }
    double target = u * acc;
    int idx = (int)(std::upper_bound(sc.cdf.begin(), sc.cdf.end(), target) - sc.cdf.begin());
    if (idx >= n || !std::isfinite(s[idx]) || std::exp((double)s[idx] - mx) == 0.0) idx = last_nonzero;
    return idx;
}

}  // namespace cp
}  // namespace kz
