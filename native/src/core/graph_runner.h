// The CPU backend, graph allocator and graph memory of a stage that builds a new graph per call
// (speaker encoder, codec encoder): one definition of their set-up and release.
// Internal (not part of the C ABI); throws kz::Error.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

namespace kz {

struct GraphRunner {
    ggml_backend_t backend = nullptr;
    ggml_gallocr_t galloc = nullptr;
    std::vector<uint8_t> graph_mem;  // metadata of graphs of up to `graph_size` nodes

    void init(size_t graph_size) {
        backend = ggml_backend_cpu_init();
        if (!backend) throw Error(KZ_ERR_NO_MEMORY, "cannot create the CPU backend");
        galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        if (!galloc) throw Error(KZ_ERR_NO_MEMORY, "cannot create the graph allocator");
        graph_mem.resize(ggml_tensor_overhead() * graph_size + ggml_graph_overhead_custom(graph_size, false));
    }

    // Runs `gf` on n_threads. With KAZETTS_PROFILE_NODES set, node by node instead, printing the
    // time per op (and kind of custom op) on stderr: where an encoder's time goes.
    void compute(ggml_cgraph *gf, int n_threads, const char *what) {
        ggml_backend_cpu_set_n_threads(backend, n_threads);
        if (!std::getenv("KAZETTS_PROFILE_NODES")) {
            if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS)
                throw Error(KZ_ERR_COMPUTE, std::string(what) + " graph failed");
            return;
        }
        std::map<std::string, std::pair<double, int>> per_op;
        std::vector<uint8_t> mem(ggml_graph_overhead_custom(1, false) + ggml_tensor_overhead());
        for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
            ggml_tensor *node = ggml_graph_node(gf, i);
            ggml_init_params ip = {mem.size(), mem.data(), true};
            ggml_context *ctx = ggml_init(ip);
            ggml_cgraph *one = ggml_new_graph_custom(ctx, 1, false);
            ggml_graph_add_node(one, node);
            const auto t0 = std::chrono::steady_clock::now();
            const bool ok = ggml_backend_graph_compute(backend, one) == GGML_STATUS_SUCCESS;
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            ggml_free(ctx);
            if (!ok) throw Error(KZ_ERR_COMPUTE, std::string(what) + " graph failed");
            std::string key = node->op == GGML_OP_CUSTOM ? std::string("custom ") + node->name : ggml_op_desc(node);
            if (node->op == GGML_OP_MUL_MAT)
                key += " K=" + std::to_string(node->src[0]->ne[0]) + (node->src[0]->ne[0] % 16 ? " (K%16)" : "");
            auto &e = per_op[key];
            e.first += ms;
            e.second++;
        }
        double total = 0;
        for (auto &e : per_op) total += e.second.first;
        std::fprintf(stderr, "%s: %d nodes, %.1f ms\n", what, ggml_graph_n_nodes(gf), total);
        for (auto &e : per_op)
            std::fprintf(stderr, "  %-28s %5d x %8.2f ms\n", e.first.c_str(), e.second.second, e.second.first);
    }

    GraphRunner() = default;
    GraphRunner(const GraphRunner &) = delete;
    GraphRunner &operator=(const GraphRunner &) = delete;
    ~GraphRunner() {
        if (galloc) ggml_gallocr_free(galloc);
        if (backend) ggml_backend_free(backend);
    }
};

}  // namespace kz
