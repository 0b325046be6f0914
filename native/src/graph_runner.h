// The CPU backend, graph allocator and graph memory of a stage that builds a new graph per call
// (speaker encoder, codec encoder): one definition of their set-up and release.
// Internal (not part of the C ABI); throws kz::Error.
#pragma once

#include <cstdint>
#include <vector>

#include "common_internal.h"
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

    GraphRunner() = default;
    GraphRunner(const GraphRunner &) = delete;
    GraphRunner &operator=(const GraphRunner &) = delete;
    ~GraphRunner() {
        if (galloc) ggml_gallocr_free(galloc);
        if (backend) ggml_backend_free(backend);
    }
};

}  // namespace kz
